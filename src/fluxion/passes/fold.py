"""Constant folding.

Requires: any IR. Guarantees: a unary, binary or select statement whose operands are all
constants is replaced by the constant it computes (ir/ops.py evaluates it, as the frontend's
own folding does), unless folding could change a value:

- float operations are folded only where computing in double precision and rounding once
  gives the correctly rounded result (+, -, *, /, sqrt, and exact ones: neg, abs, floor,
  ceil, comparisons, min and max of non-NaN values, casts: the ops marked `exact` in
  ir/ops.py, the frontend's rule too); a transcendental (sin, exp, pow) and mod keep
  running on the target, whose math library or f32 quotient may round otherwise;
- an operation the evaluator refuses (a division by zero, a shift past the width, a bit
  cast) is left for the target, which defines it (or raises in debug mode).

Why: the frontend folds what it sees as constants, but a constant reaches an operation only
after forwarding (`a = 2.0` stored once and read back) in many kernels.
"""
from __future__ import annotations

from fluxion.ir import ops as O
from fluxion.ir import stmts as S
from fluxion.ir.ops import Op


def _const(s):
    return s.value if isinstance(s, S.ConstStmt) else None


def _float_ok(dtype):
    return dtype.bits in (32, 64)   # (a half's rounding is not what the evaluator does)


def _folded(s):
    """The constant value of `s`, or None."""
    if isinstance(s, S.BinaryOpStmt):
        a, b = _const(s.lhs), _const(s.rhs)
        if a is None or b is None:
            return None
        t = s.lhs.ret_type
        if t.is_float or s.ret_type.is_float:
            if not O.folds_exactly(s.op, a, b) or not _float_ok(t) or \
                    s.rhs.ret_type != t or (s.ret_type != t and s.op not in O.COMPARISONS):
                return None
        return O.eval_binary(s.op, a, b, s.ret_type)
    if isinstance(s, S.UnaryOpStmt):
        x = _const(s.operand)
        if x is None or s.op in (Op.BIT_CAST, Op.STOP_GRAD):
            return None
        t = s.operand.ret_type
        if t.is_float or s.ret_type.is_float:
            if not O.folds_exactly(s.op, x) or not _float_ok(s.ret_type) or \
                    (t.is_float and not _float_ok(t)):
                return None
        return O.eval_unary(s.op, x, s.ret_type)
    return None


def run(kernel, cfg=None) -> bool:
    subst = {}
    replaced = []   # (keeps the replaced statements alive: `subst` is keyed by their ids)
    for body in S.bodies(kernel):
        _fold_block(body, subst, replaced)
    return bool(subst)


def _fold_block(block, subst, replaced):
    for k, s in enumerate(block.stmts):
        if subst:    # (operands come before their uses: one walk replaces them all)
            for o in s.operands():
                new = subst.get(id(o))
                if new is not None:
                    s.replace_operand(o, new)
        if isinstance(s, S.TernaryOpStmt) and isinstance(s.cond, S.ConstStmt) and \
                s.a.ret_type == s.ret_type and s.b.ret_type == s.ret_type:
            subst[id(s)] = s.a if s.cond.value else s.b
            continue
        v = _folded(s)
        if v is not None:
            c = S.ConstStmt(v, ret_type=s.ret_type, loc=s.loc)
            c.parent = block
            block.stmts[k] = c
            subst[id(s)] = c
            replaced.append(s)
            continue
        for b in s.blocks():
            _fold_block(b, subst, replaced)

