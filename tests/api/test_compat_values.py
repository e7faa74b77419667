"""Programs that ran but gave wrong values (issue 13): each expected value comes from Python's
own semantics or a NumPy reference computed here."""
import numpy as np
import pytest

import fluxion as ti


# -- `and` / `or` -------------------------------------------------------------------------------

def test_and_or_on_integers_give_the_deciding_operand():
    @ti.kernel
    def both(x: ti.i32, y: ti.i32) -> ti.types.vector(2, ti.i32):
        return ti.Vector([x and y, x or y])

    @ti.kernel
    def chains(x: ti.i32, y: ti.i32, z: ti.i64) -> ti.types.vector(4, ti.i64):
        return ti.Vector([x and y and z, x or y or z, (x and 5) or y, 3 and x])

    for x in (0, 1, 2, -3):
        for y in (0, 1, 7):
            assert list(both(x, y)) == [x and y, x or y]
            z = -4
            assert list(chains(x, y, z)) == [x and y and z, x or y or z, (x and 5) or y, 3 and x]


def test_and_or_in_conditions_and_on_vectors():
    @ti.kernel
    def cond(x: ti.i32, y: ti.i32) -> ti.i32:
        r = 0
        if x and y:
            r += 1
        if x or y:
            r += 10
        return r

    @ti.kernel
    def vec(x: ti.i32, y: ti.i32) -> ti.types.vector(4, ti.i32):
        a = ti.Vector([x, 2, 0, 0])
        b = ti.Vector([y, 0, 1, 0])
        return (a or b) + 10 * (a and b)

    for x in (0, 4):
        for y in (0, -2):
            assert cond(x, y) == (1 if x and y else 0) + (10 if x or y else 0)
            a, b = np.array([x, 2, 0, 0]), np.array([y, 0, 1, 0])
            ref = np.logical_or(a, b) + 10 * np.logical_and(a, b)
            assert list(vec(x, y)) == ref.tolist()


# -- Python-scope element access writes through -------------------------------------------------

def test_python_scope_element_writes_reach_matrix_fields():
    v = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 2, ti.i32, shape=4)
    ref_v, ref_m = np.zeros((4, 3), np.float32), np.zeros((4, 2, 2), np.int32)
    v[1][2] = 5.5
    ref_v[1, 2] = 5.5
    v[2].y = -1
    ref_v[2, 1] = -1
    v[3].fill(2)
    ref_v[3] = 2
    m[1][1, 0] = 7
    ref_m[1, 1, 0] = 7
    m[2][0] = [3, 4]           # a row of a matrix element
    ref_m[2, 0] = [3, 4]
    e = m[3]
    e[0, 1] = 9.7              # stored as the field's type, read back as stored
    ref_m[3, 0, 1] = 9
    assert e[0, 1] == 9
    np.testing.assert_array_equal(v.to_numpy(), ref_v)
    np.testing.assert_array_equal(m.to_numpy(), ref_m)


def test_python_scope_struct_member_writes_reach_the_field():
    s = ti.Struct.field({"a": ti.f32, "b": ti.types.vector(3, ti.i32),
                         "c": ti.types.struct(d=ti.i32)}, shape=4)
    s[1].a = 3
    s[1].b[2] = 4
    s[2].b = [1, 2, 9]
    s[2].c.d = 6
    e = s[3]
    e.a = 11
    out = s.to_numpy()
    np.testing.assert_array_equal(out["a"], [0, 3, 0, 11])
    np.testing.assert_array_equal(out["b"], [[0, 0, 0], [0, 0, 4], [1, 2, 9], [0, 0, 0]])
    np.testing.assert_array_equal(out["c"]["d"], [0, 0, 6, 0])
    assert s[3].a == 11 and e.a == 11


