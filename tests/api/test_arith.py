"""Scalar arithmetic in kernels: operators on every primitive type, Python semantics of `//`
and `%`, weakly-typed literals, type promotion, casts and typed locals.

References are computed with NumPy on arrays of the same dtype (so integer wraparound is the
two's-complement wraparound NumPy also performs) or analytically.
"""
import numpy as np
import pytest

import fluxion as ti

N = 256
INT_TYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64]
FLOAT_TYPES = [ti.f32, ti.f64]
ALL_TYPES = INT_TYPES + FLOAT_TYPES


def npt(dt):
    return dt.np_dtype


def _int_operands(dt, rng):
    info = np.iinfo(npt(dt))
    lo = info.min + 1 if info.min < 0 else 0   # keep clear of MIN // -1
    a = rng.integers(lo, info.max, N, endpoint=True, dtype=npt(dt))
    # half the divisors small (interesting quotients), half from the whole range
    small = rng.integers(-9 if info.min < 0 else 1, 10, N, dtype=np.int64)
    small[small == 0] = 3
    big = rng.integers(lo, info.max, N, endpoint=True, dtype=npt(dt))
    big[big == 0] = 7
    b = np.where(np.arange(N) % 2 == 0, small.astype(npt(dt)), big).astype(npt(dt))
    # a few hand-picked values: extremes and signs
    a[:4] = [info.max, lo, 0, 1]
    b[:4] = [2, 3, 5, 1]
    return a, b


def _float_operands(dt, rng):
    a = rng.uniform(-100, 100, N).astype(npt(dt))
    b = rng.uniform(0.25, 10, N) * rng.choice([-1.0, 1.0], N)
    b = b.astype(npt(dt))
    a[:4] = [-7.5, 7.5, -7.5, 0.0]
    b[:4] = [2.0, -2.0, -2.0, 3.0]
    return a, b


INT_OPS = ["add", "sub", "mul", "floordiv", "mod", "min", "max", "neg", "abs", "pow2", "pow3",
           "and", "or", "xor", "not", "shl", "shr", "lit_add", "lit_mul", "lit_add_floordiv"]
FLOAT_OPS = ["add", "sub", "mul", "floordiv", "mod", "min", "max", "neg", "abs", "pow2", "pow3",
             "truediv", "lit_add", "lit_mul", "pow_rt", "pow_half"]


def _np_ref(op, a, b, s, dt):
    t = npt(dt)
    one, two, three = t.type(1), t.type(2), t.type(3)
    # a literal is an i32 (the default integer type) and promotes as in the original system:
    # narrower integers compute in i32, the result is stored back into `dt`
    wide = np.int32 if not dt.is_float and dt.bits < 32 else t.type
    lit1, lit2 = wide(1), wide(2)
    with np.errstate(over="ignore"):
        return {
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "floordiv": lambda: a // b, "mod": lambda: a % b,
            "min": lambda: np.minimum(a, b), "max": lambda: np.maximum(a, b),
            "neg": lambda: (t.type(0) - a).astype(t), "abs": lambda: np.where(a < 0, t.type(0) - a, a),
            "pow2": lambda: a * a, "pow3": lambda: a * a * a,
            "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b, "not": lambda: ~a,
            "shl": lambda: np.left_shift(a, s), "shr": lambda: np.right_shift(a, s),
            "lit_add": lambda: a + one, "lit_mul": lambda: a * three,
            # computed in i32 for narrow types: (255 + 1) // 2 is 128 for u8 (stored: 128)
            "lit_add_floordiv": lambda: (a.astype(wide) + lit1) // lit2,
            "truediv": lambda: a.astype(np.float64) / b,
            "pow_rt": lambda: np.abs(a).astype(np.float64) ** (np.abs(b) / 4),
            "pow_half": lambda: np.sqrt(np.abs(a).astype(np.float64)),
        }[op]()


