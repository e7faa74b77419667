"""Fields: global, typed, multi-dimensional data placed in SNode trees.

In Python scope a field is accessed through numpy views on its tree's buffer (no kernel
launch). Inside kernels, the frontend turns `x[i, j]` into address arithmetic on the `Place`.
"""
from __future__ import annotations

import weakref

import numpy as np

from fluxion.lang import runtime
from fluxion.lang import snode as SN
from fluxion.lang import types as T
from fluxion.lang.exceptions import FluxionError, FluxionIndexError

_fields = weakref.WeakSet()
# bumped whenever a grad or dual field appears: grad and dual instances compiled before
# it would not know about it, so it is part of their template signature
ad_fields_version = [0]


def all_fields():
    return [f for f in list(_fields) if f._generation == runtime.state().generation]


class Field:
    """Common base of scalar and matrix fields."""
    n = m = None

    def __init__(self, dtype, name="", needs_grad=False, needs_dual=False, is_grad=False):
        runtime.ensure_initialized()
        self.dtype = T.normalize(dtype)
        self.name = name
        self.needs_grad = needs_grad
        self.needs_dual = needs_dual
        self.is_grad = is_grad
        self.grad = None
        self.dual = None
        self.places = []
        self.offset = None
        self._snode = None
        self._view = None
        self._generation = runtime.state().generation
        _fields.add(self)

    # -- placement ------------------------------------------------------------------------
    def _components(self):
        return [None]

    def _place_in(self, snode, offset=None):
        if self._snode is not None:
            raise FluxionError(f"field {self._label()} is already placed")
        self._snode = snode
        for c in self._components():
            p = SN.Place(self, c, self.dtype, snode)
            snode.children.append(p)
            self.places.append(p)
        shape = snode.shape()
        if offset is not None:
            offset = (offset,) if isinstance(offset, int) else tuple(offset)
            if len(offset) != len(shape):
                raise ValueError(f"offset {offset} does not match the field's {len(shape)} dimensions")
            self.offset = offset
        # grads and duals share their primal's cell: same layout, same tree
        if self.needs_grad and self.dtype.is_float:
            self._create_grad(snode)
        if self.needs_dual and self.dtype.is_float:
            self._create_dual(snode)

    def _twin(self):
        raise NotImplementedError

    def _create_grad(self, snode=None):
        g = self._twin()
        g.is_grad = True
        g.name = (self.name or "field") + ".grad"
        g._place_in(snode or _fresh_like(self), self.offset)
        self.grad = g
        ad_fields_version[0] += 1

    def _create_dual(self, snode=None):
        d = self._twin()
        d.name = (self.name or "field") + ".dual"
        d._place_in(snode or _fresh_like(self), self.offset)
        self.dual = d
        ad_fields_version[0] += 1

    def _label(self):
        if self.name:
            return f"'{self.name}'"
        return f"of shape {self.shape if self._snode else '?'}"

    def _check_alive(self):
        if self._generation != runtime.state().generation:
            raise FluxionError("this field belongs to a fluxion session ended by ti.reset()/ti.init()")
        if self._snode is None:
            raise FluxionError(f"field {self._label()} has not been placed: give it a shape or "
                               f"place it with ti.root.dense(...).place(...)")

    def _materialize(self):
        self._check_alive()
        self._snode.tree.materialize()

    @property
    def shape(self):
        if self._snode is None:
            raise FluxionError("field is not placed yet, so it has no shape")
        return self._snode.shape()

    @property
    def snode(self):
        return self._snode

    def parent(self, n=1):
        s = self._snode
        for _ in range(n - 1):
            s = s.parent
        return s

    def _element_shape(self):
        return ()

    # -- numpy views ----------------------------------------------------------------------
    def _place_view(self, place):
        """A numpy array aliasing the field component's storage (a copy for nested layouts)."""
        shape = self.shape
        tree = self._snode.tree
        terms = place.terms
        per_axis = {}
        for t in terms:
            per_axis.setdefault(t.axis, []).append(t)
        base_off = place.addr - tree.buffer.ctypes.data
        if all(len(v) == 1 for v in per_axis.values()):
            strides = tuple(per_axis[a][0].stride for a in range(len(shape)))
            return np.ndarray(shape, self.dtype.np_dtype, buffer=tree.buffer.data,
                              offset=base_off, strides=strides), None
        # nested levels along one axis: gather through a precomputed byte offset table
        idx = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), np.int64)
        offs = np.full(idx.shape[1], base_off, dtype=np.int64)
        for t in terms:
            offs += (idx[t.axis] // t.divisor % t.extent) * t.stride
        return None, offs.reshape(shape)

    def _views(self):
        if self._view is None:
            self._materialize()
            self._view = [self._place_view(p) for p in self.places]
        return self._view

    def _host_read(self):
        self._materialize()
        tree = self._snode.tree
        if tree.device_ptr is not None:
            tree.pull()

    def _host_write(self):
        self._materialize()
        tree = self._snode.tree
        if tree.device_ptr is not None:
            tree.pull()            # a partial write must not lose what kernels wrote
            tree.host_newer = True

    def _read_component(self, c):
        self._host_read()
        view, offs = self._views()[c]
        if view is not None:
            return view
        buf = self._snode.tree.buffer
        nb = self.dtype.nbytes
        flat = buf[(offs.reshape(-1, 1) + np.arange(nb)).reshape(-1)]
        return flat.view(self.dtype.np_dtype).reshape(offs.shape)

    def _write_component(self, c, value):
        self._host_write()
        view, offs = self._views()[c]
        if view is not None:
            view[...] = value
            return
        buf = self._snode.tree.buffer
        arr = np.broadcast_to(np.asarray(value, dtype=self.dtype.np_dtype), offs.shape)
        nb = self.dtype.nbytes
        buf[(offs.reshape(-1, 1) + np.arange(nb)).reshape(-1)] = \
            np.ascontiguousarray(arr).reshape(-1).view(np.uint8)

    def _norm_index(self, key):
        shape = self.shape
        if key is None or key == ():
            key = ()
        elif not isinstance(key, tuple):
            key = (key,)
        key = tuple(int(k) for k in key)
        if len(key) != len(shape):
            raise FluxionIndexError(
                f"field {self._label()} has {len(shape)} dimensions but was indexed with {len(key)}")
        off = self.offset or (0,) * len(shape)
        out = []
        for d, (kk, o, n) in enumerate(zip(key, off, shape)):
            if not o <= kk < o + n:
                raise FluxionIndexError(
                    f"index {key} out of bounds for field {self._label()} of shape {shape}"
                    + (f" and offset {off}" if self.offset else ""))
            out.append(kk - o)
        return tuple(out)

    def _check_array_shape(self, arr, what):
        want = self.shape + self._element_shape()
        if tuple(arr.shape) != want:
            raise ValueError(f"{what}: field {self._label()} has shape {want} (with element "
                             f"dimensions) but the array has shape {tuple(arr.shape)}")

    def fill(self, value):
        self._materialize()
        for c in range(len(self.places)):
            v = value
            if self._element_shape():
                v = np.broadcast_to(np.asarray(value), self._element_shape()).reshape(-1)[c]
            self._write_component(c, v)

    def to_torch(self, device=None):
        """A torch tensor holding a copy of the field (element dimensions last)."""
        import torch
        t = torch.from_numpy(np.ascontiguousarray(self.to_numpy()))
        return t.to(device) if device is not None else t

    def from_torch(self, tensor):
        self.from_numpy(tensor.detach().cpu().numpy())

    def copy_from(self, other):
        self.from_numpy(other.to_numpy())

    def __repr__(self):
        return f"<fluxion field {self._label()} {self.dtype}>"


def _fresh_like(field):
    """Where to place a field's grad or dual: beside the primal (same cell, same layout) while
    its tree is still open, else in a new tree of the same shape."""
    if field._snode.tree.buffer is None:
        return field._snode
    shape = field.shape
    if not shape:
        return SN.Tree().root
    return SN.root.dense(SN.axes(*range(len(shape))), shape)


class ScalarField(Field):
    def _twin(self):
        return ScalarField(self.dtype)

    def __getitem__(self, key):
        idx = self._norm_index(key)
        return self._read_component(0)[idx].item()

    def __setitem__(self, key, value):
        idx = self._norm_index(key)
        self._host_write()
        view, offs = self._views()[0]
        if view is not None:
            view[idx] = value
        else:
            tmp = self._read_component(0).copy()
            tmp[idx] = value
            self._write_component(0, tmp)

    def to_numpy(self, dtype=None):
        self._materialize()
        a = np.array(self._read_component(0), copy=True)
        return a.astype(dtype) if dtype is not None else a

    def from_numpy(self, arr):
        self._materialize()
        arr = np.asarray(arr)
        self._check_array_shape(arr, "from_numpy")
        self._write_component(0, arr)


class MatrixField(Field):
    def __init__(self, n, m, dtype, ndim, **kw):
        self.n, self.m, self.ndim = n, m, ndim
        Field.__init__(self, dtype, **kw)

    def _components(self):
        return list(range(self.n * self.m))

    def _twin(self):
        return MatrixField(self.n, self.m, self.dtype, self.ndim)

    def _element_shape(self):
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def _stack(self, idx=None):
        comps = []
        for c in range(self.n * self.m):
            v = self._read_component(c)
            comps.append(v[idx] if idx is not None else v)
        out = np.stack(comps, axis=-1)
        return out.reshape(out.shape[:-1] + self._element_shape())

    def __getitem__(self, key):
        from fluxion.lang.matrix import Matrix
        idx = self._norm_index(key)
        a = self._stack(idx)
        # build from the flat entries with the field's own (n, m, ndim): `Matrix(a.tolist())`
        # gave a plain Matrix, not a ti.Vector, for the elements of a Vector.field
        return Matrix._make(a.reshape(-1).tolist(), self.n, self.m, self.ndim)

    def __setitem__(self, key, value):
        idx = self._norm_index(key)
        vals = np.broadcast_to(np.asarray(_to_list(value), dtype=self.dtype.np_dtype),
                               self._element_shape()).reshape(-1)
        self._host_write()
        for c in range(self.n * self.m):
            view, offs = self._views()[c]
            if view is not None:
                view[idx] = vals[c]
            else:
                tmp = self._read_component(c).copy()
                tmp[idx] = vals[c]
                self._write_component(c, tmp)

    def to_numpy(self, keep_dims=False, dtype=None):
        self._materialize()
        a = self._stack()
        return a.astype(dtype) if dtype is not None else a

    def from_numpy(self, arr):
        self._materialize()
        arr = np.asarray(arr)
        self._check_array_shape(arr, "from_numpy")
        flat = arr.reshape(arr.shape[:len(self.shape)] + (-1,))
        for c in range(self.n * self.m):
            self._write_component(c, flat[..., c])


def _to_list(value):
    from fluxion.lang.matrix import Matrix
    if isinstance(value, Matrix):
        return value.to_numpy()
    return value


def _shape_tuple(shape):
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _place_new(f, shape, offset):
    shape = _shape_tuple(shape)
    if shape is None:
        return f
    node = SN.root
    if len(shape) > 0:
        if len(shape) > 8:
            raise ValueError("fields have at most 8 dimensions")
        node = node.dense(SN.axes(*range(len(shape))), shape)
    node.place(f, offset=offset)
    return f


def field(dtype, shape=None, name="", offset=None, needs_grad=False, needs_dual=False,
          order=None, layout=None):
    """A scalar field: `x = ti.field(ti.f32, shape=(n, m))`; `shape=()` for a 0-D field."""
    f = ScalarField(dtype, name=name, needs_grad=needs_grad, needs_dual=needs_dual)
    return _place_new(f, shape, offset)


def matrix_field(n, m, dtype, shape=None, name="", offset=None, needs_grad=False,
                 needs_dual=False, ndim=2, order=None, layout=None):
    f = MatrixField(n, m, dtype, ndim, name=name, needs_grad=needs_grad, needs_dual=needs_dual)
    return _place_new(f, shape, offset)
