"""Sparse SNodes (`pointer`, `bitmasked`, `dynamic`): which cells are active.

The layout stays dense (a cell's memory is committed as it is written and given back when
it is deactivated: lang/sparse_memory.py; a pointer below a pointer takes its blocks from a
pool: lang/sparse_pool.py), and a hidden field of each sparse level says which cells are
active, which gives the original system's results:
* `pointer` and `bitmasked`: u8 over the node's own index space, 1 where active (in the
  blocks of the pointer above a bitmasked node: lang/sparse_block_states.py);
* `dynamic` (a list along one axis, in each cell of its parent): an i32 field over the
  parent's index space, the list's length; element j is active when j < length.
Then:
* a write to a field element (in a kernel or from Python) activates the cells of every
  sparse level above it (lang/sparse_writes.py, an IR pass run on every compiled kernel; a
  dynamic list grows to hold the element, as the original's does);
* a struct-for over a field or an SNode visits only the elements whose cells are all active
  (`active_condition`: passes/lower_struct_for.py); `fill`, `from_numpy` and `to_numpy` do the same;
* `ti.deactivate` (and `snode.deactivate_all()`) clear the cell; for a pointer and a dynamic
  list they also zero what the cell held (the original frees the memory, and an inactive cell
  reads 0), a bitmasked cell keeps its values;
* `ti.is_active`, `ti.activate`, `ti.append`, `ti.length` and `ti.rescale_index` as
  documented; `x[i].append(v)` and `x[i].length()` on a field under a dynamic node.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import FluxionError, FluxionIndexError
from fluxion.frontend import places
from fluxion.frontend.access import as_indices, field_access, struct_access
from fluxion.frontend.matrix import Matrix
from fluxion.frontend.transformer import store_value
from fluxion.lang import sparse_block_states, sparse_counts, sparse_memory, sparse_pool
from fluxion.lang.field import ScalarField, _place_new
from fluxion.lang.field_registry import all_fields
from fluxion.lang.snode import FieldNode, Place, Root, SNode
from fluxion.passes import lower_struct_for


def levels(node):
    """The sparse nodes from the root down to `node` (included), outermost first."""
    return [s for s in node.path() if s.kind != "dense"]


def _cell_node(s):
    """The node whose index space numbers the cells of sparse node `s`'s state: `s` itself,
    or for a dynamic list its parent (one length per list)."""
    return s.up if s.kind == "dynamic" else s


def mask_of(s):
    """The hidden field of sparse node `s`'s cell states (u8 flags; i32 list lengths); in
    the blocks of a pointer above a bitmasked node (lang/sparse_block_states.py)."""
    if s._active_mask is None and sparse_block_states.block_pointer(s) is not None:
        s.tree.materialize()
    if s._active_mask is None:
        dyn = s.kind == "dynamic"
        s._active_mask = _hidden_field(T.i32 if dyn else T.u8, _cell_node(s).shape,
                                       f"<{'list lengths' if dyn else 'active cells'} of a "
                                       f"{s.kind} node>")
    return s._active_mask


def _hidden_field(dtype, shape=None, name=""):
    """A field of states (`_is_mask`), in a tree of its own when `shape` is given."""
    f = ScalarField(dtype, name=name)
    f._is_mask = True
    if shape is not None:
        _place_new(f, shape, None)
        f._materialize()
    return f


def index_map(t, s):
    """How to find the cell of node `s` (on `t`'s path) from an index in `t`'s index space:
    per dimension of `s`'s space, (dimension of `t`'s space, divisor)."""
    path = t.path()
    below = path[path.index(s) + 1:]
    t_axes = t.space_axes()
    out = []
    for a in s.space_axes():
        out.append((t_axes.index(a), _extent_along(below, a)))
    return out


def _extent_along(lvls, a):
    n = 1
    for lvl in lvls:
        for ax, e in zip(lvl.axes, lvl.extents):
            if ax == a:
                n *= e
    return n


def cell_map(t, s):
    """index_map of the cells of `s`'s state (see _cell_node)."""
    return index_map(t, _cell_node(s))


