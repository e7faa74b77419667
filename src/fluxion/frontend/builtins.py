"""Builtin functions of the language (`ti.sin`, `ti.atomic_add`, `ti.select`, ...).

Each works in Python scope on numbers, element-wise on `Matrix`, and inside kernels on `Expr`
by emitting IR, so the same function object serves both scopes. They live in the frontend
because the transformer emits them (casts, truth tests, atomics); lang/builtins.py re-exports
them as `ti.*`.
"""
from __future__ import annotations

import builtins as _py
import math as _math

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionCompilationError, FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.ir.ops import Op
from fluxion.ir.ops import _wrap_int


class Elementwise:
    """A value the builtins apply to entry by entry: it has `entries`, `shape` and
    `_like(entries)` (the matrices of frontend/matrix.py, which use the builtins and so are
    not imported here)."""
    __slots__ = ()


def _elementwise(fn):
    def wrapper(*args, **kwargs):
        # keywords (`ti.round(x, dtype=ti.i32)`) apply alike to every element
        mats = [a for a in args if isinstance(a, Elementwise)]
        if mats:
            shape = mats[0]
            for m in mats[1:]:
                if m.shape != shape.shape:
                    # (zipping the entries dropped the longer one's last ones)
                    raise FluxionTypeError(f"Cannot broadcast tensor to tensor: "
                                           f"{fn.__name__} of shapes {shape.shape} and {m.shape}")
            cols = [a.entries if isinstance(a, Elementwise) else [a] * len(shape.entries) for a in args]
            return shape._like([wrapper(*xs, **kwargs) for xs in zip(*cols)])
        return fn(*args, **kwargs)
    wrapper.__name__ = fn.__name__
    return wrapper


def _unary(op, pyfn):
    def f(x):
        if isinstance(x, Expr):
            return E.unary(op, x)
        return pyfn(x)
    f.__name__ = op
    return _elementwise(f)


def _rsqrt(x):
    return 1.0 / _math.sqrt(x)


sin = _unary("sin", _math.sin)
cos = _unary("cos", _math.cos)
tan = _unary("tan", _math.tan)
asin = _unary("asin", _math.asin)
acos = _unary("acos", _math.acos)
atan = _unary("atan", _math.atan)
tanh = _unary("tanh", _math.tanh)
exp = _unary("exp", _math.exp)
log = _unary("log", _math.log)
sqrt = _unary("sqrt", _math.sqrt)
rsqrt = _unary("rsqrt", _rsqrt)
abs = _unary("abs", _py.abs)  # noqa: A001
logical_not = _unary("logic_not", lambda x: int(not x))
bit_not = _unary("bit_not", lambda x: ~x)


def _rounding(op, pyfn):
    @_elementwise
    def f(x, dtype=None):
        if isinstance(x, Expr):
            r = E.unary(op, x)
        else:
            r = float(pyfn(x))
        return cast(r, dtype) if dtype is not None else r
    f.__name__ = op
    return f


floor = _rounding("floor", _math.floor)
ceil = _rounding("ceil", _math.ceil)
# a Python number rounds as NumPy rounds it (half to even: round(2.5) is 2.0), in Python
# scope and inside kernels alike, as the original computes it; a kernel value rounds half
# away from zero (ir/ops.py), as the original's code does
round = _rounding("round", lambda x: _math.copysign(_py.round(x), x))  # noqa: A001


def _binary(op, pyfn):
    def f(a, b):
        if isinstance(a, Expr) or isinstance(b, Expr):
            return E.binary(op, a, b)
        return pyfn(a, b)
    f.__name__ = op
    return _elementwise(f)


atan2 = _binary("atan2", _math.atan2)
pow = _binary("pow", lambda a, b: a ** b)  # noqa: A001
_min2 = _binary("min", _py.min)
_max2 = _binary("max", _py.max)
bit_and = _binary("bit_and", lambda a, b: a & b)
bit_or = _binary("bit_or", lambda a, b: a | b)
bit_xor = _binary("bit_xor", lambda a, b: a ^ b)
bit_shl = _binary("shl", lambda a, b: a << b)
bit_sar = _binary("shr", lambda a, b: a >> b)


def _variadic(two, args):
    """`ti.min`/`ti.max` of any number of arguments, folded from the right as the original
    does (`max(a, max(b, c))`): with mixed types the order decides each step's promoted type
    (`ti.max(i8(-27), u16(10), 5)` is 10; folded from the left the i8 turned into u16 first
    and the result was 65509). One argument is returned as it is, a vector included."""
    if len(args) == 1:
        return args[0]
    acc = args[-1]
    for a in reversed(args[:-1]):
        acc = two(a, acc)
    return acc


def min(*args):  # noqa: A001
    return _variadic(_min2, args)


def max(*args):  # noqa: A001
    return _variadic(_max2, args)


@_elementwise
def cast(x, dtype):
    dtype = T.normalize(dtype)
    if isinstance(x, Expr):
        return E.cast(x, dtype)
    if builder.in_kernel():
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            # an integer literal becomes a constant of `dtype` directly: through the default
            # int type first, `ti.cast(2**40, ti.i64)` (or `ti.u64(2**63)`) would wrap to 0
            return E.const(int(x), dtype)
        return E.cast(E.to_expr(x), dtype)
    if not dtype.is_float and isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        # wraps around as in a kernel (and in the original): ti.i16(65537) is 1, ti.u8(-1) 255
        return _wrap_int(int(x), dtype)
    return dtype.np_dtype.type(x).item()


