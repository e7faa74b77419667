"""Fields: global, typed, multi-dimensional data placed in SNode trees.

In Python scope a field is accessed through numpy views on its tree's buffer (no kernel
launch). Inside kernels, the frontend turns `x[i, j]` into address arithmetic on the `Place`.
Fields of quantized types (lang/quant.py) compute with their compute type (`dtype`); their
components are placed one by one into words (`_place_quant`) and read and written in Python
scope through lang/quant_access.py.

This module is the field classes and their construction (`ti.field`, `ti.Matrix.field`):
Python-scope access to the data is lang/field_host.py's, the shape arguments
lang/field_shape.py's, the session's fields lang/field_registry.py's.
"""
from __future__ import annotations

import weakref

import numpy as np

from fluxion.frontend import loops as L
from fluxion.frontend.access import field_access
from fluxion.frontend.matrix import Matrix, MatrixType, _python_scope
from fluxion.frontend.places import FieldBase
from fluxion.frontend.struct import StructType
from fluxion.frontend.transformer import store_value
from fluxion.ir import builder
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionError, FluxionRuntimeError
from fluxion.ir.quant import is_quant
from fluxion.lang import field_entries, quant, runtime
from fluxion.lang import snode as SN
from fluxion.lang.field_host import HostAccess, inactive_zero
from fluxion.lang.field_registry import (_fields, _pending, ad_fields_version, all_fields,
                                         check_placed, placed_dual, placed_grad)
from fluxion.lang.field_shape import _check_order, _dense_chain, _shape_tuple, check_offset
from fluxion.lang.snode import Layout
from fluxion.lang.whole_list import WholeList

# (the registry's names, which callers of this module also use)
__all__ = ["Field", "ScalarField", "MatrixField", "field", "matrix_field", "check_offset",
           "all_fields", "ad_fields_version", "check_placed", "placed_grad", "placed_dual"]


