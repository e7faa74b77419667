"""fluxion.lang.linalg: svd, polar_decompose, sym_eig, eig (2x2 and 3x3) inside kernels over many
matrices (f32 and f64) and in Python scope, plus the ti.math helpers defined there.

The matrix families stress the cases that break naive implementations: near-singular and
rank-deficient matrices, clustered and repeated singular values, diagonal matrices, rotations,
negative determinants, and entries so large or small that their squares leave the f32 range.
(tests/conftest.py gives every test a fresh `ti.init(arch=ti.cpu)` / `ti.reset()`.)
"""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import builder
from fluxion.lang import linalg as L
from fluxion.lang import transforms as TR
from taichi_ref import check_against_taichi

TOL = {"f32": 5e-6, "f64": 1e-12}


def _rotation(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _with_singular_values(rng, sigmas):
    n = len(sigmas[0])
    return np.array([_rotation(rng, n) @ np.diag(s) @ _rotation(rng, n).T for s in sigmas])


def _families(n, per=150, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.uniform
    fam = {
        "normal": rng.standard_normal((per, n, n)),
        "deformation": np.eye(n) + 0.3 * rng.standard_normal((per, n, n)),
        "diagonal": np.array([np.diag(rng.standard_normal(n)) for _ in range(per)]),
        "rotation": np.array([_rotation(rng, n) for _ in range(per)]),
        "rank_one": np.array([np.outer(rng.standard_normal(n), rng.standard_normal(n))
                              for _ in range(per)]),
        "repeated": _with_singular_values(rng, [[2.0] * (n - 1) + [1.0], [1.0] * n] * (per // 2)),
        "scaled": rng.standard_normal((per, n, n)) * 10.0 ** rng.choice([-25, 25], (per, 1, 1)),
        "columns_graded": rng.standard_normal((per, n, n)) * np.logspace(0, -6, n),
    }
    if n == 2:
        fam["near_singular"] = _with_singular_values(rng, [[1, 10 ** u(-7, -2)] for _ in range(per)])
        fam["negative_det"] = _with_singular_values(rng, [[1, -u(0, 1)] for _ in range(per)])
    else:
        fam["near_singular"] = _with_singular_values(
            rng, [[1, 10 ** u(-4, -1), 10 ** u(-7, -4)] for _ in range(per)])
        fam["clustered"] = _with_singular_values(
            rng, [[1, 1 + 1e-4 * rng.standard_normal(), 1e-3 * (1 + 1e-3 * rng.standard_normal())]
                  for _ in range(per)])
        fam["rank_two"] = _with_singular_values(rng, [[1, u(0.1, 1), 0] for _ in range(per)])
        fam["negative_det"] = _with_singular_values(rng, [[1, 0.5, -u(0, 0.5)] for _ in range(per)])
        # flipping one axis of a generic matrix: both det signs among the same magnitudes
        fam["reflected"] = rng.standard_normal((per, n, n)) * np.array([1.0, 1.0, -1.0])
    mats = np.concatenate(list(fam.values()))
    mats[0] = 0.0      # the zero matrix
    mats[1] = np.eye(n)
    return mats


def _fields(n, count, dt, *shapes):
    out = []
    for s in shapes:
        if s == "m":
            out.append(ti.Matrix.field(n, n, dt, shape=count))
        else:
            out.append(ti.Vector.field(n, dt, shape=count))
    return out


def _scale(a):
    s = np.abs(a).max(axis=(1, 2))
    return np.where(s > 0, s, 1.0)


def _check_rotations(m, tol):
    n = m.shape[-1]
    np.testing.assert_allclose(m @ m.transpose(0, 2, 1), np.broadcast_to(np.eye(n), m.shape),
                               atol=tol)
    np.testing.assert_allclose(np.linalg.det(m), 1.0, atol=tol)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_svd_in_kernels(n, dt):
    mats = _families(n).astype(dt.np_dtype)
    A, U, S, V = _fields(n, len(mats), dt, "m", "m", "m", "m")
    A.from_numpy(mats)

    @ti.kernel
    def k():
        for i in A:
            U[i], S[i], V[i] = L.svd(A[i])

    k()
    a = mats.astype(np.float64)
    u, s, v = (f.to_numpy().astype(np.float64) for f in (U, S, V))
    tol = TOL[str(dt)]
    scale = _scale(a)
    assert np.isfinite(u).all() and np.isfinite(s).all() and np.isfinite(v).all()
    rec = np.abs(u @ s @ v.transpose(0, 2, 1) - a).max(axis=(1, 2)) / scale
    assert rec.max() < tol
    _check_rotations(u, tol)
    _check_rotations(v, tol)
    d = np.diagonal(s, axis1=1, axis2=2)
    assert (s == d[:, :, None] * np.eye(n)).all()           # exactly diagonal
    ref = np.linalg.svd(a, compute_uv=False)
    assert (np.abs(np.abs(d) - ref).max(axis=1) / scale).max() < tol
    # the sign convention: sigma_0 >= ... >= |sigma_{n-1}|, only the last one negative, with det
    assert (d[:, :-1] >= 0).all()
    assert (np.diff(np.abs(d), axis=1) <= tol * scale[:, None]).all()
    det = np.linalg.det(a) / scale ** n
    assert (d[det < -1e-3, -1] < 0).all() and (d[det > 1e-3, -1] > 0).all()


def test_svd_relative_accuracy_of_small_singular_values():
    """One-sided Jacobi never forms A^T A: singular values of graded matrices keep their
    relative accuracy in f32 (an A^T A eigen solver loses them below sqrt(eps))."""
    rng = np.random.default_rng(7)
    mats = (rng.standard_normal((200, 3, 3)) * np.array([1.0, 1e-3, 1e-6])).astype(np.float32)
    A, U, S, V = _fields(3, len(mats), ti.f32, "m", "m", "m", "m")
    A.from_numpy(mats)

    @ti.kernel
    def k():
        for i in A:
            U[i], S[i], V[i] = L.svd(A[i])

    k()
    d = np.abs(np.diagonal(S.to_numpy().astype(np.float64), axis1=1, axis2=2))
    ref = np.linalg.svd(mats.astype(np.float64), compute_uv=False)
    assert (np.abs(d - ref) / ref).max() < 1e-4


def _polar_reference(a):
    u, s, vt = np.linalg.svd(a)
    flip = np.linalg.det(u @ vt) < 0
    u[flip, :, -1] *= -1
    s[flip, -1] *= -1
    r = u @ vt
    return r, s


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_polar_decompose_in_kernels(n, dt):
    mats = _families(n, seed=1).astype(dt.np_dtype)
    A, R, S = _fields(n, len(mats), dt, "m", "m", "m")
    A.from_numpy(mats)

    @ti.kernel
    def k():
        for i in A:
            R[i], S[i] = L.polar_decompose(A[i])

    k()
    a = mats.astype(np.float64)
    r, s = R.to_numpy().astype(np.float64), S.to_numpy().astype(np.float64)
    tol = TOL[str(dt)]
    scale = _scale(a)
    assert (np.abs(r @ s - a).max(axis=(1, 2)) / scale).max() < tol
    assert (s == s.transpose(0, 2, 1)).all()                 # exactly symmetric
    _check_rotations(r, tol)
    # against numpy where the rotation is well determined: the signed singular values
    # sigma_{n-2} + sigma_{n-1} bound its sensitivity
    r_ref, sig = _polar_reference(a)
    good = (sig[:, -2] + sig[:, -1]) > 0.05 * sig[:, 0]
    assert good.sum() > len(a) // 2
    np.testing.assert_allclose(r[good], r_ref[good], atol=20 * tol)
    s_ref = r_ref.transpose(0, 2, 1) @ a
    assert (np.abs(s - s_ref).max(axis=(1, 2))[good] / scale[good]).max() < 20 * tol


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_sym_eig_in_kernels(n, dt):
    mats = _families(n, seed=2)
    mats = (mats + mats.transpose(0, 2, 1)).astype(dt.np_dtype)
    M, Lam, Q = _fields(n, len(mats), dt, "m", "v", "m")
    M.from_numpy(mats)

    @ti.kernel
    def k():
        for i in M:
            Lam[i], Q[i] = L.sym_eig(M[i])

    k()
    m = mats.astype(np.float64)
    lam, q = Lam.to_numpy().astype(np.float64), Q.to_numpy().astype(np.float64)
    tol = TOL[str(dt)]
    scale = _scale(m)
    lam_ref, q_ref = np.linalg.eigh(m)
    assert (np.abs(lam - lam_ref).max(axis=1) / scale).max() < tol
    assert (np.diff(lam, axis=1) >= 0).all()                 # ascending, like eigh
    rec = q @ (lam[:, :, None] * q.transpose(0, 2, 1)) - m
    assert (np.abs(rec).max(axis=(1, 2)) / scale).max() < tol
    np.testing.assert_allclose(q @ q.transpose(0, 2, 1), np.broadcast_to(np.eye(n), q.shape),
                               atol=tol)
    # eigenvectors of well separated eigenvalues match numpy's up to sign
    gaps = np.diff(lam_ref, axis=1) / scale[:, None]
    for i in range(n):
        sep = np.ones(len(m), bool)
        if i > 0:
            sep &= gaps[:, i - 1] > 0.05
        if i < n - 1:
            sep &= gaps[:, i] > 0.05
        dots = np.abs(np.einsum("bk,bk->b", q[sep, :, i], q_ref[sep, :, i]))
        np.testing.assert_allclose(dots, 1.0, atol=50 * tol)


@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_eig_2x2_in_kernels(dt):
    rng = np.random.default_rng(3)
    mats = rng.standard_normal((300, 2, 2))
    mats[:4] = [np.eye(2), [[1.0, 1.0], [0.0, 1.0]], [[0.0, -2.0], [2.0, 0.0]], np.zeros((2, 2))]
    mats = mats.astype(dt.np_dtype)
    A = ti.Matrix.field(2, 2, dt, shape=len(mats))
    W = ti.Matrix.field(2, 2, dt, shape=len(mats))
    X = ti.Matrix.field(4, 2, dt, shape=len(mats))
    A.from_numpy(mats)

    @ti.kernel
    def k():
        for i in A:
            W[i], X[i] = L.eig(A[i])

    k()
    a = mats.astype(np.float64)
    w, x = W.to_numpy().astype(np.float64), X.to_numpy().astype(np.float64)
    tol = 100 * TOL[str(dt)]
    lam = w[:, :, 0] + 1j * w[:, :, 1]
    vec = x[:, 0::2, :] + 1j * x[:, 1::2, :]                 # (batch, component, eigenvector)
    ref = np.linalg.eigvals(a)
    np.testing.assert_allclose(np.sort_complex(lam), np.sort_complex(ref), atol=tol)
    np.testing.assert_allclose(np.linalg.norm(vec, axis=1), 1.0, atol=tol)
    np.testing.assert_allclose(a @ vec, vec * lam[:, None, :], atol=tol * 10)
    real = w[:, 0, 1] == 0
    assert (w[real, 0, 0] >= w[real, 1, 0]).all()            # real: larger first
    assert (w[~real, 0, 1] > 0).all()                        # complex: +imaginary first
    np.testing.assert_allclose(w[~real, 0, 1], -w[~real, 1, 1])


def test_types_and_python_values_in_kernels():
    A = ti.Matrix.field(3, 3, ti.f32, shape=1)
    out = ti.Matrix.field(3, 3, ti.f64, shape=3)
    lam = ti.Vector.field(2, ti.f32, shape=1)
    A.from_numpy(np.diag([3.0, -2.0, 1.0])[None].astype(np.float32))
    seen = []

    @ti.kernel
    def k():
        U, S, V = L.svd(A[0], dt=ti.f64)
        seen.append((U[0, 0].dtype, S[0, 1].dtype, V[2, 2].dtype))
        U2, S2, V2 = L.svd(A[0])
        seen.append((U2[0, 0].dtype, S2[0, 1].dtype, V2[2, 2].dtype))
        out[0], out[1], out[2] = U @ S @ V.transpose(), S, V
        # a matrix of Python integers inside a kernel: computed in the default float type
        lam[0], _ = L.sym_eig(ti.Matrix([[2, 1], [1, 2]]))

    k()
    assert seen == [(ti.f64,) * 3, (ti.f32,) * 3]
    np.testing.assert_allclose(out.to_numpy()[0], np.diag([3.0, -2.0, 1.0]), atol=1e-12)
    np.testing.assert_allclose(np.diag(out.to_numpy()[1]), [3.0, 2.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(lam.to_numpy()[0], [1.0, 3.0], atol=1e-6)


def test_python_scope():
    rng = np.random.default_rng(4)
    cases = [rng.standard_normal((n, n)) for n in (2, 3) for _ in range(20)]
    cases += [np.zeros((2, 2)), np.zeros((3, 3)), np.eye(3), np.diag([2.0, 2.0, -1.0]),
              np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])]
    for a in cases:
        n = len(a)
        m = ti.Matrix(a.tolist())
        U, S, V = (x.to_numpy() for x in L.svd(m))
        np.testing.assert_allclose(U @ S @ V.T, a, atol=1e-12)
        for x in (U, V):
            np.testing.assert_allclose(x @ x.T, np.eye(n), atol=1e-12)
            assert abs(np.linalg.det(x) - 1) < 1e-12
        d = np.diag(S)
        np.testing.assert_allclose(np.abs(d), np.linalg.svd(a, compute_uv=False), atol=1e-12)
        R, P = (x.to_numpy() for x in L.polar_decompose(m))
        np.testing.assert_allclose(R @ P, a, atol=1e-12)
        assert (P == P.T).all() and abs(np.linalg.det(R) - 1) < 1e-12
        sym = a + a.T
        lam, Q = (x.to_numpy() for x in L.sym_eig(ti.Matrix(sym.tolist())))
        np.testing.assert_allclose(lam, np.linalg.eigvalsh(sym), atol=1e-12)
        np.testing.assert_allclose(Q @ np.diag(lam) @ Q.T, sym, atol=1e-12)
        if n == 2:
            w, x = (v.to_numpy() for v in L.eig(m))
            lam_c = w[:, 0] + 1j * w[:, 1]
            vec = x[0::2] + 1j * x[1::2]
            np.testing.assert_allclose(a @ vec, vec * lam_c, atol=1e-12)
    # results are plain Python floats; numpy scalars and integer entries are accepted
    U, S, V = L.svd(ti.Matrix([[np.float32(1), 2], [3, 4]]))
    assert all(type(e) is float for e in U.entries + S.entries + V.entries)


def test_rejects_other_shapes():
    with pytest.raises(ValueError):
        L.svd(ti.Matrix([[1.0, 2.0, 3.0, 4.0]] * 4))
    with pytest.raises(ValueError):
        L.sym_eig(ti.Matrix([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    with pytest.raises(ValueError):
        L.eig(ti.Matrix.identity(float, 3))


def test_svd_3x3_stays_small(monkeypatch):
    """The decompositions are inlined into kernels: keep them a bounded number of statements."""
    count = [0]
    emit = builder.emit

    def counting_emit(stmt):
        count[0] += 1
        return emit(stmt)

    A = ti.Matrix.field(3, 3, ti.f32, shape=1)
    U = ti.Matrix.field(3, 3, ti.f32, shape=1)
    monkeypatch.setattr(builder, "emit", counting_emit)

    @ti.kernel
    def k():
        u, s, v = L.svd(A[0])
        U[0] = u @ s @ v.transpose()

    k()
    assert 300 < count[0] < 1500


# -- ti.math helpers ---------------------------------------------------------------------------
def _rx(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _about(axis, ang):
    """The rotation about `axis` as Q Rz(ang) Q^T, Q a rotation whose last column is the axis."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    e1 = np.cross(axis, [1.0, 0.0, 0.0])
    e1 /= np.linalg.norm(e1)
    q = np.stack([e1, np.cross(axis, e1), axis], axis=1)
    return q @ _rz(ang) @ q.T


def _pad(m3):
    m = np.eye(4)
    m[:3, :3] = m3
    return m


def _helper_cases():
    axis, ang, p = [1.0, 2.0, 2.0], 0.7, [0.3, -1.0, 2.0]
    unit = list(np.array(axis) / 3.0)
    y, pitch, r = 0.3, -0.5, 1.1
    ypr = _pad((_ry(y) @ _rx(pitch) @ _rz(r)).T)
    return [
        ("vdir", (ang,), [np.cos(ang), np.sin(ang)]),
        ("rotate2d", ([1.0, 2.0], ang), _rz(ang)[:2, :2] @ [1.0, 2.0]),
        ("rot3", (unit, ang), _about(axis, ang)),
        ("rot3", ([0.0, 0.0, 1.0], ang), _rz(ang)),
        ("rotate3d", (p, unit, ang), _about(axis, ang) @ p),
        # the original system's convention: the transpose of the right-handed rotation
        ("rot_by_axis", (axis, ang), _pad(_about(axis, ang).T)),
        ("rot_yaw_pitch_roll", (y, pitch, r), ypr),
        ("rotation3d", (pitch, r, y), ypr),
        ("translate", (1.0, 2.0, 3.0), [[1, 0, 0, 1], [0, 1, 0, 2], [0, 0, 1, 3], [0, 0, 0, 1]]),
        ("scale", (1.0, 2.0, 3.0), np.diag([1.0, 2.0, 3.0, 1.0])),
        ("cinv", ([3.0, 4.0],), [3 / 25, -4 / 25]),
    ]


def test_math_helpers_python_scope():
    for name, args, expected in _helper_cases():
        args = [ti.Vector(a) if isinstance(a, list) else a for a in args]
        got = np.array(getattr(TR, name)(*args).to_numpy(), dtype=np.float64)
        np.testing.assert_allclose(got, expected, atol=1e-12, err_msg=name)
    for x in (0, 1, 255, 256, 0x7FFFFFFF, -1, 12345678):
        assert TR.popcnt(x) == (x & 0xFFFFFFFF).bit_count()
        assert TR.clz(x) == 32 - (x & 0xFFFFFFFF).bit_length()


def _padded(m):
    """A helper's result as the first rows/columns of a 4x4 matrix (Python scope code)."""
    rows = [[m[r, c] if m.ndim == 2 else m[r] for c in range(m.m)] for r in range(m.n)]
    return ti.Matrix([[rows[r][c] if r < m.n and c < len(rows[0]) else 0.0 for c in range(4)]
                      for r in range(4)])


def _kernel_args(args):
    # kernel values (not Python floats) as arguments, so that the helpers emit IR
    return [ti.Vector([ti.cast(x, ti.f32) for x in a]) if isinstance(a, list)
            else ti.cast(a, ti.f32) for a in args]


def test_math_helpers_in_kernels():
    cases = _helper_cases()
    out = ti.Matrix.field(4, 4, ti.f32, shape=len(cases))

    @ti.kernel
    def k():
        # no variable holds the per-case value: its shape differs from case to case
        for j in ti.static(range(len(cases))):
            out[j] = _padded(getattr(TR, cases[j][0])(*_kernel_args(cases[j][1])))

    k()
    got = out.to_numpy()
    for j, (name, _, expected) in enumerate(cases):
        expected = np.asarray(expected, dtype=np.float64)
        shape = expected.shape if expected.ndim == 2 else (len(expected),)
        g = got[j][:shape[0], :shape[1]] if expected.ndim == 2 else got[j][:shape[0], 0]
        np.testing.assert_allclose(g, expected, atol=1e-6, err_msg=name)


def test_bit_counts_in_kernels():
    xs = np.array([0, 1, 2, 3, 255, 256, 0x7FFFFFFF, -1, -2, 12345678, 1 << 30], dtype=np.int32)
    X = ti.field(ti.i32, shape=len(xs))
    X64 = ti.field(ti.i64, shape=len(xs))
    res = ti.Vector.field(6, ti.i32, shape=len(xs))
    X.from_numpy(xs)
    X64.from_numpy(xs.astype(np.int64) * 3)

    @ti.kernel
    def k():
        for i in X:
            u = ti.cast(X[i], ti.u32)
            res[i] = ti.Vector([TR.popcnt(X[i]), TR.clz(X[i]), TR.popcnt(u), TR.clz(u),
                                TR.popcnt(X64[i]), TR.clz(X64[i])])

    k()
    r = res.to_numpy()
    w32 = [int(x) & 0xFFFFFFFF for x in xs]
    w64 = [(int(x) * 3) & (2 ** 64 - 1) for x in xs]
    assert r[:, 0].tolist() == [x.bit_count() for x in w32] == r[:, 2].tolist()
    assert r[:, 1].tolist() == [32 - x.bit_length() for x in w32] == r[:, 3].tolist()
    assert r[:, 4].tolist() == [x.bit_count() for x in w64]
    assert r[:, 5].tolist() == [64 - x.bit_length() for x in w64]


def svd_of_singular_matrices(ti):
    # zero-initialized fields are common (taichi_benchmark's SVD runs on one): the vectors of
    # a rank <= 1 matrix's null space are a convention, which follows the original system's
    import numpy as np
    mats = np.array([np.zeros((3, 3)), np.diag([3.0, 0, 0]), np.diag([-3.0, 0, 0]),
                     np.outer([1.0, 2, 3], [1, 0, 0]), np.diag([3.0, 2, 0]),
                     np.outer([-0.5, 0.25, 2], [1, 0, 0])], np.float32)
    A = ti.Matrix.field(3, 3, ti.f32, len(mats))
    U = ti.Matrix.field(3, 3, ti.f32, len(mats))
    S = ti.Matrix.field(3, 3, ti.f32, len(mats))
    V = ti.Matrix.field(3, 3, ti.f32, len(mats))
    A.from_numpy(mats)

    @ti.kernel
    def k():
        for i in A:
            U[i], S[i], V[i] = ti.svd(A[i])

    k()
    return {"U": U, "S": S, "V": V}


def test_svd_of_singular_matrices_as_the_original_system():
    check_against_taichi(svd_of_singular_matrices)


def norms_of_every_type(ti):
    # Taichi adds eps (0.0 when left out) inside the square root of norm and norm_inv, and to
    # the norm in normalized: an f16 or integer vector's norm is of the default float type
    out = ti.field(ti.f64, shape=10)

    @ti.kernel
    def k(e: ti.f64):
        v = ti.Vector([0.03, 0.04], dt=ti.f64)
        out[0] = v.normalized(0.1)[0]
        out[1] = v.norm(0.1)
        out[2] = v.norm_inv(0.1)
        h = ti.Vector([ti.cast(e, ti.f16), ti.cast(2.0 * e, ti.f16)], dt=ti.f16)
        out[3] = h.norm()
        out[4] = h.normalized()[0]
        out[5] = h.norm_inv()
        out[6] = h.normalized(0.5)[1]
        w = ti.Vector([3, 5])
        out[7] = w.norm()
        out[8] = w.normalized()[1]
        out[9] = ti.math.length(h) + ti.math.normalize(h)[0]

    k(10.9)
    return {"out": out.to_numpy(), "py": [ti.Vector([0.03, 0.04]).normalized(0.1)[0],
                                          ti.Vector([3, 5]).norm()]}


@pytest.mark.parametrize("fp", ["f32", "f64"])
def test_norms_of_every_type_as_the_original_system(fp):
    check_against_taichi(norms_of_every_type, default_fp=f"ti.{fp}")


def f16_vector_algebra(ti):
    # the types of the original system: an integer divides as the default float type, the
    # constants of ti.Matrix.identity/zero/one/unit are of their dtype, and ti.math's literals
    # widen an f16 operand to the default float type
    out = ti.field(ti.f64, shape=14)

    @ti.kernel
    def k(e: ti.f64):
        dt = ti.f16
        a = ti.Vector([ti.cast(e * 3.1, dt), ti.cast(e * -1.7 + 2, dt), ti.cast(e * 0.9 + 1, dt)],
                      dt=dt)
        b = ti.Vector([ti.cast(e * 1.3 - 1, dt), ti.cast(e * 2.2, dt), ti.cast(-e * 0.6 + 3, dt)],
                      dt=dt)
        m = a.outer_product(b) + ti.Matrix.identity(dt, 3) * ti.cast(4, dt)
        n = 3
        vals = [a[0] / 3, a[1] / n, 2 / a[2], (a / 3)[0], m.determinant(), m.trace(), (m @ a)[2],
                m.inverse()[0, 0], ti.math.mix(a, b, 0.25)[1], ti.math.reflect(a, b)[0],
                ti.math.smoothstep(0, 5, a)[0], (ti.Matrix.one(dt, 2, 2) * a[0])[1, 1],
                (ti.Vector.unit(3, 1, dt) * a[1]).sum(), (ti.Matrix.zero(dt, 2) + a[2])[0]]
        for q in ti.static(range(14)):
            out[q] = vals[q]

    k(1.37)
    return {"out": out.to_numpy()}


def test_f16_vector_algebra_as_the_original_system():
    check_against_taichi(f16_vector_algebra)
