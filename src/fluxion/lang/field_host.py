"""Python-scope access to a field's data, a base of Field: numpy views on its tree's buffer
(no kernel launch), the bytes a component or element spans (on CUDA the tree keeps host and
device copies coherent by those byte ranges), reads and writes of elements and of whole
components, index checks, and torch tensors.

Under sparse levels a write activates its element's cells, and whole-field reads and writes
see active elements only: what that takes is lang/sparse.py's, which builds on fields, so it
is reached through `places.sparse`, which it fills.
"""
from __future__ import annotations

import numpy as np

from fluxion.frontend import places
from fluxion.ir import builder
from fluxion.ir.errors import FluxionIndexCountError, FluxionOutOfBoundsError
from fluxion.ir.ops import _wrap_int
from fluxion.lang import quant_access, sparse_pool


class HostAccess:
    """The Python-scope side of Field (its subclasses give `to_numpy` and `from_numpy`)."""

    # -- numpy views ----------------------------------------------------------------------
    def _place_view(self, place):
        """A numpy array aliasing the field component's storage (a copy for nested layouts)."""
        shape = self.shape
        tree = self._snode.tree
        if place.pool is not None:
            # under a pooled pointer node: through its slot table (lang/sparse_pool.py)
            return None, sparse_pool.offsets(place, shape)
        terms = place.terms
        per_axis = {}
        for t in terms:
            per_axis.setdefault(t.axis, []).append(t)
        base_off = place.addr - tree.buffer.ctypes.data
        if all(len(v) == 1 for v in per_axis.values()):
            strides = tuple(per_axis[a][0].stride for a in range(len(shape)))
            return np.ndarray(shape, self.dtype.np_dtype, buffer=tree.buffer.data,
                              offset=base_off, strides=strides), None
        # nested levels along one axis (`dense(ti.ij, 64).dense(ti.ij, 16)`): a view with an
        # axis per level, when each axis's levels divide its extent
        blocked = _blocked_view(per_axis, shape, self.dtype.np_dtype, tree.buffer, base_off)
        if blocked is not None:
            return None, blocked
        # else gather through a precomputed byte offset table (each term broadcast along its
        # axis: no table of every element's indices)
        offs = np.full(shape, base_off, dtype=np.int64)
        for t in terms:
            along = [1] * len(shape)
            along[t.axis] = shape[t.axis]
            offs += (np.arange(shape[t.axis], dtype=np.int64) // t.divisor % t.extent
                     * t.stride).reshape(along)
        return None, offs

    def _data_access(self):
        """Every Python-scope read or write of the field's data comes here first."""
        if builder.active[0] and builder.in_kernel():
            # Python code run by a kernel's build reads or writes field data: the code then
            # depends on the data, which the offline cache's key does not cover
            builder.taint(f"field {self._label()} accessed in Python scope while compiling")

    def _views(self):
        self._data_access()
        if self._view is None:
            self._materialize()
            views = [self._place_view(p) for p in self.places]
            if any(p.pool is not None for p in self.places):
                return views          # (the slot table changes: read afresh each time)
            self._view = views
        return self._view

    def _view_of(self, c):
        """`_views()[c]`; under a pooled node, component `c`'s offsets alone (they are read
        afresh each time: reading every component's for one would repeat the work)."""
        place = self.places[c]
        if place.pool is None:
            return self._views()[c]
        self._data_access()
        return self._place_view(place)

    # -- host access (on CUDA the tree keeps host and device copies coherent by byte ranges)
    def _span(self, c, idx=None):
        """(lo, hi, used): the bytes [lo, hi) of the tree's buffer holding component `c` of
        element `idx` (of every element when None), `used` of them its own."""
        nb = self.dtype.nbytes
        if idx is not None:
            lo = self._element_offset(c, idx)
            return lo, lo + nb, nb
        view, offs = self._view_of(c)
        if isinstance(offs, Blocked):
            view = offs.levels
        if view is not None:
            base = self.places[c].addr - self._snode.tree.buffer.ctypes.data
            if view.size == 0:
                return base, base, 0
            lo = base + sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s < 0)
            hi = base + nb + sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s > 0)
            return lo, hi, view.size * nb
        if offs.size == 0:
            return 0, 0, 0
        return int(offs.min()), int(offs.max()) + nb, offs.size * nb

    def _union(self, comps):
        """(lo, hi, dense) over components `comps`: dense when their bytes fill the range."""
        spans = [s for s in (self._span(c) for c in comps) if s[1] > s[0]]
        if not spans:
            return 0, 0, True
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        return lo, hi, hi - lo == sum(s[2] for s in spans)

    def _read_components(self, comps):
        """Bring the bytes of components `comps` to the host copy (one range on CUDA)."""
        if self._quant:
            return
        self._materialize()
        tree = self._snode.tree
        if tree.device_newer:
            lo, hi, _ = self._union(comps)
            tree.read_span(lo, hi)

    def _read_component(self, c, fresh=False):
        if self._quant:
            self._data_access()
            self._materialize()
            return quant_access.read_all(self.places[c])
        if not fresh:
            self._read_components([c])
        view, offs = self._view_of(c)
        if view is not None:
            return view
        if isinstance(offs, Blocked):
            return offs.read()
        buf = self._snode.tree.buffer
        nb = self.dtype.nbytes
        words = self._elements(c)
        if words is not None:
            return words[offs // nb]
        flat = buf[(offs.reshape(-1, 1) + np.arange(nb)).reshape(-1)]
        return flat.view(self.dtype.np_dtype).reshape(offs.shape)

    def _elements(self, c):
        """The tree's buffer as an array of this field's elements when every element of
        component `c` is aligned to its size (a gather through an offset table then indexes
        elements, not each of their bytes: 8 bytes of index an element instead of 8 a byte),
        else None."""
        nb = self.dtype.nbytes
        place, buf = self.places[c], self._snode.tree.buffer
        pp = place.pool
        base, terms = (place.addr - buf.ctypes.data, place.terms) if pp is None else \
            (pp.base + pp.pool.span, pp.terms)         # (a slot's offset: a multiple of span)
        if base % nb or any(t.stride % nb for t in terms):
            return None
        return buf[:buf.nbytes // nb * nb].view(self.dtype.np_dtype)

    def _sparse_levels(self):
        """The sparse SNodes above this field (lang/sparse.py), outermost first."""
        lv = self.__dict__.get("_sparse_cache")
        if lv is None:
            lv = [] if getattr(self, "_is_mask", False) else places.sparse.levels(self._snode)
            self._sparse_cache = lv
        return lv

    def _zero_region(self, sl):
        """Zero a region (index `sl`) of every component, bypassing the activity masks."""
        self._read_components(range(len(self.places)))
        vals = {}
        for c in range(len(self.places)):
            a = np.array(self._read_component(c, fresh=True), copy=True)
            a[sl] = 0
            vals[c] = a
        self._write_components(vals, all_cells=True)

    def _write_components(self, values, all_cells=False):
        """Component c := values[c] for every c in `values` (all elements): on CUDA their
        bytes move as one range (read first when the range holds other fields' bytes)."""
        self._materialize()
        if self._quant:
            self._data_access()
            for c, value in values.items():
                quant_access.write_all(self.places[c], value)
            return
        # writes of whole fields (fill, from_numpy) are struct-fors in the original system:
        # under sparse levels they write active elements only, so they activate no cell and
        # leave inactive ones alone (and their memory uncommitted: lang/sparse_memory.py)
        active = None if all_cells or not self._sparse_levels() else places.sparse.active_array(self)
        tree = self._snode.tree
        device = tree.device_ptr is not None      # on the CPU the host copy is the memory
        if device:
            lo, hi, dense = self._union(list(values))
            tree.before_write(lo, hi, partial=not dense or active is not None)
        for c, value in values.items():
            view, offs = self._view_of(c)
            pp = self.places[c].pool
            if pp is not None and active is None:
                # (cells without a slot: their bytes would be the pool's zero block)
                active = (offs - pp.pool.offset) >= pp.pool.span
            if active is not None:
                value = np.broadcast_to(np.asarray(value, dtype=self.dtype.np_dtype),
                                        active.shape)[active]
                offs = offs if offs is None else offs[active]
            if view is not None:
                view[... if active is None else active] = value
                continue
            if isinstance(offs, Blocked):
                offs.write(value, active)
                continue
            arr = np.broadcast_to(np.asarray(value, dtype=self.dtype.np_dtype), offs.shape)
            nb = self.dtype.nbytes
            words = self._elements(c)
            if words is not None:
                words[offs // nb] = arr
                continue
            tree.buffer[(offs.reshape(-1, 1) + np.arange(nb)).reshape(-1)] = \
                np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        if device:
            tree.after_write(lo, hi)

    def _read_element(self, c, idx):
        """Component `c` of element `idx` (a numpy scalar)."""
        self._materialize()
        if self._quant:
            self._data_access()
            return quant_access.read_one(self.places[c], idx)
        tree = self._snode.tree
        if tree.device_newer:
            tree.read_span(*self._span(c, idx)[:2])
        view = self._direct_view(c)
        if view is not None:
            return view[idx]
        lo = self._element_offset(c, idx)
        return tree.buffer[lo:lo + self.dtype.nbytes].view(self.dtype.np_dtype)[0]

    def _side_by_side(self):
        """Every component at once as a numpy view with a trailing axis of components (a
        level per axis first where the tree splits axes: `Blocked`), when the components of
        each element lie side by side (a vector field placed alone: its entries at
        consecutive addresses); else None. One strided copy reads or writes all of them,
        where one per component and a stack of them took 4x as long."""
        if self._quant or any(p.pool is not None for p in self.places):
            return None
        views = self._views()
        nb, base = self.dtype.nbytes, self.places[0].addr
        arrs = []
        for k, (view, offs) in enumerate(views):
            a = view if view is not None else offs.levels if isinstance(offs, Blocked) else None
            if a is None or self.places[k].addr - base != k * nb or \
                    (arrs and (a.shape, a.strides) != (arrs[0].shape, arrs[0].strides)):
                return None
            arrs.append(a)
        tree = self._snode.tree
        return np.ndarray(arrs[0].shape + (len(arrs),), self.dtype.np_dtype,
                          buffer=tree.buffer.data, offset=base - tree.buffer.ctypes.data,
                          strides=arrs[0].strides + (nb,))

    def _direct_view(self, c):
        """Component `c` as a numpy view of its memory, or None where it has none (a tree
        that splits an axis over levels, a pooled node): then one element's offset comes
        from `_element_offset`, without the table of every element's offsets that
        `_views` builds (8 bytes an element: a 1024^3 field's 8 GiB)."""
        self._data_access()
        if self._view is not None:
            return self._view[c][0]
        place = self.places[c]
        axes = [t.axis for t in place.terms]
        if place.pool is not None or len(axes) != len(set(axes)):
            return None
        return self._views()[c][0]

    def _element_offset(self, c, idx):
        """The byte offset in the tree's buffer of component `c` of element `idx`
        (0-based), from its place's address terms."""
        place = self.places[c]
        if place.pool is not None:
            return sparse_pool.offset_of(place, idx)
        off = place.addr - self._snode.tree.buffer.ctypes.data
        for t in place.terms:
            off += idx[t.axis] // t.divisor % t.extent * t.stride
        return off

    def _scalar(self, value):
        """A Python-scope value for one element: an integer out of the field type's range
        wraps around, as in the original (`x_u8[0] = -128` stores 128; numpy refused it)."""
        if not self.dtype.is_float and isinstance(value, (int, np.integer)) \
                and not isinstance(value, (bool, np.bool_)):
            return _wrap_int(int(value), self.dtype)
        return value

    def _write_element(self, c, idx, value):
        value = self._scalar(value)
        self._materialize()
        if self._sparse_levels():
            places.sparse.activate_element(self, idx)
        if self._quant:
            self._data_access()
            quant_access.write_one(self.places[c], idx, value)
            return
        tree = self._snode.tree
        view = self._direct_view(c)
        if view is not None and tree.device_ptr is None:
            view[idx] = value                 # the CPU: the host copy is the memory
            return
        lo, hi, _ = self._span(c, idx)
        tree.before_write(lo, hi, partial=False)
        tree.buffer[lo:hi] = np.asarray(value, dtype=self.dtype.np_dtype).reshape(1).view(
            np.uint8)
        tree.after_write(lo, hi)

    def _norm_index(self, key):
        shape = self.shape
        if key is None or (isinstance(key, tuple) and not key):
            key = ()
        elif not isinstance(key, tuple):
            key = (key,)
        bad = next((k for k in key if isinstance(k, slice) or k is Ellipsis), None)
        if bad is not None:
            raise TypeError(f"Detected illegal element of type: {type(bad).__name__}. Please be "
                            f"aware that slicing a ti.field is not supported so far: index "
                            f"field {self._label()} with integers")
        key = tuple(int(k) for k in key)
        if len(key) != len(shape):
            raise FluxionIndexCountError(
                f"Slicing is not supported on ti.field: field {self._label()} has {len(shape)} "
                f"dimensions but was indexed with {len(key)}")
        off = self.offset or (0,) * len(shape)
        out = []
        for d, (kk, o, n) in enumerate(zip(key, off, shape)):
            if not o <= kk < o + n:
                raise FluxionOutOfBoundsError(
                    f"Out of bound access: index {key} out of bounds for field {self._label()} "
                    f"of shape {shape}"
                    + (f" and offset {off}" if self.offset else ""))
            out.append(kk - o)
        return tuple(out)

    def _check_array_shape(self, arr, what):
        want = self.shape + self._element_shape()
        if tuple(arr.shape) != want:
            raise ValueError(f"{what}: field {self._label()} has shape {want} (with element "
                             f"dimensions) but the array has shape {tuple(arr.shape)}")

    def to_torch(self, device=None):
        """A torch tensor holding a copy of the field (element dimensions last)."""
        import torch
        t = torch.from_numpy(np.ascontiguousarray(self.to_numpy()))
        return t.to(device) if device is not None else t

    def from_torch(self, tensor):
        self.from_numpy(tensor.detach().cpu().numpy())


def inactive_zero(f, a):
    """`a` (the field's values, element dimensions last) with the elements of inactive cells
    zero, as the original's to_numpy (a struct-for) leaves them."""
    if not f._sparse_levels():
        return a
    active = places.sparse.active_array(f)
    return np.where(active.reshape(active.shape + (1,) * (a.ndim - active.ndim)), a, 0).astype(
        a.dtype)


class Blocked:
    """A component of a field whose tree splits axes over several dense levels, as a numpy
    view with an axis per level (`levels`: for each field axis, its levels outermost
    first), read and written whole without a table of element offsets. An axis's levels
    are the digits of its index in mixed radix, outermost first, so the C-order
    flattening of `levels` is that of the field's elements."""
    __slots__ = ("levels", "shape")

    def __init__(self, levels, shape):
        self.levels, self.shape = levels, shape

    def read(self):
        return self.levels.reshape(self.shape)

    def write(self, value, active=None):
        """Every element := `value` (broadcast to the field's shape), or with `active` (a
        boolean array of the field's shape) the active ones := `value` (one per active
        element, in C order)."""
        if active is None:
            self.levels[...] = np.broadcast_to(value, self.shape).reshape(self.levels.shape)
        else:
            self.levels[active.reshape(self.levels.shape)] = value


def _blocked_view(per_axis, shape, dtype, buffer, base_off):
    """`Blocked` over the terms of each axis (`per_axis`), or None when an axis's extent is
    not a whole number of its outermost level's cells (the outer index would not be a digit)."""
    dims, strides = [], []
    for a, n in enumerate(shape):
        terms = sorted(per_axis.get(a, ()), key=lambda t: -t.divisor)
        if not terms or n == 0 or n % terms[0].divisor:
            return None
        for k, t in enumerate(terms):
            dims.append(n // t.divisor if k == 0 else t.extent)
            strides.append(t.stride)
    levels = np.ndarray(tuple(dims), dtype, buffer=buffer.data, offset=base_off,
                        strides=tuple(strides))
    return Blocked(levels, tuple(shape))
