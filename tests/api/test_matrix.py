"""Vectors and matrices inside kernels, compared with NumPy's linear algebra."""
import numpy as np
import pytest

import fluxion as ti

N = 48


def _random_well_conditioned(rng, n, k):
    m = rng.uniform(-1, 1, (N, n, k))
    if n == k:
        m += np.eye(n) * 2.5
    return m


@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_matrix_algebra_batch(dt):
    rng = np.random.default_rng(5)
    A_np = _random_well_conditioned(rng, 3, 3).astype(dt.np_dtype)
    B_np = _random_well_conditioned(rng, 2, 2).astype(dt.np_dtype)
    u_np = rng.uniform(-2, 2, (N, 3)).astype(dt.np_dtype)
    w_np = rng.uniform(-2, 2, (N, 3)).astype(dt.np_dtype)
    A = ti.Matrix.field(3, 3, dt, shape=N)
    B = ti.Matrix.field(2, 2, dt, shape=N)
    u = ti.Vector.field(3, dt, shape=N)
    w = ti.Vector.field(3, dt, shape=N)
    for f, a in ((A, A_np), (B, B_np), (u, u_np), (w, w_np)):
        f.from_numpy(a)
    m33 = ti.Matrix.field(3, 3, dt, shape=(6, N))
    m22 = ti.Matrix.field(2, 2, dt, shape=N)
    v3 = ti.Vector.field(3, dt, shape=(6, N))
    sc = ti.field(dt, shape=(11, N))

    @ti.kernel
    def run():
        for i in range(N):
            a, v, q = A[i], u[i], w[i]
            m33[0, i] = a @ A[i].transpose()
            m33[1, i] = a.inverse()
            m33[2, i] = v.outer_product(q)
            m33[3, i] = a.T + 2 * a - a / 4.0
            m33[4, i] = a * a                        # element-wise
            m33[5, i] = ti.Matrix.identity(dt, 3) * 3.0 - a @ a.inverse()
            m22[i] = B[i].inverse() @ B[i] + B[i].inverse()
            v3[0, i] = a @ v
            v3[1, i] = v.cross(q)
            v3[2, i] = v.normalized()
            v3[3, i] = (v + 1.0) * q - 0.5 / (ti.abs(q) + 1)
            v3[4, i] = -v + ti.max(v, q) + ti.min(v, q) ** 2
            v3[5, i] = v * v.dot(q) + q.norm() * ti.Vector([1.0, 0.0, -1.0])
            sc[0, i] = v.dot(q)
            sc[1, i] = v.norm()
            sc[2, i] = v.norm_sqr()
            sc[3, i] = a.determinant()
            sc[4, i] = B[i].determinant()
            sc[5, i] = a.trace()
            sc[6, i] = a.sum()
            sc[7, i] = a.max()
            sc[8, i] = v.min()
            sc[9, i] = v @ q
            sc[10, i] = v.transpose() @ a @ q if ti.static(False) else (a @ q).dot(v)

    run()
    A64, B64 = A_np.astype(np.float64), B_np.astype(np.float64)
    U, W = u_np.astype(np.float64), w_np.astype(np.float64)
    Ainv, Binv = np.linalg.inv(A64), np.linalg.inv(B64)
    At = A64.transpose(0, 2, 1)
    ref33 = np.stack([A64 @ At, Ainv, U[:, :, None] * W[:, None, :], At + 2 * A64 - A64 / 4,
                      A64 * A64, np.broadcast_to(np.eye(3) * 2, (N, 3, 3))])
    ref3 = np.stack([np.einsum("nij,nj->ni", A64, U), np.cross(U, W),
                     U / np.linalg.norm(U, axis=1, keepdims=True),
                     (U + 1) * W - 0.5 / (np.abs(W) + 1),
                     -U + np.maximum(U, W) + np.minimum(U, W) ** 2,
                     U * (U * W).sum(1, keepdims=True)
                     + np.linalg.norm(W, axis=1, keepdims=True) * np.array([1.0, 0.0, -1.0])])
    refs = np.stack([(U * W).sum(1), np.linalg.norm(U, axis=1), (U * U).sum(1),
                     np.linalg.det(A64), np.linalg.det(B64), np.trace(A64, axis1=1, axis2=2),
                     A64.sum((1, 2)), A64.max((1, 2)), U.min(1), (U * W).sum(1),
                     np.einsum("ni,nij,nj->n", U, A64, W)])
    tol = {"rtol": 2e-5, "atol": 2e-5} if dt is ti.f32 else {"rtol": 1e-11, "atol": 1e-11}
    np.testing.assert_allclose(m33.to_numpy(), ref33, **tol)
    np.testing.assert_allclose(m22.to_numpy(), np.eye(2) + Binv, **tol)
    np.testing.assert_allclose(v3.to_numpy(), ref3, **tol)
    np.testing.assert_allclose(sc.to_numpy(), refs, **tol)


