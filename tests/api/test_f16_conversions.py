"""float64 -> float16 conversions in kernels (a casted value, a stored value, a scalar
argument) give what the original system gives: the value rounded to float32, then to float16
(measured with Taichi 1.7.4: 1 + 2**-11 + 2**-30 becomes 1.0, where a direct rounding gives
1 + 2**-10). They used to call a runtime function the CPU JIT does not define, and crashed
the process."""
import numpy as np

import fluxion as ti

# ties of half precision where the rounding through float32 differs from a direct one (1 +
# 2**-11 is a tie: the 2**-40 above it is lost in float32, and the tie then goes to even), the
# overflow threshold, subnormals, zeros, infinities and NaN
VALUES = [1.5, 1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 1 + 2**-11, 1 + 3 * 2**-11,
          65519.99, 65520.0, -65520.0, 1e300, -1e300, 2**-25 + 2**-60, 2**-25, 2**-24 * 1.5,
          1e-30, 0.0, -0.0, 3.141592653589793, float("inf"), float("-inf"), float("nan")]


def _half(values):
    with np.errstate(over="ignore"):
        return np.array(values).astype(np.float32).astype(np.float16)


def _same(got, want):
    """Bit for bit, except that a NaN's payload is free: a GPU's conversion makes the
    canonical NaN 0x7fff where NumPy keeps 0x7e00 (both quiet NaNs)."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_casts_and_stores_of_float64_round_like_numpy():
    n = len(VALUES)
    src = ti.field(ti.f64, n)
    cast = ti.field(ti.f16, n)
    stored = ti.field(ti.f16, n)

    @ti.kernel
    def convert():
        for i in src:
            cast[i] = ti.cast(src[i], ti.f16)
            stored[i] = src[i]

    src.from_numpy(np.array(VALUES))
    convert()
    want = _half(VALUES)
    _same(cast.to_numpy(), want)
    _same(stored.to_numpy(), want)


def test_float16_scalar_arguments():
    out = ti.field(ti.f16, len(VALUES))

    @ti.kernel
    def put(i: ti.i32, v: ti.f16):
        out[i] = v

    for i, v in enumerate(VALUES):
        put(i, v)
    _same(out.to_numpy(), _half(VALUES))


def test_constant_half_arithmetic_rounds_like_the_target():
    """An f16 expression of constants, folded as the kernel is built, gives what the same
    expression gives at run time and what NumPy gives computing in float32 and rounding to
    float16 (the folder kept the double: 1 + f16(0.001) was 1.0010000000474975)."""
    pairs = [(1.0, 0.001), (65504.0, 1.0), (65504.0, 16.0), (0.1, 0.1), (1.0, 3.0),
             (2**-14, 2**-10), (3.0, -1e-4), (-7.25, 0.3)]
    ops = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b]
    n = len(pairs) * len(ops)
    folded = ti.field(ti.f16, n)
    run_time = ti.field(ti.f16, n)
    a = ti.field(ti.f16, len(pairs))
    b = ti.field(ti.f16, len(pairs))

    @ti.kernel
    def both():
        for k in ti.static(range(len(ops))):
            for j in ti.static(range(len(pairs))):
                folded[k * len(pairs) + j] = ops[k](ti.f16(pairs[j][0]), ti.f16(pairs[j][1]))
                run_time[k * len(pairs) + j] = ops[k](a[j], b[j])

    a.from_numpy(_half([p[0] for p in pairs]))
    b.from_numpy(_half([p[1] for p in pairs]))
    both()
    ha, hb = _half([p[0] for p in pairs]).astype(np.float32), \
        _half([p[1] for p in pairs]).astype(np.float32)
    with np.errstate(over="ignore"):
        want = np.concatenate([op(ha, hb).astype(np.float16) for op in ops])
    _same(run_time.to_numpy(), want)
    _same(folded.to_numpy(), want)


def test_half_floordiv_and_mod_round_each_step_like_the_original():
    """`a // b` and `a % b` of f16 values round the quotient to f16 before its floor, and the
    product `b * q` before the difference, as the original computes them (measured with
    Taichi 1.7.4); they used to run whole in f32: -1.5 // f16(0.001) was -1500, not -1499."""
    a_v = _half([-1.5, 65504.0, 65504.0, 1.0, 2.5, 3.0, -7.25, 100.0, 0.1])
    b_v = _half([0.001, -7.25, 31.0, 0.001, 0.001, 0.3, 0.7, 0.3, 0.03])
    n = len(a_v)
    a, b = ti.field(ti.f16, n), ti.field(ti.f16, n)
    q, m = ti.field(ti.f16, n), ti.field(ti.f16, n)

    @ti.kernel
    def k():
        for i in range(n):
            q[i] = a[i] // b[i]
            m[i] = a[i] % b[i]

    a.from_numpy(a_v)
    b.from_numpy(b_v)
    k()
    x, y = a_v.astype(np.float32), b_v.astype(np.float32)
    with np.errstate(over="ignore"):
        want_q = np.floor((x / y).astype(np.float16).astype(np.float32))
        want_m = (x - (y * want_q).astype(np.float16).astype(np.float32)).astype(np.float16)
    _same(q.to_numpy(), want_q.astype(np.float16))
    _same(m.to_numpy(), want_m)
    assert q.to_numpy()[0] == -1499 and q.to_numpy()[2] == 2114