def list_position(t, s):
    """For a dynamic node `s` on `t`'s path: (dimension of `t`'s space, divisor, extent):
    an index's position in its list is (I[dim] // divisor) % extent."""
    path = t.path()
    a = s.axes[0]
    return t.space_axes().index(a), _extent_along(path[path.index(s) + 1:], a), s.extents[0]


def _node_of(x):
    """An SNode given an SNode or a field (the node it is placed in)."""
    if isinstance(x, FieldNode):
        x = x.field
    if isinstance(x, places.StructFieldBase):
        x = next(iter(x._leaves()))
    if isinstance(x, places.FieldBase):
        x._check_alive()
        return x._snode
    return x


def _index_list(indices):
    if isinstance(indices, Matrix):
        return list(indices.entries)
    if isinstance(indices, (list, tuple)):
        out = []
        for k in indices:
            out.extend(k.entries if isinstance(k, Matrix) else [k])
        return out
    return [indices]


# -- inside kernels ---------------------------------------------------------------------------
def _shifted(indices, d, offset):
    v = indices[d]
    return v - offset[d] if offset and offset[d] else v


def _div(v, div):
    if div == 1:
        return v
    # in-bounds indices are non-negative: no sign fix-up
    return E.binary("div_nonneg", v, div) if isinstance(v, E.Expr) else v // div


def _cell_index(t, s, indices, offset):
    return tuple(_div(_shifted(indices, d, offset), div) for d, div in cell_map(t, s))


def _position(t, s, indices, offset):
    d, div, ext = list_position(t, s)
    v = _div(_shifted(indices, d, offset), div)
    return E.binary("mod_nonneg", v, ext) if isinstance(v, E.Expr) else v % ext


def _state(s, cell):
    return field_access(mask_of(s), cell)


