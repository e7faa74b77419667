"""Iteration spaces of kernel `for` loops: `range`, `ti.ndrange`, `ti.grouped`, fields."""
from __future__ import annotations

import itertools

from fluxion.frontend.matrix import Vector
from fluxion.frontend.places import SNodeBase, sparse
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr, unflatten


def _int_bound(x):
    """An ndrange bound: an integer (Python, numpy or kernel value). A float is refused, not
    truncated: `ti.ndrange((1.1, 10.5))` silently ran over 1..9."""
    import numbers
    # (the messages begin with the original system's words)
    if isinstance(x, Expr):
        if x.dtype.is_float:
            raise FluxionTypeError(f"Every argument of ndrange should be an integer scalar or a "
                                   f"tuple/list of (int, int): ti.ndrange bounds are integers; "
                                   f"got a {x.dtype} value (cast it with ti.cast(x, ti.i32))")
        return x
    if isinstance(x, numbers.Integral):
        return int(x)
    raise FluxionTypeError(f"Every argument of ndrange should be an integer scalar or a "
                           f"tuple/list of (int, int): ti.ndrange bounds are integers, got "
                           f"{x!r} (a float is not truncated)")


class ndrange:  # noqa: N801  (the original system's name)
    """`ti.ndrange(4, (1, 5))`: a product of ranges; each dimension is `n` or `(begin, end)`."""

    def __init__(self, *dims):
        self.bounds = []
        for d in dims:
            if isinstance(d, (tuple, list)):
                if len(d) != 2:
                    raise FluxionSyntaxError(
                        f"Every argument of ndrange should be a scalar or a tuple/list like "
                        f"(begin, end): got {tuple(d)!r}")
                self.bounds.append((_int_bound(d[0]), _int_bound(d[1])))
            else:
                self.bounds.append((0, _int_bound(d)))

    @property
    def dimensions(self):
        out = []
        for b, e in self.bounds:
            n = e - b
            out.append(n if isinstance(n, Expr) else max(n, 0))   # (5, 2) is empty, not -3
        return out

    def __iter__(self):
        if any(isinstance(x, Expr) for b in self.bounds for x in b):
            raise TypeError("ndrange with kernel values can only be iterated inside a kernel")
        return itertools.product(*(range(b, e) for b, e in self.bounds))

    def grouped(self):
        return GroupedNdrange(self)


class GroupedNdrange:
    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        for idx in self.inner:
            yield Vector(list(idx))


def grouped(x):
    """`for I in ti.grouped(x)`: iterate a field or an ndrange with one index vector."""
    if isinstance(x, ndrange):
        return GroupedNdrange(x)
    if isinstance(x, GroupedNdrange):
        return x
    return GroupedField(x)


class GroupedField:
    def __init__(self, field):
        self.field = field


def field_bounds(field):
    """Of a field, a struct field or an SNode (whose index space starts at 0)."""
    off = getattr(field, "offset", None) or (0,) * len(field.shape)
    return [(o, o + n) for o, n in zip(off, field.shape)]


def active_filter(x):
    """For a library loop over the elements of `x` (a field, struct field or SNode) under
    sparse SNodes (emit_index_loop): of the loop's indices, the kernel value "the element's
    cells are active"; None when `x` is under no sparse SNode. (A struct-for's test is made
    where it is lowered: passes/lower_struct_for.py.)"""
    node = x if isinstance(x, SNodeBase) else sparse.node_of(x)
    if not sparse.levels(node):
        return None
    offset = None if isinstance(x, SNodeBase) else x.offset
    return lambda indices: sparse.active_condition(node, indices, offset)


def emit_index_loop(bounds, body, active=None):
    """Emit, inside a kernel, a loop over the index space `bounds` ([(begin, end)] of Python
    ints) calling `body(indices)` (kernel values) for each point; for library code that
    loops (`x.fill(v)` in a kernel). A top-level loop runs in parallel, like a struct-for."""
    ctx = builder.current()
    ip = ctx.cfg.default_ip
    exts = [max(e - b, 0) for b, e in bounds]
    total = 1
    for n in exts:
        total *= n
    parallel = ctx.block is ctx.ir.body and not ctx.in_parallel_loop
    loop = emit(S.RangeForStmt(E.const(0, ip).stmt, E.const(total, ip).stmt, parallel, None))
    saved = ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop
    if parallel:
        ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop = True, 0, loop
    else:
        ctx.loop_depth += 1
    try:
        with into(loop.body):
            linear = Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
            idx = [v + b if b else v for v, (b, _) in zip(unflatten(linear, exts), bounds)]
            cond = active(idx) if active is not None else None
            if cond is None:
                body(idx)
            else:
                with into(emit(S.IfStmt(E.truth(cond).stmt)).then_block):
                    body(idx)
    finally:
        ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop = saved
