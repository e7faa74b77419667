"""Facts about operators: their names, how results are typed, and how to evaluate them on
Python numbers (shared by constant folding and any reference evaluation)."""
from __future__ import annotations

import math

UNARY_MATH = ("sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "tanh", "exp", "log")
UNARY = UNARY_MATH + ("neg", "bit_not", "logic_not", "abs", "floor", "ceil", "round", "sgn",
                      "cast", "bit_cast", "stop_grad")
COMPARISONS = ("cmp_lt", "cmp_le", "cmp_gt", "cmp_ge", "cmp_eq", "cmp_ne")
BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "min", "max", "atan2",
          "bit_and", "bit_or", "bit_xor", "shl", "shr") + COMPARISONS
# Division and remainder of operands known to be non-negative (loop index decomposition):
# no sign fix-ups, so LLVM can strength-reduce and vectorize them.
BINARY_INTERNAL = ("div_nonneg", "mod_nonneg")
COMMUTATIVE = {"add", "mul", "min", "max", "bit_and", "bit_or", "bit_xor", "cmp_eq", "cmp_ne"}
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shl": "<<", "shr": ">>",
          "cmp_lt": "<", "cmp_le": "<=", "cmp_gt": ">", "cmp_ge": ">=", "cmp_eq": "==",
          "cmp_ne": "!="}


def _wrap_int(v, dtype):
    """Two's-complement wraparound of a Python int to `dtype`."""
    mask = (1 << dtype.bits) - 1
    v &= mask
    if dtype.is_signed and v >> (dtype.bits - 1):
        v -= 1 << dtype.bits
    return v


def _round_half_away(x):
    # llvm.round: halfway cases away from zero
    return math.copysign(math.floor(abs(x) + 0.5), x)


def _to_type(v, dtype):
    if dtype.bits == 1:
        return int(bool(v))                 # a value converted to u1: its truth
    if dtype.is_float:
        if dtype.bits == 32:
            import numpy as np
            return float(np.float32(v))
        return float(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        v = int(v)  # C truncation toward zero
    return _wrap_int(int(v), dtype)


_UNARY_EVAL = {
    "neg": lambda x: -x, "abs": abs, "floor": math.floor, "ceil": math.ceil,
    "round": _round_half_away, "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos,
    "tan": math.tan, "exp": math.exp, "log": math.log, "tanh": math.tanh,
    "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "rsqrt": lambda x: 1.0 / math.sqrt(x), "bit_not": lambda x: ~x,
    "logic_not": lambda x: int(not x), "sgn": lambda x: (x > 0) - (x < 0),
}


def _floordiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return math.floor(a / b)


def _mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return a - b * math.floor(a / b)


_BINARY_EVAL = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b, "floordiv": _floordiv, "mod": _mod,
    "div_nonneg": _floordiv, "mod_nonneg": _mod,
    "min": min, "max": max, "atan2": math.atan2, "pow": lambda a, b: a ** b,
    "bit_and": lambda a, b: a & b, "bit_or": lambda a, b: a | b, "bit_xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
    "cmp_lt": lambda a, b: int(a < b), "cmp_le": lambda a, b: int(a <= b),
    "cmp_gt": lambda a, b: int(a > b), "cmp_ge": lambda a, b: int(a >= b),
    "cmp_eq": lambda a, b: int(a == b), "cmp_ne": lambda a, b: int(a != b),
}


def eval_unary(op, x, dtype):
    """Fold a unary op on a constant; None when it cannot be folded exactly."""
    try:
        if op == "cast":
            if dtype.bits == 1:
                return int(x != 0)          # to u1: a truth test
            return _to_type(x, dtype)
        if op == "bit_cast":
            return None
        v = _UNARY_EVAL[op](x)
        if dtype.bits == 1 and isinstance(v, int):
            v &= 1                          # u1 arithmetic wraps in one bit
        return _to_type(v, dtype)
    except (ValueError, ZeroDivisionError, OverflowError, KeyError):
        return None


def eval_binary(op, a, b, dtype):
    try:
        if op in ("floordiv", "mod", "div_nonneg", "mod_nonneg") and b == 0:
            return None
        if op in ("shl", "shr") and not (0 <= b < dtype.bits):
            return None
        if op == "pow" and isinstance(b, int) and b < 0 and isinstance(a, int):
            return None
        v = _BINARY_EVAL[op](a, b)
        if isinstance(v, complex):
            return None
        if dtype.bits == 1 and isinstance(v, int):
            v &= 1                          # u1 arithmetic wraps in one bit
        return _to_type(v, dtype)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
