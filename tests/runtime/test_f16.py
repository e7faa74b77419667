"""f16 at the runtime boundary and in arithmetic: scalar arguments, conversions from f64 and
integers, rounding after every operation (as the original system does: f16 operations run in
f32 and round), atomic add/max/min in parallel loops. The references are NumPy's float16."""
import numpy as np

import fluxion as ti

h, f = np.float16, np.float32


def test_f16_scalar_arguments_and_returns():
    out = ti.field(ti.f16, 3)

    @ti.kernel
    def k(a: ti.f16, b: ti.f32, c: ti.f16) -> ti.f32:
        out[0] = a
        out[1] = c
        out[2] = a * c
        return a + b

    # f16 arguments round as f64 -> f32 -> f16
    a, c = 0.1, 3.3
    r = k(a, 2.5, c)
    ha, hc = h(f(a)), h(f(c))
    assert r == float(f(f(ha) + f(2.5)))
    np.testing.assert_array_equal(out.to_numpy(), np.array([ha, hc, h(f(ha) * f(hc))]))


def test_f16_casts_from_f64_and_integers():
    out = ti.field(ti.f16, 4)

    @ti.kernel
    def k(x: ti.f64, n: ti.i64, m: ti.u32):
        out[0] = ti.cast(x, ti.f16)
        out[1] = ti.cast(n, ti.f16)
        out[2] = ti.cast(m, ti.f16)
        out[3] = ti.cast(x * 3, ti.f16)

    x, n, m = 1.0 / 3.0, -(2 ** 14) - 3, 2 ** 15 + 7
    k(x, n, m)
    expect = [h(f(x)), h(f(n)), h(f(m)), h(f(x * 3))]
    np.testing.assert_array_equal(out.to_numpy(), np.array(expect, np.float16))


def _stepwise_sum(c, n):
    s = h(0)
    for _ in range(n):
        s = h(f(s) + f(c))
    return s


def test_f16_sums_round_after_every_addition():
    # at 1024 the spacing of f16 is 1: adding 1.12 gains 1 each time from there on
    acc = ti.field(ti.f16, 2)

    @ti.kernel
    def k():
        for i in range(1000):          # parallel: every update is atomic and rounds
            acc[0] += 1.12
        for _ in range(1):
            for i in range(1000):      # serial
                acc[1] = acc[1] + 1.12

    k()
    expect = _stepwise_sum(h(f(1.12)), 1000)
    np.testing.assert_array_equal(acc.to_numpy(), np.array([expect, expect]))


def test_f16_atomic_max_and_min_of_converted_integers():
    # loops like these made LLVM's loop vectorizer fail an assertion (the process aborted)
    n = 4096
    m = ti.field(ti.f16, 4)
    v = ti.Vector.field(2, ti.f16, ())

    # one loop per kernel: each is a reduction LLVM vectorizes on its own
    @ti.kernel
    def vmax():
        for i in range(n):
            ti.atomic_max(v[None], ti.Vector([1.12 * i, -1.12 * i], dt=ti.f16))

    @ti.kernel
    def fmax():
        for i in range(n):
            ti.atomic_max(m[0], ti.cast(i, ti.f16))

    @ti.kernel
    def fmin():
        for i in range(n):
            ti.atomic_min(m[1], -ti.cast(i, ti.f16))

    @ti.kernel
    def serial():
        for _ in range(1):
            for i in range(n):
                m[2] = ti.max(m[2], ti.cast(i, ti.f16))
                m[3] = ti.min(m[3], ti.cast(-i, ti.f16))

    for k in (vmax, fmax, fmin, serial):
        k()
    vals = np.array([h(f(i)) for i in range(n)])
    np.testing.assert_array_equal(m.to_numpy(), [vals.max(), -vals.max(), vals.max(),
                                                 -vals.max()])
    scaled = np.array([h(f(1.12) * f(i)) for i in range(n)])
    np.testing.assert_array_equal(v.to_numpy(), [scaled.max(), 0])


def test_f16_min_max_keep_the_number_when_one_operand_is_nan():
    out = ti.field(ti.f16, 4)

    @ti.kernel
    def k(a: ti.f16, b: ti.f16):
        out[0] = ti.max(a, b)
        out[1] = ti.max(b, a)
        out[2] = ti.min(a, b)
        out[3] = ti.min(b, a)

    k(float("nan"), 2.0)
    np.testing.assert_array_equal(out.to_numpy(), [2, 2, 2, 2])
