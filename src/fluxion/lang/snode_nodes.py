"""The nodes of an SNode tree: axes, the places of field components, the levels (building,
reflection, cell layout), quant arrays, and the leaf that stands for a placed field.

A level does not know the trees (lang/snode_tree.py makes a tree's root and lays its levels
out in memory) nor ti.root (lang/snode.py), whose levels each start a tree of their own: it
asks `_level_parent()`, which ti.root overrides. What sparse levels do on deactivation is
lang/sparse.py's, reached through `places.sparse`, which it fills: it builds on these nodes
and on fields, so they cannot import it.
"""
from __future__ import annotations

import numpy as np

from fluxion.frontend import places
from fluxion.frontend.places import SNodeBase
from fluxion.ir.errors import FluxionError
from fluxion.ir.quant import WORD_TYPES, QuantFixed, QuantInt
from fluxion.lang import runtime, sparse_counts
from fluxion.lang.field_registry import all_fields
from fluxion.lang.quant import QuantSlot, Word


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


class Place:
    """A scalar component of a field placed in a tree; `addr` and `terms` exist once
    materialized. A quantized component has a `quant` slot (lang/quant.py): then `dtype` is
    its compute type, `addr` and `terms` address its word and `bit_terms` its bits."""
    __slots__ = ("field", "component", "dtype", "snode", "addr", "terms", "quant", "bit_terms",
                 "pool",
                 "__weakref__")

    def __init__(self, field, component, dtype, snode, quant=None):
        self.field, self.component, self.dtype, self.snode = field, component, dtype, snode
        self.addr = None
        self.terms = None
        self.quant = quant
        self.bit_terms = ()
        self.pool = None           # how it is addressed under a pooled node (sparse_pool.py)

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
        self._pool = None         # a pooled pointer level's blocks (lang/sparse_pool.py)

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
        parent = self._level_parent()
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
    _num_dynamically_allocated = property(sparse_counts.peak_allocated)

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
        return sparse_counts.chunked(self._child(SNode, "dynamic", index, dimension,
                                                 kind="dynamic"), chunk_size)

    def _level_parent(self):
        """The node that a new level or a placed field goes under (ti.root: a new tree's)."""
        return self

    def place(self, *fields, offset=None):
        target = self._level_parent()
        target._check_open()
        for f in _flatten_fields(fields):
            f._place_in(target, offset)
        return self

    def deactivate_all(self):
        """Every cell of this node and of the sparse nodes below it inactive (the values of
        pointers and lists zeroed)."""
        places.sparse.deactivate_all(self)

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
        out = []
        for f in all_fields():
            if f._snode is None or f._snode.tree is None or f._snode.tree.destroyed:
                continue
            if self.up is None:          # ti.root: every tree
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
            if getattr(c, "_hidden", False):
                continue          # (states of a bitmasked node below: sparse_block_states)
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
            if s.up is None or s.up is _ROOT_SENTINEL:     # ti.root, or a tree's own root
                parts.append("ti.root")
            else:
                parts.append(f"{s.kind} {list(s.shape)}")
        return " => ".join(parts)

    # -- layout ---------------------------------------------------------------------------
    def _layout(self):
        """(cell size, alignment); sets child offsets within a cell."""
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


class QuantArray(SNode):
    """`snode.quant_array(axes, n, max_num_bits)`: n elements of one quantized field (int or
    fixed point) packed into one unsigned word per cell of the parent."""

    def __init__(self, parent, axes_, extents, word):
        SNode.__init__(self, parent, axes_, extents)
        self.word = word

    def place(self, *fields, offset=None):
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


class _RootSentinel:
    tree = None
    up = None


_ROOT_SENTINEL = _RootSentinel()


def _flatten_fields(fields):
    out = []
    for f in fields:
        if isinstance(f, (list, tuple)):
            out.extend(_flatten_fields(f))
        else:
            out.append(f)
    return out