def test_struct_member_assignment_on_hierarchical_layout():
    n = 8
    y = ti.Struct.field({"a": ti.f32, "b": ti.f32})
    ti.root.dense(ti.i, n // 4).dense(ti.i, 4).place(y)
    for i in range(n):
        y[i].a = i
    for i in range(n):
        y[i].b = y[i].a * 2 + 1
    np.testing.assert_array_equal(y.b.to_numpy(), np.arange(n) * 2 + 1)


# -- fill, any/all, struct construction in kernels -------------------------------------------

def test_fill_in_a_kernel_stores_under_branches_and_loops():
    x = ti.Vector.field(3, ti.i32, shape=4)

    @ti.kernel
    def f(c: ti.i32) -> ti.types.vector(3, ti.i32):
        v = ti.Vector([1, 2, 3])
        if c > 0:
            v.fill(c)
        return v

    @ti.kernel
    def g(c: ti.i32) -> ti.types.vector(3, ti.i32):
        v = ti.Vector([1, 2, 3])
        ti.loop_config(serialize=True)     # one variable for all iterations: in order
        for k in range(c):
            v.fill(k)
            v.z = 7
        return v

    @ti.kernel
    def h(c: ti.i32):
        for i in x:
            x[i].fill(c + i)

    assert list(f(0)) == [1, 2, 3] and list(f(5)) == [5, 5, 5]
    assert list(g(0)) == [1, 2, 3] and list(g(5)) == [4, 4, 7]
    h(3)
    np.testing.assert_array_equal(x.to_numpy(), np.repeat(np.arange(3, 7)[:, None], 3, axis=1))


def test_any_all_builtins_on_matrices():
    a = ti.Matrix.field(2, 2, dtype=ti.i32, shape=())

    @ti.kernel
    def f() -> ti.types.vector(2, ti.i32):
        return ti.Vector([any(a[None]), all(a[None])])

    for vals in ([[0, 0], [0, 0]], [[0, 3], [0, 0]], [[1, 1], [-1, 2]]):
        a[None] = vals
        arr = np.array(vals)
        assert list(f()) == [int(arr.any()), int(arr.all())]


def test_struct_values_from_ti_struct_and_positional_nested_init():
    vec3f = ti.types.vector(3, ti.f32)
    line3f = ti.types.struct(linedir=vec3f, length=ti.f32)
    mystruct = ti.types.struct(line=line3f, idx=ti.i32)
    n = 4
    x = mystruct.field(shape=n)
    y = ti.Struct.field({"a": ti.i32, "b": ti.f32}, shape=n)

    @ti.kernel
    def init():
        for i in x:
            x[i] = mystruct(1)             # the first member (the nested struct) from 1
            y[i] = ti.Struct(a=2 * i, b=0.5 * i)

    init()
    out = x.to_numpy()
    np.testing.assert_array_equal(out["line"]["linedir"], np.ones((n, 3)))
    np.testing.assert_array_equal(out["line"]["length"], np.zeros(n))
    np.testing.assert_array_equal(out["idx"], np.zeros(n))
    np.testing.assert_array_equal(y.a.to_numpy(), 2 * np.arange(n))
    np.testing.assert_array_equal(y.b.to_numpy(), 0.5 * np.arange(n))
    for i in range(n):
        x[i] = ti.Struct({"line": {"linedir": vec3f(2), "length": i + 0.5}, "idx": i})
    out = x.to_numpy()
    np.testing.assert_array_equal(out["line"]["linedir"], np.full((n, 3), 2.0))
    np.testing.assert_array_equal(out["line"]["length"], np.arange(n) + 0.5)
    np.testing.assert_array_equal(out["idx"], np.arange(n))


def test_struct_field_element_copied_into_a_kernel_is_a_copy():
    a = ti.Struct.field({"a": ti.i32, "b": ti.i32}, shape=())
    a[None].a = 2
    a[None].b = 3

    @ti.kernel
    def f() -> ti.types.vector(4, ti.i32):
        b = a[None]
        b.a = 5
        return ti.Vector([b.a, b.b, a[None].a, a[None].b])

    assert list(f()) == [5, 3, 2, 3]


# -- loops ----------------------------------------------------------------------------------

def test_ndrange_with_an_empty_dimension_runs_zero_times():
    @ti.kernel
    def count(i1: ti.i32, i2: ti.i32, j1: ti.i32, j2: ti.i32) -> ti.i32:
        n = 0
        for i, j in ti.ndrange((i1, i2), (j1, j2)):
            n += 1
        return n

    @ti.kernel
    def count_grouped(b: ti.i32, e: ti.i32) -> ti.i32:
        n = 0
        for I in ti.grouped(ti.ndrange((b, e), (b, e), 3)):
            n += 1
        return n

    @ti.kernel
    def count_const() -> ti.i32:
        n = 0
        for i, j in ti.ndrange((5, 2), (7, 1)):
            n += 1
        return n

    for i1, i2, j1, j2 in [(0, 10, 0, 20), (0, 10, 20, 0), (10, 0, 0, 20), (10, 0, 20, 0)]:
        assert count(i1, i2, j1, j2) == len(range(i1, i2)) * len(range(j1, j2))
    assert count_grouped(5, 2) == 0 and count_grouped(2, 5) == 27
    assert count_const() == 0


def test_dynamic_index_stores_from_a_parallel_loop_keep_every_entry():
    n = 24
    vt = ti.types.vector(n, ti.i32)
    x = ti.Vector.field(n, ti.i32, shape=2)

    @ti.kernel
    def local() -> vt:
        ret = vt(0)
        for i in range(n):          # the parallel loop: each iteration writes its own entry
            ret[i] = i * i
        return ret

    @ti.kernel
    def scaled() -> vt:
        ret = vt(3)
        for i in range(n):
            ret[i] *= i
        return ret

    @ti.kernel
    def field_elem():
        for i in range(n):
            x[1][i] = n - i

    assert list(local()) == [i * i for i in range(n)]
    assert list(scaled()) == [3 * i for i in range(n)]
    field_elem()
    np.testing.assert_array_equal(x.to_numpy()[1], n - np.arange(n))
    np.testing.assert_array_equal(x.to_numpy()[0], np.zeros(n))


# -- ndarrays in Python scope ---------------------------------------------------------------

def test_python_scope_ndarray_elements_write_through():
    a = ti.Matrix.ndarray(2, 2, ti.i32, 5)
    v = ti.Vector.ndarray(10, ti.i32, 5)
    ref_a, ref_v = np.zeros((5, 2, 2), np.int32), np.zeros((5, 10), np.int32)
    for i in range(5):
        for j in range(2):
            for k in range(2):
                a[i][j, k] = j * j + k * k + i
                ref_a[i, j, k] = j * j + k * k + i
        for j in range(4):
            v[i][j * j] = j * j - i
            ref_v[i, j * j] = j * j - i
    v[2].x = 7
    ref_v[2, 0] = 7
    np.testing.assert_array_equal(a.to_numpy(), ref_a)
    np.testing.assert_array_equal(v.to_numpy(), ref_v)
    assert a[3][1, 1] == ref_a[3, 1, 1] and v[4][9] == ref_v[4, 9]

    s = ti.ndarray(ti.f32, shape=())
    s[()] = 1.5
    assert s[None] == 1.5
    y = ti.ndarray(ti.math.vec2, shape=())
    y[None] = [1.0, 2.0]
    assert list(y[None]) == [1.0, 2.0]
    z = ti.ndarray(ti.f32, (4, 4))
    with pytest.raises(IndexError, match="2d ndarray indexed with 1d"):
        z[0]
    with pytest.raises(IndexError, match="out of bounds"):
        z[4, 0]


# -- ti.func templates, ti.math types ---------------------------------------------------------

def test_template_parameter_aliases_the_callers_variable():
    @ti.func
    def set_t(x: ti.template()):
        x = 1

    @ti.func
    def inc_t(x: ti.template()):
        x += 1

    @ti.func
    def set_v(x):
        x = 1

    @ti.func
    def inc_v(x):
        x += 1

    @ti.func
    def fill_t(m: ti.template()):
        m = ti.Vector([4, 5])

    @ti.kernel
    def run() -> ti.types.vector(6, ti.i32):
        a, b, c, d = 0, 10, 20, 30
        set_t(a)
        inc_t(b)
        set_v(c)
        inc_v(d)
        m = ti.Vector([0, 0])
        fill_t(m)
        return ti.Vector([a, b, c, d, m[0], m[1]])

    assert list(run()) == [1, 11, 20, 30, 4, 5]


@pytest.mark.parametrize("ip", ["i32", "i64"])
def test_math_integer_vectors_follow_default_ip(ip):
    ti.init(arch=ti.cpu, default_ip=getattr(ti, ip), default_fp=ti.f64)
    bits = int(ip[1:])
    assert ti.math.ivec3.dtype == getattr(ti, ip)
    assert ti.math.uvec2.dtype == getattr(ti, f"u{bits}")
    big = 2 ** (bits - 1) - 1

    @ti.kernel
    def f() -> ti.i32:
        n = ti.u64(big)
        v = ti.math.uvec2(n)
        return v.x == n

    assert f() == 1


def test_ndarray_boundary_clamp_moves_indices_into_range():
    @ti.kernel
    def read(x: ti.types.ndarray(boundary="clamp"), k: ti.i32) -> ti.f32:
        return x[k]

    @ti.kernel
    def write(x: ti.types.ndarray(boundary="clamp"), k: ti.i32):
        x[k] = 100

    @ti.kernel
    def read_elem(x: ti.types.ndarray(boundary="clamp"), i: ti.i32, j: ti.i32) -> ti.f32:
        return x[i, 0][j]

    ref = np.array([1.0, 2.0, 3.0], np.float32)
    x = ti.ndarray(ti.f32, shape=3)
    x.from_numpy(ref)
    for k in (-2, -1, 0, 1, 2, 3, 4):
        assert read(x, k) == ref[min(max(k, 0), 2)]
    write(x, 7)
    ref[2] = 100
    np.testing.assert_array_equal(x.to_numpy(), ref)

    v = ti.ndarray(ti.math.vec2, shape=(3, 1))
    vref = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    v.from_numpy(vref)
    for i in (-1, 1, 5):
        for j in (-3, 0, 1, 2):
            assert read_elem(v, i, j) == vref[min(max(i, 0), 2), 0, min(max(j, 0), 1)]

    @ti.kernel
    def read_mat(x: ti.types.ndarray(boundary="clamp"), i: ti.i32, j: ti.i32) -> ti.f32:
        return x[0][i, j]

    m = ti.ndarray(ti.math.mat2, shape=1)
    mref = np.array([[[1, 2], [3, 4]]], np.float32)
    m.from_numpy(mref)
    for i, j in [(-1, 0), (1, -1), (2, 0), (1, 2), (0, 1)]:
        # an element index is clamped as the flat index i * 2 + j (Taichi's rule)
        assert read_mat(m, i, j) == mref[0].reshape(-1)[min(max(i * 2 + j, 0), 3)]
    with pytest.raises(ValueError, match="boundary"):
        ti.types.ndarray(boundary="wrap")


def test_vector_ndarray_passed_to_an_untyped_annotation_keeps_its_elements():
    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in range(a.shape[0]):
            for j in ti.static(range(3)):
                a[i][j] = i * 10 + j

    a = ti.Vector.ndarray(3, ti.i32, 4)
    assert a.element_shape == (3,) and a.n == 3
    fill(a)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(4)[:, None] * 10 + np.arange(3))
    assert ti.ndarray(ti.f32, (2, 5)).element_shape == ()
    assert ti.Matrix.ndarray(2, 3, ti.f32, 4).element_shape == (2, 3)


