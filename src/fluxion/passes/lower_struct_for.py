"""Lowering of struct-fors (`StructForStmt`, ir/stmts.py) and ndrange-fors (`NdRangeForStmt`)
into range-fors: the compile driver's step after simplify (compiler/driver.py), which runs
on the structured loops, so that autodiff and every later pass see only range-fors.

An ndrange-for becomes what a dense struct-for does, with bounds that may be kernel values:
one `RangeForStmt` over [begin, end) for one dimension; for several, over [0, product of the
extents), each extent `max(end - begin, 0)` (an empty dimension empties the space), the
indices unflattened row-major and shifted by each dimension's begin (`flat_space`,
`flat_indices`: the frontend runs the same arithmetic once at the loop, to raise there an
error of it, a bound that does not fit the index type). The result is the IR the frontend
emitted for an ndrange loop before the loop had a statement of its own.

What it produces, for a struct-for over the index space `bounds` ([(begin, end)] per
dimension) of a field, struct field or SNode:

* one `RangeForStmt` (parallel and block_dim as the struct-for's), preceded by the constants
  of its begin and end: over [begin, end) itself for one dimension; over [0, product of the
  extents) for several (none: one iteration), the indices unflattened row-major (the last
  fastest) with `div_nonneg` / `mod_nonneg` and shifted by each dimension's begin;
* under sparse SNodes, the test of their cells' activity around the body (an `IfStmt`);
* a parallel loop over a pointer, bitmasked or dynamic node whose cells hold several
  elements runs over the cells instead, tests each cell once and runs its elements in an
  inner serial loop (a list's: up to its length), so that its cost follows the active cells;
  where the shape of the cells is given with a test of each element, that test as well. A
  cell spanning several dimensions whose elements are tested gets one serial loop per
  dimension (`_enter_block` says when and why), which the frontend did not emit: the
  frontend's IR below is that of dense struct-fors.

The uses of the struct-for's indices (`StructIndexStmt`) become uses of these values, and the
body's statements move into the innermost block. The result is the very IR that the
frontend emitted for a struct-for before it had a statement of its own, down to the order of
the kernel's error table: a check that the lowering adds (in debug mode, the bounds check of
a read of the cells' activity) takes the code it had when the frontend made it.

The layout of the SNodes (which levels are sparse, how a cell's activity is read, the shape
of the cells) is the language's: `sparse` below, which lang/sparse.py replaces by the object
that it fills (the frontend's `places.sparse`, which list cells use too); this module imports
neither lang/ nor the frontend. The activity test reads hidden fields through the builder
(ir/builder.py), so the lowering emits within a build context of its own.
"""
from __future__ import annotations

import contextlib

from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir.builder import BuildContext, building, emit, into
from fluxion.ir.expr import Expr


def _needs_lang(*args, **kwargs):
    raise TypeError("struct-fors need fluxion's language layer (import fluxion)")


class _Sparse:
    """What the language (lang/sparse.py) installs: `node_of(x)`, the SNode of a field, struct
    field or SNode; `levels(node)`, the sparse SNodes above it (none: a dense loop);
    `active_condition(node, indices, offset)`, the kernel value "the cells of the element at
    `indices` are active"; `block_shape(node, offset)`, how a loop visits cells of several
    elements (None: element by element)."""
    levels = node_of = active_condition = block_shape = staticmethod(_needs_lang)


sparse = _Sparse()


def run(kernel, cfg) -> bool:
    """Lower every struct-for and ndrange-for of the kernel and of its real functions, in the
    order the frontend made them; whether there was one."""
    loops = sorted((s for s in S.walk_all(kernel)
                    if isinstance(s, (S.StructForStmt, S.NdRangeForStmt))), key=lambda s: s.id)
    structs = [s for s in loops if isinstance(s, S.StructForStmt)]
    for loop in loops:
        if isinstance(loop, S.NdRangeForStmt):
            _lower_ndrange(loop, kernel, cfg)
            continue
        added = _lower(loop, kernel, cfg)
        if added and loop.errors_at is not None:
            _renumber_errors(kernel, loop.errors_at, added,
                             structs[structs.index(loop) + 1:])
    return bool(loops)


