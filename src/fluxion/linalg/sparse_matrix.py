"""Sparse matrices: `ti.linalg.SparseMatrix`, and `ti.linalg.SparseMatrixBuilder`, which
kernels fill through a `ti.types.sparse_matrix_builder()` argument.

A builder is a list of (row, column, value) triplets in three fields plus a counter. In a
kernel, `A[i, j] += v` claims the next slot with an atomic add on the counter and writes the
triplet there (`-=` writes -v); `build()` sums the duplicates into a scipy matrix (CSC for the
default storage_format="col_major", CSR for "row_major") and empties the builder. The kernel
does no search and takes no lock, so any number of iterations may add to the same entry.

The matrix itself is a scipy.sparse matrix in the builder's value type (f32 or f64), so every
operation (+, -, *, @, transpose, SpMV) computes in that type, as in the original system.
"""
from __future__ import annotations

import ast
import warnings

import numpy as np

from fluxion.frontend.access import as_indices, field_access, flatten_index
from fluxion.frontend.transformer import store_value
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit
from fluxion.ir.errors import FluxionRuntimeError, FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.lang import builtins as B
from fluxion.lang.field import Field, field
from fluxion.lang.kernel import template
from fluxion.lang.matrix import Matrix
from fluxion.lang.ndarray import Ndarray
from fluxion.linalg import _scipy

__all__ = ["SparseMatrix", "SparseMatrixBuilder", "sparse_matrix_builder"]

_FORMATS = {"col_major": "csc", "row_major": "csr"}
# a matrix with more entries than this prints as a one-line summary, not densely
_PRINT_LIMIT = 1 << 20


def _format_of(storage_format, what):
    if storage_format not in _FORMATS:
        raise ValueError(f"{what}: storage_format must be 'col_major' or 'row_major', "
                         f"got {storage_format!r}")
    return _FORMATS[storage_format]


def _shape_arg(n, what):
    try:
        v = int(n)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an integer, got {n!r}") from None
    if v != n or v <= 0:
        raise ValueError(f"{what} must be a positive integer, got {n!r}")
    return v