@pytest.mark.parametrize("dt", ALL_TYPES, ids=str)
def test_binary_and_unary_operators_per_dtype(dt):
    rng = np.random.default_rng(1234 + dt.bits + 100 * dt.is_float + 10 * dt.is_signed)
    is_int = not dt.is_float
    a_np, b_np = (_int_operands if is_int else _float_operands)(dt, rng)
    s_np = rng.integers(0, dt.bits, N).astype(npt(dt))
    ops = INT_OPS if is_int else FLOAT_OPS
    a, b, s = (ti.field(dt, shape=N) for _ in range(3))
    a.from_numpy(a_np)
    b.from_numpy(b_np)
    s.from_numpy(s_np)
    out = ti.field(dt, shape=(len(ops), N))
    cmp = ti.field(ti.i32, shape=(6, N))
    div = ti.field(ti.f64, shape=N)

    @ti.kernel
    def run():
        for i in range(N):
            x, y = a[i], b[i]
            cmp[0, i] = x < y
            cmp[1, i] = x <= y
            cmp[2, i] = x > y
            cmp[3, i] = x >= y
            cmp[4, i] = x == y
            cmp[5, i] = x != y
            out[0, i] = x + y
            out[1, i] = x - y
            out[2, i] = x * y
            out[3, i] = x // y
            out[4, i] = x % y
            out[5, i] = ti.min(x, y)
            out[6, i] = ti.max(x, y)
            out[7, i] = -x
            out[8, i] = ti.abs(x)
            out[9, i] = x ** 2
            out[10, i] = x ** 3
            if ti.static(is_int):
                out[11, i] = x & y
                out[12, i] = x | y
                out[13, i] = x ^ y
                out[14, i] = ~x
                out[15, i] = x << s[i]
                out[16, i] = x >> s[i]
                out[17, i] = x + 1
                out[18, i] = x * 3
                out[19, i] = (x + 1) // 2
            else:
                out[11, i] = x / y
                out[12, i] = x + 1
                out[13, i] = x * 3
                out[14, i] = ti.abs(x) ** (ti.abs(y) / 4)
                out[15, i] = ti.abs(x) ** 0.5
            div[i] = x / y

    run()
    got = out.to_numpy()
    for k, op in enumerate(ops):
        ref = _np_ref(op, a_np, b_np, s_np, dt)
        if is_int:
            np.testing.assert_array_equal(got[k], ref.astype(npt(dt)), err_msg=op)
        else:
            rtol = 1e-5 if dt is ti.f32 else 1e-12
            if op in ("floordiv", "mod"):
                # away from the points where the quotient rounds onto an integer
                q = a_np.astype(np.float64) / b_np
                ok = np.abs(q - np.round(q)) > 1e-3
                ref64 = (np.floor(q) if op == "floordiv"
                         else a_np - b_np.astype(np.float64) * np.floor(q))
                np.testing.assert_allclose(got[k][ok], ref64[ok], rtol=rtol, atol=rtol * 100,
                                           err_msg=op)
            else:
                np.testing.assert_allclose(got[k], ref, rtol=rtol * 4, atol=0, err_msg=op)
    ref_cmp = np.stack([a_np < b_np, a_np <= b_np, a_np > b_np, a_np >= b_np, a_np == b_np,
                        a_np != b_np]).astype(np.int32)
    np.testing.assert_array_equal(cmp.to_numpy(), ref_cmp)
    # `/` is true division; on integers it gives the default float type (f32 here)
    ref_div = a_np.astype(np.float64) / b_np.astype(np.float64)
    if is_int or dt is ti.f32:
        ref_div = ref_div.astype(np.float32)
    np.testing.assert_allclose(div.to_numpy(), ref_div, rtol=2e-7 if dt is not ti.f64 else 1e-15)


