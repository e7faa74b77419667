"""The operators of the IR and every fact about each, in one table.

`Op` names them; a statement's `op` is an `Op` (statements convert the name they are given, so
a misspelled op fails where it is made). Code compares with the members (`op == Op.ADD`); as
`Op` is a `str` enumeration, a table keyed by names still finds an op, and the printed IR
shows the plain name. `INFO[op]` holds its facts: how many operands, its Python symbol,
whether it commutes, whether it compares (an i32 0/1 result), whether an integer operand
converts to the default float type first (`math`) or is rejected (`real_only`), how autodiff
treats it (`derivative`: "rule", a partial in autodiff/rules.py; "zero", piecewise constant;
"integer", defined on integers only; "cast", handled by the transforms), and how to evaluate
it on Python numbers (constant folding and reference evaluation). A new op is one line in
`_TABLE`; tests/ir/test_ops.py checks that each consumer of these facts covers every op.
"""
from __future__ import annotations

import enum
import math
import struct

import numpy as np


class Op(str, enum.Enum):
    # unary math: an integer operand converts to the default float type first
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    TANH = "tanh"
    EXP = "exp"
    LOG = "log"
    # other unary
    NEG = "neg"
    BIT_NOT = "bit_not"
    LOGIC_NOT = "logic_not"
    ABS = "abs"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    SGN = "sgn"
    CAST = "cast"
    BIT_CAST = "bit_cast"
    STOP_GRAD = "stop_grad"
    # binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    TRUEDIV = "truediv"
    FLOORDIV = "floordiv"
    MOD = "mod"
    POW = "pow"
    MIN = "min"
    MAX = "max"
    ATAN2 = "atan2"
    BIT_AND = "bit_and"
    BIT_OR = "bit_or"
    BIT_XOR = "bit_xor"
    SHL = "shl"
    SHR = "shr"
    CMP_LT = "cmp_lt"
    CMP_LE = "cmp_le"
    CMP_GT = "cmp_gt"
    CMP_GE = "cmp_ge"
    CMP_EQ = "cmp_eq"
    CMP_NE = "cmp_ne"
    # internal: division and remainder of operands known to be non-negative (loop index
    # decomposition): no sign fix-ups, so LLVM can strength-reduce and vectorize them
    DIV_NONNEG = "div_nonneg"
    MOD_NONNEG = "mod_nonneg"

    # the plain name wherever an op is shown (IR text, messages, f-strings)
    def __str__(self):
        return self.value

    def __format__(self, spec):
        return format(self.value, spec)

    def __repr__(self):
        return self.value

    @property
    def info(self):
        return INFO[self]


class OpInfo:
    __slots__ = ("arity", "symbol", "commutative", "comparison", "math", "real_only",
                 "derivative", "internal", "exact")

    def __init__(self, arity, derivative, symbol=None, commutative=False, comparison=False,
                 math=False, real_only=False, internal=False, exact=False):
        self.arity, self.derivative, self.symbol = arity, derivative, symbol
        self.commutative, self.comparison = commutative, comparison
        self.math, self.real_only, self.internal = math, real_only, internal
        # on floats: computed in double precision and rounded once to f32 (then to f16), the
        # result is the one the target computes, so a constant operation folds (`folds_exactly`)
        self.exact = exact


def _math(real_only=False, exact=False):
    return OpInfo(1, "rule", math=True, real_only=real_only, exact=exact)


def _cmp(symbol, commutative=False):
    return OpInfo(2, "zero", symbol, commutative=commutative, comparison=True, exact=True)