class SparseMatrix:
    """An n x m sparse matrix of f32 or f64 values (`ti.linalg.SparseMatrix(n, m, dtype=...)`
    is an empty one; `SparseMatrixBuilder.build()` makes a filled one).

    `A[i, j]` reads an entry (0.0 where none is stored) and `A[i, j] = v` sets one;
    `A + B`, `A - B`, `A * B` (entry-wise), `A * 2.0`, `A @ B` and `A.transpose()` give new
    matrices; `A @ x` multiplies a vector: a field or numpy array gives a numpy array, a
    ti.ndarray a new ti.ndarray. `sm` may be a scipy sparse matrix (or a 2-D numpy array),
    whose values are copied in `dtype`.
    """

    # numpy operands (np.float64(2) * A) defer to the methods below, not broadcast over A
    __array_ufunc__ = None

    def __init__(self, n=None, m=None, sm=None, dtype=T.f32, storage_format="col_major"):
        self.dtype = _scipy.value_dtype(dtype, "SparseMatrix")
        self._fmt = _format_of(storage_format, "SparseMatrix")
        self.storage_format = storage_format
        sp = _scipy.sparse()
        if sm is None:
            if n is None:
                raise TypeError("SparseMatrix needs a shape (n, m) or a matrix `sm`")
            self.n = _shape_arg(n, "SparseMatrix: n")
            self.m = _shape_arg(m, "SparseMatrix: m") if m else self.n
            self._mat = sp.csr_matrix((self.n, self.m), dtype=_scipy.np_dtype(self.dtype))
            self._mat = self._mat.asformat(self._fmt)
        else:
            if isinstance(sm, SparseMatrix):
                sm = sm._mat
            if not sp.issparse(sm):
                sm = np.asarray(sm)
                if sm.ndim != 2:
                    raise ValueError(f"SparseMatrix: sm must be a matrix, got shape {sm.shape}")
            # a copy: setting an entry of this matrix must not change `sm`
            mat = sp.csr_matrix(sm, dtype=_scipy.np_dtype(self.dtype)).asformat(self._fmt,
                                                                                 copy=True)
            if n is not None and (n, m or n) != mat.shape:
                raise ValueError(f"SparseMatrix: shape ({n}, {m or n}) given for a matrix of "
                                 f"shape {mat.shape}")
            self.n, self.m = mat.shape
            self._mat = mat

    @classmethod
    def _wrap(cls, mat, dtype, storage_format):
        """A SparseMatrix around scipy matrix `mat` (taken, not copied)."""
        obj = cls.__new__(cls)
        obj.dtype = dtype
        obj.storage_format = storage_format
        obj._fmt = _FORMATS[storage_format]
        obj._mat = mat.asformat(obj._fmt).astype(_scipy.np_dtype(dtype), copy=False)
        obj.n, obj.m = mat.shape
        return obj

    @property
    def shape(self):
        """(rows, columns)."""
        return (self.n, self.m)

    # -- entries --------------------------------------------------------------------------
    def _index(self, indices):
        if not isinstance(indices, tuple) or len(indices) != 2:
            raise IndexError(f"a sparse matrix is indexed with (row, column), got {indices!r}")
        i, j = indices
        try:
            i, j = int(i), int(j)
        except (TypeError, ValueError):
            raise IndexError(f"sparse matrix indices must be integers, got {indices!r}") from None
        if not (0 <= i < self.n and 0 <= j < self.m):
            raise IndexError(f"index ({i}, {j}) out of range for a sparse matrix of shape "
                             f"{self.shape}")
        return i, j

    def __getitem__(self, indices):
        i, j = self._index(indices)
        return float(self._mat[i, j])

    def __setitem__(self, indices, value):
        i, j = self._index(indices)
        with warnings.catch_warnings():
            # a new entry changes the sparsity structure, which scipy warns is slow
            warnings.simplefilter("ignore", _scipy.sparse().SparseEfficiencyWarning)
            self._mat[i, j] = value

    # -- arithmetic -----------------------------------------------------------------------
    def _same_shape(self, other, op):
        if not isinstance(other, SparseMatrix):
            raise TypeError(f"sparse matrix {op}: the other operand must be a SparseMatrix, "
                            f"got {type(other).__name__}")
        if self.shape != other.shape:
            raise FluxionRuntimeError(f"Dimension mismatch between sparse matrices {self.shape} "
                                      f"and {other.shape} in {op}")

    def _result(self, mat, other=None):
        dt = self.dtype
        if isinstance(other, SparseMatrix) and other.dtype is T.f64:
            dt = T.f64
        return SparseMatrix._wrap(mat, dt, self.storage_format)

    def __add__(self, other):
        self._same_shape(other, "+")
        return self._result(self._mat + other._mat, other)

    def __sub__(self, other):
        self._same_shape(other, "-")
        return self._result(self._mat - other._mat, other)

    def __iadd__(self, other):
        self._same_shape(other, "+=")
        self._mat = (self._mat + other._mat).asformat(self._fmt).astype(self._mat.dtype)
        return self

    def __isub__(self, other):
        self._same_shape(other, "-=")
        self._mat = (self._mat - other._mat).asformat(self._fmt).astype(self._mat.dtype)
        return self

    def __neg__(self):
        return self._result(-self._mat)

    def __mul__(self, other):
        """`A * s` scales by a number; `A * B` is the entry-wise (Hadamard) product."""
        if isinstance(other, SparseMatrix):
            self._same_shape(other, "*")
            return self._result(self._mat.multiply(other._mat), other)
        if isinstance(other, (int, float, np.integer, np.floating)) and \
                not isinstance(other, bool):
            return self._result(self._mat * self._mat.dtype.type(other))
        return NotImplemented

    def __rmul__(self, other):
        if isinstance(other, (int, float, np.integer, np.floating)) and \
                not isinstance(other, bool):
            return self._result(self._mat * self._mat.dtype.type(other))
        return NotImplemented

    def transpose(self):
        """The transposed matrix (a new one)."""
        return self._result(self._mat.transpose())

    def __matmul__(self, other):
        """`A @ B` for a SparseMatrix B; `A @ x` for a vector x (a field, a numpy array or a
        ti.ndarray) of A.m elements."""
        if isinstance(other, SparseMatrix):
            if self.m != other.n:
                raise FluxionRuntimeError(f"Dimension mismatch between sparse matrices "
                                          f"{self.shape} and {other.shape} in @")
            return self._result(self._mat @ other._mat, other)
        if isinstance(other, Ndarray):
            x = other.to_numpy()
            self._check_vector(x, "ti.ndarray")
            out = Ndarray(other.dtype, (self.n,) + tuple(x.shape[1:]), other.element)
            out.from_numpy(self._spmv(x).astype(out.arr.dtype))
            return out
        if isinstance(other, Field):
            x = other.to_numpy()
            self._check_vector(x, "field")
            return self._spmv(x)
        if isinstance(other, np.ndarray):
            self._check_vector(other, "numpy array")
            return self._spmv(other)
        raise TypeError(f"sparse matrix @ {type(other).__name__}: the other operand must be a "
                        f"SparseMatrix, a field, a ti.ndarray or a numpy array")

    def _check_vector(self, x, what):
        if x.ndim == 0 or x.shape[0] != self.m:
            raise FluxionRuntimeError(f"Dimension mismatch between sparse matrix {self.shape} "
                                      f"and {what} of shape {x.shape}")

    def _spmv(self, x):
        """A x in the matrix's type, or in f64 if x is f64 (integers count as the matrix's)."""
        dt = self._mat.dtype
        if x.dtype.kind == "f":
            dt = np.result_type(dt, x.dtype)
        mat = self._mat if dt == self._mat.dtype else self._mat.astype(dt)
        return np.asarray(mat @ np.ascontiguousarray(x, dtype=dt))

    # -- output ---------------------------------------------------------------------------
    def __str__(self):
        """The dense matrix, one bracketed row a line, entries right-aligned to a common
        width with 4 significant digits (as the original system prints)."""
        if self.n * self.m > _PRINT_LIMIT:
            return (f"<SparseMatrix {self.n}x{self.m} {self.dtype}, {self._mat.nnz} stored "
                    f"entries>")
        dense = self._mat.toarray()
        cells = [[format(float(v), ".4g") for v in row] for row in dense]
        w = max(len(c) for row in cells for c in row)
        return "\n".join("[" + ", ".join(c.rjust(w) for c in row) + "]" for row in cells)

    __repr__ = __str__

    def mmwrite(self, filename):
        """Write the matrix to a Matrix Market file."""
        import scipy.io
        scipy.io.mmwrite(filename, self._mat)

    def build_from_ndarray(self, ndarray):
        """Set the matrix from (row, column, value) triplets: a ti.ndarray (or numpy array)
        whose elements, read in order, are the triplets' numbers; entries given twice add."""
        if isinstance(ndarray, Ndarray):
            flat = ndarray.to_numpy().reshape(-1)
        elif isinstance(ndarray, np.ndarray):
            flat = ndarray.reshape(-1)
        else:
            raise FluxionRuntimeError("Sparse matrix only supports building from ti.ndarray, "
                                      "ti.Vector.ndarray, ti.Matrix.ndarray (or numpy arrays), "
                                      f"not {type(ndarray).__name__}")
        if flat.size % 3 != 0:
            raise FluxionRuntimeError(f"build_from_ndarray: {flat.size} numbers do not make "
                                      f"(row, column, value) triplets")
        t = flat.reshape(-1, 3)
        rows, cols = t[:, 0], t[:, 1]
        if np.any(rows != np.floor(rows)) or np.any(cols != np.floor(cols)):
            raise FluxionRuntimeError("build_from_ndarray: a row or column index is not an "
                                      "integer")
        self._mat = _from_triplets(rows.astype(np.int64), cols.astype(np.int64), t[:, 2],
                                   self.shape, self.dtype, self._fmt, "build_from_ndarray")