def test_constant_matrix_indices_are_checked_per_axis():
    @ti.kernel
    def vec_two_indices() -> ti.i32:
        v = ti.Vector([1, 2, 3])
        return v[0, 1]

    @ti.kernel
    def column_past_end() -> ti.i32:
        m = ti.Matrix([[1, 2], [3, 4]])
        return m[0, 2]

    @ti.kernel
    def store_past_end() -> ti.i32:
        m = ti.Matrix([[1, 2], [3, 4]])
        m[0, 2] = 9
        return m[1, 0]

    @ti.kernel
    def negative_from_end() -> ti.i32:
        m = ti.Matrix([[1, 2], [3, 4]])
        return m[1, -1] * 10 + m[-1, 0]

    for k in (column_past_end, store_past_end):
        with pytest.raises(IndexError, match="out of range"):
            k()
    # a vector takes one index in a kernel, as in the original system
    with pytest.raises(ti.TaichiIndexError, match="Expected 1 indices, got 2"):
        vec_two_indices()
    ref = np.array([[1, 2], [3, 4]])
    assert negative_from_end() == ref[1, -1] * 10 + ref[-1, 0]
    m = ti.Matrix([[1, 2], [3, 4]])
    with pytest.raises(IndexError, match="out of range"):
        m[0, 2]
    with pytest.raises(IndexError, match="out of range"):
        ti.Vector([1, 2, 3])[0, 1]