_TABLE = {
    Op.SQRT: _math(exact=True), Op.RSQRT: _math(), Op.SIN: _math(True), Op.COS: _math(True),
    Op.TAN: _math(True), Op.ASIN: _math(True), Op.ACOS: _math(True), Op.ATAN: _math(),
    Op.TANH: _math(True), Op.EXP: _math(), Op.LOG: _math(),
    Op.NEG: OpInfo(1, "rule", "-", exact=True),
    Op.BIT_NOT: OpInfo(1, "integer", "~"),
    Op.LOGIC_NOT: OpInfo(1, "zero", "not"),
    Op.ABS: OpInfo(1, "rule", exact=True),
    Op.FLOOR: OpInfo(1, "zero", real_only=True, exact=True),
    Op.CEIL: OpInfo(1, "zero", real_only=True, exact=True),
    Op.ROUND: OpInfo(1, "zero", real_only=True, exact=True),
    Op.SGN: OpInfo(1, "zero", exact=True),
    Op.CAST: OpInfo(1, "cast", exact=True),
    Op.BIT_CAST: OpInfo(1, "integer"),
    Op.STOP_GRAD: OpInfo(1, "zero"),
    Op.ADD: OpInfo(2, "rule", "+", commutative=True, exact=True),
    Op.SUB: OpInfo(2, "rule", "-", exact=True),
    Op.MUL: OpInfo(2, "rule", "*", commutative=True, exact=True),
    Op.TRUEDIV: OpInfo(2, "rule", "/", exact=True),
    Op.FLOORDIV: OpInfo(2, "zero", "//"),
    Op.MOD: OpInfo(2, "rule", "%"),
    Op.POW: OpInfo(2, "rule", "**"),
    Op.MIN: OpInfo(2, "rule", commutative=True, exact=True),
    Op.MAX: OpInfo(2, "rule", commutative=True, exact=True),
    Op.ATAN2: OpInfo(2, "rule"),
    Op.BIT_AND: OpInfo(2, "integer", "&", commutative=True),
    Op.BIT_OR: OpInfo(2, "integer", "|", commutative=True),
    Op.BIT_XOR: OpInfo(2, "integer", "^", commutative=True),
    Op.SHL: OpInfo(2, "integer", "<<"),
    Op.SHR: OpInfo(2, "integer", ">>"),
    Op.CMP_LT: _cmp("<"), Op.CMP_LE: _cmp("<="), Op.CMP_GT: _cmp(">"), Op.CMP_GE: _cmp(">="),
    Op.CMP_EQ: _cmp("==", True), Op.CMP_NE: _cmp("!=", True),
    Op.DIV_NONNEG: OpInfo(2, "integer", internal=True),
    Op.MOD_NONNEG: OpInfo(2, "integer", internal=True),
}
INFO = _TABLE

# the views that the rest of the compiler reads, derived from the table
UNARY_MATH = tuple(op for op in Op if INFO[op].math)
UNARY = tuple(op for op in Op if INFO[op].arity == 1)
COMPARISONS = tuple(op for op in Op if INFO[op].comparison)
BINARY = tuple(op for op in Op if INFO[op].arity == 2 and not INFO[op].internal)
BINARY_INTERNAL = tuple(op for op in Op if INFO[op].internal)
COMMUTATIVE = frozenset(op for op in Op if INFO[op].commutative)
SYMBOL = {op: INFO[op].symbol for op in Op if INFO[op].symbol and op is not Op.NEG
          and INFO[op].arity == 2}
REAL_ONLY = tuple(op for op in Op if INFO[op].real_only)


def derivative_kind(op):
    return INFO[op].derivative


# (not exact: mod and floordiv, whose f32 quotient rounds before the floor; pow, atan2 and
# the transcendentals, which the target's math library rounds its own way)
EXACT_FLOAT = frozenset(op for op in Op if INFO[op].exact)


def folds_exactly(op, *values):
    """Whether a float operation `op` (of a float operand or result) on these constants may be
    folded: an exact one, without a NaN (min, max and comparisons of NaN follow LLVM's rules,
    not Python's) or an int that a double does not hold exactly."""
    for v in values:
        if isinstance(v, float) and math.isnan(v) or isinstance(v, int) and abs(v) > 1 << 53:
            return False
    return op in EXACT_FLOAT


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


_F32 = struct.Struct("<f")


