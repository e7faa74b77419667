"""ti.linalg.MatrixFreeCG and MatrixFreeBICGSTAB over fields of 1, 2 and 3 dimensions, against
numpy.linalg.solve on the dense matrix of the same stencil, built here in numpy."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.linalg import LinearOperator, MatrixFreeBICGSTAB, MatrixFreeCG

NP = {"f32": np.float32, "f64": np.float64}


def _stencil_matrix(shape, diag, weights):
    """Dense matrix of out[I] = diag v[I] - sum_k w_k v[I + e_k] (zero outside the grid);
    weights: {(axis, step): w}."""
    n = int(np.prod(shape))
    M = np.eye(n) * diag
    idx = np.arange(n).reshape(shape)
    for (axis, step), w in weights.items():
        src = np.roll(idx, -step, axis=axis)
        valid = np.ones(shape, bool)
        sl = [slice(None)] * len(shape)
        sl[axis] = slice(-1, None) if step > 0 else slice(0, 1)
        valid[tuple(sl)] = False
        M[idx[valid], src[valid]] -= w
    return M


def _operator(shape, diag, weights):
    dims = len(shape)

    @ti.kernel
    def matvec(v: ti.template(), out: ti.template()):
        for I in ti.grouped(v):
            acc = diag * v[I]
            for a in ti.static(range(dims)):
                for s in ti.static((-1, 1)):
                    if ti.static((a, s) in weights):
                        J = I + ti.Vector.unit(dims, a, ti.i32) * s
                        if 0 <= J[a] < shape[a]:
                            acc -= weights[a, s] * v[J]
            out[I] = acc

    return LinearOperator(matvec)


SYMMETRIC = {(0, -1): 1.0, (0, 1): 1.0, (1, -1): 1.0, (1, 1): 1.0, (2, -1): 1.0, (2, 1): 1.0}
SKEWED = {(0, -1): 2.0, (0, 1): 1.0, (1, -1): 1.0, (1, 1): 3.0, (2, -1): 0.5, (2, 1): 1.5}


@pytest.mark.parametrize("shape, dtype", [((50,), "f64"), ((12, 9), "f32"), ((5, 4, 6), "f64"),
                                          ((7, 5, 3), "f32")])
@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_matrix_free_solvers_match_numpy(shape, dtype, method):
    dims = len(shape)
    table = SYMMETRIC if method == "cg" else SKEWED
    weights = {k: w for k, w in table.items() if k[0] < dims}
    diag = 1.0 + sum(weights.values())     # diagonally dominant: well conditioned
    rng = np.random.default_rng(dims)
    rhs = rng.standard_normal(shape)
    dt = getattr(ti, dtype)
    b = ti.field(dt, shape)
    x = ti.field(dt, shape)
    b.from_numpy(rhs.astype(NP[dtype]))
    x.from_numpy(rng.standard_normal(shape).astype(NP[dtype]))    # any starting point
    A = _operator(shape, diag, weights)
    solve = MatrixFreeCG if method == "cg" else MatrixFreeBICGSTAB
    tol = 1e-4 if dtype == "f32" else 1e-10
    assert solve(A, b, x, tol=tol, maxiter=500) is True
    M = _stencil_matrix(shape, diag, weights)
    want = np.linalg.solve(M, rhs.astype(NP[dtype]).reshape(-1)).reshape(shape)
    # |b - A x| < tol, and the error is at most that over the smallest singular value
    err = np.abs(x.to_numpy() - want).max()
    assert err <= 2 * tol / np.linalg.svd(M, compute_uv=False).min(), err


@pytest.mark.parametrize("method", [MatrixFreeCG, MatrixFreeBICGSTAB])
def test_unreachable_tolerance_stops_with_a_usable_solution(method):
    # f32 cannot reach 1e-20: the solver runs until maxiter or a breakdown and says False,
    # and x is still the solution to f32 accuracy (never NaN)
    shape = (16, 16)
    weights = {k: w for k, w in (SYMMETRIC if method is MatrixFreeCG else SKEWED).items()
               if k[0] < 2}
    b = ti.field(ti.f32, shape)
    x = ti.field(ti.f32, shape)
    diag = 1.0 + sum(weights.values())
    rhs = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    b.from_numpy(rhs)
    assert method(_operator(shape, diag, weights), b, x, tol=1e-20, maxiter=3000) is False
    M = _stencil_matrix(shape, diag, weights)
    want = np.linalg.solve(M, rhs.reshape(-1)).reshape(shape)
    err = np.abs(x.to_numpy() - want).max() / np.abs(want).max()
    assert err < 20 * np.finfo(np.float32).eps * np.linalg.cond(M), err


def test_matrix_free_cg_max_iterations_and_zero_rhs():
    shape = (64,)
    A = _operator(shape, 2.0, {(0, -1): 1.0, (0, 1): 1.0})    # the ill-conditioned 1D Laplacian
    b = ti.field(ti.f64, shape)
    x = ti.field(ti.f64, shape)
    b.fill(1.0)
    assert MatrixFreeCG(A, b, x, tol=1e-12, maxiter=3) is False
    assert MatrixFreeCG(A, b, x, tol=1e-9, maxiter=200) is True
    b.fill(0.0)
    x.fill(0.0)
    assert MatrixFreeCG(A, b, x, tol=1e-12, maxiter=0) is True
    assert not np.any(x.to_numpy())


def test_matrix_free_argument_checks():
    A = _operator((8,), 3.0, {})
    b64 = ti.field(ti.f64, 8)
    with pytest.raises(ti.FluxionTypeError, match="Dtype mismatch"):
        MatrixFreeCG(A, b64, ti.field(ti.f32, 8))
    with pytest.raises(ti.FluxionRuntimeError, match="Dimension mismatch"):
        MatrixFreeBICGSTAB(A, b64, ti.field(ti.f64, 9))
    with pytest.raises(ti.FluxionTypeError, match="scalar field"):
        MatrixFreeCG(A, b64, np.zeros(8))
    with pytest.raises(ti.FluxionTypeError, match="LinearOperator"):
        MatrixFreeCG(lambda v, w: None, b64, ti.field(ti.f64, 8))
    with pytest.raises(ti.FluxionRuntimeError, match="Dimension mismatch"):
        A.matvec(b64, ti.field(ti.f64, 7))
