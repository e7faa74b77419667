"""`ti.ndarray`: dense arrays owned by fluxion (numpy memory on the host), of scalars, vectors
or matrices. How a kernel takes them, and numpy arrays and torch tensors, as arguments is
lang/array_args.py's.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionIndexError, FluxionOutOfBoundsError, FluxionRuntimeError
from fluxion.ir.ops import _wrap_int
from fluxion.frontend import access as _access
from fluxion.frontend.matrix import Matrix, MatrixType, _python_scope
from fluxion.runtime import args as _args, program, staging as _staging

# the launch's (runtime/) array spec and host staging, named here too for lang's modules
ArrayArg = _args.ArrayArg
HostStaging, host_span = _staging.HostStaging, _staging.host_span
# the annotation `ti.types.ndarray()` is the frontend's (it types ti.func parameters too)
NdarrayType = _access.NdarrayType


class Ndarray:
    """`ti.ndarray(dtype, shape)`: a dense array owned by fluxion (numpy memory on the CPU)."""

    def __init__(self, dtype, shape, element=None, needs_grad=False):
        program.ensure_initialized()
        self.element = element
        self.dtype = T.normalize(dtype) if element is None else element.dtype
        shape = _checked_shape(shape)
        self.shape = shape
        es = () if element is None else ((element.n,) if element.ndim == 1 else (element.n, element.m))
        if needs_grad and not self.dtype.is_float:
            raise FluxionRuntimeError(f"{self.dtype} is not supported for ndarray with "
                                      f"needs_grad=True: gradients need a floating-point dtype")
        self.arr = np.zeros(shape + es, dtype=self.dtype.np_dtype)
        self.grad = Ndarray(dtype, shape, element) if needs_grad else None
        # the original's classes of scalar, vector and matrix ndarrays
        self.__class__ = ScalarNdarray if element is None else \
            VectorNdarray if element.ndim == 1 else MatrixNdarray

    @property
    def element_type(self):
        """The dtype of a scalar ndarray; of a vector/matrix one, its element type, whose
        `element_type()` is the dtype and `shape()` the element's shape (a list)."""
        if self.element is None:
            return self.dtype
        return _TensorType(self.dtype, list(self.element_shape))

    def _get_element_size(self):
        """Bytes of one element (of all its entries)."""
        return self.dtype.nbytes * int(np.prod(self.element_shape, dtype=np.int64))

    def _get_nelement(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def copy_from(self, other):
        """Copy the elements of ndarray `other` (same shape and element type) into this one."""
        if not isinstance(other, Ndarray):
            raise TypeError(f"copy_from: expected a ti.ndarray, got {type(other).__name__}")
        if other.arr.shape != self.arr.shape:
            raise ValueError(f"copy_from: shapes differ ({other.arr.shape} into "
                             f"{self.arr.shape})")
        self.arr[...] = other.arr

    @property
    def element_shape(self):
        """() for scalar elements, (n,) for vectors, (n, m) for matrices."""
        e = self.element
        return () if e is None else ((e.n,) if e.ndim == 1 else (e.n, e.m))

    @property
    def n(self):
        if self.element is None:
            raise AttributeError("a scalar ndarray has no n (its elements are not vectors)")
        return self.element.n

    @property
    def m(self):
        if self.element is None or self.element.ndim != 2:
            raise AttributeError("only a matrix ndarray has m")
        return self.element.m

    def to_numpy(self):
        return self.arr.copy()

    def from_numpy(self, a):
        a = np.asarray(a)
        if a.shape != self.arr.shape:
            raise ValueError(f"from_numpy: the ndarray has shape {self.arr.shape} but the array "
                             f"has shape {a.shape}")
        self.arr[...] = a

    def fill(self, v):
        self.arr[...] = self._wrapped(v)

    def _wrapped(self, v):
        """A Python-scope value for elements of an integer ndarray: an integer out of the
        type's range wraps around, as a field's element does (lang/field_host.py) and as in
        the original (`a_u8[0] = -1` stores 255; NumPy refuses it)."""
        if self.dtype.is_float or self.dtype.bits == 1:
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            return _wrap_int(int(v), self.dtype)
        if isinstance(v, (list, tuple)):
            return [self._wrapped(x) for x in v]
        return v

    def _index(self, key):
        """The element index of `a[key]` in Python scope: one integer per dimension."""
        if key is None:
            key = ()
        elif not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):
            raise FluxionIndexError(f"{len(self.shape)}d ndarray indexed with {len(key)}d "
                                    f"indices: {key}")
        out = []
        for k, n in zip(key, self.shape):
            if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
                raise FluxionIndexError(f"ndarray index {key}: indices are integers")
            if not 0 <= k < n:
                raise FluxionOutOfBoundsError(f"Out of bound access: index {key} out of bounds "
                                              f"for ndarray of shape {self.shape}")
            out.append(int(k))
        return tuple(out)

    def __getitem__(self, key):
        idx = self._index(key)
        if self.element is None:
            return self.arr[idx].item()
        # a vector/matrix element: a value that writes through, so `a[i][j] = v` stores into
        # the array as Taichi's does (a copy silently dropped the write)
        e = self.element
        cell = self.arr[idx]
        mat = Matrix._make(cell.reshape(-1).tolist(), e.n, e.m, e.ndim)
        flat = cell.reshape(-1)             # a view of the element's entries

        def sink(c, value):
            flat[c] = value
            return flat[c].item()
        mat._sink = sink
        return mat

    def __setitem__(self, key, v):
        if isinstance(v, Matrix):
            v = v.to_list()
        self.arr[self._index(key)] = self._wrapped(v)

    def __repr__(self):
        return f"<fluxion ndarray {self.dtype} {self.shape}>"

    def __array__(self, dtype=None, copy=None):
        return self.arr if dtype is None else self.arr.astype(dtype)

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class ScalarNdarray(Ndarray):
    """An ndarray of scalars (`ti.ndarray(ti.f32, shape)`)."""

    def __init__(self, dtype, arr_shape, needs_grad=False):
        Ndarray.__init__(self, dtype, arr_shape, needs_grad=needs_grad)