class Field(FieldBase, WholeList, HostAccess):
    """Common base of scalar and matrix fields."""
    n = m = None
    # `x.fill(v)` in Python scope under sparse levels runs a kernel's struct-for: set by
    # lang/kernel_methods.py, which defines kernels (they sit above fields); None: numpy
    _fill_by_kernel = None
    _copy_by_kernel = None    # (to_numpy, from_numpy under sparse levels: lang/kernel_methods.py)

    def __init__(self, dtype, name="", needs_grad=False, needs_dual=False, is_grad=False):
        runtime.ensure_initialized()
        self.dtype, self._qtypes = _element_types(dtype, len(self._components()), name)
        self._quant = any(q is not None for q in self._qtypes)
        if self._quant and (needs_grad or needs_dual):
            raise FluxionRuntimeError(
                f"field{f' {name!r}' if name else ''} of a quantized type: needs_grad=True and "
                f"needs_dual=True are not supported for quantized fields")
        if (needs_grad or needs_dual) and not self.dtype.is_float:
            # (before, the flag was accepted and silently ignored: no grad was made)
            raise FluxionRuntimeError(
                f"field{f' {name!r}' if name else ''} of {self.dtype}: {self.dtype} is not "
                f"supported for field with `needs_grad=True` or `needs_dual=True`: they need a "
                f"floating-point field (f16, f32, f64); integers have no gradients")
        self.name = name
        self.needs_grad = needs_grad
        self.needs_dual = needs_dual
        self.is_grad = is_grad
        self.is_dual = False
        self._grad = None
        self._dual = None
        # a quantized field's components are placed one by one (BitpackedFields, quant_array)
        self.places = [None] * len(self._qtypes) if self._quant else []
        self.offset = None
        self._snode = None
        self._view = None
        self._generation = runtime.state().generation
        self._twin_of = None          # (primal, "grad" or "dual") for a gradient or dual field
        _fields.add(self)
        _pending.append(weakref.ref(self))
        # the gradient and dual fields exist from the start, unplaced, so that they can be
        # placed like any field (`ti.root.dense(ti.i, n).place(x, x.grad)`); `shape=` places
        # them beside the primal, ti.root.lazy_grad() places those still unplaced
        if needs_grad and self.dtype.is_float:
            self._grad = self._new_twin("grad")
        if needs_dual and self.dtype.is_float:
            self._dual = self._new_twin("dual")

    @property
    def grad(self):
        """The gradient field (a float field has one, as in the original system; it holds
        memory once placed: `needs_grad=True` with `shape=`, `.place(x, x.grad)`, or
        ti.root.lazy_grad()). None for integer and quantized fields."""
        if self._grad is None and self.dtype.is_float and not self._quant:
            self._grad = self._new_twin("grad")
        return self._grad

    @grad.setter
    def grad(self, value):
        self._grad = value

    @property
    def dual(self):
        """The dual (tangent) field, as `grad`."""
        if self._dual is None and self.dtype.is_float and not self._quant:
            self._dual = self._new_twin("dual")
        return self._dual

    @dual.setter
    def dual(self, value):
        self._dual = value

    # -- placement ------------------------------------------------------------------------
    def _components(self):
        return [None]

    def _place_in(self, snode, offset=None, component_nodes=None):
        """Place the field's components in `snode` (or component k in component_nodes[k],
        nodes of one tree with the same shape: ti.Layout.SOA)."""
        if self._quant:
            raise FluxionError(
                f"field {self._label()} has a quantized type ({self._qtypes[0]!r}): place it "
                f"through ti.BitpackedFields(max_num_bits=...).place(...) or "
                f"snode.quant_array(...).place(...)")
        if self._snode is not None and self._twin_of is not None and self._snode is snode:
            return    # `place(x, x.grad)` with needs_grad=True: placed here with its primal
        if self._snode is not None:
            raise FluxionError(f"field {self._label()} is already placed")
        field_entries.check_not_begun(self)
        self._snode = snode
        for k, c in enumerate(self._components()):
            node = component_nodes[k] if component_nodes else snode
            p = SN.Place(self, c, self.dtype, node)
            node.children.append(p)
            self.places.append(p)
        shape = snode.shape
        if offset is not None:
            offset = (offset,) if isinstance(offset, int) else tuple(offset)
            if len(offset) != len(shape):
                raise ValueError(f"offset {offset} does not match the field's {len(shape)} dimensions")
            self.offset = offset
        if self._twin_of is not None:
            primal = self._twin_of[0]
            if primal._snode is not None and primal.shape != shape:
                raise FluxionError(f"field {self._label()} is placed with shape {shape}, but "
                                   f"its primal has shape {primal.shape}")
            if self.offset is None:
                self.offset = primal.offset
            ad_fields_version[0] += 1     # instances compiled before do not know of it
        for twin in (self._grad, self._dual):
            if twin is not None and twin._snode is not None and twin.shape != shape:
                raise FluxionError(f"field {self._label()} is placed with shape {shape}, but "
                                   f"its {twin.name} has shape {twin.shape}")

    def _quant_members(self):
        """(field, component) of each component, for BitpackedFields and quant_array."""
        return [(self, c) for c in range(len(self._qtypes))]

    def _place_quant(self, c, snode, slot, offset=None):
        """Place quantized component `c` in `snode`'s cells as `slot` says; its Place."""
        shape = snode.shape
        if self._snode is None:
            self._snode = snode
            if offset is not None:
                offset = (offset,) if isinstance(offset, int) else tuple(offset)
                if len(offset) != len(shape):
                    raise ValueError(f"offset {offset} does not match the field's {len(shape)} "
                                     f"dimensions")
                self.offset = offset
        elif self._snode.shape != shape:
            raise FluxionError(f"the components of field {self._label()} must be placed in "
                               f"SNodes of one shape, got {self._snode.shape} and {shape}")
        p = SN.Place(self, None if self.n is None else c, self.dtype, snode, quant=slot)
        self.places[c] = p
        return p

    def _twin(self):
        raise NotImplementedError

    def _new_twin(self, kind):
        t = self._twin()
        t.is_grad = kind == "grad"
        t.is_dual = kind == "dual"
        t.name = (self.name or "field") + "." + kind
        t._twin_of = (self, kind)
        return t

    def _place_twins(self):
        """Place the unplaced grad and dual beside this (placed) field: the same cell, the
        same layout, the same tree."""
        for t in (self._grad, self._dual):
            if t is not None and t._snode is None:
                t._place_in(self._snode, self.offset)

    def _create_grad(self, snode=None):
        if self.grad._snode is None:
            self.grad._place_in(snode or _fresh_like(self), self.offset)

    def _create_dual(self, snode=None):
        if self.dual._snode is None:
            self.dual._place_in(snode or _fresh_like(self), self.offset)

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
        if self._snode.tree.destroyed:
            raise FluxionRuntimeError(f"field {self._label()} belongs to an SNode tree that was "
                                      f"destroyed (SNodeTree.destroy())")
        if self._quant and None in self.places:
            c = self.places.index(None)
            raise FluxionError(f"component {c} of field {self._label()} has not been placed")

    def _materialize(self):
        self._check_alive()
        if self._quant:
            for p in self.places:
                p.snode.tree.materialize()
            return
        self._snode.tree.materialize()

    @property
    def shape(self):
        if self._snode is None:
            raise FluxionError("field is not placed yet, so it has no shape")
        return self._snode.shape

    @property
    def _name(self):
        return self.name

    @property
    def snode(self):
        """The field's place in its SNode tree: `x.snode.parent()` is the node it was placed
        in (as in the original system)."""
        if self._snode is None:
            return None
        ps = self.__dict__.get("_place_snode")
        if ps is None:
            ps = self._place_snode = SN.PlaceSNode(self)
        return ps

    def parent(self, n=1):
        """The SNode `n` levels above the field (`x.parent()` is the node it was placed in)."""
        return self.snode.parent(n) if self._snode is not None else None

    def _element_shape(self):
        return ()

    def fill(self, value):
        if builder.in_kernel():
            # inside a kernel: a struct-for that stores `value` in every (active) element
            self._materialize()
            L.emit_index_loop(self, lambda I: store_value(field_access(self, tuple(I)), value))
            return
        self._materialize()
        if not self._quant and self._sparse_levels():
            if self._fill_by_kernel is not None and self._fill_by_kernel(value):
                return
        values = {}
        for c in range(len(self.places)):
            v = value
            if self._element_shape():
                v = np.broadcast_to(np.asarray(value), self._element_shape()).reshape(-1)[c]
            values[c] = self._scalar(v.item() if isinstance(v, np.generic) else v)
        self._write_components(values)

    def _sparse_copy(self, arr=None):
        """to_numpy (`arr` None) or from_numpy by a struct-for kernel under sparse levels
        (lang/kernel_methods.py); None where that does not apply."""
        if self._copy_by_kernel is None or not self._sparse_levels():
            return None
        return self._copy_by_kernel(arr)

    def copy_from(self, other):
        if not isinstance(other, Field):
            raise TypeError(f"copy_from: expected a field, got {type(other).__name__}")
        self.from_numpy(other.to_numpy())

    def _list_label(self):
        return f"field {self._label()}"

    def __iter__(self):
        # without it Python would iterate through __getitem__ with 0, 1, 2, ...
        raise NotImplementedError("Struct for is only available in Taichi scope: iterate a "
                                  "field in a kernel, or over its to_numpy() in Python")

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
        return self._read_element(0, self._norm_index(key)).item()

    def __setitem__(self, key, value):
        self._write_element(0, self._norm_index(key), value)

    def to_numpy(self, dtype=None):
        self._materialize()
        a = self._sparse_copy()
        if a is None:
            a = inactive_zero(self, np.array(self._read_component(0), copy=True))
        return a.astype(dtype) if dtype is not None else a

    def from_numpy(self, arr):
        self._materialize()
        arr = np.asarray(arr)
        self._check_array_shape(arr, "from_numpy")
        if self._sparse_copy(arr) is None:
            self._write_components({0: arr})


