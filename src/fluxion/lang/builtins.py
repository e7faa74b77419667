"""`ti.sin`, `ti.cast`, `ti.atomic_add`, ...: the builtins the frontend emits live in
frontend/builtins.py; this module names them for the language and adds `ti.stop_grad`, which
knows the language's fields."""
from __future__ import annotations

from fluxion.frontend.access import ArrayValue
from fluxion.frontend.builtins import (
    _elementwise, abs, acos, asin, atan, atan2, atomic_add, atomic_and, atomic_max, atomic_min,
    atomic_mul, atomic_or, atomic_sub, atomic_update, atomic_xor, bit_and, bit_cast, bit_not,
    bit_or, bit_sar, bit_shl, bit_xor, cast, ceil, cos, exp, floor, ifte, log, logical_not, max,
    min, pow, random, round, rsqrt, select, sin, sqrt, static, tan, tanh, truth)
from fluxion.ir import builder
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionSyntaxError
from fluxion.ir.expr import Expr
from fluxion.lang.field import Field

__all__ = [
    "_elementwise", "abs", "acos", "asin", "atan", "atan2", "atomic_add", "atomic_and",
    "atomic_max", "atomic_min", "atomic_mul", "atomic_or", "atomic_sub", "atomic_update",
    "atomic_xor", "bit_and", "bit_cast", "bit_not", "bit_or", "bit_sar", "bit_shl", "bit_xor",
    "cast", "ceil", "cos", "exp", "floor", "ifte", "log", "logical_not", "max", "min", "pow",
    "random", "round", "rsqrt", "select", "sin", "sqrt", "static", "stop_grad", "tan", "tanh",
    "truth"]


def stop_grad(x):
    """`ti.stop_grad(field)`: the field's (or ndarray's) reads in the current block and the
    blocks nested in it pass no gradient on (its grad stays untouched), in both modes, wherever
    in the block the read is. `ti.stop_grad(expr)`: the value of expr, through which no
    gradient flows."""
    if isinstance(x, (Field, ArrayValue)):
        if not builder.in_kernel():
            raise FluxionSyntaxError("ti.stop_grad(field) marks the reads of a kernel: call it "
                                     "inside a kernel or ti.func")
        target = x.arg if isinstance(x, ArrayValue) else x
        blk = builder.current().block
        blk.stop_gradients = tuple(blk.stop_gradients) + (target,)
        return None
    return _stop_grad_value(x)


@_elementwise
def _stop_grad_value(x):
    if isinstance(x, Expr) and x.dtype.is_float:
        return Expr(builder.emit(S.UnaryOpStmt(x.stmt, "stop_grad", ret_type=x.dtype)))
    return x
