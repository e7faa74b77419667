"""`Expr`: a scalar IR value seen from Python, with operators that emit IR: the typed layer of
the builder, used by the frontend to build kernels and by autodiff to build their adjoints.

Kernel bodies are executed by the frontend: Python operators on `Expr` emit statements into the
current block, while operators on plain Python numbers are evaluated by Python (so compile-time
arithmetic folds for free). A Python literal in an operation has the default type of its kind
and then promotes, as in the original system (`x_u8 - 1` is the i32 -1); see `operand`.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from fluxion.ir import builder
from fluxion.ir import ops as O
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionRuntimeError, FluxionSyntaxError, FluxionTypeError
from fluxion.ir.ops import Op


class Expr:
    __slots__ = ("stmt", "lvalue")

    def __init__(self, stmt, lvalue=None):
        self.stmt = stmt
        # what an assignment to this expression writes: an AllocaStmt or a GlobalPtrStmt
        self.lvalue = lvalue

    @property
    def dtype(self):
        return self.stmt.ret_type

    def __repr__(self):
        return f"Expr(${self.stmt.id}: {self.dtype})"

    def __bool__(self):
        raise FluxionSyntaxError(
            "a kernel value has no truth value at compile time; use it in `if`/`while` "
            "directly, or ti.select(...)")

    def __hash__(self):
        return id(self)

    # arithmetic
    def __add__(self, o): return _bin("add", self, o)
    def __radd__(self, o): return _bin("add", o, self, o)
    def __sub__(self, o): return _bin("sub", self, o)
    def __rsub__(self, o): return _bin("sub", o, self, o)
    def __mul__(self, o): return _bin("mul", self, o)
    def __rmul__(self, o): return _bin("mul", o, self, o)
    def __truediv__(self, o): return _bin("truediv", self, o)
    def __rtruediv__(self, o): return _bin("truediv", o, self, o)
    def __floordiv__(self, o): return _bin("floordiv", self, o)
    def __rfloordiv__(self, o): return _bin("floordiv", o, self, o)
    def __mod__(self, o): return _bin("mod", self, o)
    def __rmod__(self, o): return _bin("mod", o, self, o)
    def __pow__(self, o): return _bin("pow", self, o)
    def __rpow__(self, o): return _bin("pow", o, self, o)
    def __and__(self, o): return _bin("bit_and", self, o)
    def __rand__(self, o): return _bin("bit_and", o, self, o)
    def __or__(self, o): return _bin("bit_or", self, o)
    def __ror__(self, o): return _bin("bit_or", o, self, o)
    def __xor__(self, o): return _bin("bit_xor", self, o)
    def __rxor__(self, o): return _bin("bit_xor", o, self, o)
    def __lshift__(self, o): return _bin("shl", self, o)
    def __rlshift__(self, o): return _bin("shl", o, self, o)
    def __rshift__(self, o): return _bin("shr", self, o)
    def __rrshift__(self, o): return _bin("shr", o, self, o)
    def __lt__(self, o): return _bin("cmp_lt", self, o)
    def __le__(self, o): return _bin("cmp_le", self, o)
    def __gt__(self, o): return _bin("cmp_gt", self, o)
    def __ge__(self, o): return _bin("cmp_ge", self, o)
    def __eq__(self, o): return _bin("cmp_eq", self, o)
    def __ne__(self, o): return _bin("cmp_ne", self, o)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return self
    def __invert__(self): return unary("bit_not", self)
    def __abs__(self): return unary("abs", self)


def _bin(op, a, b, other=None):
    o = b if other is None else other
    if hasattr(o, "entries"):
        # a vector or matrix operand: let its reflected operator broadcast over its entries
        return NotImplemented
    return binary(op, a, b)


def is_value(x):
    return isinstance(x, Expr)


def const(value, dtype):
    value = O._to_type(value, dtype)
    return Expr(builder.emit(S.ConstStmt(value, ret_type=dtype)))


def const_of(stmt):
    return stmt.value if isinstance(stmt, S.ConstStmt) else None


def _const(x):
    """The constant value of Expr `x` as the operations here fold it as they are built: none
    for a variable's value (an Expr with an lvalue). A local's read is the value stored, a
    constant too (ir/builder.py's known_value), where it used to be a load: so what is built
    from it is what was built from the load (`n = 3; y = x ** n` stays a `pow`, a check of an
    index or divisor stays), and simplify folds it as before."""
    return None if x.lvalue is not None else const_of(x.stmt)


def literal_type(value):
    cfg = builder.current().cfg
    if isinstance(value, bool):
        return cfg.default_ip
    if isinstance(value, int):
        return cfg.default_ip
    if isinstance(value, float):
        return cfg.default_fp
    if isinstance(value, np.generic) and value.dtype.kind in "iuf":
        return T.from_numpy_dtype(value.dtype)     # (an entry of a typed Python-scope vector)
    # (the original's words first: this is what an operator on such a value meets)
    raise FluxionTypeError(f"unsupported operand type: {type(value).__name__} value {value!r} "
                           f"cannot be used as a kernel value"
                           + ("; index the field (x[None], x[i]) for its elements' values"
                              if hasattr(value, "snode") else ""))


def check_int_literal(x):
    """An int literal that takes the default integer type must fit it (else it would wrap)."""
    ip = builder.current().cfg.default_ip
    if not _fits(x, ip):
        raise FluxionTypeError(
            f"Integer literal {x} exceeded the range of default_ip: {ip}, please specify the "
            f"dtype via e.g. `ti.u64({x})` or set a different `default_ip` in `ti.init()`")


def to_expr(x, like=None):
    """Make an Expr of `x`; a Python number adopts `like`'s type when that keeps its kind."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "biuf":
        x = x[()]          # a 0-d array (a global, a loop bound) is the scalar it holds
    if isinstance(x, np.generic):
        return const(x.item(), T.from_numpy_dtype(x.dtype))
    if like is not None and isinstance(x, (int, float, bool)):
        if like.is_float or isinstance(x, (int, bool)):
            if type(x) is int and not like.is_float and not _fits(x, like):
                check_int_literal(x)       # wraps in `like`: fine only as an i32-like literal
            return const(x, like)
    if type(x) is int:
        check_int_literal(x)
    return const(x, literal_type(x))


def cast(x, dtype):
    x = to_expr(x)
    if x.dtype is dtype:
        return x
    c = _const(x)
    if c is not None and _folds(x.dtype, dtype, "cast", c):
        v = O.eval_unary("cast", c, dtype)
        if v is not None:
            return const(v, dtype)
    return Expr(builder.emit(S.UnaryOpStmt(x.stmt, "cast", ret_type=dtype)))


def _folds(operand_type, result_type, op, *values):
    """Whether an operation on constants folds as the kernel is built: an integer one always
    (the evaluator refuses what it cannot compute exactly), a float one where the result is
    the one the target computes (ir/ops.py's `folds_exactly`; passes/fold.py's rule too)."""
    return not (operand_type.is_float or result_type.is_float) or O.folds_exactly(op, *values)


def bit_cast(x, dtype):
    x = to_expr(x)
    if x.dtype.bits != dtype.bits:
        raise FluxionTypeError(f"bit_cast from {x.dtype} to {dtype}: sizes differ")
    return Expr(builder.emit(S.UnaryOpStmt(x.stmt, "bit_cast", ret_type=dtype)))


# operations the original system defines on floating-point operands only (exp, log, sqrt
# convert an integer operand instead): ir/ops.py's `real_only`
REAL_ONLY = O.REAL_ONLY


def unary(op, x):
    x = to_expr(x)
    dtype = x.dtype
    if not _library.depth:
        if op in REAL_ONLY and not dtype.is_float:
            raise FluxionTypeError(f"'{op}' takes real inputs only, however '{dtype}' is "
                                   f"provided. Convert it first, e.g. ti.{op}(ti.cast(x, ti.f32))")
        if op in (Op.BIT_NOT, Op.LOGIC_NOT) and dtype.is_float:
            hint = "" if op == Op.BIT_NOT else " (`not x` of a float: write `x == 0`)"
            raise FluxionTypeError(f"'{op}' takes integral inputs only, however '{dtype}' is "
                                   f"provided{hint}")
    if op in O.UNARY_MATH and not dtype.is_float:
        dtype = builder.current().cfg.default_fp
        x = cast(x, dtype)
    if op == Op.LOGIC_NOT:
        dtype = T.i32
    if op in (Op.FLOOR, Op.CEIL, Op.ROUND) and not dtype.is_float:
        return x
    if op == Op.BIT_NOT and dtype.is_float:
        raise FluxionTypeError(f"bitwise not of a float ({dtype})")
    c = _const(x)
    if c is not None and _folds(x.dtype, dtype, op, c):
        v = O.eval_unary(op, c, dtype)
        if v is not None:
            return const(v, dtype)
    return Expr(builder.emit(S.UnaryOpStmt(x.stmt, op, ret_type=dtype)))


def _result_type(op, a, b):
    if op == Op.TRUEDIV:
        # as in the original system, an integer operand counts as the default float type:
        # an f16 divided by an integer is of default_fp
        fp = builder.current().cfg.default_fp
        return T.promote(a if a.is_float else fp, b if b.is_float else fp)
    if op == Op.ATAN2:
        # the original's rule: f64 where an operand is f64, else f32 (whatever default_fp
        # is: atan2 of two ints is f32 there under default_fp=f64, of two halves f32)
        return T.f64 if T.f64 in (a, b) else T.f32
    if op in (Op.SHL, Op.SHR):
        return a
    return T.promote(a, b)


def fits(v, dt):
    """Whether integer `v` is in the range of integer type `dt`."""
    return _fits(v, dt)


def _fits(v, dt):
    lo = -(1 << (dt.bits - 1)) if dt.is_signed else 0
    hi = (1 << (dt.bits - 1 if dt.is_signed else dt.bits)) - 1
    return lo <= v <= hi


class _Library(threading.local):
    depth = 0


_library = _Library()


def library_code(fn):
    """Mark a function of fluxion's own library (ti.math, decompositions): inside it, a
    literal takes the type of the other operand, so f64 inputs keep f64 constants (`1e-200`
    would be 0 as a default f32). User code follows the original system's rule (`operand`)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        _library.depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _library.depth -= 1
    return wrapped


def library_module(namespace):
    """Apply library_code to the public functions a module defines (its `globals()`)."""
    name = namespace["__name__"]
    for key, fn in list(namespace.items()):
        if (callable(fn) and not key.startswith("_") and not isinstance(fn, type)
                and getattr(fn, "__module__", None) == name):
            namespace[key] = library_code(fn)


def operand(x, like):
    """A Python number `x` as the operand of an arithmetic op whose other operand has type
    `like`. A literal has the default type of its kind, as in the original system, and the
    usual promotion follows: `x_i8 + 200` is the i32 300, `x_u8 - 1` the i32 -1, `x_f16 * 0.5`
    an f32. (An int literal next to a float takes the float's type: the same value.) An int
    literal out of default_ip's range takes the other operand's integer type, else i64/u64."""
    if _library.depth and type(x) is float and like is not None and like.is_float:
        # a library literal keeps an f64 operand's precision, and widens an f16 one to the
        # default float type as the original's ti.math functions (whose literals and
        # arguments are of default_fp) do
        return to_expr(x, like=T.promote(like, builder.current().cfg.default_fp))
    if like is None or isinstance(x, (Expr, bool)) or not isinstance(x, (int, float)) \
            or _library.depth:
        return to_expr(x, like=like)
    if isinstance(x, float) or like.is_float:
        return to_expr(x, like=like if like.is_float and isinstance(x, int) else None)
    ip = literal_type(x)
    for dt in (ip, like, T.i64, T.u64):
        if not dt.is_float and _fits(x, dt):
            return const(x, dt)
    return const(x, ip)


def binary(op, a, b):
    ta = a.dtype if isinstance(a, Expr) else None
    tb = b.dtype if isinstance(b, Expr) else None
    if ta is None and tb is None:
        a, b = to_expr(a), to_expr(b)
    elif op == Op.TRUEDIV and (type(a) is int or type(b) is int):
        # an integer literal divides as the default float type, as an integer value does
        # (_result_type): `x_f16 / 3` is of default_fp (next to a wider float, of that one:
        # the literal's value stays exact)
        fp = builder.current().cfg.default_fp
        other = tb if type(a) is int else ta
        lt = T.promote(fp, other) if other is not None and other.is_float else fp
        a = const(a, lt) if type(a) is int else operand(a, tb)
        b = const(b, lt) if type(b) is int else operand(b, ta)
    else:
        a = operand(a, tb)
        b = operand(b, ta)
    if op == Op.POW:
        return _pow(a, b)
    rt = _result_type(op, a.dtype, b.dtype)
    if op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR, Op.SHL, Op.SHR) and (a.dtype.is_float or
                                                                 b.dtype.is_float):
        # (a float shift amount was truncated silently)
        raise FluxionTypeError(f"unsupported operand type(s) for '{O.SYMBOL[op]}': "
                               f"'{a.dtype}' and '{b.dtype}' (bit operations take integers)")
    if op in (Op.SHL, Op.SHR):
        b = cast(b, rt)
    else:
        a, b = cast(a, rt), cast(b, rt)
    out = T.i32 if op in O.COMPARISONS else rt
    # (_const, written out: this is the frontend's most frequent operation)
    ca = a.stmt.value if a.lvalue is None and type(a.stmt) is S.ConstStmt else None
    cb = b.stmt.value if b.lvalue is None and type(b.stmt) is S.ConstStmt else None
    if op in (Op.FLOORDIV, Op.MOD) and rt.is_int and (cb is None or cb == 0):
        ctx = builder.current()
        if ctx.cfg.debug:
            _check_divisor(ctx, op, b)
    if ca is not None and cb is not None and _folds(a.dtype, out, op, ca, cb):
        v = O.eval_binary(op, ca, cb, out)
        if v is not None:
            return const(v, out)
    return Expr(builder.emit(S.BinaryOpStmt(a.stmt, b.stmt, op, ret_type=out)))


DIVISION_BY_ZERO = "division by zero"   # the error table's kind of this check


def _check_divisor(ctx, op, b):
    """Debug mode: integer `//` and `%` by zero stop the kernel with a ZeroDivisionError
    (without debug they give 0, as the lowering defines them)."""
    zero = const(0, b.dtype)
    ok = Expr(builder.emit(S.BinaryOpStmt(b.stmt, zero.stmt, "cmp_ne", ret_type=T.i32)))
    code = len(ctx.ir.errors)
    what = "division" if op == Op.FLOORDIV else "modulo"
    ctx.ir.errors.append((f"integer {what} by zero", ctx.loc, DIVISION_BY_ZERO))
    builder.emit(S.AssertStmt(ok.stmt, [], code))


def _pow(a, b):
    cb = _const(b)
    # the original's rule: an integer exponent keeps the base's type (`x_f16 ** -1` is an
    # f16, `x_i8 ** n_i64` an i8), a float one promotes (`x_f16 ** 0.5` is of default_fp)
    rt = a.dtype if b.dtype.is_int else T.promote(a.dtype, b.dtype)
    # small constant integer exponents become multiplications: exact and fast
    if cb is not None and float(cb).is_integer() and 0 <= cb <= 16:
        n = int(cb)
        a = cast(a, rt)
        if n == 0:
            return const(1, rt)
        result, base = None, a
        while n:
            if n & 1:
                result = base if result is None else binary("mul", result, base)
            n >>= 1
            if n:
                base = binary("mul", base, base)
        return result
    if cb is not None and float(cb) == 0.5 and rt.is_float:
        return unary("sqrt", cast(a, rt))
    if cb is not None and float(cb) == -1.0 and rt.is_float:
        return binary("truediv", const(1, rt), cast(a, rt))
    if rt.is_int:
        # an integer power with a negative exponent has no integer value: refused as in the
        # original system (at compile time for a constant; checked at run time in debug mode)
        msg = "Negative exponent in pow(int, int) is not allowed"
        if cb is not None and cb < 0:
            raise FluxionRuntimeError(f"{msg}: {a.dtype} ** {cb} (cast the base to a float "
                                      f"for a fractional result)")
        ctx = builder.current()
        if cb is None and ctx.cfg.debug and b.dtype.is_signed:
            ok = Expr(builder.emit(S.BinaryOpStmt(b.stmt, const(0, b.dtype).stmt, "cmp_ge",
                                                  ret_type=T.i32)))
            code = len(ctx.ir.errors)
            ctx.ir.errors.append((f"{msg}: the exponent is negative", ctx.loc, []))
            builder.emit(S.AssertStmt(ok.stmt, [], code))
    # computed in a type that holds both operands (an i64 exponent of an i8 base, which
    # wraps the same either way; an f16's in f32, whose exponents are exact to 2**24), then
    # converted to the result's type
    wt = T.promote(rt, b.dtype) if rt.is_int else T.promote(rt, T.f32)
    a, b = cast(a, wt), cast(b, wt)
    return cast(Expr(builder.emit(S.BinaryOpStmt(a.stmt, b.stmt, "pow", ret_type=wt))), rt)


def select(cond, a, b):
    cond = to_expr(cond)
    ta = a.dtype if isinstance(a, Expr) else None
    tb = b.dtype if isinstance(b, Expr) else None
    a = operand(a, tb)
    b = operand(b, ta)
    rt = T.promote(a.dtype, b.dtype)
    a, b = cast(a, rt), cast(b, rt)
    c = _const(cond)
    if c is not None:
        return a if c else b
    if cond.dtype is not T.i32:
        cond = binary("cmp_ne", cond, 0)
    return Expr(builder.emit(S.TernaryOpStmt(cond.stmt, a.stmt, b.stmt, ret_type=rt)))


def truth(x):
    """An i32 0/1 of a kernel value used as a condition."""
    x = to_expr(x)
    # (a variable's value, a comparison stored to a local, is compared with 0 as its load was)
    if x.lvalue is None and isinstance(x.stmt, S.BinaryOpStmt) and x.stmt.op in O.COMPARISONS:
        return x
    return binary("cmp_ne", x, 0)


def unflatten(linear, exts):
    """The indices, row-major (the last fastest), of non-negative linear index `linear` in a
    space of extents `exts` (Python ints)."""
    if not exts:
        return []
    out = [None] * len(exts)
    rest = linear
    for d in range(len(exts) - 1, 0, -1):
        # the linear index and the extents are non-negative
        out[d] = binary("mod_nonneg", rest, exts[d])
        rest = binary("div_nonneg", rest, exts[d])
    out[0] = rest
    return out