class MatrixField(Field):
    def __init__(self, n, m, dtype, ndim, **kw):
        self.n, self.m, self.ndim = n, m, ndim
        Field.__init__(self, dtype, **kw)

    def _components(self):
        return list(range(self.n * self.m))

    def _twin(self):
        return MatrixField(self.n, self.m, self.dtype, self.ndim)

    def get_scalar_field(self, *indices):
        """Entry `indices` ((k,) of a vector, (i, j) of a matrix) as a scalar field: of a placed
        field, a field sharing the entry's storage; of a quantized one not yet placed, the
        component to place on its own (`bitpack.place(x.get_scalar_field(0, 1))`)."""
        if len(indices) == 1 and self.ndim == 2 and self.m > 1:
            raise ValueError("get_scalar_field(i, j): a matrix field's component has two indices")
        i = indices[0]
        j = indices[1] if len(indices) > 1 else 0
        if not (0 <= i < self.n and 0 <= j < self.m) or len(indices) > 2:
            raise IndexError(f"get_scalar_field{tuple(indices)}: the field's elements are "
                             f"{self.n}x{self.m}")
        c = i * self.m + j
        if self._quant:
            return quant.ScalarComponent(self, c)
        return _EntryField(self, c)      # (not placed yet: lang/field_entries.py)

    def _element_shape(self):
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def _stack(self):
        cs = range(self.n * self.m)
        self._read_components(cs)
        whole = self._side_by_side()
        if whole is not None:
            out = whole.reshape(self.shape + self._element_shape())
            return out.copy() if np.shares_memory(out, whole) else out
        out = np.stack([self._read_component(c, fresh=True) for c in cs], axis=-1)
        return out.reshape(out.shape[:-1] + self._element_shape())

    def __getitem__(self, key):
        idx = self._norm_index(key)
        # build from the flat entries with the field's own (n, m, ndim): `Matrix(a.tolist())`
        # gave a plain Matrix, not a ti.Vector, for the elements of a Vector.field
        mat = Matrix._make([self._read_element(c, idx).item() for c in range(self.n * self.m)],
                           self.n, self.m, self.ndim)
        mat._sink = lambda c, v: self._store_entry(c, idx, v)
        return mat

    def _store_entry(self, c, idx, value):
        """One entry of one element, written through from `x[i][k] = v` (Python scope)."""
        self._write_element(c, idx, value)
        return self._read_element(c, idx).item()

    def __setitem__(self, key, value):
        idx = self._norm_index(key)
        # (through the value's own type: an int out of range wraps, as a scalar's does)
        vals = np.broadcast_to(np.asarray(_to_list(value)).astype(self.dtype.np_dtype),
                               self._element_shape()).reshape(-1)
        for c in range(self.n * self.m):
            self._write_element(c, idx, vals[c])

    def to_numpy(self, keep_dims=False, dtype=None):
        self._materialize()
        a = self._sparse_copy()
        if a is None:
            a = inactive_zero(self, self._stack())
        if keep_dims and self.ndim == 1:
            a = a.reshape(a.shape + (1,))     # a vector as an n x 1 matrix
        return a.astype(dtype) if dtype is not None else a

    def from_numpy(self, arr):
        self._materialize()
        arr = np.asarray(arr)
        nd = len(self.shape)
        if self.ndim == 1 and tuple(arr.shape[nd:]) in ((self.n, 1), (1, self.n)):
            arr = arr.reshape(arr.shape[:nd] + (self.n,))   # vectors as n x 1 or 1 x n
        self._check_array_shape(arr, "from_numpy")
        if self._sparse_copy(arr) is not None:
            return
        flat = arr.reshape(arr.shape[:len(self.shape)] + (-1,))
        whole = None if self._sparse_levels() or self._snode.tree.device_ptr is not None \
            else self._side_by_side()
        if whole is not None:
            # (the host copy is the memory: on the CPU, of a dense tree, nothing to activate)
            whole[...] = flat.reshape(whole.shape)
            return
        self._write_components({c: flat[..., c] for c in range(self.n * self.m)})


