"""ti.func (inlined functions) and kernel arguments / return values."""
import numpy as np
import pytest

import fluxion as ti


@ti.func
def _piecewise(x):
    # early returns in if/elif/else
    if x < -1.0:
        return -1.0
    elif x < 1.0:
        return x * x * x
    else:
        if x > 3.0:
            return 27.0
    return x * x * x


@ti.func
def _sign_i(x):
    r = 0
    if x > 0:
        r = 1
    elif x < 0:
        r = -1
    return r


@ti.func
def _clamp_vec(v, lo: ti.f32, hi: ti.f32):
    if v.norm() < lo:
        return v * 0.0
    if v.norm() > hi:
        return v.normalized() * hi
    return v


@ti.func
def _poly(x, a, b=2.0, c=1.0):
    return (a * x + b) * x + c


@ti.func
def _outer(x):
    return _poly(_piecewise(x), 1.0) + _sign_i(x)   # nested calls


def test_funcs_with_early_returns_nested_calls_and_default_args():
    n = 101
    x = ti.field(ti.f32, shape=n)
    out = ti.field(ti.f32, shape=(4, n))
    xs = np.linspace(-5, 5, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def run():
        for i in x:
            out[0, i] = _piecewise(x[i])
            out[1, i] = _sign_i(x[i])
            out[2, i] = _outer(x[i])
            out[3, i] = _poly(x[i], a=0.5, c=-1.0)

    run()
    X = xs.astype(np.float64)
    pw = np.where(X < -1, -1.0, np.where(X > 3, 27.0, X ** 3))
    sg = np.sign(X)
    ref = np.stack([pw, sg, (pw + 2) * pw + 1 + sg, (0.5 * X + 2) * X - 1])
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-6, atol=1e-6)


def test_func_returning_vectors_with_early_return():
    v = ti.Vector.field(2, ti.f32, shape=5)
    out = ti.Vector.field(2, ti.f32, shape=5)
    v_np = np.array([[0.1, 0.0], [1.0, 1.0], [3.0, 4.0], [0.0, -10.0], [0.3, 0.4]], np.float32)
    v.from_numpy(v_np)

    @ti.kernel
    def run():
        for i in v:
            out[i] = _clamp_vec(v[i], 0.5, 2.0)

    run()
    ref = []
    for p in v_np.astype(np.float64):
        nrm = np.linalg.norm(p)
        ref.append(p * 0 if nrm < 0.5 else (p / nrm * 2 if nrm > 2 else p))
    np.testing.assert_allclose(out.to_numpy(), np.array(ref), rtol=1e-6, atol=1e-7)


def test_func_arguments_are_copies_and_typed_parameters_convert():
    out = ti.field(ti.f64, shape=4)

    @ti.func
    def bump(a):
        a += 1       # changes the callee's copy only
        return a

    @ti.func
    def as_int(a: ti.i32):
        return a / 2  # i32 / i32 -> default float

    @ti.kernel
    def run():
        x = 5
        y = bump(x)
        out[0] = x
        out[1] = y
        f = 7.9
        out[2] = as_int(f)         # 7.9 -> 7 -> 3.5
        v = ti.Vector([1.0, 2.0])
        w = bump(v)
        out[3] = v[0] * 10 + w[0]

    run()
    np.testing.assert_array_equal(out.to_numpy(), [5, 6, 3.5, 12])


def test_literal_argument_converts_to_annotated_func_parameter():
    @ti.func
    def half(a: ti.i32):
        return a / 2

    @ti.kernel
    def k() -> ti.f32:
        return half(7.9)

    assert k() == 3.5


def test_template_arguments_alias_fields_and_select_code():
    a = ti.field(ti.i32, shape=8)
    b = ti.field(ti.i32, shape=8)

    @ti.func
    def fill(f: ti.template(), scale: ti.template()):
        for i in ti.static(range(8)):
            f[i] = i * scale

    @ti.kernel
    def run(f: ti.template(), g: ti.template(), scale: ti.template()):
        fill(f, scale)
        fill(g, -scale)

    run(a, b, 3)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(8) * 3)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(8) * -3)
    run(b, a, 5)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(8) * -5)
    np.testing.assert_array_equal(b.to_numpy(), np.arange(8) * 5)


def test_func_called_inside_loops_and_from_other_funcs():
    n = 40
    out = ti.field(ti.i64, shape=n)

    @ti.func
    def fib(k):
        a, b = ti.cast(0, ti.i64), ti.cast(1, ti.i64)
        for _ in range(k):
            a, b = b, a + b
        return a

    @ti.func
    def fib_sum(k):
        s = ti.cast(0, ti.i64)
        for j in range(k + 1):
            s += fib(j)
        return s

    @ti.kernel
    def run():
        for i in range(n):
            out[i] = fib_sum(i)

    run()
    f = [0, 1]
    while len(f) < n + 2:
        f.append(f[-1] + f[-2])
    np.testing.assert_array_equal(out.to_numpy(), [sum(f[:i + 1]) for i in range(n)])