def test_python_semantics_of_floordiv_and_mod_on_signs():
    vals = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (1, -1), (-1, 7)]
    a = ti.field(ti.i32, shape=len(vals))
    b = ti.field(ti.i32, shape=len(vals))
    fa = ti.field(ti.f32, shape=len(vals))
    fb = ti.field(ti.f32, shape=len(vals))
    q = ti.field(ti.i32, shape=len(vals))
    r = ti.field(ti.i32, shape=len(vals))
    fq = ti.field(ti.f32, shape=len(vals))
    fr = ti.field(ti.f32, shape=len(vals))
    for k, (x, y) in enumerate(vals):
        a[k], b[k] = x, y
        fa[k], fb[k] = x + 0.5, y

    @ti.kernel
    def run():
        for i in a:
            q[i] = a[i] // b[i]
            r[i] = a[i] % b[i]
            fq[i] = fa[i] // fb[i]
            fr[i] = fa[i] % fb[i]

    run()
    for k, (x, y) in enumerate(vals):
        assert (q[k], r[k]) == (x // y, x % y), (x, y)
        assert fq[k] == (x + 0.5) // y, (x, y)
        assert fr[k] == pytest.approx((x + 0.5) % y, abs=1e-6), (x, y)


def test_constant_folded_arithmetic_matches_runtime_semantics():
    @ti.kernel
    def consts() -> ti.types.vector(8, ti.f64):
        return ti.Vector([ti.i32(-7) // 2, ti.i32(-7) % 3, ti.f32(-7.5) % 2.0,
                          ti.f32(-7.5) // 2.0, ti.u8(250) + ti.u8(10), ti.i8(127) + 1,  # i32: 128
                          ti.i32(7) / ti.i32(2), ti.i32(-1) >> 1], dt=ti.f64)

    got = np.asarray(consts())
    np.testing.assert_array_equal(got, [-4, 2, 0.5, -4.0, 4, 128, 3.5, -1])


def test_int_pow_with_runtime_exponent():
    base = ti.field(ti.i32, shape=12)
    expo = ti.field(ti.i32, shape=12)
    out32 = ti.field(ti.i32, shape=12)
    out64 = ti.field(ti.i64, shape=12)
    outf = ti.field(ti.f32, shape=12)
    b_np = np.array([-3, -2, -1, 0, 1, 2, 3, 5, 7, 10, 2, -2], np.int32)
    e_np = np.array([3, 4, 5, 3, 9, 10, 0, 4, 3, 6, 30, 31], np.int32)
    base.from_numpy(b_np)
    expo.from_numpy(e_np)

    @ti.kernel
    def run():
        for i in base:
            out32[i] = base[i] ** expo[i]
            out64[i] = ti.cast(base[i], ti.i64) ** ti.cast(expo[i], ti.i64)
            outf[i] = ti.cast(base[i], ti.f32) ** expo[i]   # float ** int -> float

    run()
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out32.to_numpy(), b_np ** e_np)
    np.testing.assert_array_equal(out64.to_numpy(), b_np.astype(np.int64) ** e_np.astype(np.int64))
    np.testing.assert_allclose(outf.to_numpy(), b_np.astype(np.float64) ** e_np, rtol=1e-6)


