"""The type of a matrix literal in a kernel, against taichi (the oracle, where installed): its
entries are cast to the type they all promote to, a Python int counting as the default
integer type and a float as the default float type. fluxion kept each entry's own type:
`ti.Vector([i_i32, 0.5]) * 4` wrapped its first entry around as an i32, and
`ti.Vector([x_f32, 2.0])` under default_fp=f64 squared its first entry in f32 (inf for 1e30)."""
import pytest

from taichi_ref import check_against_taichi


def literal_types(ti):
    names = ["int_and_half", "f32_and_literal", "literals_mixed", "ints_widen", "matrix",
             "norm", "u8_and_int", "half_and_literal", "floordiv"]
    out = ti.field(ti.f64, len(names))
    f32s = ti.field(ti.f32, 1)
    ints = ti.field(ti.i32, 1)
    wide = ti.field(ti.i64, 1)
    bytes_ = ti.field(ti.u8, 1)
    halves = ti.field(ti.f16, 1)

    @ti.kernel
    def k():
        x, i, n, b, h = f32s[0], ints[0], wide[0], bytes_[0], halves[0]
        v = ti.Vector([i, 0.5])
        out[0] = (v * 4)[0]
        w = ti.Vector([x, 2.0])
        out[1] = (w * w)[0]
        c = ti.Vector([1, 2.5])
        out[2] = c[0] * i
        u = ti.Vector([i, n])
        out[3] = (u * 4)[0]
        m = ti.Matrix([[x, 1], [2, x]])
        out[4] = (m @ m)[0, 0]
        out[5] = ti.Vector([x, 1.0]).norm()
        z = ti.Vector([b, 1])
        out[6] = (z * 200)[0]
        q = ti.Vector([h, 0.1])
        out[7] = (q * q)[1]
        out[8] = (ti.Vector([i, 0.5]) // 3)[0]

    f32s[0] = 1e30
    ints[0] = 1 << 30
    wide[0] = 5
    bytes_[0] = 200
    halves[0] = 0.5
    k()
    return dict(zip(names, out.to_numpy().tolist()))


@pytest.mark.parametrize("default_fp", ["ti.f32", "ti.f64"])
def test_matrix_literals_are_typed_as_in_taichi(default_fp):
    check_against_taichi(literal_types, rtol=0, default_fp=default_fp)


def test_matrix_literal_values_against_python():
    import fluxion as ti
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    got = literal_types(ti)
    assert got["int_and_half"] == float(1 << 32)      # an f64 vector: no i32 wraparound
    assert got["f32_and_literal"] == float(ti.f32(1e30)) ** 2
    assert got["u8_and_int"] == 40000                  # i32 (u8 and the int literal)
