"""A store in a kernel through the lvalues of a value (`a = b`, `v.fill(c)`, `s.x = v`).

A scalar kernel value stores here; a vector, matrix or struct value (and a sparse matrix
builder's entry) stores through its own type's `_kernel_store`, entry by entry, back into
`store_value`. So the value types, which store in their own methods, need not import the
modules that visit assignments, which build on them.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit
from fluxion.ir.errors import FluxionSyntaxError
from fluxion.ir.expr import Expr


def store_value(target, value):
    """Store `value` through the lvalues of `target` (a scalar, matrix or struct value)."""
    hook = getattr(type(target), "_kernel_store", None)
    if hook is not None:
        hook(target, value)
        return
    if not isinstance(target, Expr) or target.lvalue is None:
        raise FluxionSyntaxError("this expression cannot be assigned to")
    v = E.cast(E.to_expr(value, like=target.dtype), target.dtype)
    if isinstance(target.lvalue, S.AllocaStmt):
        emit(S.LocalStoreStmt(target.lvalue, v.stmt))
    else:
        emit(S.GlobalStoreStmt(target.lvalue, v.stmt))


def unify_types(values):
    """The type of one result entry given what each `return` gives for it: the promotion of
    the typed values; a literal adopts that type unless it is a float meeting integers."""
    typed, literals = None, []
    for v in values:
        if isinstance(v, Expr):
            t = v.dtype
        elif isinstance(v, (np.number, np.bool_)):
            t = T.from_numpy_dtype(v.dtype)
        else:
            literals.append(v)
            continue
        typed = t if typed is None else T.promote(typed, t)
    for v in literals:
        lt = E.literal_type(v)
        if typed is None:
            typed = lt
        elif lt.is_float and not typed.is_float:
            typed = T.promote(typed, lt)
    return typed


def tensor_text(m):
    """A matrix's type as the original system writes it: [Tensor (3) i32]."""
    types = [e.dtype if isinstance(e, Expr) else E.literal_type(e) for e in m.entries
             if isinstance(e, (Expr, int, float))]
    dt = unify_types(m.entries) if types else None
    return f"[Tensor ({', '.join(str(n) for n in m.shape)}) {dt}]"
