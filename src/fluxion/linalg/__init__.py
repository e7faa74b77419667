"""`ti.linalg`: sparse matrices, their direct and conjugate-gradient solvers, and matrix-free
Krylov solvers over fields.

    SparseMatrixBuilder, SparseMatrix    sparse_matrix.py (filled by kernels, kept in scipy)
    SparseSolver                         sparse_solver.py (LLT, LDLT, LU factorizations)
    SparseCG                             sparse_cg.py (Jacobi-preconditioned CG)
    LinearOperator, MatrixFreeCG,        matrixfree_cg.py (fluxion kernels over fields)
    MatrixFreeBICGSTAB

The sparse matrices need scipy (`pip install 'fluxion[sparse]'`), imported on first use; the
matrix-free solvers need nothing but fluxion. The small dense routines (`ti.svd`,
`ti.solve`, ...) are in fluxion.lang.linalg and are top-level names, as in the original system.
"""
from fluxion.ir.errors import FluxionRuntimeError as TaichiRuntimeError  # noqa: F401
from fluxion.ir.errors import FluxionTypeError as TaichiTypeError  # noqa: F401
from fluxion.linalg.matrixfree_cg import LinearOperator, MatrixFreeBICGSTAB, MatrixFreeCG
from fluxion.linalg.sparse_cg import SparseCG
from fluxion.linalg.sparse_matrix import SparseMatrix, SparseMatrixBuilder
from fluxion.linalg.sparse_solver import SparseSolver

__all__ = ["LinearOperator", "MatrixFreeBICGSTAB", "MatrixFreeCG", "SparseCG", "SparseMatrix",
           "SparseMatrixBuilder", "SparseSolver"]