def test_type_promotion_rules():
    f32v = ti.field(ti.f32, shape=())
    f64v = ti.field(ti.f64, shape=())
    i8v = ti.field(ti.i8, shape=())
    u8v = ti.field(ti.u8, shape=())
    i16v = ti.field(ti.i16, shape=())
    i32v = ti.field(ti.i32, shape=())
    i64v = ti.field(ti.i64, shape=())
    u32v = ti.field(ti.u32, shape=())
    outf = ti.field(ti.f64, shape=8)
    outi = ti.field(ti.i64, shape=8)
    f32v[None] = 0.1
    f64v[None] = 0.0
    i8v[None] = -1
    u8v[None] = 255
    i16v[None] = 1
    i32v[None] = 2 ** 24 + 1
    i64v[None] = 1
    u32v[None] = 0

    @ti.kernel
    def run():
        z32 = f32v[None] - f32v[None]      # an f32 zero
        outf[0] = i32v[None] + z32          # f32 + i32 -> f32: 2**24 + 1 rounds to 2**24
        outf[1] = i32v[None] + f64v[None]   # i32 + f64 -> f64: exact
        outf[2] = f32v[None] + f64v[None]   # f32 + f64 -> f64: the f32 value of 0.1, widened
        outf[3] = ti.cast(i32v[None], ti.i64) + z32   # i64 + f32 -> f32
        outi[0] = ti.i32(2147483647) + i64v[None]   # i32 + i64 -> i64: no wraparound
        outi[1] = u32v[None] + ti.i32(-1)   # u32 + i32 -> u32: 4294967295
        outi[2] = i8v[None] + (u8v[None] - u8v[None])   # i8 + u8 -> u8: 255
        outi[3] = u8v[None] + i16v[None]    # u8 + i16 -> i16: 256
        outi[4] = ti.i32(2147483647) + ti.i32(1)   # same type: wraps
        outi[5] = u8v[None] + 1             # the literal is an i32: u8 + i32 -> i32, 256
        outi[6] = i8v[None] * 200           # i8 * i32 -> i32: -200 (no wraparound in i8)

    run()
    assert outf[0] == 2.0 ** 24
    assert outf[1] == 2.0 ** 24 + 1
    assert outf[2] == float(np.float32(0.1))
    assert outf[3] == 2.0 ** 24
    assert outi[0] == 2 ** 31
    assert outi[1] == 2 ** 32 - 1
    assert outi[2] == 255
    assert outi[3] == 256
    assert outi[4] == -2 ** 31
    # as Taichi 1.7.4 gives them (checked side by side): literals have the default types
    assert outi[5] == 256
    assert outi[6] == -200


def test_int_division_gives_default_float_type():
    a = ti.field(ti.i32, shape=())
    out = ti.field(ti.f64, shape=2)
    a[None] = 2 ** 24 + 1

    @ti.kernel
    def run():
        out[0] = a[None] / 1        # i32 / i32 -> f32 (the default float): loses the + 1
        out[1] = 7 / a[None] * a[None]

    run()
    assert out[0] == 2.0 ** 24
    assert out[1] == pytest.approx(7.0, rel=1e-6)


def test_int_division_follows_default_fp_f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    a = ti.field(ti.i32, shape=())
    out = ti.field(ti.f64, shape=2)
    a[None] = 2 ** 24 + 1

    @ti.kernel
    def run():
        out[0] = a[None] / 1
        out[1] = a[None] * 0.1      # float literal: the default float, now f64

    run()
    assert out[0] == 2.0 ** 24 + 1
    assert out[1] == (2 ** 24 + 1) * 0.1


def test_comparisons_give_i32_zero_one():
    x = ti.field(ti.f32, shape=4)
    out = ti.field(ti.i32, shape=(4, 4))
    x.from_numpy(np.array([-1.5, 0.0, 2.0, 2.0], np.float32))

    @ti.kernel
    def run():
        for i in x:
            out[i, 0] = (x[i] < 1.0) * 7
            out[i, 1] = -(x[i] >= 2.0)
            out[i, 2] = (x[i] == 2.0) + (x[i] != 2.0) * 10
            out[i, 3] = 0 < x[i] <= 2.0   # chained comparison

    run()
    xs = np.array([-1.5, 0.0, 2.0, 2.0])
    ref = np.stack([(xs < 1) * 7, -(xs >= 2).astype(int), (xs == 2) + (xs != 2) * 10,
                    (0 < xs) & (xs <= 2)], axis=1).astype(np.int32)
    np.testing.assert_array_equal(out.to_numpy(), ref)


# -- casts --------------------------------------------------------------------------------
def _cast_source(src, rng):
    if src.is_float:
        return rng.uniform(-120, 120, 64).astype(npt(src))
    info = np.iinfo(npt(src))
    return rng.integers(info.min, info.max, 64, endpoint=True, dtype=npt(src))


