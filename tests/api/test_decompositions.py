"""ti.svd, ti.polar_decompose and ti.sym_eig, inside kernels (f32, f64) and in Python scope."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def _matrices(n, count, seed=0):
    rng = np.random.default_rng(seed)
    ms = [rng.standard_normal((n, n)) for _ in range(count - 6)]
    ms += [np.diag(rng.uniform(0.5, 2, n)),                       # diagonal
           np.eye(n),                                              # repeated values
           np.diag([2.0] * (n - 1) + [-1.0]),                      # negative determinant
           np.outer(rng.standard_normal(n), rng.standard_normal(n)),  # rank one
           np.linalg.qr(rng.standard_normal((n, n)))[0],           # orthogonal
           rng.standard_normal((n, n)) * 1e-3]                     # small
    return np.array(ms)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_svd_in_kernels(n, dt):
    ms = _matrices(n, 64)
    count = len(ms)
    A = ti.Matrix.field(n, n, dt, shape=count)
    U = ti.Matrix.field(n, n, dt, shape=count)
    S = ti.Matrix.field(n, n, dt, shape=count)
    V = ti.Matrix.field(n, n, dt, shape=count)
    A.from_numpy(ms.astype(dt.np_dtype))

    @ti.kernel
    def k():
        for i in A:
            U[i], S[i], V[i] = ti.svd(A[i])

    k()
    u, s, v = U.to_numpy().astype(np.float64), S.to_numpy().astype(np.float64), V.to_numpy()
    tol = 2e-4 if dt == ti.f32 else 1e-9
    scale = np.abs(ms).max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose((u @ s @ v.transpose(0, 2, 1)) / scale, ms / scale, atol=tol)
    eye = np.broadcast_to(np.eye(n), u.shape)
    np.testing.assert_allclose(u @ u.transpose(0, 2, 1), eye, atol=tol)
    np.testing.assert_allclose(v @ v.transpose(0, 2, 1), eye, atol=tol)
    np.testing.assert_allclose(np.linalg.det(u), 1, atol=tol)
    np.testing.assert_allclose(np.linalg.det(v), 1, atol=tol)
    sig = np.abs(np.diagonal(s, axis1=1, axis2=2))
    np.testing.assert_allclose(np.sort(sig, 1)[:, ::-1] / scale[:, 0],
                               np.linalg.svd(ms, compute_uv=False) / scale[:, 0], atol=tol)
    # the sign convention: only the last singular value may be negative, with det(A)
    d = np.diagonal(s, axis1=1, axis2=2)
    assert (d[:, :-1] >= -tol).all()
    neg = np.linalg.det(ms) < -1e-6 * scale[:, 0, 0] ** n
    assert (d[neg, -1] < 0).all()


@pytest.mark.parametrize("n", [2, 3])
def test_polar_decomposition(n):
    ms = _matrices(n, 32, seed=1)
    ms = ms[np.abs(np.linalg.det(ms)) > 1e-3]
    count = len(ms)
    A = ti.Matrix.field(n, n, ti.f64, shape=count)
    R = ti.Matrix.field(n, n, ti.f64, shape=count)
    S = ti.Matrix.field(n, n, ti.f64, shape=count)
    A.from_numpy(ms)

    @ti.kernel
    def k():
        for i in A:
            R[i], S[i] = ti.polar_decompose(A[i])

    k()
    r, s = R.to_numpy(), S.to_numpy()
    np.testing.assert_allclose(r @ s, ms, atol=1e-9)
    np.testing.assert_allclose(s, s.transpose(0, 2, 1), atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(r), 1, atol=1e-9)


@pytest.mark.parametrize("n", [2, 3])
def test_symmetric_eigen_decomposition(n):
    ms = _matrices(n, 32, seed=2)
    ms = ms + ms.transpose(0, 2, 1)
    count = len(ms)
    A = ti.Matrix.field(n, n, ti.f64, shape=count)
    L = ti.Vector.field(n, ti.f64, shape=count)
    Q = ti.Matrix.field(n, n, ti.f64, shape=count)
    A.from_numpy(ms)

    @ti.kernel
    def k():
        for i in A:
            L[i], Q[i] = ti.sym_eig(A[i])

    k()
    lam, q = L.to_numpy(), Q.to_numpy()
    np.testing.assert_allclose(lam, np.linalg.eigh(ms)[0], atol=1e-9)
    np.testing.assert_allclose(q @ (lam[:, :, None] * q.transpose(0, 2, 1)), ms, atol=1e-9)


@pytest.mark.parametrize("dt", [ti.f32, ti.f64])
def test_symmetric_eigenvalues_repeated(dt):
    # repeated eigenvalues (6, 6, 5 and 2, 2, 2 and a rotated pair), where a closed-form
    # solver's degenerate branch is taken; taichi 1.7.4 returns 5.5, 5.5, 6 for the first
    ms = np.array([[[6.0, 0.0, 0.0], [0.0, 5.5, 0.5], [0.0, 0.5, 5.5]],
                   [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]],
                   [[4.0, 1.0, 0.0], [1.0, 4.0, 0.0], [0.0, 0.0, 5.0]]])
    A = ti.Matrix.field(3, 3, dt, shape=len(ms))
    L = ti.Vector.field(3, dt, shape=len(ms))
    A.from_numpy(ms)

    @ti.kernel
    def k():
        for i in A:
            L[i] = ti.sym_eig(A[i])[0]

    k()
    np.testing.assert_allclose(np.sort(L.to_numpy(), axis=1), np.linalg.eigvalsh(ms),
                               atol=1e-5 if dt == ti.f32 else 1e-12)


def test_python_scope():
    a = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])
    U, S, V = ti.svd(ti.Matrix(a.tolist()))
    np.testing.assert_allclose(U.to_numpy() @ S.to_numpy() @ V.to_numpy().T, a, atol=1e-12)
    lam, _ = ti.sym_eig(ti.Matrix(a.tolist()))
    np.testing.assert_allclose(lam.to_numpy(), np.linalg.eigvalsh(a), atol=1e-12)
