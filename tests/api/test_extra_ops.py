"""The smaller functions of the original API: C-style `raw_div`/`raw_mod`, the logical shift
`bit_shr`, `zero`/`one`, `randn`, `rescale_index`, `get_addr`, the color helpers. Checked
against NumPy's C-semantics operations."""
import numpy as np
import pytest

import fluxion as ti

PAIRS = [(-7, 2), (7, -2), (7, 2), (-8, 2), (-1, 3), (0, -5), (2**31 - 1, -3), (-2**31 + 1, 7)]


def test_raw_div_and_raw_mod_truncate_like_c():
    @ti.kernel
    def k(a: ti.i32, b: ti.i32) -> ti.types.vector(2, ti.i32):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b)])

    for a, b in PAIRS:
        q = np.trunc(np.float64(a) / b).astype(np.int64)     # C's quotient
        assert list(k(a, b)) == [q, np.fmod(a, b)], (a, b)


def test_raw_div_and_raw_mod_of_floats():
    @ti.kernel
    def k(a: ti.f64, b: ti.f64) -> ti.types.vector(2, ti.f64):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b)])

    for a, b in [(-7.5, 2.0), (7.5, -2.0), (5.25, 0.5), (-0.75, 4.0)]:
        d, m = k(a, b)
        assert d == a / b and m == pytest.approx(np.fmod(a, b))


def test_raw_div_and_raw_mod_in_python_scope():
    # as the original: Python's // for two ints, C's remainder
    assert ti.raw_div(-7, 2) == -4 and ti.raw_mod(-7, 2) == -1
    assert ti.raw_div(-7.0, 2) == -3.5 and ti.raw_mod(-7.0, 2.0) == -1.0


@pytest.mark.parametrize("dt", [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u32])
def test_bit_shr_is_a_logical_shift(dt):
    @ti.kernel
    def k(a: dt, n: ti.i32) -> dt:
        return ti.bit_shr(a, n)

    unsigned = np.dtype(f"uint{dt.bits}")
    values = [-1, -2, -7, 5, 100] if dt.is_signed else [1, 5, 100, 2**dt.bits - 1]
    for v in values:
        for n in (0, 1, 3):
            # the bits of v as an unsigned number, shifted, read back as dt
            bits = np.array([v], dtype=dt.np_dtype).view(unsigned)
            want = (bits >> unsigned.type(n)).view(dt.np_dtype)[0].item()
            assert k(v, n) == want, (v, n)


def test_zero_one():
    @ti.kernel
    def k(x: ti.f32, v: ti.types.vector(3, ti.i32)) -> ti.types.vector(4, ti.f32):
        return ti.Vector([ti.zero(x), ti.one(x), ti.zero(v)[1], ti.one(v)[2]])

    assert list(k(3.5, ti.Vector([4, 5, 6]))) == [0.0, 1.0, 0.0, 1.0]


def test_randn_is_standard_normal():
    n = 200000
    out = ti.field(ti.f32, shape=n)

    @ti.kernel
    def sample():
        for i in out:
            out[i] = ti.randn()

    sample()
    a = out.to_numpy()
    assert np.isfinite(a).all()
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1) < 0.02
    # the normal's tails: about 4.55% beyond 2 sigma
    assert abs((np.abs(a) > 2).mean() - 0.0455) < 0.004


def test_rescale_index():
    fine = ti.field(ti.i32, shape=(8, 6))
    coarse = ti.field(ti.i32, shape=(2, 3))
    out = ti.Vector.field(2, ti.i32, shape=(8, 6))
    up = ti.Vector.field(2, ti.i32, shape=(2, 3))

    @ti.kernel
    def k():
        for I in ti.grouped(fine):
            out[I] = ti.rescale_index(fine, coarse, I)
        for I in ti.grouped(coarse):
            up[I] = ti.rescale_index(coarse, fine, I)

    k()
    i, j = np.indices((8, 6))
    assert (out.to_numpy() == np.stack([i // 4, j // 2], -1)).all()
    i, j = np.indices((2, 3))
    assert (up.to_numpy() == np.stack([i * 4, j * 2], -1)).all()


def test_get_addr_follows_the_layout():
    b = ti.field(ti.f32)
    ti.root.dense(ti.j, 32).dense(ti.i, 16).place(b)   # column-major cells

    @ti.kernel
    def addr(i: ti.i32, j: ti.i32) -> ti.u64:
        return ti.get_addr(b, [i, j])

    base = addr(0, 0)
    assert addr(1, 0) - base == 4
    assert addr(0, 1) - base == 16 * 4
    assert addr(3, 5) - base == (5 * 16 + 3) * 4
    with pytest.raises(ti.FluxionSyntaxError):
        ti.get_addr(b, [0, 0])                         # kernels only


def test_colors():
    assert ti.rgb_to_hex((0.2, 0.4, 1.0)) == (int(0.2 * 255) << 16) + (int(0.4 * 255) << 8) + 255
    r, g, b = ti.hex_to_rgb(0x336699)
    assert (round(r * 255), round(g * 255), round(b * 255)) == (0x33, 0x66, 0x99)


@pytest.mark.parametrize("dt", [ti.f32, ti.f64])
def test_frexp_matches_numpy(dt):
    @ti.kernel
    def fr(x: dt) -> ti.types.vector(2, dt):
        m, e = ti.frexp(x)
        return ti.Vector([m, e])

    values = [1.4, -3.0, 0.0, 0.5, 1.0, 1e30, -2.75e-20, np.inf]
    if dt is ti.f64:
        values.append(5e-320)                          # a subnormal (f32 ones are flushed)
    for v in values:
        m, e = np.frexp(dt.np_dtype.type(v))
        got = fr(v)
        assert got[0] == m and got[1] == e, v
    assert ti.frexp(1.4) == (0.7, 1)


def test_assume_in_range_returns_the_value():
    @ti.kernel
    def k(x: ti.i32) -> ti.i32:
        return ti.assume_in_range(x, 10, -2, 2) * 2

    assert k(9) == 18