def _to_f32(v):
    """float(np.float32(v)) for a Python float, bit for bit (NaN payloads, signed zeros and
    infinities included): C's conversion, which struct's packing is too, but where it raises
    (a finite value that rounds past the largest f32) the infinity that the conversion
    gives. About ten times faster than NumPy's scalar and errstate, and folding a kernel's
    f32 constants converts hundreds. (Only for a float: an int's conversion stays NumPy's,
    whose rounding of a large one was not compared.)"""
    try:
        return _F32.unpack(_F32.pack(v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _to_type(v, dtype):
    if dtype.bits == 1:
        return int(bool(v))                 # a value converted to u1: its truth
    if dtype.is_float:
        if dtype.bits < 64:
            # the double the evaluator computed, rounded to f32 (for +, -, *, / and sqrt the
            # correctly rounded f32 result), then to f16 for a half: what the target does,
            # which computes a half's arithmetic in f32, and converts f64 to f16 through f32
            # (tests/api/test_f16_conversions.py)
            if dtype.bits == 32 and type(v) is float:
                return _to_f32(v)
            with np.errstate(over="ignore"):
                v = np.float32(v)
                return float(v if dtype.bits == 32 else np.float16(v))
        return float(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        v = int(v)  # C truncation toward zero
    return _wrap_int(int(v), dtype)


def _float_to_int(x, dtype):
    """Float `x` converted to integer type `dtype` as the CPU target does: to a signed type
    of 32 bits or more (an 8- or 16-bit type through an i32, a u32 through an i64), then
    wrapped. Outside that type's range (and for NaN) the result is undefined, as in C: x86
    gives the type's lowest value (which wraps to 0 in a narrower type), and so does the
    folded constant (LLVM would fold the conversion of such a constant to anything). A u64
    wraps from -2**63 on (x86's conversion of a value below 2**63 is the signed one); beyond
    that range it is not folded."""
    if not dtype.is_signed and dtype.bits == 64:
        ok = not (math.isnan(x) or math.isinf(x)) and -(1 << 63) <= int(x) < 1 << 64
        return _to_type(x, dtype) if ok else None
    wide = 32 if dtype.bits < 32 else 64 if dtype.bits == 32 and not dtype.is_signed \
        else dtype.bits
    if math.isnan(x) or math.isinf(x) or not -(1 << (wide - 1)) <= int(x) < 1 << (wide - 1):
        return _wrap_int(-(1 << (wide - 1)), dtype)
    return _to_type(x, dtype)


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
        if op == Op.CAST:
            if dtype.bits == 1:
                return int(x != 0)          # to u1: a truth test
            if isinstance(x, float) and not dtype.is_float:
                return _float_to_int(x, dtype)
            return _to_type(x, dtype)
        if op == Op.BIT_CAST:
            return None
        v = _UNARY_EVAL[op](x)
        if dtype.bits == 1 and isinstance(v, int):
            v &= 1                          # u1 arithmetic wraps in one bit
        return _to_type(v, dtype)
    except (ValueError, ZeroDivisionError, OverflowError, KeyError):
        return None


def eval_binary(op, a, b, dtype):
    try:
        if op in (Op.FLOORDIV, Op.MOD, Op.DIV_NONNEG, Op.MOD_NONNEG) and b == 0:
            return None
        if op in (Op.SHL, Op.SHR) and not (0 <= b < dtype.bits):
            return None
        if op == Op.POW and isinstance(b, int) and b < 0 and isinstance(a, int):
            return None
        if op == Op.POW and isinstance(a, int) and isinstance(b, int) and dtype.is_int:
            # modulo 2**bits: the wrapped result, without the astronomically long integer
            # that `3 ** 4294967295` would build (the compile hung)
            return _to_type(pow(a, b, 1 << dtype.bits), dtype)
        v = _BINARY_EVAL[op](a, b)
        if isinstance(v, complex):
            return None
        if dtype.bits == 1 and isinstance(v, int):
            v &= 1                          # u1 arithmetic wraps in one bit
        return _to_type(v, dtype)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