@pytest.mark.parametrize("dt, value, expected", [
    (ti.i8, -100, -100), (ti.i16, 30000, 30000), (ti.i32, -2 ** 31, -2 ** 31),
    (ti.i64, 2 ** 62 + 3, 2 ** 62 + 3), (ti.u8, 255, 255), (ti.u16, 65535, 65535),
    (ti.u32, 2 ** 32 - 1, 2 ** 32 - 1), (ti.u64, 2 ** 63 - 1, 2 ** 63 - 1),
    (ti.u64, 2 ** 63, 2 ** 63), (ti.u64, 2 ** 64 - 1, 2 ** 64 - 1),
    (ti.f32, 0.1, float(np.float32(0.1))), (ti.f64, 0.1, 0.1),
], ids=str)
def test_scalar_argument_and_return_roundtrip(dt, value, expected):
    @ti.kernel
    def ident(x: dt) -> dt:
        y = x
        return y

    got = ident(value)
    assert got == expected
    assert isinstance(got, float if dt.is_float else int)


def test_return_value_is_converted_to_the_annotated_type():
    @ti.kernel
    def trunc(x: ti.f32) -> ti.i32:
        return x * 2

    @ti.kernel
    def widen(x: ti.i32) -> ti.f64:
        return x / 4

    @ti.kernel
    def mixed(a: ti.i32, b: ti.f64) -> ti.f64:
        return a + b   # i32 + f64 -> f64, no f32 rounding on the way

    @ti.kernel
    def u64_max() -> ti.u64:
        return ti.cast(-1, ti.u64)

    assert u64_max() == 2 ** 64 - 1
    assert trunc(1.7) == 3
    assert trunc(-1.7) == -3
    assert widen(3) == 0.75
    assert mixed(2 ** 24 + 1, 0.0) == 2 ** 24 + 1


def test_vector_and_matrix_return_values():
    @ti.kernel
    def vec(s: ti.f32) -> ti.types.vector(3, ti.f32):
        return ti.Vector([1.0, 2.0, 3.0]) * s

    @ti.kernel
    def mat(a: ti.f32) -> ti.types.matrix(2, 2, ti.f64):
        m = ti.Matrix([[a, 1.0], [0.0, a]])
        return m @ m

    @ti.kernel
    def ivec(k: ti.i32) -> ti.types.vector(2, ti.i32):
        r = ti.Vector([0, 0])
        for i in range(k):
            r += ti.Vector([i, 1])
        return r

    np.testing.assert_allclose(np.asarray(vec(0.5)), [0.5, 1.0, 1.5])
    a = 1.5
    np.testing.assert_allclose(np.asarray(mat(a)), np.array([[a, 1], [0, a]]) @ [[a, 1], [0, a]])
    np.testing.assert_array_equal(np.asarray(ivec(5)), [sum(range(5)), 5])
    assert np.asarray(mat(a)).shape == (2, 2)


def test_kernel_reads_fields_and_returns_a_reduction():
    x = ti.field(ti.f32, shape=1000)
    x.from_numpy(np.linspace(0, 1, 1000, dtype=np.float32))

    @ti.kernel
    def total() -> ti.f32:
        s = 0.0
        for _ in range(1):
            for i in range(1000):
                s += x[i]
        return s

    assert total() == pytest.approx(float(np.linspace(0, 1, 1000, dtype=np.float32).sum()),
                                    rel=1e-5)


def test_early_return_result_type_is_not_fixed_by_a_literal_return():
    out = ti.field(ti.f64, shape=3)

    @ti.func
    def half_pos(x):
        if x < 0:
            return 0
        return x * 0.5

    @ti.func
    def floor_at_minus_one(x):
        if x < -1.0:
            return -1.0
        return x

    @ti.func
    def vec_pos(x):
        if x < 0:
            return ti.Vector([0, 0])
        return ti.Vector([x, x * 0.5])

    @ti.kernel
    def run(x: ti.f32, y: ti.f64):
        out[0] = half_pos(x)
        out[1] = floor_at_minus_one(y)
        out[2] = vec_pos(x)[1]

    run(3.0, 0.1234567890123)
    np.testing.assert_array_equal(out.to_numpy(), [1.5, 0.1234567890123, 1.5])


def test_func_return_annotation_converts_the_result():
    out = ti.field(ti.f64, shape=2)

    @ti.func
    def to_int(x) -> ti.i32:
        return x * 0.5

    @ti.func
    def to_float(x) -> ti.f32:
        if x < 0:
            return 0
        return x * 0.5

    @ti.kernel
    def run(x: ti.f32):
        out[0] = to_int(x)
        out[1] = to_float(x)

    run(3.0)
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 1.5])