@pytest.mark.parametrize("src", ALL_TYPES, ids=str)
def test_cast_to_every_type_matches_numpy(src):
    rng = np.random.default_rng(src.bits * 7 + src.is_float * 3 + src.is_signed)
    a_np = _cast_source(src, rng)
    a = ti.field(src, shape=64)
    a.from_numpy(a_np)
    outs = [ti.field(dt, shape=64) for dt in ALL_TYPES]

    @ti.kernel
    def run():
        for i in a:
            for k in ti.static(range(len(ALL_TYPES))):
                outs[k][i] = ti.cast(a[i], ALL_TYPES[k])

    run()
    for dt, o in zip(ALL_TYPES, outs):
        got = o.to_numpy()
        if src.is_float and not dt.is_float:
            # float -> int truncates toward zero; out-of-range values are undefined
            info = np.iinfo(npt(dt))
            ok = (a_np > info.min - 1) & (a_np < info.max + 1)
            np.testing.assert_array_equal(got[ok], np.trunc(a_np[ok]).astype(npt(dt)), err_msg=str(dt))
        elif dt.is_float:
            np.testing.assert_array_equal(got, a_np.astype(npt(dt)), err_msg=str(dt))
        else:
            np.testing.assert_array_equal(got, a_np.astype(npt(dt)), err_msg=str(dt))


@pytest.mark.parametrize("dt", [ti.u8, ti.i8, ti.u16, ti.i16, ti.u32], ids=str)
def test_floats_out_of_a_narrow_types_range_wrap_as_on_the_original(dt):
    # truncated toward zero, then wrapped modulo 2**bits: what the original's CPU code gives
    # (u8(-1.0) == 255, i8(200.0) == -56). Also where the value is a compile-time choice of
    # constants (`ti.math.sign`), which a plain LLVM conversion made poison and then 0
    xs = np.array([-1.0, -3.5, 300.0, 200.0, -129.75, 65537.5, -70000.0, 3.0e9, -0.5], np.float64)
    xs = xs[np.abs(xs) < 2.0 ** 31] if dt.bits < 32 else xs
    x = ti.field(ti.f64, shape=len(xs))
    x.from_numpy(xs)
    out = ti.field(dt, shape=(2, len(xs)))

    @ti.kernel
    def k():
        for i in x:
            out[0, i] = ti.cast(x[i], dt)
            out[1, i] = ti.cast(ti.math.sign(x[i] + 0.5), dt)

    k()
    wrap = np.dtype(npt(dt))
    np.testing.assert_array_equal(out.to_numpy()[0], np.trunc(xs).astype(np.int64).astype(wrap))
    np.testing.assert_array_equal(out.to_numpy()[1], np.sign(xs + 0.5).astype(np.int64).astype(wrap))


def test_python_casts_and_typed_locals():
    x = ti.field(ti.f32, shape=2)
    out = ti.field(ti.f64, shape=12)
    x[0], x[1] = -2.7, 2.7

    @ti.kernel
    def run():
        out[0] = int(x[0])              # truncation toward zero
        out[1] = int(x[1])
        out[2] = float(int(x[1])) / 4   # float() gives the default float
        v: ti.i32 = x[1]                # a typed local converts its initial value
        out[3] = v
        v = 3.7                         # ... and every later assignment
        out[4] = v
        w: ti.f32 = 1
        out[5] = w / 2
        u: ti.u8 = 255
        u += 1
        out[6] = u
        d: ti.f64 = 0.1
        out[7] = d
        s = 0                           # untyped local: the type of its first value (i32)
        for _ in range(4):
            s += 0.5
        out[8] = s
        t = 0.0
        for _ in range(4):
            t += 0.5
        out[9] = t
        out[10] = ti.cast(ti.cast(-1, ti.i32), ti.u32)
        out[11] = ti.f32(7.0) / ti.i32(2)

    run()
    np.testing.assert_array_equal(
        out.to_numpy(), [-2, 2, 0.5, 2, 3, 0.5, 0, 0.1, 0, 2.0, 2 ** 32 - 1, 3.5])