def _element_types(dtype, count, name):
    """(compute type, quantized type per component or None): `dtype` is one type, or for a
    matrix field a list (of lists) with one per component."""
    if isinstance(dtype, (list, tuple)):
        flat = []
        for d in dtype:
            flat.extend(d if isinstance(d, (list, tuple)) else [d])
        if len(flat) != count:
            raise ValueError(f"field{f' {name!r}' if name else ''}: {len(flat)} element types "
                             f"for {count} components")
    else:
        flat = [dtype] * count
    qtypes = [d if is_quant(d) else None for d in flat]
    computes = [d.compute if is_quant(d) else T.normalize(d) for d in flat]
    if any(c is not computes[0] for c in computes):
        raise FluxionRuntimeError("Member fields of a matrix field must have the same compute "
                                  "type")
    if any(q is None for q in qtypes) and any(q is not None for q in qtypes):
        raise FluxionRuntimeError("the components of a field must all be quantized or all be "
                                  "of primitive types")
    return computes[0], qtypes


class _EntryField(ScalarField):
    """One entry of a vector/matrix field as a scalar field (get_scalar_field): the same
    Place, so kernels and Python read and write the matrix field's storage."""

    def __init__(self, owner, c):
        Field.__init__(self, owner.dtype, name=f"{owner.name}[{c}]" if owner.name else "",
                       is_grad=owner.is_grad)
        _fields.discard(self)        # a view: the owner is the field (lazy_grad, clearing...)
        del _pending[-1]             # (and the placement check)
        self.is_dual = owner.is_dual
        self._owner, self._entry = owner, c
        p = owner.places[c] if c < len(owner.places) else None
        if p is not None:
            self._snode, self.places, self.offset = p.snode, [p], owner.offset

    @property
    def grad(self):
        g = placed_grad(self._owner)
        return _EntryField(g, self._entry) if g is not None else None

    @grad.setter
    def grad(self, g):
        raise FluxionError("the grad of a matrix field's entry is its matrix field's")

    @property
    def dual(self):
        d = placed_dual(self._owner)
        return _EntryField(d, self._entry) if d is not None else None

    @dual.setter
    def dual(self, d):
        raise FluxionError("the dual of a matrix field's entry is its matrix field's")

    def _place_in(self, snode, offset=None, component_nodes=None):
        if self._snode is not None:
            raise FluxionError("this entry of a placed matrix field is placed already")
        p = field_entries.place_entry(self._owner, self._entry, snode, offset)
        self._snode, self.places, self.offset = p.snode, [p], self._owner.offset


