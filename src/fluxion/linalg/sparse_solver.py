"""`ti.linalg.SparseSolver`: direct solves with a sparse matrix, by SuperLU (scipy).

  "LU"    a general LU factorization, columns ordered by COLAMD or by minimum degree on
          A^T + A (the "AMD" ordering).
  "LLT"   Cholesky, and "LDLT": as in the original system (Eigen's simplicial solvers), only
          the lower triangle of the matrix is read and mirrored; the matrix is factorized
          with symmetric (diagonal) pivoting, whose pivots are those of L D L^T: "LLT" fails
          unless every pivot is positive (the matrix is not positive definite), "LDLT" fails
          on a zero pivot.

A failed factorization makes `info()` False, and `solve()` then raises instead of returning
the zeros the original system returns.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang.field import Field
from fluxion.lang.ndarray import Ndarray
from fluxion.linalg import _scipy
from fluxion.linalg.sparse_matrix import SparseMatrix

__all__ = ["SparseSolver"]

_SOLVER_TYPES = ("LLT", "LDLT", "LU")
_ORDERINGS = {"AMD": "MMD_AT_PLUS_A", "COLAMD": "COLAMD"}


class SparseSolver:
    """Solves A x = b for a SparseMatrix A: `analyze_pattern(A)`, `factorize(A)` (or
    `compute(A)`, both), then `solve(b)` for any number of right-hand sides.

    >>> solver = ti.linalg.SparseSolver(dtype=ti.f32, solver_type="LLT")
    >>> solver.compute(A)
    >>> x = solver.solve(b)      # b: a field or numpy array -> numpy; a ti.ndarray -> ti.ndarray
    """

    def __init__(self, dtype=T.f32, solver_type="LLT", ordering="AMD"):
        if solver_type not in _SOLVER_TYPES or ordering not in _ORDERINGS:
            raise FluxionRuntimeError(
                f"The solver type {solver_type} with {ordering} is not supported. Only "
                f"{list(_SOLVER_TYPES)} with {list(_ORDERINGS)} are supported.")
        self.dtype = _scipy.value_dtype(dtype, "SparseSolver")
        self.solver_type = solver_type
        self.ordering = ordering
        self.matrix = None
        self._lu = None
        self._ok = False
        _scipy.sparse()          # a missing scipy is reported here, not at the first solve

    def _check_matrix(self, A, what):
        if not isinstance(A, SparseMatrix):
            raise FluxionRuntimeError(f"SparseSolver.{what}: the matrix must be a "
                                      f"ti.linalg.SparseMatrix, got {type(A).__name__}")
        if A.dtype is not self.dtype:
            raise FluxionRuntimeError(f"The SparseSolver's dtype {self.dtype} is not "
                                      f"consistent with the SparseMatrix's dtype {A.dtype}.")
        if A.n != A.m:
            raise FluxionRuntimeError(f"SparseSolver.{what}: the matrix must be square, got "
                                      f"shape {A.shape}")

    def compute(self, sparse_matrix):
        """analyze_pattern and factorize in one call."""
        self.analyze_pattern(sparse_matrix)
        self.factorize(sparse_matrix)

    def analyze_pattern(self, sparse_matrix):
        """Check the matrix; the fill-reducing ordering itself is computed by factorize (SuperLU
        orders and factorizes in one step)."""
        self._check_matrix(sparse_matrix, "analyze_pattern")
        self.matrix = sparse_matrix

    def factorize(self, sparse_matrix):
        """Factorize the matrix; `info()` tells whether it succeeded."""
        self._check_matrix(sparse_matrix, "factorize")
        self.matrix = sparse_matrix
        spla = _scipy.sparse_linalg()
        sp = _scipy.sparse()
        mat = sparse_matrix._mat
        self._lu, self._ok = None, False
        try:
            if self.solver_type == "LU":
                lu = spla.splu(mat.tocsc(), permc_spec=_ORDERINGS[self.ordering])
                ok = True
            else:
                low = sp.tril(mat, format="csc")
                sym = (low + sp.tril(mat, -1, format="csc").T).tocsc()
                # diagonal pivots only, in a symmetric ordering: the LU factors are
                # L (D L^T), and U's diagonal is D
                lu = spla.splu(sym, permc_spec=_ORDERINGS[self.ordering],
                               diag_pivot_thresh=0.0, options={"SymmetricMode": True})
                pivots = lu.U.diagonal()
                diagonal = np.array_equal(lu.perm_r, lu.perm_c)
                if self.solver_type == "LLT":
                    ok = diagonal and bool(np.all(pivots > 0))
                else:
                    ok = diagonal and bool(np.all(pivots != 0))
        except RuntimeError:        # SuperLU: "Factor is exactly singular"
            return
        if ok:
            self._lu, self._ok = lu, True

    def info(self):
        """True if the last factorization succeeded."""
        return self._ok

    def solve(self, b):
        """The solution of A x = b: a numpy array for a field or numpy array b, a new
        ti.ndarray (of b's dtype) for a ti.ndarray b."""
        if self.matrix is None:
            raise FluxionRuntimeError("SparseSolver.solve: call compute() (or analyze_pattern() "
                                      "and factorize()) before solve()")
        if not self._ok:
            kind = "positive definite " if self.solver_type == "LLT" else ""
            raise FluxionRuntimeError(
                f"SparseSolver.solve: the {self.solver_type} factorization failed (info() is "
                f"False): the matrix is not {kind}invertible" +
                (" or needs pivoting; try solver_type='LU'" if self.solver_type != "LU" else ""))
        if isinstance(b, Ndarray):
            x = self._solve(b.to_numpy())
            out = Ndarray(b.dtype, x.shape)
            out.from_numpy(x.astype(out.arr.dtype))
            return out
        if isinstance(b, Field):
            return self._solve(b.to_numpy())
        if isinstance(b, np.ndarray):
            return self._solve(b)
        raise FluxionRuntimeError(f"The parameter type: {type(b).__name__} is not supported in "
                                  f"linear solvers (a field, a ti.ndarray or a numpy array)")

    def _solve(self, b):
        n = self.matrix.n
        if b.ndim not in (1, 2) or b.shape[0] != n:
            raise FluxionRuntimeError(f"SparseSolver.solve: b of shape {b.shape} does not match "
                                      f"the {n}x{n} matrix")
        rhs = np.ascontiguousarray(b, dtype=_scipy.np_dtype(self.dtype))
        return self._lu.solve(rhs)