def block_shape(t, offset=None):
    """For a struct-for over node `t`'s space, when its deepest sparse level is a pointer or
    bitmasked node whose cells hold several elements: (cells, elements per cell) per
    dimension, so the loop tests each cell once; for a list, (cells, elements per cell, the
    count of a cell's elements: _list_blocks); when a level above has them (a pointer over
    bitmasked cells of one element): (cells, elements per cell, None, the test of a cell,
    the test of an element); None otherwise (1 element a cell)."""
    lv = levels(t)
    if lv and lv[-1].kind == "dynamic":
        return _list_blocks(t, lv[-1])
    path = t.path()
    for k in range(len(lv) - 1, -1, -1):
        ext = [_extent_along(path[path.index(lv[k]) + 1:], a) for a in t.space_axes()]
        if any(n % e for n, e in zip(t.shape, ext)) or lv[k].kind == "dynamic":
            return None
        if all(e == 1 for e in ext):
            continue
        cells = [n // e for n, e in zip(t.shape, ext)]
        if k == len(lv) - 1:
            return cells, ext
        return (cells, ext, None,
                lambda idx: active_condition(t, idx, offset, lv[:k + 1]),
                lambda idx: active_condition(t, idx, offset, lv[k + 1:]))
    return None


def _list_blocks(t, s):
    """A struct-for over the elements of lists (node `t` is dynamic node `s` or placed in
    it): the loop runs over the lists' parent cells, each split into chunks when they are too
    few to share among threads, and an inner loop runs to the list's length (a list of 2^25
    holding 10^4 takes 10^4 steps, not 2^25 tests)."""
    path = t.path()
    d, div, ext = list_position(t, s)
    if path[path.index(s) + 1:] or div != 1:
        return None                          # (levels below the list: element by element)
    lists = int(np.prod(t.shape)) // ext
    chunk = ext
    while chunk > 1024 and chunk % 2 == 0 and lists * ext // chunk < 4096:
        chunk //= 2
    per = [1] * len(t.shape)
    per[d] = chunk
    if any(n % e for n, e in zip(t.shape, per)):
        return None

    def count(origin):
        # (the loop tested that the chunk's first position is below the length; at most
        # the chunk: a full list's length counts on past its capacity, see append)
        pos = _position(t, s, origin, None)
        left = E.to_expr(_state(s, _cell_index(t, s, origin, None)), like=T.i32) - pos
        return E.binary("min", left, chunk)
    return [n // e for n, e in zip(t.shape, per)], per, count


def active_condition(t, indices, offset=None, lvls=None):
    """A kernel value: 1 where every sparse level on `t`'s path (or of `lvls`) is active at
    `indices` (an index in `t`'s space, shifted by the field's `offset`), or None when there
    is none."""
    cond = None
    for s in levels(t) if lvls is None else lvls:
        st = _state(s, _cell_index(t, s, indices, offset))
        if s.kind == "dynamic":
            c = E.to_expr(_position(t, s, indices, offset), like=T.i32) < st
        else:
            c = E.to_expr(st, like=T.i32) != 0
        cond = c if cond is None else E.truth(cond) & E.truth(c)
    return cond


def _kernel_indices(n_dims, indices, what):
    flat = _index_list(indices)
    if len(flat) != n_dims:
        raise FluxionIndexError(f"{what}: the node has {n_dims} dimensions but {len(flat)} "
                                f"indices were given")
    return as_indices(flat, what)


def is_active(node, indices):
    """`ti.is_active(snode, I)`: 1 if the cell `I` of `snode` (and those above it) is active."""
    node = _node_of(node)
    if not builder.in_kernel():
        return int(_py_active(node, tuple(int(i) for i in _index_list(indices))))
    idx = _kernel_indices(len(node.shape), indices, "ti.is_active")
    cond = active_condition(node, idx)
    return E.const(1, T.i32) if cond is None else E.cast(E.truth(cond), T.i32)


def _store_state(s, cell, value, op=None):
    """state[cell] = value (op None) or an atomic `op` with it; the old value for atomics."""
    m = mask_of(s)
    ptr = _state(s, cell).lvalue
    v = E.cast(E.to_expr(value, like=m.dtype), m.dtype)
    if op is None:
        emit(S.GlobalStoreStmt(ptr, v.stmt))
        return None
    return E.Expr(emit(S.AtomicOpStmt(ptr, v.stmt, op, ret_type=m.dtype)))


def activate(node, indices):
    """`ti.activate(snode, I)`: activate cell `I` of `snode` and the cells above it."""
    node = _node_of(node)
    if not builder.in_kernel():
        _py_activate(node, tuple(int(i) for i in _index_list(indices)))
        return
    idx = _kernel_indices(len(node.shape), indices, "ti.activate")
    _check_cell(node, idx, "ti.activate")
    for s in levels(node):
        cell = _cell_index(node, s, idx, None)
        if s.kind == "dynamic":
            _store_state(s, cell, _position(node, s, idx, None) + 1, "max")
            continue
        _store_state(s, cell, 1)
        if sparse_pool.pool_of(s) is not None:
            emit(S.SlotAcquireStmt(field_access(s._pool.table, cell).lvalue))


def deactivate(node, indices):
    """`ti.deactivate(snode, I)`: deactivate cell `I` of the sparse `snode` (of a dynamic
    node: `I` indexes its parent, and the list becomes empty); the values of a pointer's cell
    or of a list (and the cells of sparse levels below it) are cleared."""
    node = _node_of(node)
    _check_sparse(node, "ti.deactivate")
    anchor = _cell_node(node)
    if not builder.in_kernel():
        _py_deactivate(node, tuple(int(i) for i in _index_list(indices)))
        return
    idx = tuple(_kernel_indices(len(anchor.shape), indices, "ti.deactivate"))
    _check_cell(anchor, idx, "ti.deactivate")
    # (a list's elements past its length were never written: zeroing them would commit them)
    used = E.binary("min", E.to_expr(_state(node, idx), like=T.i32), node.extents[0]) \
        if node.kind == "dynamic" else None
    _store_state(node, idx, 0)
    if node.kind != "bitmasked":
        for t, target in _below(node):
            whole = t is node and int(np.prod(_inner_extents(anchor, t))) == node.extents[0]
            _zero_cell_kernel(anchor, idx, t, target, used if whole else None)


def _check_cell(node, idx, what):
    """A cell index given to `what` (which writes the cell's state) inside `node`'s index
    space, checked as a field's write is (by default, and with debug=True): past it, the
    state's store would write other memory."""
    ctx = builder.current()
    if not (ctx.cfg.check_writes or ctx.cfg.check_accesses):
        return
    cond = None
    for i, n in zip(idx, node.shape):
        c = E.truth((i >= 0) & (i < n))
        cond = c if cond is None else cond & c
    if cond is None or E.const_of(cond.stmt) == 1:
        return
    code = len(ctx.ir.errors)
    ctx.ir.errors.append((f"Out of bound access: index {{}} out of bounds for {what} on an "
                          f"SNode of shape {node.shape}", ctx.loc, len(idx)))
    emit(S.AssertStmt(cond.stmt, [E.to_expr(i, like=T.i32).stmt for i in idx], code))


def _check_sparse(node, what, need="a pointer, bitmasked or dynamic"):
    if node.kind == "dense" or (need == "a dynamic" and node.kind != "dynamic"):
        raise FluxionError(f"{what} needs {need} SNode, got a {node.kind} one")


def length(node, indices):
    """`ti.length(snode, I)`: the length of the list of dynamic `snode` in its parent's cell
    `I`."""
    node = _node_of(node)
    _check_sparse(node, "ti.length", "a dynamic")
    if not builder.in_kernel():
        key = tuple(int(i) for i in _index_list(indices))
        return int(mask_of(node)._read_element(0, key))
    idx = tuple(_kernel_indices(len(node.up.shape), indices, "ti.length"))
    return _state(node, idx)


def append(node, indices, value, field=None):
    """`ti.append(snode, I, v)`: add `v` at the end of the list of dynamic `snode` in its
    parent's cell `I` (a value of the field placed under it: a scalar, vector or struct);
    returns the position it took (the old length). A full list keeps its values (its
    length counts on); with debug=True appending to it is an error."""
    node = _node_of(node)
    _check_sparse(node, "ti.append", "a dynamic")
    if not builder.in_kernel():
        raise FluxionError("ti.append works inside kernels")
    idx = tuple(_kernel_indices(len(node.up.shape), indices, "ti.append"))
    if field is None:
        fields = _fields_of([p for t, ps in _below(node) if isinstance(ps, list) for p in ps])
        if len(fields) != 1:
            raise FluxionError(f"ti.append(snode, ...) on a dynamic node holding {len(fields)} "
                               f"fields: use x[I].append(v) on the field")
        field = fields[0]
    old = _store_state(node, idx, 1, "add")
    ctx = builder.current()
    if ctx.cfg.debug:             # (else a full list keeps its values: see the docstring)
        ctx.ir.errors.append((f"ti.append: the list in cell {{}} of a dynamic SNode of "
                              f"capacity {node.extents[0]} is full", ctx.loc, len(idx)))
        emit(S.AssertStmt(E.truth(old < node.extents[0]).stmt,
                          [E.to_expr(i, like=T.i32).stmt for i in idx], len(ctx.ir.errors) - 1))
    full = _list_index(field, node, idx, old)
    guard = emit(S.IfStmt(E.truth(old < node.extents[0]).stmt))
    with into(guard.then_block):
        access = struct_access if isinstance(field, places.StructFieldBase) else field_access
        store_value(access(field, full), value)
    _raw_stores(builder.current().ir).update(dict.fromkeys(map(id, S.walk(guard.then_block)), node))
    return old


def _list_index(field, node, parent_idx, pos):
    """The full index (field coordinates) of position `pos` of the list in parent cell
    `parent_idx`."""
    t = _node_of(field)
    d_dyn, div, _ = list_position(t, node)
    pmap = index_map(t, node.up)
    pdiv = dict(pmap)
    pidx = {d: parent_idx[k] for k, (d, _) in enumerate(pmap)}
    off = field.offset or (0,) * len(t.shape)
    out = []
    for d in range(len(t.shape)):
        v = pidx[d] * pdiv[d] if d in pidx else 0
        if d == d_dyn:
            v = v + (pos * div if div != 1 else pos)
        out.append(v + off[d] if off[d] else v)
    return tuple(out)


def _below(s):
    """What a cell of `s` holds: (node, places) for the fields placed under it, and
    (node of the cells, sparse node) for the states of the sparse levels under it."""
    out = []

    def visit(n):
        # (a bit-packed word is a member of the cells too: its fields' places are in it)
        places = [p for c in n.children
                  for p in ([c] if isinstance(c, Place) else getattr(c, "places", ()))]
        if places:
            out.append((n, places))
        for c in n.children:
            if isinstance(c, SNode):     # (states in blocks are places of the cells)
                if c.kind != "dense" and c._active_mask is not None and \
                        sparse_block_states.in_blocks(c) is None:
                    out.append((_cell_node(c), c))
                visit(c)
    visit(s)
    return out


def _inner_extents(s, t):
    """Per dimension of `t`'s space: how many of `t`'s indices one cell of `s` spans."""
    path = t.path()
    below = path[path.index(s) + 1:]
    return [_extent_along(below, a) for a in t.space_axes()]


def _zero_cell_kernel(s, idx, t, target, count=None):
    """Zero, inside a kernel, what cell `idx` of `s` holds for node `t` (its fields'
    components, or the state of sparse node `target` when it is not a list of places): a
    serial loop over the cell (its first `count` elements, a kernel value, when given)."""
    ip = T.i32
    ext = _inner_extents(s, t)
    s_dims = {d: k for k, (d, _) in enumerate(index_map(t, s))}
    total = E.const(int(np.prod(ext)) if ext else 1, ip) if count is None else count
    loop = emit(S.RangeForStmt(E.const(0, ip).stmt, total.stmt, False, None))
    with into(loop.body):
        rest = E.Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
        full = [None] * len(ext)
        for d in range(len(ext) - 1, -1, -1):
            # (no division where the dimensions before are 1 wide: the check is then proven)
            n, outer = ext[d], int(np.prod(ext[:d]))
            local = None if n == 1 else rest if outer == 1 else E.binary("mod_nonneg", rest, n)
            rest = E.binary("div_nonneg", rest, n) if outer > 1 and n > 1 else rest
            base = (idx[s_dims[d]] * n if n > 1 else idx[s_dims[d]]) if d in s_dims else 0
            full[d] = base if local is None else local if isinstance(base, int) and base == 0 \
                else local + base
        if not isinstance(target, list):
            _store_state(target, tuple(full), 0)
            return
        for p in target:
            f = p.field
            f._materialize()          # (a list's fields may be used first here: oit_renderer)
            off = f.offset or (0,) * len(full)
            key = [v + o if o else v for v, o in zip(full, off)]
            key = [E.cast(E.to_expr(k, like=ip), ip).stmt for k in key]
            ptr = emit(S.QuantPtrStmt(key, p, ret_type=T.i64) if p.quant is not None else
                       S.GlobalPtrStmt(key, p, ret_type=p.dtype))
            st = emit(S.GlobalStoreStmt(ptr, E.const(0, p.dtype).stmt))
            _raw_stores(builder.current().ir)[id(st)] = None


def _raw_stores(kernel):
    """Ids of the stores of `kernel` that must not activate cells (a deactivation's zeroing:
    None), or whose list `ti.append` grew already (that dynamic node)."""
    raw = getattr(kernel, "sparse_raw_stores", None)
    if raw is None:
        raw = kernel.sparse_raw_stores = {}
    return raw


# -- Python scope -------------------------------------------------------------------------------
def _py_cell_key(t, s, idx):
    return tuple(idx[d] // div for d, div in cell_map(t, s))


def _py_position(t, s, idx):
    d, div, ext = list_position(t, s)
    return idx[d] // div % ext


def _py_active(node, idx):
    for s in levels(node):
        v = mask_of(s)._read_element(0, _py_cell_key(node, s, idx))
        if not (_py_position(node, s, idx) < v if s.kind == "dynamic" else v):
            return False
    return True


def _py_activate(node, idx):
    for s in levels(node):
        m, key = mask_of(s), _py_cell_key(node, s, idx)
        if s.kind == "dynamic":
            end = _py_position(node, s, idx) + 1
            if m._read_element(0, key) < end:
                m._write_element(0, key, end)
        else:
            m._write_element(0, key, 1)
            if sparse_pool.pool_of(s) is not None:
                sparse_pool.take(s._pool, key)


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
        mp = cell_map(t, s)
        m = mask_of(s).to_numpy()
        sel = m[np.ix_(*[np.arange(shape[d]) // div for d, div in mp])] if mp else m
        full = [1] * len(shape)
        for d, _ in mp:
            full[d] = shape[d]
        sel = sel.reshape(full)
        if s.kind == "dynamic":
            d, div, ext = list_position(t, s)
            pos_shape = [1] * len(shape)
            pos_shape[d] = shape[d]
            pos = (np.arange(shape[d]) // div % ext).reshape(pos_shape)
            out &= pos < sel
        else:
            out &= sel.astype(bool)
    return out


def _py_deactivate(node, idx):
    anchor = _cell_node(node)
    sparse_counts.note_allocated(node)
    mask_of(node)._write_element(0, tuple(idx), 0)
    if node.kind == "bitmasked":
        return
    reserved = sparse_memory.reserved(node)
    if reserved:
        # the cell's bytes go back to the system (the states of the sparse levels below it
        # are fields of their own, zeroed below), or its block to its pool
        sparse_memory.release_cells(node, [idx])
        if node._pool is not None:
            sparse_pool.give_back(node._pool, tuple(idx))
    for t, target in _below(node):
        if reserved and isinstance(target, list):
            continue
        ext = _inner_extents(anchor, t)
        dims = {d: k for k, (d, _) in enumerate(index_map(t, anchor))}
        sl = tuple(slice(idx[dims[d]] * n, idx[dims[d]] * n + n) if d in dims else slice(None)
                   for d, n in enumerate(ext))
        if getattr(target, "_pool", None) is not None:
            sparse_pool.give_back(target._pool, sl)
        targets = _fields_of(target) if isinstance(target, list) else [mask_of(target)]
        for f in targets:
            f._zero_region(sl)


def deactivate_all(node):
    """`snode.deactivate_all()`: every cell of `node` and of the sparse nodes below it
    inactive (the values of pointers and lists zeroed); on `ti.root`, of every tree."""
    if sparse_memory.deactivate_planned(node, mask_of):
        return
    if node is None or isinstance(node, Root):      # (None: ti.deactivate_all_snodes())
        # (each tree's root once, in the order of the fields)
        for r in dict.fromkeys(f._snode.tree.root for f in all_fields()
                               if f._snode is not None and not getattr(f, "_is_mask", False)):
            deactivate_all(r)
        return
    if node.kind != "dense" and sparse_memory.reserved(node):
        sparse_memory.deactivate_all(node, mask_of)
        return
    for c in node.children:
        if isinstance(c, SNode):
            deactivate_all(c)
    if node.kind == "dense":
        return
    sparse_counts.note_allocated(node)
    mask_of(node).fill(0)
    if node.kind == "bitmasked":
        return
    for t, target in _below(node):
        targets = _fields_of(target) if isinstance(target, list) else [mask_of(target)]
        for f in targets:
            f._zero_region(tuple(slice(None) for _ in f.shape))


def deactivate_all_snodes():
    """`ti.deactivate_all_snodes()`: every sparse cell of every SNode tree (those of
    `ti.root` and of FieldsBuilders) inactive, as `ti.root.deactivate_all()`."""
    deactivate_all(None)


def _fields_of(places):
    out = []
    for p in places:
        if p.field not in out:
            out.append(p.field)
    return out


# the frontend's list cells (`x[i].append(v)`) and the lowering of struct-fors reach these
vars(places.sparse).update(levels=levels, node_of=_node_of, active_condition=active_condition,
                           block_shape=block_shape)
lower_struct_for.sparse = places.sparse
sparse_pool.new_field = _hidden_field
sparse_block_states.new_field = lambda dtype, name: _hidden_field(dtype, None, name)
# and fields and SNodes (which this module builds on) reach these in Python scope through it
vars(places.sparse).update(active_array=active_array, activate_element=activate_element,
                           deactivate_all=deactivate_all)