def test_ndrange_refuses_float_bounds_instead_of_truncating():
    @ti.kernel
    def const_bounds() -> ti.i32:
        n = 0
        for i in ti.ndrange((1.1, 10.5)):
            n += 1
        return n

    @ti.kernel
    def value_bound(x: ti.f32) -> ti.i32:
        n = 0
        for i in ti.ndrange(x):
            n += 1
        return n

    @ti.kernel
    def numpy_ints() -> ti.i32:
        n = 0
        for i, j in ti.ndrange((np.int64(1), np.int32(4)), np.int16(2)):
            n += 1
        return n

    with pytest.raises(TypeError, match="integers"):
        const_bounds()
    with pytest.raises(TypeError, match="integers"):
        value_bound(3.7)
    assert numpy_ints() == 3 * 2


def test_trace_needs_a_square_matrix():
    @ti.kernel
    def tall() -> ti.f32:
        x = ti.Matrix([[0.1, 3.0], [5.0, 7.0], [1.0, 2.0]])
        return x.trace()

    @ti.kernel
    def square() -> ti.f32:
        return ti.Matrix([[0.5, 3.0], [5.0, 7.0]]).trace()

    with pytest.raises(ti.FluxionTypeError, match="square"):
        tall()
    with pytest.raises(ti.FluxionCompilationError, match="square"):   # as in the original
        ti.Vector([1.0, 2.0]).trace()
    assert square() == pytest.approx(np.trace(np.array([[0.5, 3.0], [5.0, 7.0]])))