class VectorNdarray(Ndarray):
    """An ndarray of vectors (`ti.Vector.ndarray(n, dtype, shape)`)."""

    def __init__(self, n, dtype, shape, needs_grad=False):
        Ndarray.__init__(self, dtype, shape, element=MatrixType(n, 1, 1, dtype),
                         needs_grad=needs_grad)


class MatrixNdarray(Ndarray):
    """An ndarray of matrices (`ti.Matrix.ndarray(n, m, dtype, shape)`)."""

    def __init__(self, n, m, dtype, shape, needs_grad=False):
        Ndarray.__init__(self, dtype, shape, element=MatrixType(n, m, 2, dtype),
                         needs_grad=needs_grad)


# the classes of fluxion's own arrays (the launch tells them by exact type); lang/texture.py
# adds its Texture through register_array_class
_NDARRAY_TYPES = {Ndarray, ScalarNdarray, VectorNdarray, MatrixNdarray}
register_array_class = _NDARRAY_TYPES.add


class _TensorType:
    def __init__(self, dtype, shape):
        self._dtype, self._shape = dtype, shape

    def element_type(self):
        return self._dtype

    def shape(self):
        return list(self._shape)

    def __repr__(self):
        return f"TensorType({self._shape}, {self._dtype})"


def _checked_shape(shape):
    """The shape of a new ti.ndarray as a tuple of ints: each dimension an integer (numpy's
    too) from 0 to 2**31 - 1 (a float would be truncated, a larger size cannot be indexed
    with the default i32 indices)."""
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        try:
            if isinstance(d, (bool, np.bool_)):
                raise TypeError
            k = operator.index(d)
        except TypeError:
            k = None
        if k is None or not 0 <= k < 2 ** 31:
            raise FluxionRuntimeError(f"{shape!r} is not a valid shape for ndarray: each "
                                      f"dimension is an integer from 0 to 2**31 - 1")
        out.append(k)
    return tuple(out)


def ndarray(dtype, shape, needs_grad=False, layout=None):
    if isinstance(dtype, MatrixType):
        return Ndarray(dtype.dtype, shape, element=dtype, needs_grad=needs_grad)
    return Ndarray(dtype, shape, needs_grad=needs_grad)


_python_scope.ndarray = Ndarray  # `ti.Matrix.ndarray(...)` allocates through this
