"""Small vectors and matrices, usable both in Python scope (entries are numbers) and inside
kernels (entries are `Expr`s): the frontend scalarizes them, so each entry is one IR value and
every method below is ordinary Python that emits scalar IR when its entries are kernel values.
The frontend builds and tests them, so they live here; allocating fields and ndarrays of them
(`ti.Vector.field`) is the language layer's, which plugs it in through `_python_scope`
(frontend/python_scope.py).
"""
from __future__ import annotations

import numbers

import numpy as np

from fluxion.frontend import builtins as B
from fluxion.frontend.builtins import Elementwise
from fluxion.frontend.python_scope import _python_scope
from fluxion.frontend.stores import store_value, tensor_text
from fluxion.frontend.matrix_entries import (_SWIZZLE_CHARS, _cmp, _dynamic_get, _one,
                                             _plus_eps, _truth_of, _sum, _swizzle_indices,
                                             _typed_entries, _zero)
from fluxion.ir import types as T
from fluxion.ir.errors import (FluxionCompilationError, FluxionIndexError, FluxionRuntimeError,
                               FluxionTypeError)
from fluxion.ir.expr import Expr


def _is_scalar(x):
    return isinstance(x, (numbers.Number, Expr, np.generic))


class Matrix(Elementwise):
    """An n x m matrix (`ndim == 2`) or an n-vector (`ndim == 1`, m == 1)."""
    __array_priority__ = 1000
    # Python scope: an element read from a field or ndarray (`x[i]`) writes through to it, so
    # `x[i][0] = v` and `x[i].y = v` store like `x[i] = v` does. `_sink(flat, value)` stores one
    # entry and gives back the value as stored (cast to the element type); None for plain values.
    _sink = None

    def __init__(self, arr, dt=None, ndim=None):
        if isinstance(arr, Matrix):
            entries, n, m, nd = list(arr.entries), arr.n, arr.m, arr.ndim
        elif isinstance(arr, np.ndarray):
            return Matrix.__init__(self, arr.tolist(), dt, ndim)
        elif _is_scalar(arr):
            entries, n, m, nd = [arr], 1, 1, 1
        else:
            arr = list(arr)
            if ndim != 1 and arr and isinstance(arr[0], (list, tuple, np.ndarray, Matrix)):
                rows = [list(r.entries) if isinstance(r, Matrix) else list(r) for r in arr]
                n, m = len(rows), len(rows[0]) if rows else 0
                if any(len(r) != m for r in rows):
                    raise ValueError("matrix rows have different lengths")
                entries, nd = [x for r in rows for x in r], 2
            else:
                entries, n, m, nd = arr, len(arr), 1, 1
        if ndim is not None:
            nd = ndim
        entries = _typed_entries(entries, dt)
        self.entries, self.n, self.m, self.ndim = entries, n, m, nd

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def _make(cls, entries, n, m, ndim):
        obj = Matrix.__new__(Vector if ndim == 1 else Matrix)
        obj.entries, obj.n, obj.m, obj.ndim = list(entries), n, m, ndim
        return obj

    def _like(self, entries):
        return Matrix._make(entries, self.n, self.m, self.ndim)

    @staticmethod
    def field(n, m, dtype, shape=None, **kw):
        return _python_scope.matrix_field(n, m, dtype, shape, ndim=2, **kw)

    @staticmethod
    def ndarray(n, m, dtype, shape, needs_grad=False, **kw):
        return _python_scope.ndarray(dtype, shape, element=MatrixType(n, m, 2, dtype),
                                     needs_grad=needs_grad)

    @staticmethod
    def zero(dt, n, m=None):
        if m is None:
            return Matrix._make([_zero(dt)] * n, n, 1, 1)
        return Matrix._make([_zero(dt)] * (n * m), n, m, 2)

    @staticmethod
    def one(dt, n, m=None):
        if m is None:
            return Matrix._make([_one(dt)] * n, n, 1, 1)
        return Matrix._make([_one(dt)] * (n * m), n, m, 2)

    @staticmethod
    def identity(dt, n):
        return Matrix._make([_one(dt) if r == c else _zero(dt) for r in range(n)
                             for c in range(n)], n, n, 2)

    @staticmethod
    def unit(n, i, dt=None):
        dt = dt or int
        return Matrix._make([_one(dt) if k == i else _zero(dt) for k in range(n)], n, 1, 1)

    @staticmethod
    def rows(rows):
        return Matrix([list(r.entries) if isinstance(r, Matrix) else list(r) for r in rows])

    @staticmethod
    def cols(cols):
        return Matrix.rows(cols).transpose()

    @staticmethod
    def diag(dim, val):
        return Matrix._make([val if r == c else 0 * val if not isinstance(val, (int, float))
                             else type(val)(0) for r in range(dim) for c in range(dim)],
                            dim, dim, 2)

    # -- shape and access -------------------------------------------------------------------
    @property
    def shape(self):
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def __len__(self):
        return self.n

    def __iter__(self):
        if self.ndim == 1:
            return iter(self.entries)
        return iter(self._row(r) for r in range(self.n))

    def _row(self, r):
        row = Matrix._make(self.entries[r * self.m:(r + 1) * self.m], self.m, 1, 1)
        if self._sink is not None:
            row._sink = lambda c, v: self._store(r * self.m + c, v)
        return row

    def _store(self, flat, value):
        flat = range(len(self.entries))[flat]
        if self._sink is not None:
            value = self._sink(flat, value)
        self.entries[flat] = value

    def _axis(self, k, n, key):
        """Constant index `k` into an axis of length `n`, checked (negative counts from the
        end, as in Python). Unchecked, `m[0, 2]` of a 2x2 read m[1, 0] and `v[0, 1]` v[1]."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise FluxionIndexError(f"matrix index {key!r}: indices are integers")
        if not -n <= k < n:
            what = f"{self.n}-vector" if self.ndim == 1 else f"{self.n}x{self.m} matrix"
            raise FluxionIndexError(f"index {key!r} is out of range for a {what}")
        return int(k) % n

    def _flat_index(self, key):
        """The flat entry of a constant index, or ("row", r) for one index into a matrix."""
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if isinstance(key, tuple):
            if len(key) != 2:
                raise FluxionIndexError(f"a matrix takes 1 or 2 indices, got {len(key)}: {key!r}")
            r, c = key
            return self._axis(r, self.n, key) * self.m + self._axis(c, self.m, key)
        if self.ndim == 2:
            return ("row", self._axis(key, self.n, key))
        return self._axis(key, self.n, key)

    def _slice_keys(self, key):
        """For an index with slices (`v[1::2]`, `m[:, j]`, `m[1:, :2]`): the scalar keys it
        selects, in order, and the shape of the result (a vector when one axis is sliced).
        None for an index without slices. Slice bounds are constants; a plain index beside a
        slice may be a kernel value."""
        parts = key if isinstance(key, tuple) else (key,)
        if not any(isinstance(k, slice) for k in parts):
            return None
        for k in parts:
            if isinstance(k, slice) and any(isinstance(b, Expr) for b in (k.start, k.stop, k.step)):
                raise FluxionCompilationError("Taichi does not support variables in slice now: "
                                              "slice bounds must be compile-time constants")
        if len(parts) > (1 if self.ndim == 1 else 2):
            raise FluxionIndexError(f"too many indices for a {self.shape} value: {key!r}")
        if self.ndim == 1:
            picks = list(range(self.n))[parts[0]]
            return picks, (len(picks),)
        rows = parts[0]
        cols = parts[1] if len(parts) == 2 else slice(None)
        rs = list(range(self.n))[rows] if isinstance(rows, slice) else [rows]
        cs = list(range(self.m))[cols] if isinstance(cols, slice) else [cols]
        keys = [(r, c) for r in rs for c in cs]
        if not isinstance(rows, slice):
            return keys, (len(cs),)
        if not isinstance(cols, slice):
            return keys, (len(rs),)
        return keys, (len(rs), len(cs))

    def __getitem__(self, key):
        if isinstance(key, Matrix):        # an index vector, as from ti.grouped
            key = tuple(key.entries)
        sliced = self._slice_keys(key)
        if sliced is not None:
            keys, shape = sliced
            vals = [self[k] for k in keys]
            if len(shape) == 1:
                return Matrix._make(vals, shape[0], 1, 1)
            return Matrix._make(vals, shape[0], shape[1], 2)
        if isinstance(key, Expr) or (isinstance(key, tuple) and any(isinstance(k, Expr) for k in key)):
            return _dynamic_get(self, key)
        idx = self._flat_index(key)
        if isinstance(idx, tuple):
            return self._row(idx[1])
        return self.entries[idx]

    def __setitem__(self, key, value):
        if isinstance(key, Matrix):
            key = tuple(key.entries)
        sliced = self._slice_keys(key)
        if sliced is not None:
            keys, _ = sliced
            vals = _flat_values(value, len(keys))
            for k, v in zip(keys, vals):
                self[k] = v
            return
        idx = self._flat_index(key)
        if isinstance(idx, tuple):
            vals = value.entries if isinstance(value, Matrix) else list(value)
            r = idx[1]
            if len(vals) != self.m:
                raise ValueError(f"row {r} of a {self.n}x{self.m} matrix takes {self.m} values, "
                                 f"got {len(vals)}")
            for c, v in enumerate(vals):
                self._store(r * self.m + c, v)
        else:
            self._store(idx, value)

    # Swizzles, as in the original system: on a vector, any string of `xyzw`, `rgba` or
    # `stpq` letters (one set per name) reads those entries (`v.x` a scalar, `v.zxy` a
    # vector) and assignment writes them (`v.brg += 1`; in kernels too, entry by entry).
    def __getattr__(self, name):
        idx = _swizzle_indices(self, name)
        if len(idx) == 1:
            return self.entries[idx[0]]
        return Matrix._make([self.entries[i] for i in idx], len(idx), 1, 1)

    def __setattr__(self, name, value):
        if name[0] not in _SWIZZLE_CHARS or name in Matrix._PLAIN_ATTRS:
            object.__setattr__(self, name, value)
            return
        idx = _swizzle_indices(self, name)
        if len(idx) == 1:
            self._store(idx[0], value)
            return
        vals = value.entries if isinstance(value, Matrix) else (
            list(np.ravel(value)) if isinstance(value, (list, tuple, np.ndarray)) else
            [value] * len(idx))
        if len(vals) != len(idx):
            raise FluxionRuntimeError(f"value len does not match the swizzle pattern={name}")
        for i, v in zip(idx, vals):
            self._store(i, v)

    _PLAIN_ATTRS = frozenset(("entries", "n", "m", "ndim"))

    def to_numpy(self, dtype=None):
        a = np.array(self.entries, dtype=dtype)     # (an f32 vector's NumPy scalars: f32)
        return a.reshape(self.shape)

    def to_list(self):
        # each entry's own Python number (through NumPy a u64 beside a small int is a float)
        flat = [e.item() if isinstance(e, np.generic) else e for e in self.entries]
        return flat if self.ndim == 1 else [flat[k:k + self.m] for k in range(0, len(flat), self.m)]

    def __repr__(self):
        # printed as NumPy prints the array, as the original does (`[[1. 2.]\n [3. 4.]]`)
        if all(isinstance(e, (numbers.Number, np.bool_)) for e in self.entries):
            return str(self.to_numpy())
        return f"Matrix({self.shape})"

    __str__ = __repr__

    def __array__(self, dtype=None, copy=None):
        return self.to_numpy(dtype)

    # -- arithmetic -------------------------------------------------------------------------
    def _zip(self, other, fn):
        if isinstance(other, Matrix):
            if other.shape != self.shape:
                raise ValueError(f"Cannot broadcast tensor to tensor: shape mismatch: "
                                 f"{self.shape} and {other.shape}")
            return self._like([fn(a, b) for a, b in zip(self.entries, other.entries)])
        if isinstance(other, (list, tuple, np.ndarray)):
            b = _numeric_array(other)
            if b is not None and b.shape != self.shape and _numeric_array(self) is not None:
                # Python scope, shapes differ: NumPy broadcasting, as the original (whose
                # entries are a NumPy array) gives: `v == [v, w]` compares row by row
                r = np.vectorize(fn, otypes=[object])(_numeric_array(self), b)
                return Matrix(r.tolist(), ndim=min(r.ndim, 2) or None) if r.ndim else r.item()
            return self._zip(Matrix(other, ndim=self.ndim), fn)
        return self._like([fn(a, other) for a in self.entries])

    def _rzip(self, other, fn):
        if isinstance(other, (list, tuple, np.ndarray)):
            return Matrix(other, ndim=self.ndim)._zip(self, fn)
        return self._like([fn(other, a) for a in self.entries])

    def _map(self, fn):
        return self._like([fn(a) for a in self.entries])

    def __add__(self, o): return self._zip(o, lambda a, b: a + b)
    def __radd__(self, o): return self._rzip(o, lambda a, b: a + b)
    def __sub__(self, o): return self._zip(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._rzip(o, lambda a, b: a - b)
    def __mul__(self, o): return self._zip(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._rzip(o, lambda a, b: a * b)
    def __truediv__(self, o): return self._zip(o, lambda a, b: a / b)
    def __rtruediv__(self, o): return self._rzip(o, lambda a, b: a / b)
    def __floordiv__(self, o): return self._zip(o, lambda a, b: a // b)
    def __rfloordiv__(self, o): return self._rzip(o, lambda a, b: a // b)
    def __mod__(self, o): return self._zip(o, lambda a, b: a % b)
    def __rmod__(self, o): return self._rzip(o, lambda a, b: a % b)
    def __pow__(self, o): return self._zip(o, lambda a, b: a ** b)
    def __rpow__(self, o): return self._rzip(o, lambda a, b: a ** b)
    def __and__(self, o): return self._zip(o, lambda a, b: a & b)
    def __rand__(self, o): return self._rzip(o, lambda a, b: a & b)
    def __or__(self, o): return self._zip(o, lambda a, b: a | b)
    def __ror__(self, o): return self._rzip(o, lambda a, b: a | b)
    def __xor__(self, o): return self._zip(o, lambda a, b: a ^ b)
    def __rxor__(self, o): return self._rzip(o, lambda a, b: a ^ b)
    def __lshift__(self, o): return self._zip(o, lambda a, b: a << b)
    def __rlshift__(self, o): return self._rzip(o, lambda a, b: a << b)
    def __rshift__(self, o): return self._zip(o, lambda a, b: a >> b)
    def __rrshift__(self, o): return self._rzip(o, lambda a, b: a >> b)
    def __lt__(self, o): return self._zip(o, _cmp("cmp_lt"))
    def __le__(self, o): return self._zip(o, _cmp("cmp_le"))
    def __gt__(self, o): return self._zip(o, _cmp("cmp_gt"))
    def __ge__(self, o): return self._zip(o, _cmp("cmp_ge"))
    def __eq__(self, o): return self._zip(o, _cmp("cmp_eq"))
    def __ne__(self, o): return self._zip(o, _cmp("cmp_ne"))
    def __neg__(self): return self._map(lambda a: -a)
    def __pos__(self): return self
    def __abs__(self): return self._map(abs)
    def __invert__(self): return self._map(lambda a: ~a)
    __hash__ = object.__hash__

    def __matmul__(self, o):
        if not isinstance(o, Matrix):
            o = Matrix(o)
        if self.ndim == 1 and o.ndim == 1:
            return self.dot(o)
        a_rows = self.n if self.ndim == 2 else 1
        a_cols = self.m if self.ndim == 2 else self.n
        if self.ndim == 1:
            # a row vector times a matrix
            if a_cols != o.n:
                raise ValueError(f"matmul: shapes {self.shape} and {o.shape} do not match")
            return Matrix._make([_sum(self.entries[k] * o.entries[k * o.m + c] for k in range(o.n))
                                 for c in range(o.m)], o.m, 1, 1)
        if o.ndim == 1:
            if a_cols != o.n:
                raise ValueError(f"matmul: shapes {self.shape} and {o.shape} do not match")
            return Matrix._make([_sum(self.entries[r * self.m + k] * o.entries[k]
                                      for k in range(self.m)) for r in range(a_rows)],
                                a_rows, 1, 1)
        if a_cols != o.n:
            raise ValueError(f"matmul: shapes {self.shape} and {o.shape} do not match")
        return Matrix._make([_sum(self.entries[r * self.m + k] * o.entries[k * o.m + c]
                                  for k in range(self.m))
                             for r in range(self.n) for c in range(o.m)], self.n, o.m, 2)

    def __rmatmul__(self, o):
        return Matrix(o).__matmul__(self)

    # -- methods ------------------------------------------------------------------------------
    def sum(self):
        return _sum(self.entries)

    def max(self):
        return B.max(*self.entries)

    def min(self):
        return B.min(*self.entries)

    def any(self):
        return _truth_of(self.entries, lambda a, b: a | b)

    def all(self):
        return _truth_of(self.entries, lambda a, b: a & b)

    def dot(self, o):
        o = o if isinstance(o, Matrix) else Matrix(o)
        if len(self.entries) != len(o.entries):
            raise ValueError(f"dot: shapes {self.shape} and {o.shape} differ")
        return _sum(a * b for a, b in zip(self.entries, o.entries))

    def norm_sqr(self):
        return _sum(a * a for a in self.entries)

    # Taichi's forms, to the type: an f16 or integer vector's norm is of the default float
    # type (_plus_eps); normalized adds eps to the norm, outside the square root
    def norm(self, eps=0.0):
        return B.sqrt(_plus_eps(self.norm_sqr(), eps))

    def norm_inv(self, eps=0.0):
        return B.rsqrt(_plus_eps(self.norm_sqr(), eps))

    def normalized(self, eps=0.0):
        inv = 1 / _plus_eps(self.norm(), eps)
        return self._map(lambda a: a * inv)

    def cross(self, o):
        a, b = self.entries, o.entries
        if self.n == 3 and o.n == 3:
            return Matrix._make([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                                 a[0] * b[1] - a[1] * b[0]], 3, 1, 1)
        if self.n == 2 and o.n == 2:
            return a[0] * b[1] - a[1] * b[0]
        raise ValueError("cross product needs two 2-vectors or two 3-vectors")

    def outer_product(self, o):
        return Matrix._make([a * b for a in self.entries for b in o.entries], self.n, o.n, 2)

    def transpose(self):
        if self.ndim == 1:
            # as in the original system: a vector is neither a row nor a column
            raise FluxionTypeError("`transpose()` cannot apply to a vector. If you want "
                                   "something like `a @ b.transpose()`, write "
                                   "`a.outer_product(b)` instead.")
        return Matrix._make([self.entries[r * self.m + c] for c in range(self.m)
                             for r in range(self.n)], self.m, self.n, 2)

    @property
    def T(self):  # noqa: N802
        return self.transpose()

    def trace(self):
        if self.ndim != 2 or self.n != self.m:
            # a compilation error in Python scope too, as in the original
            raise FluxionTypeError(f"trace: expected a square matrix, got shape {self.shape}")
        return _sum(self.entries[r * self.m + r] for r in range(self.n))

    def determinant(self):
        e = self.entries
        if (self.n, self.m) == (1, 1):
            return e[0]
        if (self.n, self.m) == (2, 2):
            return e[0] * e[3] - e[1] * e[2]
        if (self.n, self.m) == (3, 3):
            return (e[0] * (e[4] * e[8] - e[5] * e[7]) - e[1] * (e[3] * e[8] - e[5] * e[6])
                    + e[2] * (e[3] * e[7] - e[4] * e[6]))
        if (self.n, self.m) == (4, 4):
            return _sum((-1) ** c * e[c] * self._minor(0, c).determinant() for c in range(4))
        raise ValueError(f"determinant of a {self.shape} matrix is not supported")

    def _minor(self, r0, c0):
        return Matrix._make([self.entries[r * self.m + c] for r in range(self.n) if r != r0
                             for c in range(self.m) if c != c0], self.n - 1, self.m - 1, 2)

    def inverse(self):
        e, n = self.entries, self.n
        if self.ndim != 2 or n != self.m or n not in (1, 2, 3, 4):
            raise ValueError(f"inverse of a {self.shape} matrix is not supported")
        inv_det = 1.0 / self.determinant()
        if n == 1:
            return Matrix._make([inv_det], 1, 1, 2)
        if n == 2:
            return Matrix._make([e[3] * inv_det, -e[1] * inv_det, -e[2] * inv_det, e[0] * inv_det],
                                2, 2, 2)
        cof = [((-1) ** (r + c)) * self._minor(r, c).determinant() for r in range(n)
               for c in range(n)]
        # the inverse is the transposed cofactor matrix over the determinant
        return Matrix._make([cof[c * n + r] * inv_det for r in range(n) for c in range(n)],
                            n, n, 2)

    def cast(self, dtype):
        return self._map(lambda a: B.cast(a, dtype))

    def _kernel_store(self, value):
        """In a kernel: `value` (a matrix, list or scalar) through the entries' lvalues."""
        if isinstance(value, (list, tuple)):
            value = Matrix(list(value), ndim=self.ndim)
        vals = value.entries if isinstance(value, Matrix) else [value] * len(self.entries)
        if len(vals) != len(self.entries) or (isinstance(value, Matrix) and
                                              value.shape != self.shape):
            raise FluxionTypeError(f"cannot assign '{tensor_text(value)}' to "
                                   f"'{tensor_text(self)}': a {value.shape} value to a "
                                   f"{self.shape} one")
        for t, v in zip(self.entries, vals):
            store_value(t, v)

    def fill(self, v):
        if self._sink is not None:
            for k in range(len(self.entries)):
                self._store(k, v)
            return
        if self.entries and all(isinstance(e, Expr) and e.lvalue is not None
                                for e in self.entries):
            # in a kernel, a variable's or a field element's entries: store through them.
            # Replacing the entries only renamed values at compile time, so `v.fill(c)` under
            # an `if` or in a loop was lost (or used a value outside the block defining it).
            self._kernel_store(v)
            return
        self.entries = [v] * len(self.entries)