def test_casts_of_wide_integer_literals_and_large_unsigned_values():
    out = ti.field(ti.u64, shape=4)
    fout = ti.field(ti.f64, shape=2)
    big = ti.field(ti.f64, shape=())
    big[None] = 1.5e19                   # above 2**63: only a u64 holds it

    @ti.kernel
    def run():
        out[0] = ti.cast(2 ** 40, ti.i64) * 3     # the literal is not squeezed through i32
        out[1] = ti.u64(2 ** 63 + 5)
        out[2] = ti.cast(big[None], ti.u64)
        out[3] = ti.cast(-1, ti.u64) // 2
        fout[0] = ti.cast(2 ** 40, ti.f64)
        fout[1] = ti.cast(out[1], ti.f64)        # u64 -> f64 of a value above 2**63

    run()
    assert out.to_numpy().tolist() == [3 * 2 ** 40, 2 ** 63 + 5, 15 * 10 ** 18, 2 ** 63 - 1]
    assert fout[0] == 2.0 ** 40
    assert fout[1] == float(2 ** 63 + 5)


def test_mixed_signedness_comparisons_follow_promotion():
    out = ti.field(ti.i32, shape=4)

    @ti.kernel
    def run(u: ti.u32, s: ti.i32, f: ti.f32):
        out[0] = u < s          # u32 vs i32 compares as u32: -1 is 4294967295
        out[1] = s < 0.5        # i32 vs float literal: compared as floats
        out[2] = s < f          # i32 vs f32
        out[3] = ti.cast(s, ti.i64) < u   # i64 vs u32: compared as i64

    run(0, -1, -0.5)
    assert out.to_numpy().tolist() == [1, 1, 1, 1]


def test_pow_variants_and_shifts_with_mixed_operand_types():
    r = ti.field(ti.f64, shape=5)
    q = ti.field(ti.i64, shape=10)

    @ti.kernel
    def run(x: ti.f32, i: ti.i32, i8: ti.i8, u8: ti.u8):
        r[0] = x ** -2               # negative constant exponent on a float
        r[1] = 2 ** i                # int ** int stays an int
        r[2] = 0.5 ** i
        r[3] = x ** i                # float ** int
        r[4] = (-x) ** 3
        q[0] = ti.cast(1, ti.i64) << i * 4   # the shift count's type does not matter
        q[1] = u8 << 7
        q[2] = i8 << 7               # i8: wraps to -128
        q[3] = (i8 - 2) >> 1         # arithmetic shift of a negative i8
        q[4] = not i
        q[5] = not (i - i)
        q[6] = ti.bit_cast(x, ti.i32)
        q[7] = 1 << (i * 3 + 1)      # literal on the left: an i32, 1 << 31 wraps
        q[8] = -i8 // 2
        q[9] = ti.bit_cast(ti.cast(-1, ti.i64), ti.u64) >> 60   # logical shift of a u64

    run(1.5, 10, 1, 1)
    np.testing.assert_allclose(r.to_numpy(), [1.5 ** -2, 2 ** 10, 0.5 ** 10, 1.5 ** 10, -1.5 ** 3],
                               rtol=1e-6)
    assert q.to_numpy().tolist() == [2 ** 40, 128, -128, -1, 0, 1,
                                     int(np.float32(1.5).view(np.int32)), -2 ** 31, -1, 15]


def test_default_ip_i64_widens_literals_and_loop_indices():
    ti.init(arch=ti.cpu, default_ip=ti.i64)
    o = ti.field(ti.i64, shape=5)

    @ti.kernel
    def run(n: ti.i64):
        for i in range(n, n + 2):    # loop indices beyond the i32 range
            o[i - n] = i * 3
        a = 2 ** 40
        o[2] = a + 1
        o[3] = n * 1000000007
        for _ in range(1):
            s = 0                    # an untyped int local is now an i64
            s += 2 ** 40
            o[4] = s

    n = 2 ** 33
    run(n)
    assert o.to_numpy().tolist() == [n * 3, (n + 1) * 3, 2 ** 40 + 1,
                                     (n * 1000000007 + 2 ** 63) % 2 ** 64 - 2 ** 63, 2 ** 40]
