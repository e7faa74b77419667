"""Debug mode (`ti.init(debug=True)`): integer `+`, `-`, `*` and `<<` written in a kernel print
"Addition overflow detected in <location>" (Subtraction, Multiplication, Shift left) when the
result wraps around, as the original system does; the kernel goes on with the wrapped value.

Only the operators of the user's source are checked (frontend/expressions.py calls `check` from
its visit of a binary operator): the frontend's own index arithmetic and the hashing behind
`ti.random` wrap on purpose. Operands known when compiling fold without a check.

How each wraps, on the operands `a`, `b` and result `r` of the operation's type:
  add: signed, a and b of one sign and r of the other; unsigned, r < a
  sub: signed, a and b of different signs and r of b's; unsigned, a < b
  mul: up to 32 bits, the product in 64 bits differs from r widened; 64 bits, r // a != b
       (a divisor made safe: 0 and -1 never divide, -1 * MIN is the one signed case left)
  shl: b outside [0, bits), or r shifted back (arithmetically if signed) differs from a
"""
from __future__ import annotations

from fluxion.ir import builder
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import format_location
from fluxion.ir.ops import Op

_WHAT = {Op.ADD: "Addition", Op.SUB: "Subtraction", Op.MUL: "Multiplication",
         Op.SHL: "Shift left"}


def _emit(st):
    return builder.emit(st)


def _k(v, t):
    return _emit(S.ConstStmt(v, ret_type=t))


def _bin(op, x, y, t=T.i32):
    return _emit(S.BinaryOpStmt(x, y, op, ret_type=t))


def _cast(x, t):
    return _emit(S.UnaryOpStmt(x, Op.CAST, ret_type=t))


def _wraps(op, a, b, r, t):
    """The statement whose value is nonzero where `r = a op b` wrapped around."""
    lt, ne, eq, and_, or_ = Op.CMP_LT, Op.CMP_NE, Op.CMP_EQ, Op.BIT_AND, Op.BIT_OR
    zero = _k(0, t)
    if op is Op.ADD:
        if not t.is_signed:
            return _bin(lt, r, a)
        return _bin(lt, _bin(and_, _bin(Op.BIT_XOR, a, r, t), _bin(Op.BIT_XOR, b, r, t), t), zero)
    if op is Op.SUB:
        if not t.is_signed:
            return _bin(lt, a, b)
        return _bin(lt, _bin(and_, _bin(Op.BIT_XOR, a, b, t), _bin(Op.BIT_XOR, a, r, t), t), zero)
    if op is Op.MUL:
        if t.bits <= 32:
            w = T.i64 if t.is_signed else T.u64
            wide = _bin(Op.MUL, _cast(a, w), _cast(b, w), w)
            return _bin(ne, wide, _cast(r, w))
        one = _k(1, t)
        bad = _bin(eq, a, zero)
        minus_one = None
        if t.is_signed:
            minus_one = _bin(eq, a, _k(-1, t))
            bad = _bin(or_, bad, minus_one)
        safe = _emit(S.TernaryOpStmt(bad, one, a, ret_type=t))
        differs = _bin(and_, _bin(ne, _bin(Op.FLOORDIV, r, safe, t), b), _bin(Op.CMP_EQ, bad, _k(0, T.i32)))
        if minus_one is None:
            return differs
        smallest = _k(-(1 << (t.bits - 1)), t)
        return _bin(or_, differs, _bin(and_, minus_one, _bin(eq, b, smallest)))
    # shl: a shift of the width or more (or a negative one) loses every bit
    n = _k(t.bits, t)
    out_of_range = _bin(Op.CMP_GE, b, n) if not t.is_signed else \
        _bin(or_, _bin(Op.CMP_GE, b, n), _bin(lt, b, zero))
    back = _bin(Op.SHR, r, b, t)          # (arithmetic for signed types: codegen/arith.py)
    return _bin(or_, out_of_range, _bin(ne, back, a))


def check(result):
    """After a user's binary operator in debug mode: `result` (an Expr, or a Matrix whose
    entries are) warns where its integer add, sub, mul or shl wrapped."""
    entries = getattr(result, "entries", None)
    for e in (entries if entries is not None else (result,)):
        st = getattr(e, "stmt", None)
        if not isinstance(st, S.BinaryOpStmt) or st.op not in _WHAT:
            continue
        t = st.ret_type
        if t is None or not t.is_int or t.bits < 8:
            continue
        ctx = builder.current()
        flag = _wraps(st.op, st.lhs, st.rhs, st, t)
        text = f"{_WHAT[st.op]} overflow detected in " + format_location(ctx.loc, "").rstrip("\n")
        guard = _emit(S.IfStmt(_bin(Op.CMP_NE, flag, _k(0, flag.ret_type))))
        with builder.into(guard.then_block):
            _emit(S.PrintStmt([], (text, "\n")))