class Vector(Matrix):
    def __init__(self, arr, dt=None):
        if isinstance(arr, Matrix):
            arr = arr.entries
        Matrix.__init__(self, list(arr) if not _is_scalar(arr) else [arr], dt, ndim=1)
        self.m = 1

    @staticmethod
    def field(n, dtype, shape=None, **kw):
        return _python_scope.matrix_field(n, 1, dtype, shape, ndim=1, **kw)

    @staticmethod
    def ndarray(n, dtype, shape, needs_grad=False, **kw):
        return _python_scope.ndarray(dtype, shape, element=MatrixType(n, 1, 1, dtype),
                                     needs_grad=needs_grad)

    @staticmethod
    def zero(dt, n):
        return Matrix.zero(dt, n)

    @staticmethod
    def one(dt, n):
        return Matrix.one(dt, n)

    @staticmethod
    def unit(n, i, dt=None):
        return Matrix.unit(n, i, dt)


def _numeric_array(x):
    """`x` (a Matrix, nested lists of numbers or matrices, an array) as a NumPy array of
    numbers, or None when it holds kernel values or is ragged."""
    try:
        a = np.array(x.to_numpy() if isinstance(x, Matrix) else x)
    except Exception:
        return None
    return a if a.dtype.kind in "biuf" else None


