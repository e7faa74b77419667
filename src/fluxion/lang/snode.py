"""Structural nodes: how fields are laid out in memory.

`ti.root.dense(ti.ij, (n, m)).place(a, b)` builds a tree; each child of the root is an
independent tree, materialized into one buffer the first time any of its fields is used, so
fields can be created after kernels ran. A scalar component placed in a tree (`Place`) knows
its address as `base + sum(((I[axis] - offset) // divisor % extent) * stride)` over the dense
levels above it, which is exactly what code generation and the numpy views use.

Quantized fields (lang/quant.py) live in unsigned words that are members of cells like
places: a `ti.BitpackedFields` placed here is a `Word`, and a `quant_array` level is one word
of its parent's cell holding its n elements; a component placed there has `terms` that
address its word and `bit_terms` (a quant array's levels, strides counted in elements) that
select its bits.
"""
from __future__ import annotations

import weakref

import numpy as np

from fluxion.frontend.places import SNodeBase
from fluxion.lang import runtime, sparse, sparse_memory, tree_buffer
from fluxion.ir.errors import FluxionError, FluxionRuntimeError
from fluxion.ir.quant import WORD_TYPES, QuantFixed, QuantInt


class Axis:
    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return "ijklmnop"[self.index]


i, j, k, l, m, n, o, p = (Axis(x) for x in range(8))
ij = (i, j)
ik = (i, k)
jk = (j, k)
ijk = (i, j, k)
ijkl = (i, j, k, l)
il, jl, kl = (i, l), (j, l), (k, l)
ijl, ikl, jkl = (i, j, l), (i, k, l), (j, k, l)
axes = lambda *idx: tuple(Axis(x) for x in idx)  # noqa: E731


class Layout:
    """`ti.Layout.AOS` / `ti.Layout.SOA`: how the components of a vector/matrix field lie in
    memory: AOS (each element's components side by side, the default) or SOA (one array per
    component; lang/field.py places them so)."""
    AOS = "AOS"
    SOA = "SOA"


class Term:
    """One dense level's contribution to an address along one axis (`bits`: a quant array's
    level, whose stride counts elements within the word)."""
    __slots__ = ("axis", "divisor", "extent", "stride", "outermost", "bits")

    def __init__(self, axis, divisor, extent, stride, outermost, bits=False):
        self.axis, self.divisor, self.extent, self.stride = axis, divisor, extent, stride
        self.outermost = outermost
        self.bits = bits


class Place:
    """A scalar component of a field placed in a tree; `addr` and `terms` exist once
    materialized. A quantized component has a `quant` slot (lang/quant.py): then `dtype` is
    its compute type, `addr` and `terms` address its word and `bit_terms` its bits."""
    __slots__ = ("field", "component", "dtype", "snode", "addr", "terms", "quant", "bit_terms",
                 "__weakref__")

    def __init__(self, field, component, dtype, snode, quant=None):
        self.field, self.component, self.dtype, self.snode = field, component, dtype, snode
        self.addr = None
        self.terms = None
        self.quant = quant
        self.bit_terms = ()

    def __repr__(self):
        name = self.field.name or f"field{self.field.shape if self.field._snode else ''}"
        return f"{name}" + (f"[{self.component}]" if self.component is not None else "")

    # What autodiff asks of a place in the IR: the same component of the field's gradient
    # (reverse mode) or dual (forward mode), materialized; None when the field has none placed.
    def grad_place(self):
        return self._twin_place(self.field._grad)

    def dual_place(self):
        return self._twin_place(self.field._dual)

    def _twin_place(self, twin):
        if twin is None or twin._snode is None:
            return None
        twin._materialize()
        return twin.places[self.field.places.index(self)]


