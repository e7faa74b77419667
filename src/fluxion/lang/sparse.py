"""Sparse SNodes (`pointer`, `bitmasked`): which cells are active.

The layout stays dense (snode.py: memory is not saved), but each sparse level has a hidden u8
field over its own index space, 1 where the cell is active, which gives the original
system's results:
* a write to a field element (in a kernel or from Python) activates the cells of every
  sparse level above it (`instrument_writes`, an IR pass run on every compiled kernel);
* a struct-for over a field or an SNode visits only the elements whose cells are all active
  (`active_condition`, used by the frontend); `fill`, `from_numpy` and `to_numpy` do the same;
* `ti.deactivate` (and `snode.deactivate_all()`) clear the cell; for a pointer they also
  zero what the cell held (the original frees the block, and an inactive cell reads 0), a
  bitmasked cell keeps its values;
* `ti.is_active`, `ti.activate` and `ti.rescale_index` as documented.
"""
from __future__ import annotations

import numpy as np

from fluxion.lang import types as T


def levels(node):
    """The sparse nodes from the root down to `node` (included), outermost first."""
    return [s for s in node.path() if s.kind != "dense"]


def mask_of(s):
    """The hidden u8 field of sparse node `s`'s cell states, over `s`'s index space."""
    if s._active_mask is None:
        from fluxion.lang.field import ScalarField, _place_new
        f = ScalarField(T.u8, name=f"<active cells of a {s.kind} node>")
        f._is_mask = True
        _place_new(f, s.shape, None)
        f._materialize()
        s._active_mask = f
    return s._active_mask


def index_map(t, s):
    """How to find the cell of sparse level `s` (on `t`'s path) from an index in `t`'s index
    space: per dimension of `s`'s space, (dimension of `t`'s space, divisor)."""
    path = t.path()
    below = path[path.index(s) + 1:]
    t_axes = t.space_axes()
    out = []
    for a in s.space_axes():
        div = 1
        for lvl in below:
            for ax, e in zip(lvl.axes, lvl.extents):
                if ax == a:
                    div *= e
        out.append((t_axes.index(a), div))
    return out


def _node_of(x):
    """An SNode given an SNode or a field (the node it is placed in)."""
    from fluxion.lang.field import Field
    from fluxion.lang.snode import FieldNode
    from fluxion.lang.struct import StructField
    if isinstance(x, FieldNode):
        x = x.field
    if isinstance(x, StructField):
        x = next(iter(x._leaves()))
    if isinstance(x, Field):
        x._check_alive()
        return x._snode
    return x


def _index_list(indices):
    from fluxion.lang.matrix import Matrix
    if isinstance(indices, Matrix):
        return list(indices.entries)
    if isinstance(indices, (list, tuple)):
        out = []
        for k in indices:
            out.extend(k.entries if isinstance(k, Matrix) else [k])
        return out
    return [indices]


# -- inside kernels ---------------------------------------------------------------------------
def _mask_index(t, s, indices, offset):
    from fluxion.frontend import expr as E
    out = []
    for d, div in index_map(t, s):
        v = indices[d]
        if offset and offset[d]:
            v = v - offset[d]
        if div != 1:
            # in-bounds indices are non-negative: no sign fix-up
            v = E.binary("div_nonneg", v, div) if isinstance(v, E.Expr) else v // div
        out.append(v)
    return tuple(out)


def active_condition(t, indices, offset=None, own_only=False):
    """A kernel value: 1 where every sparse level on `t`'s path is active at `indices` (an
    index in `t`'s space, shifted by the field's `offset`), or None when there is none."""
    from fluxion.frontend import expr as E
    from fluxion.frontend.access import field_access
    cond = None
    for s in (levels(t) if not own_only else [t]):
        m = mask_of(s)
        c = E.to_expr(field_access(m, _mask_index(t, s, indices, offset)), like=T.i32) != 0
        cond = c if cond is None else E.truth(cond) & E.truth(c)
    return cond


def _kernel_indices(node, indices, what):
    from fluxion.frontend.access import as_indices
    from fluxion.lang.exceptions import FluxionIndexError
    flat = _index_list(indices)
    if len(flat) != len(node.shape):
        raise FluxionIndexError(f"{what}: the node has {len(node.shape)} dimensions but "
                                f"{len(flat)} indices were given")
    return as_indices(flat, what)


def is_active(node, indices):
    """`ti.is_active(snode, I)`: 1 if the cell `I` of `snode` (and those above it) is active."""
    from fluxion.frontend import builder
    node = _node_of(node)
    if not builder.in_kernel():
        return int(_py_active(node, tuple(int(i) for i in _index_list(indices))))
    idx = _kernel_indices(node, indices, "ti.is_active")
    from fluxion.frontend import expr as E
    cond = active_condition(node, idx)
    return E.const(1, T.i32) if cond is None else E.cast(E.truth(cond), T.i32)