def _from_triplets(rows, cols, vals, shape, dtype, fmt, what):
    bad = (rows < 0) | (rows >= shape[0]) | (cols < 0) | (cols >= shape[1])
    if np.any(bad):
        k = int(np.argmax(bad))
        raise FluxionRuntimeError(f"{what}: triplet {k} has index ({rows[k]}, {cols[k]}), out "
                                  f"of range for a sparse matrix of shape {shape}")
    sp = _scipy.sparse()
    npdt = _scipy.np_dtype(dtype)
    # duplicates add up when the COO matrix is converted
    return sp.coo_matrix((vals.astype(npdt), (rows, cols)), shape=shape).asformat(fmt)


class sparse_matrix_builder(template):  # noqa: N801  (the original system's name)
    """Annotation of a kernel argument that is a SparseMatrixBuilder: in the kernel,
    `A[i, j] += v` and `A[i, j] -= v` add triplets. Each builder compiles its own instance
    of the kernel (it is passed like a template argument)."""

    @staticmethod
    def check_argument(value, kernel_name, arg_name):
        if not isinstance(value, SparseMatrixBuilder):
            raise FluxionTypeError(f"kernel '{kernel_name}': argument '{arg_name}' is annotated "
                                   f"ti.types.sparse_matrix_builder() but got "
                                   f"{type(value).__name__}")