def _to_list(value):
    if isinstance(value, Matrix):
        return value.to_numpy()
    return value


def _place_new(f, shape, offset, order=None, layout=None):
    shape = _shape_tuple(shape)
    if layout not in (None, Layout.AOS, Layout.SOA):
        raise ValueError(f"layout={layout!r}: ti.Layout.AOS or ti.Layout.SOA")
    check_offset(shape, offset)
    if shape is None:
        return f
    if f._quant:
        f._place_in(None)       # the error that says where quantized fields go
    if len(shape) > 8:
        raise ValueError("fields have at most 8 dimensions")
    if layout == Layout.SOA and isinstance(f, MatrixField) and shape:
        # one array per component, in one tree
        tree_root = SN.Tree(owner=SN.root).root
        nodes = [_dense_chain(tree_root, shape, order) for _ in f._components()]
        f._place_in(nodes[0], offset, component_nodes=nodes)
    else:
        _dense_chain(SN.root, shape, order).place(f, offset=offset)
    f._place_twins()
    return f


def field(dtype, shape=None, name="", offset=None, needs_grad=False, needs_dual=False,
          order=None, layout=None):
    """A scalar field: `x = ti.field(ti.f32, shape=(n, m))`; `shape=()` for a 0-D field.
    A vector, matrix or struct type as `dtype` (`ti.field(ti.math.vec3, n)`) makes a field of
    those elements, as in the original system; `order="ji"` nests the axes in that order."""
    _check_order(shape, order)
    if isinstance(dtype, (MatrixType, StructType)):
        return dtype.field(shape=shape, name=name, offset=offset, needs_grad=needs_grad,
                           needs_dual=needs_dual, order=order, layout=layout)
    f = ScalarField(dtype, name=name, needs_grad=needs_grad, needs_dual=needs_dual)
    return _place_new(f, shape, offset, order)


def matrix_field(n, m, dtype, shape=None, name="", offset=None, needs_grad=False,
                 needs_dual=False, ndim=2, order=None, layout=None):
    """A field of vectors/matrices; `order` nests its axes ("ji": column-major), `layout`
    is ti.Layout.AOS (default) or ti.Layout.SOA."""
    _check_order(shape, order)
    f = MatrixField(n, m, dtype, ndim, name=name, needs_grad=needs_grad, needs_dual=needs_dual)
    return _place_new(f, shape, offset, order, layout)


_python_scope.matrix_field = matrix_field  # `ti.Matrix.field(...)` allocates through this