def _store_mask(m, idx, value):
    from fluxion.frontend import expr as E
    from fluxion.frontend.builder import emit
    from fluxion.frontend.access import field_access
    from fluxion.ir import stmts as S
    ptr = field_access(m, idx).lvalue
    emit(S.GlobalStoreStmt(ptr, E.const(value, T.u8).stmt))


def activate(node, indices):
    """`ti.activate(snode, I)`: activate cell `I` of `snode` and the cells above it."""
    from fluxion.frontend import builder
    node = _node_of(node)
    if not builder.in_kernel():
        _py_activate(node, tuple(int(i) for i in _index_list(indices)))
        return
    idx = _kernel_indices(node, indices, "ti.activate")
    for s in levels(node):
        _store_mask(mask_of(s), _mask_index(node, s, idx, None), 1)


def deactivate(node, indices):
    """`ti.deactivate(snode, I)`: deactivate cell `I` of the sparse `snode`; a pointer cell's
    values (and the cells of sparse levels below it) are cleared."""
    from fluxion.frontend import builder
    node = _node_of(node)
    _check_sparse(node, "ti.deactivate")
    if not builder.in_kernel():
        _py_deactivate(node, tuple(int(i) for i in _index_list(indices)))
        return
    idx = _kernel_indices(node, indices, "ti.deactivate")
    _store_mask(mask_of(node), tuple(idx), 0)
    if node.kind == "pointer":
        for t, places_or_mask in _below(node):
            _zero_cell_kernel(node, idx, t, places_or_mask)


def _check_sparse(node, what):
    from fluxion.lang.exceptions import FluxionError
    if node.kind == "dense":
        raise FluxionError(f"{what} needs a pointer or bitmasked SNode, got a dense one")


def _below(s):
    """What a cell of `s` holds: (node, places) for the fields placed under it, and
    (sparse node, None) for the masks of the sparse levels under it."""
    from fluxion.lang.snode import Place
    out = []

    def visit(n):
        places = [c for c in n.children if isinstance(c, Place)]
        if places:
            out.append((n, places))
        for c in n.children:
            if not isinstance(c, Place):
                if c.kind != "dense" and c._active_mask is not None:
                    out.append((c, None))
                visit(c)
    visit(s)
    return out


def _inner_extents(s, t):
    """Per dimension of `t`'s space: how many of `t`'s indices one cell of `s` spans."""
    path = t.path()
    below = path[path.index(s) + 1:]
    out = []
    for a in t.space_axes():
        n = 1
        for lvl in below:
            for ax, e in zip(lvl.axes, lvl.extents):
                if ax == a:
                    n *= e
        out.append(n)
    return out


def _zero_cell_kernel(s, idx, t, places):
    """Zero, inside a kernel, what cell `idx` of `s` holds for node `t` (its fields'
    components, or its own mask when `places` is None): a serial loop over the cell."""
    from fluxion.frontend import builder
    from fluxion.frontend import expr as E
    from fluxion.frontend.builder import emit, into
    from fluxion.ir import stmts as S
    ip = T.i32
    ext = _inner_extents(s, t)
    s_dims = {d: k for k, (d, _) in enumerate(index_map(t, s))}
    total = int(np.prod(ext)) if ext else 1
    loop = emit(S.RangeForStmt(E.const(0, ip).stmt, E.const(total, ip).stmt, False, None))
    with into(loop.body):
        rest = E.Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
        full = [None] * len(ext)
        for d in range(len(ext) - 1, -1, -1):
            n = ext[d]
            local = E.binary("mod_nonneg", rest, n) if d > 0 else rest
            if d > 0:
                rest = E.binary("div_nonneg", rest, n)
            base = idx[s_dims[d]] * n if d in s_dims else 0
            full[d] = local + base if not (isinstance(base, int) and base == 0) else local
        if places is None:
            _store_mask(mask_of(t), tuple(full), 0)
            return
        for p in places:
            f = p.field
            off = f.offset or (0,) * len(full)
            key = [v + o if o else v for v, o in zip(full, off)]
            ptr = emit(S.GlobalPtrStmt([E.cast(E.to_expr(k, like=ip), ip).stmt for k in key],
                                       p, ret_type=p.dtype))
            st = emit(S.GlobalStoreStmt(ptr, E.const(0, p.dtype).stmt))
            _raw_stores(builder.current().ir).add(id(st))