class SNode(SNodeBase):
    def __init__(self, parent, axes_, extents, kind="dense"):
        self.up = parent           # the node above (`parent()` is the original's method)
        self.axes = axes_
        self.extents = extents
        # "dense", or "pointer" / "bitmasked" / "dynamic": a sparse level, laid out densely
        # here but with an activity mask per cell (lang/sparse.py) that writes set and
        # struct-fors test
        self.kind = kind
        self.children = []        # SNode or Place
        self.tree = None if parent is None else parent.tree
        self.generation = runtime.state().generation
        self._active_mask = None  # the hidden u8 field of a sparse level's cell states

    # -- building -----------------------------------------------------------------------
    def dense(self, indices, dimensions):
        return self._child(SNode, "dense", indices, dimensions)

    def _child(self, cls, what, indices, dimensions, *args, kind="dense"):
        if isinstance(indices, Axis):
            indices = (indices,)
        if isinstance(dimensions, (int, np.integer)):
            dimensions = (dimensions,) * len(indices)
        dimensions = tuple(int(d) for d in dimensions)
        if len(dimensions) == 1 and len(indices) > 1:
            # `pointer(ti.ijk, [n])`: one extent for every axis, as the original system takes it
            dimensions = dimensions * len(indices)
        if len(dimensions) != len(indices):
            raise ValueError(f"{what}(): {len(indices)} axes but {len(dimensions)} extents")
        if any(d <= 0 for d in dimensions):
            raise ValueError(f"{what}(): extents must be positive, got {dimensions}")
        parent = self
        if self.up is None:
            parent = Tree(owner=self).root   # every child of ti.root is its own tree
        parent._check_open()
        if isinstance(parent, QuantArray):
            raise FluxionError("a quant_array holds one quantized field; it has no child SNodes")
        child = cls(parent, tuple(a.index for a in indices), dimensions, *args)
        child.kind = kind
        parent.children.append(child)
        return child

    def quant_array(self, indices, dimensions, max_num_bits):
        """A level whose elements (one quantized field, placed with `.place(x)`) are packed
        into one unsigned word of `max_num_bits` per cell of this SNode."""
        if max_num_bits not in WORD_TYPES:
            raise ValueError(f"quant_array(): max_num_bits must be 8, 16, 32 or 64, got "
                             f"{max_num_bits!r}")
        return self._child(QuantArray, "quant_array", indices, dimensions,
                           WORD_TYPES[max_num_bits])

    # `pointer`, `bitmasked` and `dynamic` are sparse in the original system. Here cells are
    # laid out densely, each active or not (lang/sparse.py): a write activates it, a struct-for
    # visits only active ones, `ti.deactivate` ends it; a pointer's cell or a list holds memory
    # only while active (lang/sparse_memory.py).
    _num_dynamically_allocated = property(sparse_memory.peak_allocated)

    def bitmasked(self, indices, dimensions):
        return self._child(SNode, "bitmasked", indices, dimensions, kind="bitmasked")

    def pointer(self, indices, dimensions):
        return self._child(SNode, "pointer", indices, dimensions, kind="pointer")

    def dynamic(self, index, dimension, chunk_size=None):
        """A list of up to `dimension` elements along axis `index` in each cell above
        (`chunk_size`, the original's allocation unit, only counts allocations here)."""
        if isinstance(index, (tuple, list)):
            if len(index) != 1:
                raise ValueError("dynamic(): a dynamic node has exactly one axis")
            index = index[0]
        dimension = dimension[0] if isinstance(dimension, (tuple, list)) else dimension
        return sparse_memory.chunked(self._child(SNode, "dynamic", index, dimension,
                                                 kind="dynamic"), chunk_size)

    def place(self, *fields, offset=None):
        target = self
        if self.up is None:
            target = Tree(owner=self).root
        target._check_open()
        for f in _flatten_fields(fields):
            f._place_in(target, offset)
        return self

    def deactivate_all(self):
        """Every cell of this node and of the sparse nodes below it inactive (the values of
        pointers and lists zeroed)."""
        sparse.deactivate_all(self)

    def lazy_grad(self):
        """Place the grad of every float field under this node (every field, for ti.root)
        that has none placed yet (gradients and duals themselves get none)."""
        for f in self._fields_below():
            if f.dtype.is_float and not f._quant and not f.is_grad and not f.is_dual and \
                    f.grad._snode is None:
                f._create_grad()

    def lazy_dual(self):
        for f in self._fields_below():
            if f.dtype.is_float and not f._quant and not f.is_dual and f.dual._snode is None:
                f._create_dual()

    def _fields_below(self):
        from fluxion.lang.field import all_fields
        out = []
        for f in all_fields():
            if f._snode is None or f._snode.tree is None or f._snode.tree.destroyed:
                continue
            if isinstance(self, Root):
                out.append(f)
                continue
            s = f._snode
            while s is not None and s is not self:
                s = s.up if s.up is not _ROOT_SENTINEL else None
            if s is self:
                out.append(f)
        return out

    def _check_open(self):
        if self.tree is not None and self.tree.destroyed:
            raise FluxionError("cannot place fields into a destroyed SNode tree")
        if self.tree is not None and self.tree.buffer is not None:
            raise FluxionError("cannot place fields into a tree whose fields were already used; "
                               "create a new tree with ti.root.dense(...) or ti.field(...)")
        if self.tree is not None and self.tree.finalized:
            raise FluxionError("cannot place fields into a finalized FieldsBuilder's tree")

    # -- shape ----------------------------------------------------------------------------
    def path(self):
        out, s = [], self
        while s is not None and s.up is not None:
            out.append(s)
            s = s.up
        return out[::-1]

    def space_axes(self):
        """The axes used from the root down to here, in order: dimension d of the index space
        of this node (and of a field placed here) is the d-th of them, as in the original
        system (`dense(ti.k, n)` alone gives a 1-D field; `dense(ti.k, n).dense(ti.i, m)` a
        field of shape (m, n))."""
        return sorted({a for s in self.path() for a in s.axes})

    def _extents(self):
        ext = {}
        for s in self.path():
            for a, e in zip(s.axes, s.extents):
                ext[a] = ext.get(a, 1) * e
        return ext

    # -- the original system's SNode API (reflection) -------------------------------------
    @property
    def shape(self):
        """Extent per dimension of a field placed here (product over levels along each axis),
        in axis order; the axes the tree leaves out are left out (a field under ti.j alone is
        1-D), as in the original system."""
        ext = self._extents()
        return tuple(ext[a] for a in sorted(ext))

    def parent(self, n=1):
        """The node `n` levels above (`ti.root` above a tree's first level; None above it)."""
        s = self
        for _ in range(n):
            if s is None:
                return None
            s = s._public_parent()
        return s

    def _public_parent(self):
        p = self.up
        if p is None or p is _ROOT_SENTINEL:
            return None
        if p.up is _ROOT_SENTINEL:           # a tree's own root stands for its owner
            return p.tree.owner
        return p

    def _path_from_root(self):
        out, s = [], self
        while s is not None:
            out.append(s)
            s = s._public_parent()
        return out[::-1]

    def _get_children(self):
        out = []
        for c in self.children:
            if isinstance(c, Place):
                if c.component in (None, 0):
                    out.append(c.field.snode)
            else:
                out.append(c)
        return out

    @property
    def _snode_tree_id(self):
        """The tree's number (trees are numbered as they are allocated: asking allocates)."""
        if self.tree is None:
            return None
        self.tree.materialize()
        return self.tree.id

    @property
    def _cell_size_bytes(self):
        """The bytes of one cell of this node (all its children, placed side by side)."""
        self._tree_layout()
        return self.cell_size

    @property
    def _offset_bytes_in_parent_cell(self):
        parent = self.up
        if parent is None or parent is _ROOT_SENTINEL:
            return 0
        self._tree_layout()
        return parent._offsets[parent.children.index(self)]

    def _tree_layout(self):
        if self.tree is not None and self.tree.buffer is None:
            self.tree.root._layout()

    def _physical_index_position(self):
        return {k: a for k, a in enumerate(sorted(self._extents()))}

    @property
    def _id(self):
        return id(self)

    def __repr__(self):
        parts = []
        for s in self._path_from_root():
            if isinstance(s, Root) or s.up is _ROOT_SENTINEL:
                parts.append("ti.root")
            else:
                parts.append(f"{s.kind} {list(s.shape)}")
        return " => ".join(parts)

    # -- layout ---------------------------------------------------------------------------
    def _layout(self):
        """(cell size, alignment); sets child offsets within a cell."""
        from fluxion.lang.quant import Word
        off, align = 0, 1
        self._offsets = []
        for c in self.children:
            if isinstance(c, Place):
                size, al = c.dtype.nbytes, c.dtype.nbytes
            elif isinstance(c, Word):
                size, al = c.dtype.nbytes, c.dtype.nbytes
            elif isinstance(c, QuantArray):
                size, al = c._layout()      # its elements share one word of this cell
            else:
                csize, al = c._layout()
                size = csize * int(np.prod(c.extents))
            off = (off + al - 1) // al * al
            self._offsets.append(off)
            off += size
            align = max(align, al)
        self.cell_size = max((off + align - 1) // align * align, align)
        return self.cell_size, align


class PlaceSNode:
    """The leaf of the SNode tree that holds a field (`x.snode`), with the original system's
    reflection: `parent(n)`, `shape`, `_path_from_root()`, ..."""

    def __init__(self, field):
        self._field = field

    @property
    def field(self):
        return self._field

    @property
    def _container(self):
        return self._field._snode

    @property
    def shape(self):
        return self._field.shape

    @property
    def _dtype(self):
        return self._field.dtype

    @property
    def _name(self):
        return self._field.name

    name = _name

    @property
    def dtype(self):
        return self._field.dtype

    @property
    def tree(self):
        return self._container.tree

    def parent(self, n=1):
        if n <= 0:
            return self
        c = self._container
        up = c.tree.owner if c.up is _ROOT_SENTINEL else c
        return up.parent(n - 1) if up is not None else None

    def _public_parent(self):
        return self.parent(1)

    def _path_from_root(self):
        return self.parent(1)._path_from_root() + [self]

    def _get_children(self):
        return []

    @property
    def _snode_tree_id(self):
        return self._container._snode_tree_id

    @property
    def _cell_size_bytes(self):
        return self._field.dtype.nbytes

    @property
    def _offset_bytes_in_parent_cell(self):
        c = self._container
        c._tree_layout()
        return c._offsets[c.children.index(self._field.places[0])]

    def _physical_index_position(self):
        return self._container._physical_index_position()

    @property
    def _id(self):
        return id(self)

    def __getattr__(self, name):
        # the rest (`kind`, `deactivate_all()`, ...) is the node the field is placed in
        if name.startswith("__") or name == "_field":
            raise AttributeError(name)
        return getattr(self._field._snode, name)

    def __repr__(self):
        return f"{self.parent(1)!r} => place {list(self.shape)}"


FieldNode = PlaceSNode     # (the name sparse.py and main's code use)


class Tree:
    def __init__(self, owner=None):
        self.root = SNode(None, (), ())
        self.root.up = _ROOT_SENTINEL
        self.root.tree = self
        self.owner = owner          # what stands above its first level: ti.root, or a
        # FieldsBuilder's root
        self.id = None              # numbered when materialized, as the original's trees
        self.finalized = False      # by FieldsBuilder.finalize(): no more fields
        self.destroyed = False
        self.buffer = None          # host memory (numpy), the only copy on the CPU
        self.device_ptr = None      # device memory on CUDA, mirrored by `buffer`
        self.device_newer = False   # a kernel wrote the device copy since the last pull
        self.host_newer = False     # Python wrote the host copy since the last push

    def materialize(self):
        if self.buffer is not None:
            return
        if self.destroyed:
            raise FluxionRuntimeError("this SNode tree was destroyed (SNodeTree.destroy()); "
                                      "its fields have no storage")
        r = self.root
        size, align = r._layout()
        self.buffer, slack = tree_buffer.allocate(r, size, sparse_memory.reserves(r))
        if runtime.on_cuda():
            self.device_ptr = runtime.get_jit().device.alloc(size + slack)
        st = runtime.state()
        st.trees.append(self)
        used = {t.id for t in st.trees if not t.destroyed}
        self.id = next(k for k in range(len(used) + 1) if k not in used)
        self._assign(r, self.buffer.ctypes.data, [])

    def destroy(self):
        """Free the tree's memory. Its fields can no longer be used, and the compiled kernel
        instances that access them are dropped from their kernels' caches (a later call
        compiles again, reading the program's fields anew)."""
        if self.destroyed:
            raise FluxionRuntimeError("this SNode tree was already destroyed")
        st = runtime.state()
        with runtime.compile_lock:
            for inst in list(st.instances):
                if self in getattr(inst, "trees", ()):
                    inst.drop(f"it accesses fields of an SNode tree that was destroyed")
            self.destroyed = True
            if self.device_ptr is not None:
                runtime.get_jit().device.free(self.device_ptr)
                self.device_ptr = None
            for place in _places(self.root):
                place.field._view = None
                place.addr = None
            if self in st.trees:
                st.trees.remove(self)
            self.buffer = None

    # -- keeping host and device copies coherent on CUDA ---------------------------------
    # A tree up to this size moves whole between host and device (a copy costs about its
    # latency then, and one pull serves every later read); a larger one moves only the bytes
    # Python reads or writes, so reading a scalar loss does not copy the simulation's state.
    WHOLE_BYTES = 1 << 16

    def read_span(self, lo, hi):
        """Before Python reads bytes [lo, hi) of the host copy."""
        if not self.device_newer:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.pull()
        elif hi > lo:
            # (host_newer is only set with the whole host copy fresh: device_newer is False)
            runtime.get_jit().device.to_host(self.buffer.ctypes.data + lo, self.device_ptr + lo,
                                             hi - lo)

    def before_write(self, lo, hi, partial):
        """Before Python writes into bytes [lo, hi); `partial`: not every byte of the range
        is written (the rest must be the device's, since the range goes back whole)."""
        if self.device_ptr is None:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.pull()
        elif partial:
            self.read_span(lo, hi)

    def after_write(self, lo, hi):
        """After Python wrote bytes [lo, hi): a small tree is pushed whole before the next
        launch, a range of a large one goes to the device now."""
        if self.device_ptr is None:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.host_newer = True
        elif hi > lo:
            runtime.get_jit().device.to_device(self.device_ptr + lo, self.buffer.ctypes.data + lo,
                                               hi - lo)

    def pull(self):
        """Before Python reads the whole host copy."""
        if self.device_newer:
            runtime.get_jit().device.to_host(self.buffer.ctypes.data, self.device_ptr,
                                             self.buffer.nbytes)
            self.device_newer = False

    def push(self):
        """Before a kernel reads the device copy."""
        if self.host_newer:
            runtime.get_jit().device.to_device(self.device_ptr, self.buffer.ctypes.data,
                                               self.buffer.nbytes)
            self.host_newer = False

    def _assign(self, node, base, terms):
        from fluxion.lang.quant import Word
        for c, off in zip(node.children, node._offsets):
            if isinstance(c, (Place, Word)):
                # terms address the field's dimensions: axis -> its rank among the used axes
                rank = {a: r for r, a in enumerate(sorted({t[0] for t in terms}))}
                ranked = [[rank[t[0]]] + list(t[1:]) for t in terms]
                for p in (c.places if isinstance(c, Word) else (c,)):
                    p.addr = base + off
                    p.terms, p.bit_terms = _finish_terms(ranked)
            else:
                new_terms = list(terms)
                bits = isinstance(c, QuantArray)
                strides = _row_major(c.extents, 1 if bits else c.cell_size)
                for a, e, st in zip(c.axes, c.extents, strides):
                    new_terms.append([a, e, st, bits])
                self._assign(c, base + off, new_terms)


def _places(node):
    for c in node.children:
        if isinstance(c, Place):
            yield c
        else:
            yield from _places(c)


class SNodeTree:
    """What `FieldsBuilder.finalize()` returns: the tree's `id`, and `destroy()`."""

    def __init__(self, tree):
        self._tree = tree

    @property
    def id(self):
        return self._tree.id

    def destroy(self):
        self._tree.destroy()


class FieldsBuilder:
    """Builds one SNode tree of its own, like `ti.root` does: `fb.dense(ti.i, n).place(x)`,
    then `fb.finalize()` allocates it (its fields are usable from then on) and returns an
    SNodeTree whose `destroy()` frees it."""

    def __init__(self):
        runtime.ensure_initialized()
        self._tree = Tree()
        self._tree.owner = self._tree.root      # the builder's root is the tree's own
        self.root = self._tree.root
        _builders.add(self)

    @property
    def finalized(self):
        return self._tree.finalized

    @property
    def empty(self):
        return not self._tree.root.children

    def _check_not_finalized(self):
        if self._tree.finalized:
            raise FluxionRuntimeError("this FieldsBuilder is finalized: create a new one to "
                                      "place more fields")

    def dense(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.dense(indices, dimensions)

    def pointer(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.pointer(indices, dimensions)

    def bitmasked(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.bitmasked(indices, dimensions)

    def dynamic(self, index, dimension, chunk_size=None):
        self._check_not_finalized()
        return self.root.dynamic(index, dimension, chunk_size)

    def place(self, *fields, offset=None):
        self._check_not_finalized()
        self.root.place(*fields, offset=offset)
        return self

    def lazy_grad(self):
        self._check_not_finalized()
        self.root.lazy_grad()

    def lazy_dual(self):
        self._check_not_finalized()
        self.root.lazy_dual()

    def deactivate_all(self):
        self.root.deactivate_all()

    def finalize(self, raise_warning=True):
        """Allocate the tree; returns its SNodeTree."""
        self._check_not_finalized()
        if self.empty and raise_warning:
            import warnings
            warnings.warn("finalizing an empty FieldsBuilder", stacklevel=2)
        self._tree.finalized = True
        if not self.empty:
            self._tree.materialize()
        return SNodeTree(self._tree)

    @staticmethod
    def _finalized_roots():
        out = [root]
        out += [b.root for b in list(_builders) if b._tree.finalized and not b._tree.destroyed
                and b._tree.root.generation == runtime.state().generation]
        return out


_builders = weakref.WeakSet()


def _row_major(extents, cell):
    strides, acc = [], cell
    for e in reversed(extents):
        strides.append(acc)
        acc *= e
    return strides[::-1]


def _finish_terms(raw):
    """Turn (axis, extent, stride, bits) from outer to inner into Terms with divisors: the
    byte terms and the quant-array (bit) terms."""
    out = []
    seen_axis = {}
    for idx in range(len(raw) - 1, -1, -1):     # inner levels first: their extents divide outer
        a, e, st, bits = raw[idx]
        div = seen_axis.get(a, 1)
        seen_axis[a] = div * e
        out.append(Term(a, div, e, st, False, bits))
    out.reverse()
    # the field's index k is the k-th axis the tree splits (ti.j alone is index 0)
    position = {a: k for k, a in enumerate(sorted({t.axis for t in out}))}
    for t in out:
        t.axis = position[t.axis]
    first = set()
    for t in out:
        if t.axis not in first:
            t.outermost = True
            first.add(t.axis)
    return [t for t in out if not t.bits], [t for t in out if t.bits]


class QuantArray(SNode):
    """`snode.quant_array(axes, n, max_num_bits)`: n elements of one quantized field (int or
    fixed point) packed into one unsigned word per cell of the parent."""

    def __init__(self, parent, axes_, extents, word):
        SNode.__init__(self, parent, axes_, extents)
        self.word = word

    def place(self, *fields, offset=None):
        from fluxion.lang.quant import QuantSlot
        self._check_open()
        flat = []
        for f in fields:
            flat.extend(f if isinstance(f, (list, tuple)) else [f])
        if len(flat) != 1 or self.children:
            raise FluxionError("only one field can be placed under a quant_array")
        f = flat[0]
        members = f._quant_members() if hasattr(f, "_quant_members") else None
        if not members or len(members) != 1:
            raise FluxionError("a quant_array holds one scalar field of a quantized type")
        field, comp = members[0]
        q = field._qtypes[comp]
        if not isinstance(q, (QuantInt, QuantFixed)):
            raise TypeError(f"a quant_array holds quant.int or quant.fixed values, not {q!r}")
        n = int(np.prod(self.extents))
        if q.bits * n > self.word.bits:
            raise FluxionError(f"quant_array: {n} elements of {q!r} take {q.bits * n} bits, "
                               f"more than max_num_bits={self.word.bits}")
        if field.places[comp] is not None:
            raise FluxionError(f"field {field._label()} is already placed")
        slot = QuantSlot(q, self.word, 0, array=True)
        self.children.append(field._place_quant(comp, self, slot, offset))
        return self

    def _layout(self):
        self._offsets = [0] * len(self.children)
        self.cell_size = self.word.nbytes
        return self.cell_size, self.word.nbytes


class _RootSentinel:
    tree = None
    up = None


_ROOT_SENTINEL = _RootSentinel()


class Root(SNode):
    """`ti.root`: its children are independent trees."""

    def __init__(self):
        SNode.__init__(self, None, (), ())

    @property
    def shape(self):
        return ()

    def _get_children(self):
        return [c for t in runtime.state().trees if t.owner is self and not t.destroyed
                for c in t.root.children if not isinstance(c, Place)]

    def __repr__(self):
        return "ti.root"


root = Root()


@runtime.on_reset
def reset_root():
    root.children = []


def _flatten_fields(fields):
    out = []
    for f in fields:
        if isinstance(f, (list, tuple)):
            out.extend(_flatten_fields(f))
        else:
            out.append(f)
    return out