def flat_space(bounds, ip):
    """Emit the range [begin, end) (Exprs of type `ip`) of the range-for that runs the space
    `bounds` ([(begin, end)] per dimension, each an int or an Expr of type `ip`); returns
    them and the extents of the dimensions (None for one dimension: looped over directly)."""
    if not bounds:
        # a 0-D iteration space has exactly one point
        begin, end, exts = 0, 1, []
    elif len(bounds) == 1:
        (begin, end), exts = bounds[0], None
    else:
        begin = 0
        # an empty dimension (end <= begin) empties the whole space: without the clamp
        # two negative extents multiplied into a positive trip count
        exts = [_extent(b, e) for b, e in bounds]
        end = exts[0]
        for x in exts[1:]:
            end = end * x
    begin_e = E.cast(E.to_expr(begin, like=ip), ip)
    end_e = E.cast(E.to_expr(end, like=ip), ip)
    return begin_e, end_e, exts


def flat_indices(idx, exts, bounds):
    """Emit the indices of the point of `bounds` that the range-for of `flat_space` visits at
    index `idx` (the last dimension fastest)."""
    if exts is None:
        return [idx]
    return [v if isinstance(b, int) and b == 0 else v + b
            for v, (b, _) in zip(E.unflatten(idx, exts), bounds)]


def _extent(begin, end):
    """The number of indices in [begin, end), never negative."""
    if isinstance(begin, Expr) or isinstance(end, Expr):
        return E.binary("max", end - begin, 0)
    return max(end - begin, 0)


def _lower_ndrange(nd, kernel, cfg):
    """Replace ndrange-for `nd` by its range-for."""
    ip = nd.ret_type
    bounds = [tuple(Expr(v) if isinstance(v, S.Stmt) else v for v in pair)
              for pair in zip(nd.begins, nd.ends)]
    outer, pos = nd.parent, nd.parent.stmts.index(nd)
    head = S.Block()
    ctx = BuildContext(kernel, cfg)
    ctx.loc = nd.loc
    with building(ctx), into(head):
        begin_e, end_e, exts = flat_space(bounds, ip)
        loop = emit(S.RangeForStmt(begin_e.stmt, end_e.stmt, nd.parallel, nd.block_dim))
        with into(loop.body):
            idx = Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
            indices = flat_indices(idx, exts, bounds)
        _move_body(nd, loop.body, [i.stmt for i in indices])
    outer.stmts[pos:pos + 1] = head.stmts
    for s in head.stmts:
        s.parent = outer


def lower_one(loop, kernel, cfg):
    """Lower struct-for `loop`, which a later pass made (in a kernel whose struct-fors are
    lowered already: the scatter pass's merge over a sparse field's active cells)."""
    _lower(loop, kernel, cfg)


def _active(over):
    """(condition of indices, block shape) of a loop over `over` under sparse SNodes, or
    None."""
    node = sparse.node_of(over)
    if not sparse.levels(node):
        return None
    offset = None if node is over else over.offset
    return (lambda indices: sparse.active_condition(node, indices, offset),
            sparse.block_shape(node, offset))


def _lower(sf, kernel, cfg):
    """Replace struct-for `sf` by its range-for; returns how many entries the kernel's error
    table gained."""
    active = _active(sf.over)
    ip, bounds = sf.ret_type, list(sf.bounds)
    outer, pos = sf.parent, sf.parent.stmts.index(sf)
    errors = len(kernel.errors)
    head = S.Block()
    ctx = BuildContext(kernel, cfg)
    ctx.loc = sf.loc
    with building(ctx), into(head), contextlib.ExitStack() as nest:
        if not bounds:
            begin, end, exts = 0, 1, []
        elif len(bounds) == 1:
            (begin, end), exts = bounds[0], None
        else:
            # an empty dimension empties the whole space (no negative extents multiplied)
            exts = [max(e - b, 0) for b, e in bounds]
            begin, end = 0, _product(exts)
        # (not when serial: a `break` there must leave the whole loop)
        blocks = active[1] if active is not None and sf.parallel else None
        if blocks is not None:
            begin, end = 0, _product(blocks[0])
        begin_e = E.cast(E.to_expr(begin, like=ip), ip)
        end_e = E.cast(E.to_expr(end, like=ip), ip)
        loop = emit(S.RangeForStmt(begin_e.stmt, end_e.stmt, sf.parallel, sf.block_dim))
        nest.enter_context(into(loop.body))
        idx = Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
        condition = active[0] if active is not None else None
        if blocks is not None:
            indices = _enter_block(nest, idx, blocks, bounds, condition, ip)
            condition = None
        elif exts is None:
            indices = [idx]
        else:
            indices = [v + b if b else v for v, (b, _) in zip(E.unflatten(idx, exts), bounds)]
        cond = condition(indices) if condition is not None else None
        if cond is not None:
            nest.enter_context(into(emit(S.IfStmt(E.truth(cond).stmt)).then_block))
        _move_body(sf, ctx.block, [i.stmt for i in indices])
        if active is not None:
            # the element the body visits is in active cells where the body starts
            # (lang/sparse_writes.py: a write there activates nothing)
            node = sparse.node_of(sf.over)
            kernel.visited_cells.append((tuple(i.stmt for i in indices), node,
                                         None if node is sf.over else sf.over.offset,
                                         ctx.block))
    outer.stmts[pos:pos + 1] = head.stmts
    for s in head.stmts:
        s.parent = outer
    return len(kernel.errors) - errors