def rescale_index(a, b, I):  # noqa: E741  (the original's name)
    """`ti.rescale_index(a, b, I)`: the index `I` of field or SNode `a` in `b`'s index space
    (divided or multiplied per dimension by the ratio of their extents)."""
    from fluxion.lang.matrix import Vector
    sa, sb = _node_of(a).shape, _node_of(b).shape
    idx = _index_list(I)
    out = list(idx)
    for d in range(min(len(idx), len(sa), len(sb))):
        if sa[d] > sb[d]:
            out[d] = idx[d] // (sa[d] // sb[d])
        elif sa[d] < sb[d]:
            out[d] = idx[d] * (sb[d] // sa[d])
    return Vector(out)


# -- the IR pass --------------------------------------------------------------------------------
def _raw_stores(kernel):
    """Ids of the stores of `kernel` that must not activate cells (a deactivation's zeroing)."""
    raw = getattr(kernel, "sparse_raw_stores", None)
    if raw is None:
        raw = kernel.sparse_raw_stores = set()
    return raw


def instrument_writes(kernel):
    """Before each store or atomic into a field under sparse levels: activate its cells."""
    from fluxion.ir import stmts as S
    raw = getattr(kernel, "sparse_raw_stores", ())
    for st in list(S.walk(kernel.body)):
        if not isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)) or \
                not isinstance(st.ptr, S.GlobalPtrStmt) or id(st) in raw:
            continue
        place = st.ptr.place
        if getattr(place.field, "_is_mask", False):
            continue
        lv = levels(place.snode)
        if not lv:
            continue
        blk = st.parent
        at = blk.stmts.index(st)
        new = []

        def add(x):
            x.parent = blk
            x.loc = st.loc
            new.append(x)
            return x
        off = place.field.offset
        one = add(S.ConstStmt(1, ret_type=T.u8))
        for s in lv:
            m = mask_of(s)
            idx = []
            for d, div in index_map(place.snode, s):
                v = st.ptr.indices[d]
                it = v.ret_type
                if off and off[d]:
                    c = add(S.ConstStmt(off[d], ret_type=it))
                    v = add(S.BinaryOpStmt(v, c, "sub", ret_type=it))
                if div != 1:
                    c = add(S.ConstStmt(div, ret_type=it))
                    v = add(S.BinaryOpStmt(v, c, "div_nonneg", ret_type=it))
                idx.append(v)
            ptr = add(S.GlobalPtrStmt(idx, m.places[0], ret_type=T.u8))
            add(S.GlobalStoreStmt(ptr, one))
        blk.stmts[at:at] = new


# -- Python scope -------------------------------------------------------------------------------
def _py_mask_key(t, s, idx):
    return tuple(idx[d] // div for d, div in index_map(t, s))


def _py_active(node, idx):
    for s in levels(node):
        if not mask_of(s)._read_element(0, _py_mask_key(node, s, idx)):
            return False
    return True


def _py_activate(node, idx):
    for s in levels(node):
        mask_of(s)._write_element(0, _py_mask_key(node, s, idx), 1)


def activate_element(field, idx):
    """A Python-scope write of element `idx` (0-based) of `field`: activate its cells."""
    if levels(field._snode):
        _py_activate(field._snode, idx)


def active_array(field):
    """A boolean array of `field`'s shape: which elements are in active cells (None when the
    field is under no sparse level)."""
    t = field._snode
    lv = levels(t)
    if not lv:
        return None
    shape = field.shape
    out = np.ones(shape, dtype=bool)
    for s in lv:
        mp = index_map(t, s)
        m = mask_of(s).to_numpy().astype(bool)
        sel = m[np.ix_(*[np.arange(shape[d]) // div for d, div in mp])] if mp else m
        full = [1] * len(shape)
        for d, _ in mp:
            full[d] = shape[d]
        out &= sel.reshape(full)
    return out


def _py_deactivate(node, idx):
    mask_of(node)._write_element(0, tuple(idx), 0)
    if node.kind != "pointer":
        return
    for t, places in _below(node):
        ext = _inner_extents(node, t)
        dims = {d: k for k, (d, _) in enumerate(index_map(t, node))}
        sl = tuple(slice(idx[dims[d]] * n, idx[dims[d]] * n + n) if d in dims else slice(None)
                   for d, n in enumerate(ext))
        targets = [mask_of(t)] if places is None else _fields_of(places)
        for f in targets:
            _zero_region(f, sl)


def deactivate_all(node):
    """`snode.deactivate_all()`: every cell of `node` and of the sparse nodes below it
    inactive (a pointer's values zeroed); on `ti.root`, of every tree."""
    from fluxion.lang.snode import Place, Root
    if isinstance(node, Root):
        from fluxion.lang.field import all_fields
        roots = []
        for f in all_fields():
            if f._snode is not None and not getattr(f, "_is_mask", False):
                r = f._snode.tree.root
                if r not in roots:
                    roots.append(r)
        for r in roots:
            deactivate_all(r)
        return
    for c in node.children:
        if not isinstance(c, Place):
            deactivate_all(c)
    if node.kind == "dense":
        return
    mask_of(node).fill(0)
    if node.kind != "pointer":
        return
    for t, places in _below(node):
        targets = [mask_of(t)] if places is None else _fields_of(places)
        for f in targets:
            _zero_region(f, tuple(slice(None) for _ in t.shape))


def _fields_of(places):
    out = []
    for p in places:
        if p.field not in out:
            out.append(p.field)
    return out


def _zero_region(f, sl):
    """Zero a region of every component of `f`, bypassing the activity masks."""
    f._read_components(range(len(f.places)))
    vals = {}
    for c in range(len(f.places)):
        a = np.array(f._read_component(c, fresh=True), copy=True)
        a[sl] = 0
        vals[c] = a
    f._write_components(vals, all_cells=True)