def test_construction_indexing_and_local_mutation():
    out = ti.Matrix.field(2, 3, ti.f32, shape=())
    vout = ti.Vector.field(4, ti.i32, shape=())
    sout = ti.field(ti.f32, shape=6)

    @ti.kernel
    def run(k: ti.i32):
        m = ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        m[0, 1] = 20.0
        m[1, 2] += 0.5
        out[None] = m
        v = ti.Vector([1, 2, 3, 4])
        v[3] = v[0] + v[1]
        v.x = 7
        v[k] = 100                 # an index known only at run time
        vout[None] = v
        sout[0] = m[1, 0] + m[0, 2]
        sout[1] = m[(k + 1) % 2, k % 3]  # dynamic 2-D read: m[1, 2]
        a, b = ti.Vector([1.5, -2.5])  # unpacking
        sout[2] = a - b
        r0, r1 = m                 # a matrix unpacks into rows
        sout[3] = r1[0] - r0[0]
        z = ti.Vector.zero(ti.f32, 3)
        z += 1.5
        sout[4] = z.sum() + ti.Vector.unit(3, 1, ti.f32)[1]
        sout[5] = ti.Matrix.diag(3, 2.0).trace() + v.y

    run(2)
    np.testing.assert_array_equal(out.to_numpy(), [[1, 20, 3], [4, 5, 6.5]])
    np.testing.assert_array_equal(vout.to_numpy(), [7, 2, 100, 3])
    np.testing.assert_allclose(sout.to_numpy(), [7, 6.5, 4, 3, 5.5, 8])