def _call_type(dtype, *args):
    # `ti.f32(x)` inside a kernel is a cast; in Python scope it converts a number.
    # A Python number in a kernel becomes a constant of this type directly, as in the
    # original system: `ti.f64(1.2345e300)` is that f64 (`ti.cast(1.2345e300, ti.f64)`
    # goes through the default float type there, and overflows in f32).
    x = args[0]
    if dtype.is_float and isinstance(x, float) and builder.in_kernel():
        return E.const(x, dtype)
    return cast(x, dtype)


T._hooks.call = _call_type


@_elementwise
def bit_cast(x, dtype):
    dtype = T.normalize(dtype)
    if isinstance(x, Expr):
        return E.bit_cast(x, dtype)
    return np.array(x).view(dtype.np_dtype).item()


@_elementwise
def select(cond, a, b):
    if isinstance(cond, Expr) or isinstance(a, Expr) or isinstance(b, Expr):
        return E.select(cond, a, b)
    return a if cond else b


def ifte(cond, a, b):
    return select(cond, a, b)


def truth(x):
    if isinstance(x, Expr):
        return E.truth(x)
    return int(bool(x))


def random(dtype=float):
    dtype = T.normalize(dtype)
    if not builder.in_kernel():
        return np.random.random() if dtype.is_float else np.random.randint(0, 2**31)
    return Expr(builder.emit(S.RandStmt(ret_type=dtype)))


def static(x, *xs):
    """Evaluate at compile time: `if ti.static(cond)`, `for i in ti.static(range(3))`."""
    if isinstance(x, Expr) or any(isinstance(v, Expr) for v in xs):
        raise FluxionSyntaxError("ti.static() needs a value known at compile time: its "
                                 "arguments must be compile-time constants, not kernel values")
    if xs:
        return (x,) + xs
    return x


def static_assert(cond, msg=None):
    if isinstance(cond, Expr):
        # (the original's words, which its tests match)
        raise FluxionTypeError("Static assert with non-static condition: ti.static_assert "
                               "needs a condition known at compile time")
    if not cond:
        raise FluxionCompilationError(f"static assertion failed{': ' + msg if msg else ''}")


class template:  # noqa: N801  (the original system's name)
    """Annotation of a compile-time argument: a field, or any Python value."""

    def __init__(self, tensor=None, dim=None):
        pass


def is_template(ann):
    return ann is template or isinstance(ann, template)


def loop_config(*, serialize=False, block_dim=None, parallelize=None, block_dim_adaptive=True,
                bit_vectorize=False):
    """Configure the next for loop of a kernel (`serialize=True` runs it in order)."""
    # only meaningful inside a kernel, where the frontend intercepts the call
    return None


# -- atomics ---------------------------------------------------------------------------------
def _atomic(op, pyop):
    def f(x, y):
        if isinstance(x, Elementwise):
            ys = y.entries if isinstance(y, Elementwise) else [y] * len(x.entries)
            return x._like([f(a, b) for a, b in zip(x.entries, ys)])
        if not isinstance(x, Expr) or x.lvalue is None:
            raise FluxionSyntaxError(
                f"cannot use a non-writable target as the first operand of '{name}': "
                f"ti.{name}() updates a field or array element or a local variable")
        return atomic_update(op, x, y)
    name = {"bit_and": "atomic_and", "bit_or": "atomic_or", "bit_xor": "atomic_xor"}.get(
        op, f"atomic_{op}")
    f.__name__ = name
    return f


def atomic_update(op, target, value):
    """Apply `op` to the location behind `target` (an Expr with an lvalue); return the old value."""
    ptr = target.lvalue
    value = E.cast(E.to_expr(value, like=target.dtype), target.dtype)
    if isinstance(ptr, S.AllocaStmt) and not builder.shared_by_iterations(ptr):
        old = Expr(builder.emit(S.LocalLoadStmt(ptr, ret_type=target.dtype)))
        new = {"add": lambda: old + value, "sub": lambda: old - value,
               "min": lambda: _min2(old, value), "max": lambda: _max2(old, value),
               "bit_and": lambda: old & value, "bit_or": lambda: old | value,
               "bit_xor": lambda: old ^ value, "mul": lambda: old * value}[op]()
        builder.emit(S.LocalStoreStmt(ptr, E.cast(new, target.dtype).stmt))
        return old
    if op == Op.SUB:
        # one read-modify-write: atomic add of the negation (exact for ints and floats)
        return Expr(builder.emit(S.AtomicOpStmt(ptr, (-value).stmt, "add", ret_type=target.dtype)))
    if op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR) and target.dtype.is_float:
        raise FluxionTypeError(f"atomic bit operation on a float field element ({target.dtype})")
    return Expr(builder.emit(S.AtomicOpStmt(ptr, value.stmt, op, ret_type=target.dtype)))


atomic_add = _atomic("add", None)
atomic_sub = _atomic("sub", None)
atomic_min = _atomic("min", None)
atomic_max = _atomic("max", None)
atomic_and = _atomic("bit_and", None)
atomic_or = _atomic("bit_or", None)
atomic_xor = _atomic("bit_xor", None)
atomic_mul = _atomic("mul", None)
