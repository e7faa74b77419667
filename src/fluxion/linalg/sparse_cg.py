"""`ti.linalg.SparseCG`: conjugate gradients for a symmetric positive definite SparseMatrix,
with the Jacobi (diagonal) preconditioner, in the matrix's value type (numpy and scipy).

As in the original system (Eigen's ConjugateGradient), `atol` bounds the residual relative
to the right-hand side: the iteration stops when |b - A x| <= atol |b|.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang.field import Field
from fluxion.lang.ndarray import Ndarray
from fluxion.linalg import _scipy
from fluxion.linalg.sparse_matrix import SparseMatrix

__all__ = ["SparseCG"]


def _vector(v, n, npdt, what):
    if isinstance(v, (Ndarray, Field)):
        v = v.to_numpy()
    elif not isinstance(v, np.ndarray):
        raise FluxionRuntimeError(f"SparseCG: {what} must be a ti.ndarray, a field or a numpy "
                                  f"array, got {type(v).__name__}")
    if v.shape != (n,):
        raise FluxionRuntimeError(f"SparseCG: {what} of shape {v.shape} does not match the "
                                  f"{n}x{n} matrix")
    return v.astype(npdt)          # a copy: the solver never writes the caller's array


class SparseCG:
    """Solve A x = b by preconditioned conjugate gradients: `x, converged = cg.solve()`.

    A: a SparseMatrix (symmetric positive definite); b, x0: ti.ndarray, field or numpy array
    (x0 defaults to zeros); max_iter: the most iterations; atol: the relative residual to
    reach. `solve()` returns x as a numpy array and whether it converged.
    """

    def __init__(self, A, b, x0=None, max_iter=50, atol=1e-6):
        if not isinstance(A, SparseMatrix):
            raise FluxionRuntimeError(f"SparseCG: A must be a ti.linalg.SparseMatrix, got "
                                      f"{type(A).__name__}")
        if A.n != A.m:
            raise FluxionRuntimeError(f"SparseCG: A must be square, got shape {A.shape}")
        self.dtype = A.dtype
        self.matrix = A
        npdt = _scipy.np_dtype(A.dtype)
        self.b = b
        self._b = _vector(b, A.n, npdt, "b")
        self._x0 = np.zeros(A.n, npdt) if x0 is None else _vector(x0, A.n, npdt, "x0")
        self.max_iter = int(max_iter)
        self.atol = float(atol)
        self.iterations = 0
        self.error = None

    def solve(self):
        A = self.matrix._mat
        b, x = self._b, self._x0.copy()
        npdt = x.dtype
        rhs2 = float(np.dot(b, b))
        self.iterations = 0
        if rhs2 == 0.0:
            self.error = 0.0
            return np.zeros_like(x), True
        # |r|^2 below this is convergence (the floor keeps an exactly solved system from
        # dividing 0 by 0)
        threshold = max(self.atol * self.atol * rhs2, np.finfo(npdt).tiny)
        d = A.diagonal()
        inv_diag = np.where(d != 0, 1 / np.where(d != 0, d, 1), 1).astype(npdt)
        r = b - A @ x
        r2 = float(np.dot(r, r))
        if r2 >= threshold:
            p = inv_diag * r
            rz = np.dot(r, p)
            for it in range(self.max_iter):
                q = A @ p
                pq = np.dot(p, q)
                if not pq > 0:       # A is not positive definite along p: CG cannot go on
                    break
                alpha = rz / pq
                x += alpha * p
                r -= alpha * q
                self.iterations = it + 1
                r2 = float(np.dot(r, r))
                if r2 < threshold:
                    break
                z = inv_diag * r
                rz_new = np.dot(r, z)
                p = z + (rz_new / rz) * p
                rz = rz_new
        self.error = (r2 / rhs2) ** 0.5
        return x, bool(r2 < threshold)