def test_integer_vectors_promotion_and_comparisons():
    out_f = ti.Vector.field(3, ti.f32, shape=())
    out_i = ti.Vector.field(3, ti.i32, shape=4)

    @ti.kernel
    def run():
        a = ti.Vector([7, -7, 6])
        b = ti.Vector([2, 2, -4])
        out_f[None] = a / b                   # int / int -> float
        out_i[0] = a // b
        out_i[1] = a % b
        out_i[2] = a < b
        out_i[3] = ti.Vector([(a > 0).any(), (a > -10).all(), (a == 6).any()])

    run()
    a, b = np.array([7, -7, 6]), np.array([2, 2, -4])
    np.testing.assert_allclose(out_f.to_numpy(), a / b)
    np.testing.assert_array_equal(out_i.to_numpy(),
                                  [a // b, a % b, (a < b).astype(int), [1, 1, 1]])


def test_determinant_4x4_and_matrix_field_of_ints():
    rng = np.random.default_rng(9)
    m_np = rng.integers(-5, 6, (8, 4, 4)).astype(np.float32)
    m = ti.Matrix.field(4, 4, ti.f32, shape=8)
    m.from_numpy(m_np)
    det = ti.field(ti.f32, shape=8)
    im = ti.Matrix.field(2, 2, ti.i16, shape=8)

    @ti.kernel
    def run():
        for i in m:
            det[i] = m[i].determinant()
            im[i] = ti.Matrix([[i, -i], [2 * i, i * i]]) @ ti.Matrix([[1, 1], [0, 1]])

    run()
    np.testing.assert_allclose(det.to_numpy(), np.linalg.det(m_np.astype(np.float64)), atol=1e-3)
    ii = np.arange(8)
    ref = np.stack([np.stack([ii, ii - ii], -1), np.stack([2 * ii, 2 * ii + ii * ii], -1)], 1)
    np.testing.assert_array_equal(im.to_numpy(), ref)


def test_matrix_assignments_between_fields_and_components():
    a = ti.Vector.field(3, ti.f64, shape=10)
    b = ti.Vector.field(3, ti.f64, shape=10)

    @ti.kernel
    def run():
        for i in a:
            a[i] = ti.Vector([i, i * 2, i * 3])
            b[i] = a[i]
            b[i][1] = -1.0
            b[i].z += 0.25
            b[i] *= 2

    run()
    ii = np.arange(10.0)
    np.testing.assert_array_equal(a.to_numpy(), np.stack([ii, 2 * ii, 3 * ii], 1))
    np.testing.assert_array_equal(b.to_numpy(),
                                  np.stack([2 * ii, np.full(10, -2.0), 6 * ii + 0.5], 1))


def test_runtime_indexed_stores_and_non_square_products():
    m = ti.Matrix.field(3, 3, ti.f32, shape=())
    r = ti.Matrix.field(2, 4, ti.f32, shape=())
    o = ti.Matrix.field(3, 2, ti.f32, shape=())
    s = ti.field(ti.f32, shape=5)
    A_np = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    B_np = np.array([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 1.0, 2.0], [1.0, 1.0, 0.0, 3.0]])

    @ti.kernel
    def run():
        a = ti.Matrix.zero(ti.f32, 3, 3)
        for i in range(3):            # i and j are run-time values: select-based stores
            for j in range(3):
                a[i, j] = i * 3 + j
        m[None] = a
        A = ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        B = ti.Matrix([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 1.0, 2.0], [1.0, 1.0, 0.0, 3.0]])
        r[None] = A @ B
        o[None] = ti.Vector([1.0, 2.0, 3.0]).outer_product(ti.Vector([4.0, 5.0]))
        s[0] = ti.Vector([1.0, 2.0]).cross(ti.Vector([3.0, 4.0]))   # 2-D cross: a scalar
        v = ti.Vector([3, -1, 2])
        s[1] = v.max() * 10 + v.min()
        x, y, z = v ** 2
        s[2] = x + y * 10 + z * 100
        s[3] = ti.Matrix([[1, 2], [3, 4]]).inverse()[0, 0]          # int entries: float inverse
        s[4] = (v * 1.5)[0]                                        # int vector * float

    run()
    np.testing.assert_array_equal(m.to_numpy(), np.arange(9).reshape(3, 3))
    np.testing.assert_allclose(r.to_numpy(), A_np @ B_np)
    np.testing.assert_allclose(o.to_numpy(), np.outer([1, 2, 3], [4, 5]))
    np.testing.assert_allclose(s.to_numpy(), [1 * 4 - 2 * 3, 29, 9 + 10 + 400,
                                              np.linalg.inv([[1, 2], [3, 4]])[0, 0], 4.5],
                               rtol=1e-6)


def test_matrix_python_scope_operations():
    m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
    v = ti.Vector([1.0, -1.0])
    np.testing.assert_allclose((m @ v).to_numpy(), np.array([[1, 2], [3, 4]]) @ [1, -1])
    np.testing.assert_allclose(m.inverse().to_numpy(), np.linalg.inv([[1, 2], [3, 4]]))
    assert m.determinant() == pytest.approx(-2.0)
    assert v.norm() == pytest.approx(np.sqrt(2))


def test_parallel_iterations_writing_components_of_one_element_by_run_time_index():
    # each iteration writes only its own component: writing the others back (with a select)
    # raced with the iterations writing them, and lost their values
    v = ti.Vector.field(64, ti.i32, shape=())
    m = ti.Matrix.field(4, 4, ti.f32, shape=2)

    @ti.kernel
    def k():
        for j in range(64):
            v[None][j] = j + 1
        for t in range(32):
            m[t // 16][(t // 4) % 4, t % 4] = t * 0.5

    for _ in range(5):
        v.fill(0)
        m.fill(-1.0)
        k()
        np.testing.assert_array_equal(v.to_numpy(), np.arange(1, 65))
        np.testing.assert_array_equal(m.to_numpy().reshape(-1), np.arange(32) * 0.5)
