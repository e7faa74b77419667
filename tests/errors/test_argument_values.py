"""Scalar arguments keep their value or the launch raises, naming the argument: a Python int
out of the range of the argument's integer type (it would wrap), a float for an integer
argument (it would be truncated; the original system refuses floats there too)."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.errors import FluxionRuntimeTypeError  # a launch-time error, as in Taichi

INT_TYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64]


def _range(dt):
    bits = {ti.i8: 8, ti.i16: 16, ti.i32: 32, ti.i64: 64, ti.u8: 8, ti.u16: 16, ti.u32: 32,
            ti.u64: 64}[dt]
    if dt in (ti.u8, ti.u16, ti.u32, ti.u64):
        return 0, 2 ** bits - 1
    return -2 ** (bits - 1), 2 ** (bits - 1) - 1


@pytest.mark.parametrize("dt", INT_TYPES)
def test_integer_arguments_out_of_range_raise_and_the_ends_pass(dt):
    wide = ti.u64 if dt is ti.u64 else ti.i64

    @ti.kernel
    def k(count: dt) -> wide:
        return ti.cast(count, wide)

    lo, hi = _range(dt)
    for v in (lo, hi, np.int64(min(hi, 2 ** 62)), True):
        assert k(v) == int(v)        # the kernel saw exactly v
    for bad in (lo - 1, hi + 1):
        with pytest.raises(FluxionRuntimeTypeError, match=rf"argument 'count' expects {dt}.*out of range"):
            k(bad)


@pytest.mark.parametrize("value", [3.7, 3.0, np.float32(2.5), np.float64(-1.0), float("nan")])
def test_a_float_for_an_integer_argument_raises(value):
    @ti.kernel
    def k(n: ti.i32) -> ti.i32:
        return n * 2

    with pytest.raises(FluxionRuntimeTypeError, match=r"argument 'n' expects i32, got .*float"):
        k(value)
    assert k(True) == 2 and k(np.int16(-4)) == -8 and k(21) == 42


def test_matrix_and_struct_arguments_check_their_integer_entries():
    pair = ti.types.struct(a=ti.i8, b=ti.f32)

    @ti.kernel
    def vec(v: ti.types.vector(2, ti.u8)) -> ti.i32:
        return ti.cast(v[0], ti.i32) + v[1]

    @ti.kernel
    def st(p: pair) -> ti.f32:
        return p.a + p.b

    assert vec(ti.Vector([255, 1])) == 256
    with pytest.raises(FluxionRuntimeTypeError, match="argument 'v' expects u8.*256"):
        vec(ti.Vector([256, 1]))
    with pytest.raises(FluxionRuntimeTypeError, match="argument 'v' expects u8.*float"):
        vec(np.array([1.5, 1.0]))
    assert st(pair(a=-128, b=0.5)) == -127.5
    with pytest.raises(FluxionRuntimeTypeError, match="argument 'p' expects i8.*128"):
        st({"a": 128, "b": 0.5})


def test_the_error_names_the_kernel_and_its_file():
    @ti.kernel
    def scale(factor: ti.i16):
        pass

    with pytest.raises(FluxionRuntimeTypeError) as e:
        scale(40000)
    assert "scale" in str(e.value) and __file__ in str(e.value) and "-32768 .. 32767" in str(e.value)


def test_struct_arguments_of_another_layout_raise_naming_the_argument_and_member():
    inner = ti.types.struct(p=ti.math.vec2, w=ti.f32)
    outer = ti.types.struct(a=inner, b=ti.i32)
    wide = ti.types.struct(p=ti.math.vec3, w=ti.f32)

    @ti.kernel
    def total(s: outer) -> ti.f32:
        return s.a.p[0] + s.a.p[1] + s.a.w + s.b

    good = outer(a=inner(p=ti.math.vec2(1, 2), w=3), b=4)
    assert total(good) == 10.0
    assert total({"a": {"p": [1, 2], "w": 3}, "b": 4}) == 10.0
    # a nested member keeps the struct it is given: its layout is checked at the launch
    bad = outer(a=wide(p=ti.math.vec3(1, 2, 3), w=3), b=4)
    with pytest.raises(FluxionRuntimeTypeError, match="argument 's': member 'a.p' takes 2 "
                                                      "entries, got 3") as e:
        total(bad)
    assert "total" in str(e.value) and __file__ in str(e.value)
    with pytest.raises(FluxionRuntimeTypeError, match="member 'a.w' is a scalar"):
        total({"a": {"p": [1, 2], "w": [3, 3]}, "b": 4})
    with pytest.raises(FluxionRuntimeTypeError, match=r"it has members \['a'\]; the type has "
                                                      r"\['a', 'b'\]"):
        total({"a": {"p": [1, 2], "w": 3}})


def test_matrix_arguments_of_another_shape_raise_naming_the_argument():
    @ti.kernel
    def corner(m: ti.types.matrix(2, 3, ti.f32)) -> ti.f32:
        return m[0, 2] * 10 + m[1, 0]

    @ti.kernel
    def third(v: ti.types.vector(6, ti.f32)) -> ti.f32:
        return v[2]

    ref = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    assert corner(ti.Matrix(ref.tolist())) == ref[0, 2] * 10 + ref[1, 0]
    assert corner(ref) == ref[0, 2] * 10 + ref[1, 0]
    # a flat sequence passes in row-major order; a vector takes an n x 1 or 1 x n value
    assert corner(ref.ravel().tolist()) == ref[0, 2] * 10 + ref[1, 0]
    assert third(ref.ravel()) == ref.ravel()[2]
    assert third(ref.reshape(6, 1)) == ref.ravel()[2]
    with pytest.raises(FluxionRuntimeTypeError, match=r"argument 'm': a value of shape \(3, 2\) "
                                                      r"is given for shape \(2, 3\)") as e:
        corner(ti.Matrix(ref.T.tolist()))
    assert "corner" in str(e.value) and __file__ in str(e.value)
    with pytest.raises(FluxionRuntimeTypeError, match=r"shape \(3, 2\) is given"):
        corner(ref.T)
    with pytest.raises(FluxionRuntimeTypeError, match=r"argument 'v': a value of shape \(2, 3\) "
                                                      r"is given for shape \(6,\)"):
        third(ti.Matrix(ref.tolist()))
    with pytest.raises(FluxionRuntimeTypeError, match="it takes 6 values, got 5"):
        corner([1, 2, 3, 4, 5])
