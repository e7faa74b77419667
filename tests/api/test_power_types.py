"""The types and values of `**`, `ti.pow` and `ti.atan2` on every kind of operand, against
taichi (the oracle, where installed) and against NumPy. The original's rules: an integer
exponent keeps the base's type (`h_f16 ** -1` is an f16, `x_i8 ** n_i64` an i8), a float one
promotes (`h_f16 ** 0.5` is of default_fp), and atan2 is f64 where an operand is f64, else f32
(also for two integers under default_fp=f64). fluxion made `h ** 0.5` a square root of the
base's type, `h ** -1` a division of default_fp, `i8 ** i64` an i64, and atan2 of halves a half.
Each value goes to an f64 field, so its precision shows which type computed it."""
import numpy as np
import pytest

from taichi_ref import check_against_taichi


def power_types(ti):
    names = ["h**0.5", "h**-1", "h**-2", "h**2.5", "pow(h,0.5)", "pow(h,-1)", "h**i", "h**k",
             "atan2(h,g)", "atan2(i,j)", "atan2(h,d)", "atan2(f,g)", "i8**k64", "i8**-1.0",
             "f**i", "d**0.5", "i**0.5", "i**-1.0", "u8**k64", "h**h"]
    out = ti.field(ti.f64, len(names))
    halves = ti.field(ti.f16, 2)
    ints = ti.field(ti.i32, 3)
    small = ti.field(ti.i8, 1)
    byte = ti.field(ti.u8, 1)
    wide = ti.field(ti.i64, 1)
    f32s = ti.field(ti.f32, 1)
    f64s = ti.field(ti.f64, 1)

    @ti.kernel
    def k():
        h, g = halves[0], halves[1]
        i, j, kk = ints[0], ints[1], ints[2]
        f, d, n = f32s[0], f64s[0], wide[0]
        out[0] = h ** 0.5
        out[1] = h ** -1
        out[2] = h ** -2
        out[3] = h ** 2.5
        out[4] = ti.pow(h, 0.5)
        out[5] = ti.pow(h, -1)
        out[6] = h ** i
        out[7] = h ** kk
        out[8] = ti.atan2(h, g)
        out[9] = ti.atan2(i, j)
        out[10] = ti.atan2(h, d)
        out[11] = ti.atan2(f, g)
        out[12] = small[0] ** n
        out[13] = small[0] ** -1.0
        out[14] = f ** i
        out[15] = d ** 0.5
        out[16] = i ** 0.5
        out[17] = i ** -1.0
        out[18] = byte[0] ** n
        out[19] = h ** h

    halves.from_numpy(np.array([3.0, 2.5], np.float16))
    ints.from_numpy(np.array([7, 3, 12], np.int32))
    small[0] = -3
    byte[0] = 3
    wide[0] = 5
    f32s[0] = 1.1
    f64s[0] = 0.7
    k()
    return dict(zip(names, out.to_numpy().tolist()))


@pytest.mark.parametrize("default_fp", ["ti.f32", "ti.f64"])
def test_power_and_atan2_types_match_taichi(default_fp):
    # the same numbers: a type computed in f64 where the original's is f32 shows too
    check_against_taichi(power_types, rtol=0, default_fp=default_fp)


def test_power_and_atan2_values_against_numpy():
    import fluxion as ti
    got = power_types(ti)
    h, g = np.float16(3.0), np.float16(2.5)
    f32 = np.float32
    assert got["h**0.5"] == float(np.sqrt(f32(h)))                 # in f32, not f16
    assert got["h**-1"] == float(np.float16(1) / h)                # stays an f16
    assert got["atan2(h,g)"] == pytest.approx(float(np.arctan2(f32(h), f32(g))), rel=1e-7)
    assert got["atan2(h,g)"] != float(np.float16(np.arctan2(f32(h), f32(g))))
    assert got["i8**k64"] == 13                                     # (-3)**5 = -243 in an i8
    assert got["u8**k64"] == 243
    assert got["i**0.5"] == float(np.sqrt(f32(7)))