def test_out_of_range_integer_arguments_are_rejected_with_the_argument_named():
    @ti.kernel
    def ident(x: ti.u64) -> ti.u64:
        return x

    @ti.kernel
    def vec(v: ti.types.vector(2, ti.u64)) -> ti.u64:
        return v[0] ^ v[1]

    assert ident(np.uint64(2 ** 64 - 2)) == 2 ** 64 - 2
    assert vec(ti.Vector([2 ** 64 - 1, 2 ** 63])) == (2 ** 64 - 1) ^ 2 ** 63
    for bad in (2 ** 64, -1):
        with pytest.raises(ti.FluxionRuntimeTypeError,
                           match=r"kernel 'ident': argument 'x' .*out of range"):
            ident(bad)
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"kernel 'vec': argument 'v' .*out of range"):
        vec(ti.Vector([2 ** 64, 0]))


def test_annotated_func_parameters_and_results_with_vectors_and_defaults():
    out = ti.field(ti.f64, shape=6)

    @ti.func
    def scaled(v: ti.types.vector(2, ti.i32), k: ti.i32 = 2.9) -> ti.types.vector(2, ti.f64):
        return v * k / 4

    @ti.func
    def clip(x) -> ti.types.vector(2, ti.i32):
        if x < 0:
            return ti.Vector([0.0, 0.0])
        return ti.Vector([x, x * 2])

    @ti.kernel
    def run(x: ti.f32):
        a = scaled(ti.Vector([1.7, -3.2]))     # entries 1, -3; k = 2
        out[0], out[1] = a[0], a[1]
        b = clip(x)
        out[2], out[3] = b[0], b[1]
        c = clip(-x)
        out[4], out[5] = c[0], c[1]

    run(2.6)
    np.testing.assert_array_equal(out.to_numpy(), [1 * 2 / 4, -3 * 2 / 4, 2, 5, 0, 0])


def test_early_returns_of_structs_and_of_different_shapes():
    pair = ti.types.struct(a=ti.f32, b=ti.i32)
    out = ti.field(ti.f32, shape=4)

    @ti.func
    def make(x):
        if x < 0:
            return pair(a=0, b=-1)
        return pair(a=x * 0.5, b=1)

    @ti.func
    def mixed(x):
        if x < 0:
            return ti.Vector([x, x])
        return x

    @ti.kernel
    def run(x: ti.f32):
        p = make(x)
        q = make(-x)
        out[0], out[1], out[2], out[3] = p.a, p.b, q.a, q.b

    @ti.kernel
    def bad(x: ti.f32) -> ti.f32:
        return mixed(x)

    run(3.0)
    np.testing.assert_array_equal(out.to_numpy(), [1.5, 1, 0, -1])
    with pytest.raises(ti.FluxionTypeError, match="returns values of different shapes"):
        bad(1.0)


def test_kernel_returns_a_struct():
    s0 = ti.types.struct(a=ti.math.vec3, b=ti.i16)
    s1 = ti.types.struct(a=ti.f32, b=s0)
    f = s0.field(shape=2)

    @ti.kernel
    def make(x: ti.f32) -> s1:
        return s1(a=x, b=s0(a=ti.math.vec3([x, 2 * x, 3]), b=65537))

    @ti.kernel
    def from_field() -> s0:
        return f[1]

    r = make(1.5)
    assert r.a == 1.5 and list(r.b.a) == [1.5, 3.0, 3.0]
    assert r.b.b == 65537 - 65536                     # an i16: wrapped, as a cast does
    f[1] = {"a": [1, 2, 3], "b": 7}
    r = from_field()
    assert list(r.a) == [1, 2, 3] and r.b == 7


def test_kernel_struct_return_must_match():
    sphere = ti.types.struct(center=ti.math.vec3, radius=float)
    circle = ti.types.struct(center=ti.math.vec2, radius=float)

    @ti.kernel
    def wrong() -> sphere:
        return circle(center=ti.math.vec2([1, 2]), radius=2)

    with pytest.raises(ti.FluxionCompilationError, match="annotation"):
        wrong()


def test_a_vector_of_python_numbers_passed_to_a_func_is_a_copy_it_may_assign():
    out = ti.field(ti.f32, shape=3)

    @ti.func
    def g(v):
        v[1] = 7.0
        v += 1
        return v[1] + v[0]

    @ti.kernel
    def k():
        out[0] = g(ti.Vector([1.0, 2.0]))       # could not be assigned
        w = ti.Vector([1.0, 2.0])
        out[1] = g(w)
        out[2] = w[1]                           # the caller's keeps its value

    k()
    np.testing.assert_array_equal(out.to_numpy(), [10.0, 10.0, 2.0])
