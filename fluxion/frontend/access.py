"""Field element access inside kernels: `x[i, j]` -> GlobalPtr + GlobalLoad per component.

Each loaded value remembers its pointer (`Expr.lvalue`), so `x[i] = v`, `x[i] += v` and
`ti.atomic_add(x[i], v)` store through it and the unused load is removed by dead code
elimination.
"""
from __future__ import annotations

from fluxion.frontend import builder
from fluxion.frontend import expr as E
from fluxion.frontend.builder import emit
from fluxion.frontend.expr import Expr
from fluxion.ir import stmts as S
from fluxion.lang.exceptions import FluxionIndexError
from fluxion.lang.matrix import Matrix


def _name(field, label):
    return f"'{field.name}'" if field.name else (f"'{label}'" if label else field._label())


def normalize_index(field, index, label=None):
    if index is None:
        index = ()
    elif isinstance(index, Matrix):
        index = tuple(index.entries)
    elif not isinstance(index, tuple):
        index = (index,)
    flat = []
    for k in index:
        if isinstance(k, Matrix):
            flat.extend(k.entries)
        else:
            flat.append(k)
    shape = field.shape
    if len(flat) != len(shape):
        raise FluxionIndexError(
            f"field {_name(field, label)} has {len(shape)} dimensions but is indexed with {len(flat)} "
            f"indices" + (" (use x[None] for a 0-D field)" if not shape else ""))
    ip = builder.current().cfg.default_ip
    out = []
    for k in flat:
        if isinstance(k, float) or (isinstance(k, Expr) and k.dtype.is_float):
            raise FluxionIndexError(f"field {_name(field, label)} indexed with a float")
        out.append(E.cast(E.to_expr(k, like=ip), ip) if isinstance(k, Expr) else E.const(k, ip))
    return out


def field_access(field, index, label=None):
    field._materialize()
    idx = normalize_index(field, index, label)
    ctx = builder.current()
    if ctx.cfg.check_out_of_bound:
        _bounds_check(field, idx, label)
    loads = []
    for place in field.places:
        ptr = emit(S.GlobalPtrStmt([i.stmt for i in idx], place, ret_type=place.dtype))
        loads.append(Expr(emit(S.GlobalLoadStmt(ptr, ret_type=place.dtype)), lvalue=ptr))
    if field.n is None:
        return loads[0]
    return Matrix._make(loads, field.n, field.m, field.ndim)


def _bounds_check(field, idx, label):
    ctx = builder.current()
    shape = field.shape
    off = field.offset or (0,) * len(shape)
    conds = None
    for k, (i, n, o) in enumerate(zip(idx, shape, off)):
        c = E.truth((i >= o) & (i < o + n))
        conds = c if conds is None else conds & c
    if conds is None or E.const_of(conds.stmt) == 1:
        return
    code = len(ctx.ir.errors)
    ctx.ir.errors.append((f"index {{}} out of bounds for field {_name(field, label)} of shape {shape}"
                          + (f" and offset {off}" if field.offset else ""), ctx.loc, len(idx)))
    emit(S.AssertStmt(conds.stmt, [i.stmt for i in idx], code))