class SparseMatrixBuilder:
    """Collects the entries of a sparse matrix from kernels; `build()` makes the matrix.

    >>> K = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=10 * n, dtype=ti.f64)
    >>> @ti.kernel
    ... def assemble(A: ti.types.sparse_matrix_builder()):
    ...     for i in range(n):
    ...         A[i, i] += 2.0
    >>> assemble(K)
    >>> M = K.build()

    `max_num_triplets` bounds the number of `+=`/`-=` between two builds; `build()` raises if
    the kernels added more (the extra triplets had nowhere to go).
    """

    def __init__(self, num_rows=None, num_cols=None, max_num_triplets=0, dtype=T.f32,
                 storage_format="col_major"):
        if num_rows is None:
            raise TypeError("SparseMatrixBuilder needs num_rows")
        self.num_rows = _shape_arg(num_rows, "SparseMatrixBuilder: num_rows")
        self.num_cols = _shape_arg(num_cols, "SparseMatrixBuilder: num_cols") if num_cols \
            else self.num_rows
        self.dtype = _scipy.value_dtype(dtype, "SparseMatrixBuilder")
        self.storage_format = storage_format
        _format_of(storage_format, "SparseMatrixBuilder")
        cap = int(max_num_triplets)
        if cap < 0:
            raise ValueError(f"SparseMatrixBuilder: negative max_num_triplets {cap}")
        self.max_num_triplets = cap
        # one slot more than the capacity: the triplets past it all land there, and the
        # counter still counts them, so build() can say how many there were
        self._rows = field(T.i32, shape=cap + 1, name="sparse_builder_rows")
        self._cols = field(T.i32, shape=cap + 1, name="sparse_builder_cols")
        self._vals = field(self.dtype, shape=cap + 1, name="sparse_builder_values")
        self._count = field(T.i32, shape=(), name="sparse_builder_count")

    def __repr__(self):
        return (f"<SparseMatrixBuilder {self.num_rows}x{self.num_cols} {self.dtype}, "
                f"{self.num_triplets} of {self.max_num_triplets} triplets>")

    @property
    def num_triplets(self):
        """The triplets added since the last build (more than max_num_triplets when the
        kernels overflowed it)."""
        return int(self._count[None])

    def _triplets(self, what):
        count = self.num_triplets
        if count > self.max_num_triplets:
            raise FluxionRuntimeError(
                f"{what}: the kernels added {count} triplets to a SparseMatrixBuilder made with "
                f"max_num_triplets={self.max_num_triplets}; the ones past it are lost. Make "
                f"the builder with max_num_triplets >= {count}")
        return (self._rows.to_numpy()[:count], self._cols.to_numpy()[:count],
                self._vals.to_numpy()[:count])

    def build(self, dtype=None, _format="CSR"):
        """The sparse matrix of the triplets added so far (entries added several times are
        summed); empties the builder. Its values have the builder's dtype (`dtype` is
        accepted for compatibility and, as in the original system, not used)."""
        rows, cols, vals = self._triplets("build")
        shape = (self.num_rows, self.num_cols)
        fmt = _FORMATS[self.storage_format]
        mat = _from_triplets(rows.astype(np.int64), cols.astype(np.int64), vals, shape,
                             self.dtype, fmt, "SparseMatrixBuilder.build")
        self._count[None] = 0
        return SparseMatrix._wrap(mat, self.dtype, self.storage_format)

    def print_triplets(self):
        """Print the triplets added since the last build."""
        count = self.num_triplets
        print(f"n={self.num_rows}, m={self.num_cols}, num_triplets={count} "
              f"(max={self.max_num_triplets})")
        rows, cols, vals = self._triplets("print_triplets")
        for r, c, v in zip(rows, cols, vals):
            print(f"[{r}, {c}] = {float(v)}")

    # -- inside kernels -------------------------------------------------------------------
    def _kernel_subscript(self, index):
        return _BuilderEntry(self, index)

    def _kernel_add(self, index, value, negate=False):
        """Emit the IR of `self[index] += value` (`-=` with negate): claim a slot, write the
        triplet."""
        flat = flatten_index(index)
        if len(flat) != 2:
            raise FluxionSyntaxError(f"a sparse matrix builder is indexed with [row, column], "
                                     f"got {len(flat)} indices")
        i, j = as_indices(flat, "a sparse matrix builder")
        if isinstance(value, Matrix):
            raise FluxionTypeError("a sparse matrix builder entry takes a scalar, not a "
                                   f"{value.shape} vector or matrix")
        if not isinstance(value, (Expr, int, float, np.number)):
            raise FluxionTypeError(f"a sparse matrix builder entry takes a number, not "
                                   f"{type(value).__name__}")
        value = E.cast(E.to_expr(value, like=self.dtype), self.dtype)
        if negate:
            value = -value
        ctx = builder.current()
        if ctx.cfg.debug:
            inside = E.truth((i >= 0) & (i < self.num_rows) & (j >= 0) & (j < self.num_cols))
            code = len(ctx.ir.errors)
            ctx.ir.errors.append((f"index {{}} out of range for a sparse matrix builder of "
                                  f"shape ({self.num_rows}, {self.num_cols})", ctx.loc, 2))
            emit(S.AssertStmt(inside.stmt, [i.stmt, j.stmt], code))
        k = B.atomic_update("add", field_access(self._count, None), 1)
        slot = B.min(k, self.max_num_triplets)
        store_value(field_access(self._rows, slot), i)
        store_value(field_access(self._cols, slot), j)
        store_value(field_access(self._vals, slot), value)


class _BuilderEntry:
    """`A[i, j]` of a builder inside a kernel: only `+=` and `-=` apply to it."""

    def __init__(self, builder, index):
        self.builder, self.index = builder, index

    def _kernel_augment(self, op, value):
        if op is ast.Add:
            self.builder._kernel_add(self.index, value)
        elif op is ast.Sub:
            self.builder._kernel_add(self.index, value, negate=True)
        else:
            raise FluxionSyntaxError("only += and -= apply to the entries of a sparse matrix "
                                     "builder")

    def _kernel_store(self, value):
        raise FluxionSyntaxError("the entries of a sparse matrix builder are only added to "
                                 "(A[i, j] += v or A[i, j] -= v), not assigned")
