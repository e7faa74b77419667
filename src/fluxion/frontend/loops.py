"""Iteration spaces of kernel `for` loops: `range`, `ti.ndrange`, `ti.grouped`, fields."""
from __future__ import annotations

import itertools
import numbers

from fluxion.frontend.matrix import Vector
from fluxion.ir import builder
from fluxion.ir import stmts as S
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr


def _int_bound(x):
    """An ndrange bound: an integer (Python, numpy or kernel value). A float is refused, not
    truncated: `ti.ndrange((1.1, 10.5))` silently ran over 1..9."""
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


def emit_index_loop(over, body):
    """Emit, inside a kernel, a struct-for over the elements of `over` (a field or struct
    field) calling `body(indices)` (kernel values) for each; for library code that loops
    (`x.fill(v)` in a kernel). A top-level loop runs in parallel. Like the user's struct-fors
    it is lowered by passes/lower_struct_for.py, which visits only the active cells of a
    sparse field (block by block)."""
    ctx = builder.current()
    ip = ctx.cfg.default_ip
    bounds = [(int(b), int(e)) for b, e in field_bounds(over)]
    parallel = ctx.block is ctx.ir.body and not ctx.in_parallel_loop
    loop = emit(S.StructForStmt(over, bounds, False, parallel, None, ret_type=ip,
                                errors_at=len(ctx.ir.errors)))
    saved = ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop
    if parallel:
        ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop = True, 0, loop
    else:
        ctx.loop_depth += 1
    try:
        with into(loop.body):
            body([Expr(emit(S.StructIndexStmt(loop, k, ret_type=ip)))
                  for k in range(len(bounds))])
    finally:
        ctx.in_parallel_loop, ctx.loop_depth, ctx.parallel_loop = saved