def test_matrix_indexed_with_a_static_index_vector():
    x = ti.Matrix.field(2, 3, dtype=ti.f32, shape=(4, 2))

    @ti.kernel
    def fill():
        for i, j in ti.ndrange(4, 2):
            for I in ti.static(ti.grouped(ti.ndrange(2, 3))):
                x[i, j][I] = I[0] + I[1] * 10 + i + j * 4

    fill()
    k, l = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
    ref = np.array([[k + l * 10 + i + j * 4 for j in range(2)] for i in range(4)])
    np.testing.assert_array_equal(x.to_numpy(), ref)
    m = ti.Matrix([[1, 2, 3], [4, 5, 6]])
    assert m[ti.Vector([1, 2])] == 6


def test_ndarray_shapes_are_checked():
    assert ti.ndarray(ti.i32, shape=np.int32(3)).shape == (3,)
    assert ti.ndarray(ti.i32, shape=(1, np.int64(2), 5)).shape == (1, 2, 5)
    assert ti.ndarray(ti.f32, shape=()).shape == ()
    # (zero-size arrays are allowed, unlike in the original system: kernels over them run zero
    # iterations, see tests/interop/test_zero_size_arrays.py)
    for bad in (2 ** 31, 1.5, (1, 0.5), (1, 2 ** 31), -2):
        with pytest.raises(RuntimeError, match="shape"):
            ti.ndarray(ti.i32, shape=bad)