def _move_body(sf, block, indices):
    """The body of `sf` (a struct-for or an ndrange-for) into `block`, its indices replaced
    by `indices`."""
    for s in S.walk(sf.body):
        for o in s.operands():
            if isinstance(o, S.StructIndexStmt) and o.loop is sf:
                s.replace_operand(o, indices[o.axis])
    for s in sf.body.stmts:
        if not (isinstance(s, S.StructIndexStmt) and s.loop is sf):
            block.append(s)
    block.stop_gradients = tuple(block.stop_gradients) + tuple(sf.body.stop_gradients)


def _renumber_errors(kernel, at, added, later):
    """Move the last `added` entries of the kernel's error table to position `at`, where the
    frontend made them before the loop's body, and renumber the checks."""
    n = len(kernel.errors) - added
    kernel.errors[at:at] = kernel.errors[n:]
    del kernel.errors[n + added:]

    def moved(code):
        if code >= n:
            return code - n + at
        return code + added if code >= at else code

    for s in S.walk_all(kernel):
        if isinstance(s, S.AssertStmt):
            s.code = moved(s.code)
    for loop in later:
        if loop.errors_at is not None:
            loop.errors_at += added


def _product(ns):
    out = 1
    for n in ns:
        out *= n
    return out


def _enter_block(nest, idx, blocks, bounds, active, ip):
    """In a loop whose index `idx` numbers the cells of a sparse node (`blocks`:
    sparse.block_shape's (cells, elements per cell), and for a list the count of a cell's
    elements (of the cell's first index), and where given the test of a cell and that of an
    element): enter (on ExitStack `nest`) the test of the cell's activity and a serial loop
    over its elements, and the element's test; their indices."""
    cells, per = blocks[:2]
    first = [c * e for c, e in zip(E.unflatten(idx, cells), per)]
    origin = [o + b if b else o for o, (b, _) in zip(first, bounds)]
    test = blocks[3] if len(blocks) > 3 else active
    nest.enter_context(into(emit(S.IfStmt(E.truth(test(origin)).stmt)).then_block))
    fixed = len(blocks) < 3 or blocks[2] is None
    if fixed and len(blocks) > 4 and sum(n > 1 for n in per) > 1:
        # a cell of several dimensions whose elements are tested one by one (a bitmasked
        # level's): one serial loop per dimension (the last innermost, so the elements come
        # in the same order) rather than one over their product, whose index each element
        # would split by division; LLVM then steps every address by a constant (a 2048^2
        # stencil over 16^2 blocks: 0.64 ms to 0.29). Not where the elements are not
        # tested: LLVM vectorizes the single loop over a dense cell's contiguous elements,
        # and nested loops made a sum over them 3x slower. Nor a list's cells (a count
        # known in the kernel) or cells of one dimension
        local = []
        for n in per:
            if n == 1:
                local.append(E.const(0, ip))
                continue
            inner = emit(S.RangeForStmt(E.const(0, ip).stmt, E.const(n, ip).stmt, False, None))
            nest.enter_context(into(inner.body))
            local.append(Expr(emit(S.LoopIndexStmt(inner, ret_type=ip))))
    else:
        count = E.const(_product(per), ip) if fixed else E.cast(E.to_expr(blocks[2](first)), ip)
        inner = emit(S.RangeForStmt(E.const(0, ip).stmt, count.stmt, False, None))
        nest.enter_context(into(inner.body))
        local = E.unflatten(Expr(emit(S.LoopIndexStmt(inner, ret_type=ip))), per)
    out = [o + v for o, v in zip(origin, local)]
    if len(blocks) > 4:
        nest.enter_context(into(emit(S.IfStmt(E.truth(blocks[4](out)).stmt)).then_block))
    return out
