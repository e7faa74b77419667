"""Constants folded as a kernel is built (ir/expr.py, ir/ops.py's evaluator) against the same
operations computed at run time: every operator on every type, over edge values (zeros,
signed zeros, the type's limits, shift counts around the width, infinities, NaN, halves'
overflow). Folding must not change a value: an operation the evaluator cannot compute as
the target does is left to the target. (This found an f16 constant kept as a double, f32 `%`
and `//` folded in double precision, out-of-range float casts wrapped where the CPU gives
its lowest value, and `3 ** 4294967295` in u32 computed exactly: a compile that never
ended.)"""
import math

import numpy as np
import pytest

import fluxion as ti

# the folding is the same for every target; the run-time values it must equal are the CPU's
# (a float conversion outside the integer type's range differs on a GPU)
pytestmark = pytest.mark.cpu_only

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "f32", "f64"]
NP = dict(i8=np.int8, i16=np.int16, i32=np.int32, i64=np.int64, u8=np.uint8, u16=np.uint16,
          u32=np.uint32, u64=np.uint64, f16=np.float16, f32=np.float32, f64=np.float64)


def edges(dt):
    if dt in FLOATS:
        v = [0.0, -0.0, 1.0, -1.5, 2.5, 1e-3, 0.1, 65504.0, 3e9, math.inf, -math.inf, math.nan]
        with np.errstate(over="ignore"):
            return [x.item() for x in np.array(v, NP[dt])]
    info = np.iinfo(NP[dt])
    v = [0, 1, -1, 3, -7, info.bits - 1, info.bits, info.max, info.min, info.max // 2 + 1]
    return [x for x in dict.fromkeys(v) if info.min <= x <= info.max]


BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "min": lambda a, b: ti.min(a, b),
    "max": lambda a, b: ti.max(a, b), "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "atan2": lambda a, b: ti.atan2(a, b),
}
INT_ONLY = {"&", "|", "^", "<<", ">>"}
UNARY = {
    "neg": lambda a: -a, "abs": lambda a: abs(a), "sqrt": lambda a: ti.sqrt(a),
    "floor": lambda a: ti.floor(a), "round": lambda a: ti.round(a),
    "sin": lambda a: ti.sin(a), "exp": lambda a: ti.exp(a), "pow3": lambda a: a ** 3,
    "powm1": lambda a: a ** -1, "pow_half": lambda a: a ** 0.5,
}
UNARY_INT_OK = {"neg", "abs", "pow3"}
TO = INTS + FLOATS


def _same(got, want, exact):
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind != "f":
        return got == want
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if not exact:       # a transcendental of a constant: LLVM folds it from the double
        same |= np.isclose(got, want, rtol=1e-6, atol=0)
    return same


def _check(kind, op, dt, f, operands, result_float, exact=True):
    n = len(operands)
    odt = ti.f64 if result_float else ti.i64
    folded, run_time = ti.field(odt, n), ti.field(odt, n)
    cols = list(zip(*operands))
    arrays = [ti.field(getattr(ti, dt), n) for _ in cols]
    for arr, col in zip(arrays, cols):
        with np.errstate(over="ignore"):
            arr.from_numpy(np.array(col, NP[dt]))
    t = getattr(ti, dt)

    if len(cols) == 2:
        a, b = arrays

        @ti.kernel
        def k():
            for j in ti.static(range(n)):
                folded[j] = ti.cast(f(t(operands[j][0]), t(operands[j][1])), odt)
            for i in range(n):
                run_time[i] = ti.cast(f(a[i], b[i]), odt)
    else:
        a, = arrays

        @ti.kernel
        def k():
            for j in ti.static(range(n)):
                folded[j] = ti.cast(f(t(operands[j][0])), odt)
            for i in range(n):
                run_time[i] = ti.cast(f(a[i]), odt)
    k()
    got, want = folded.to_numpy(), run_time.to_numpy()
    bad = ~_same(got, want, exact)
    assert not bad.any(), [(operands[i], got[i], want[i]) for i in np.nonzero(bad)[0][:6]]


@pytest.mark.parametrize("op,dt", [(op, dt) for op in sorted(BINARY) for dt in INTS + FLOATS
                                   if not (op in INT_ONLY and dt in FLOATS
                                           or op == "atan2" and dt in INTS)])
def test_binary_constants_fold_to_the_run_time_value(op, dt):
    v = edges(dt)
    pairs = [(x, y) for x in v for y in v]
    if op == "**" and dt in INTS:
        pairs = [(x, y) for x, y in pairs if y >= 0]   # (a negative one is refused)
    is_float = dt in FLOATS and op not in ("<", "==", "!=") or op == "/"
    _check("binary", op, dt, BINARY[op], pairs, is_float, exact=op not in ("atan2", "**"))


@pytest.mark.parametrize("op,dt", [(op, dt) for op in sorted(UNARY) for dt in INTS + FLOATS
                                   if dt in FLOATS or op in UNARY_INT_OK])
def test_unary_constants_fold_to_the_run_time_value(op, dt):
    _check("unary", op, dt, UNARY[op], [(x,) for x in edges(dt)], dt in FLOATS,
           exact=op not in ("sin", "exp", "pow_half", "powm1"))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("to", TO)
def test_casts_of_float_constants_fold_to_the_run_time_value(dt, to):
    # NaN and values a u64 cannot hold convert to anything (LLVM folds such a constant
    # freely): left out
    v = [x for x in edges(dt) if not math.isnan(x)]
    if to == "u64":
        v = [x for x in v if not math.isinf(x) and x < 2.0 ** 64]
    if dt == "f16" and to == "u32":
        # (LLVM converts a half to a u32 through an i32, which it may: the half's finite
        # values fit; an infinity then gives 2**31 where the fold gives x86's i64 answer)
        v = [x for x in v if not math.isinf(x)]
    target = getattr(ti, to)
    _check("cast", to, dt, lambda a: ti.cast(a, target), [(x,) for x in v], to in FLOATS)