def test_template_parameter_aliases_a_local_struct():
    S = ti.types.struct(a=ti.i32, v=ti.types.vector(2, ti.f32))

    @ti.func
    def reset(s: ti.template()):
        s = S(a=7, v=ti.Vector([1.5, 2.5]))

    @ti.func
    def bump(s: ti.template()):
        s.a += 1

    @ti.kernel
    def run() -> ti.types.vector(3, ti.f32):
        s = S(a=1, v=ti.Vector([0.0, 0.0]))
        reset(s)
        bump(s)
        return ti.Vector([s.a, s.v[0], s.v[1]])

    assert list(run()) == [8.0, 1.5, 2.5]


# -- integer powers of constants ----------------------------------------------------------------

def test_integer_power_of_constants_with_a_huge_exponent_folds_modulo_the_width():
    """`3 ** 4294967295` in u32 folded as the kernel was built by computing the exact power
    (a number of two billion digits: the compile never ended); the folded value is now the
    wrapped power, the one the same operands give at run time."""
    out = ti.field(ti.i64, 4)
    rt = ti.field(ti.i64, 4)
    a = ti.field(ti.u32, 2)
    b = ti.field(ti.i32, 2)

    @ti.kernel
    def k():
        out[0] = ti.cast(ti.cast(3, ti.u32) ** ti.cast(4294967295, ti.u32), ti.i64)
        out[1] = ti.cast(ti.cast(-3, ti.i32) ** ti.cast(2147483647, ti.i32), ti.i64)
        rt[0] = ti.cast(a[0] ** a[1], ti.i64)
        rt[1] = ti.cast(b[0] ** b[1], ti.i64)

    a.from_numpy(np.array([3, 4294967295], np.uint32))
    b.from_numpy(np.array([-3, 2147483647], np.int32))
    k()
    wrap = (pow(-3, 2147483647, 1 << 32) + (1 << 31)) % (1 << 32) - (1 << 31)   # as an i32
    want = [pow(3, 4294967295, 1 << 32), wrap]
    assert out.to_numpy()[:2].tolist() == want
    assert rt.to_numpy()[:2].tolist() == want


# -- float-to-integer conversions of constants --------------------------------------------------

def test_folded_float_to_int_casts_give_what_the_cpu_computes():
    """A cast of a float constant folds to what the same cast gives at run time on the CPU,
    out of the integer type's range too (undefined as in C; x86 gives the lowest value of
    the 32- or 64-bit type it converts through): `ti.cast(-3e9, ti.i32)` folded to the
    wrapped 1294967296 where the kernel computing it gives -2**31."""
    vals = [1e30, -3e9, 3e9, float("inf"), -1.5, 200.0, 70000.0, -7.25, 1e19]
    dts = [ti.i8, ti.u8, ti.i16, ti.u16, ti.i32, ti.u32, ti.i64, ti.u64]
    folded = ti.field(ti.i64, (len(dts), len(vals)))
    run_time = ti.field(ti.i64, (len(dts), len(vals)))
    a = ti.field(ti.f32, len(vals))

    @ti.kernel
    def k():
        for d in ti.static(range(len(dts))):
            for j in ti.static(range(len(vals))):
                folded[d, j] = ti.cast(ti.cast(ti.f32(vals[j]), dts[d]), ti.i64)
                run_time[d, j] = ti.cast(ti.cast(a[j], dts[d]), ti.i64)

    a.from_numpy(np.array(vals, np.float32))
    k()
    got, want = folded.to_numpy(), run_time.to_numpy()
    # a u64 beyond 2**64 (1e30, inf) is not folded, and LLVM folds such a conversion freely
    defined = np.ones_like(got, bool)
    defined[dts.index(ti.u64), [0, 3]] = False
    np.testing.assert_array_equal(got[defined], want[defined])
    assert got[dts.index(ti.i32), 1] == -2**31
    assert got[dts.index(ti.u8), 4] == 255 and got[dts.index(ti.i8), 5] == -56