def _flat_values(value, n):
    """The entries of a value assigned to `n` selected entries (a scalar fills them all)."""
    def flat(v):
        if isinstance(v, Matrix):
            return list(v.entries)
        if isinstance(v, np.ndarray):
            return v.reshape(-1).tolist()
        if isinstance(v, (list, tuple)):
            return [x for e in v for x in flat(e)]
        return [v]
    vals = flat(value) if isinstance(value, (Matrix, list, tuple, np.ndarray)) else [value] * n
    if len(vals) != n:
        raise ValueError(f"cannot assign {len(vals)} values to {n} matrix entries")
    return vals


class MatrixType:
    """`ti.types.vector(3, ti.f32)`, `ti.math.vec3`: an annotation and a constructor."""

    def __init__(self, n, m, ndim, dtype=None):
        self.n, self.m, self.ndim, self._dtype = n, m, ndim, dtype

    @property
    def dtype(self):
        # (the running program's defaults, from ti.init: lang/runtime.py installs the hook)
        if self._dtype is None:
            return T._hooks.defaults()[0]
        if self._dtype == "default_ip":
            return T._hooks.defaults()[1]
        if self._dtype == "default_up":
            # the unsigned type of default_ip's width (ti.math.uvec2 is u64 under i64)
            return getattr(T, f"u{T._hooks.defaults()[1].bits}")
        return T.normalize(self._dtype)

    def __call__(self, *args):
        flat = []
        for a in args:
            if isinstance(a, Matrix):
                flat.extend(a.entries)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    flat.extend(x.entries if isinstance(x, Matrix) else
                                (list(np.ravel(x)) if isinstance(x, (list, tuple)) else [x]))
            elif isinstance(a, np.ndarray):
                flat.extend(a.reshape(-1).tolist())
            else:
                flat.append(a)
        size = self.n * self.m
        if len(flat) == 1:
            flat = flat * size
        if len(flat) != size:
            raise ValueError(f"{self}: expected {size} values, got {len(flat)}")
        dt = self.dtype
        return Matrix._make(_typed_entries(flat, dt), self.n, self.m, self.ndim)

    def field(self, shape=None, **kw):
        return _python_scope.matrix_field(self.n, self.m, self.dtype, shape, ndim=self.ndim,
                                          **kw)

    def __repr__(self):
        if self.ndim == 1:
            return f"vector({self.n}, {self._dtype})"
        return f"matrix({self.n}, {self.m}, {self._dtype})"
