"""ti.linalg.SparseSolver and ti.linalg.SparseCG against numpy.linalg.solve (and
scipy.sparse.linalg.spsolve for a larger system), on matrices assembled by kernels."""
import numpy as np
import pytest

import fluxion as ti

pytest.importorskip("scipy")

NP = {"f32": np.float32, "f64": np.float64}


def _matrix(M, dtype="f64", fmt="col_major"):
    """The SparseMatrix of dense numpy matrix M, assembled by a kernel (zeros left out)."""
    n, m = M.shape
    B = ti.linalg.SparseMatrixBuilder(n, m, max_num_triplets=n * m, dtype=getattr(ti, dtype),
                                      storage_format=fmt)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), src: ti.types.ndarray()):
        for i, j in ti.ndrange(n, m):
            if src[i, j] != 0:
                A[i, j] += src[i, j]

    fill(B, M.astype(NP[dtype]))
    return B.build()


def _spd(rng, n):
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("solver_type", ["LLT", "LDLT", "LU"])
@pytest.mark.parametrize("ordering", ["AMD", "COLAMD"])
def test_direct_solvers_on_spd_matrices(dtype, solver_type, ordering):
    rng = np.random.default_rng(5)
    n = 30
    M = _spd(rng, n) * (rng.random((n, n)) < 0.3)       # sparse, symmetric pattern
    M = (M + M.T) / 2 + n * np.eye(n)
    A = _matrix(M, dtype)
    rhs = rng.standard_normal(n)
    want = np.linalg.solve(M.astype(NP[dtype]).astype(np.float64), rhs.astype(NP[dtype]))
    solver = ti.linalg.SparseSolver(dtype=getattr(ti, dtype), solver_type=solver_type,
                                    ordering=ordering)
    solver.analyze_pattern(A)
    solver.factorize(A)
    assert solver.info() is True
    tol = 1e-5 if dtype == "f32" else 1e-12
    b_field = ti.field(getattr(ti, dtype), n)
    b_field.from_numpy(rhs.astype(NP[dtype]))
    b_nd = ti.ndarray(ti.f32, n)
    b_nd.from_numpy(rhs.astype(np.float32))
    x_np = solver.solve(rhs.astype(NP[dtype]))
    x_field = solver.solve(b_field)
    x_nd = solver.solve(b_nd)
    assert isinstance(x_np, np.ndarray) and x_np.dtype == NP[dtype]
    assert isinstance(x_field, np.ndarray)
    assert isinstance(x_nd, ti.Ndarray) and x_nd.dtype == ti.f32 and x_nd.shape == (n,)
    np.testing.assert_allclose(x_np, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(x_field, want, rtol=tol, atol=tol)
    # (b rounded to f32 there)
    np.testing.assert_allclose(x_nd.to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_cholesky_reads_the_lower_triangle_only():
    # as in the original system: the matrix handed to LLT/LDLT is taken as symmetric, its
    # lower triangle mirrored
    rng = np.random.default_rng(2)
    n = 8
    M = _spd(rng, n)
    M_skewed = M + np.triu(rng.standard_normal((n, n)), 1)     # only the upper part changes
    rhs = rng.standard_normal(n)
    for st in ("LLT", "LDLT"):
        solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type=st)
        solver.compute(_matrix(M_skewed))
        np.testing.assert_allclose(solver.solve(rhs), np.linalg.solve(M, rhs), rtol=1e-10)
    lu = ti.linalg.SparseSolver(dtype=ti.f64, solver_type="LU")
    lu.compute(_matrix(M_skewed))
    np.testing.assert_allclose(lu.solve(rhs), np.linalg.solve(M_skewed, rhs), rtol=1e-10)


def test_factorization_failures():
    indefinite = np.diag([2.0, -1.0, 3.0])
    indefinite[0, 1] = indefinite[1, 0] = 0.5
    rhs = np.array([1.0, 2.0, 3.0])
    llt = ti.linalg.SparseSolver(dtype=ti.f64, solver_type="LLT")
    llt.compute(_matrix(indefinite))
    assert llt.info() is False
    with pytest.raises(ti.FluxionRuntimeError, match="LLT factorization failed"):
        llt.solve(rhs)
    ldlt = ti.linalg.SparseSolver(dtype=ti.f64, solver_type="LDLT")
    ldlt.compute(_matrix(indefinite))        # indefinite but invertible: LDL^T works
    assert ldlt.info() is True
    np.testing.assert_allclose(ldlt.solve(rhs), np.linalg.solve(indefinite, rhs), rtol=1e-12)
    singular = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
    for st in ("LLT", "LDLT", "LU"):
        s = ti.linalg.SparseSolver(dtype=ti.f64, solver_type=st)
        s.compute(_matrix(singular))
        assert s.info() is False, st
        with pytest.raises(ti.FluxionRuntimeError, match="failed"):
            s.solve(rhs)


def test_solver_argument_checks():
    with pytest.raises(ti.FluxionRuntimeError, match="not supported"):
        ti.linalg.SparseSolver(solver_type="QR")
    with pytest.raises(ti.FluxionRuntimeError, match="not supported"):
        ti.linalg.SparseSolver(ordering="METIS")
    s = ti.linalg.SparseSolver(dtype=ti.f32)
    with pytest.raises(ti.FluxionRuntimeError, match="before solve"):
        s.solve(np.ones(3))
    with pytest.raises(ti.FluxionRuntimeError, match="not consistent"):
        s.analyze_pattern(_matrix(np.eye(3), "f64"))
    with pytest.raises(ti.FluxionRuntimeError, match="SparseMatrix"):
        s.compute(np.eye(3))
    s.compute(_matrix(np.eye(3) * 2, "f32"))
    with pytest.raises(ti.FluxionRuntimeError, match="does not match"):
        s.solve(np.ones(4, np.float32))


def test_poisson_system_assembled_in_a_kernel():
    import scipy.sparse.linalg as spla
    g = 40
    n = g * g
    B = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=5 * n, dtype=ti.f64)

    @ti.kernel
    def laplacian(A: ti.types.sparse_matrix_builder()):
        for i, j in ti.ndrange(g, g):
            r = i * g + j
            A[r, r] += 4.0
            if i > 0:
                A[r, r - g] -= 1.0
            if i < g - 1:
                A[r, r + g] -= 1.0
            if j > 0:
                A[r, r - 1] -= 1.0
            if j < g - 1:
                A[r, r + 1] -= 1.0

    laplacian(B)
    A = B.build()
    rng = np.random.default_rng(0)
    rhs = rng.standard_normal(n)
    want = spla.spsolve(A._mat.tocsc(), rhs)
    solver = ti.linalg.SparseSolver(dtype=ti.f64, solver_type="LLT")
    solver.compute(A)
    np.testing.assert_allclose(solver.solve(rhs), want, rtol=1e-10, atol=1e-12)
    cg = ti.linalg.SparseCG(A, rhs, max_iter=1000, atol=1e-10)
    x, ok = cg.solve()
    assert ok
    np.testing.assert_allclose(x, want, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_sparse_cg(dtype):
    rng = np.random.default_rng(11)
    n = 20
    M = _spd(rng, n).astype(NP[dtype])
    A = _matrix(M, dtype)
    b = ti.ndarray(getattr(ti, dtype), n)
    b.from_numpy(np.arange(1, n + 1).astype(NP[dtype]))
    x0 = ti.ndarray(getattr(ti, dtype), n)
    cg = ti.linalg.SparseCG(A, b, x0, max_iter=100, atol=1e-5)
    x, ok = cg.solve()
    want = np.linalg.solve(M.astype(np.float64), np.arange(1, n + 1))
    assert ok is True and x.dtype == NP[dtype]
    # converged: the relative residual is below atol
    assert np.linalg.norm(M @ x - np.arange(1, n + 1)) <= 1e-5 * np.linalg.norm(np.arange(1, n + 1)) * 1.01
    np.testing.assert_allclose(x, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    x1, ok1 = ti.linalg.SparseCG(A, b, x0, max_iter=1, atol=1e-5).solve()
    assert ok1 is False
    # starting at the solution: converged before the first iteration
    start = want.astype(NP[dtype])
    cg2 = ti.linalg.SparseCG(A, b.to_numpy(), start, max_iter=0, atol=1e-3)
    x2, ok2 = cg2.solve()
    assert ok2 is True and cg2.iterations == 0
    np.testing.assert_array_equal(x2, start)
    x3, ok3 = ti.linalg.SparseCG(A, np.zeros(n, NP[dtype])).solve()
    assert ok3 and not np.any(x3)
