"""Math builtins (`ti.sin`, ..., `ti.math.*`) in kernels, compared with NumPy in f32 and f64."""
import math

import numpy as np
import pytest

import fluxion as ti
from taichi_ref import check_against_taichi

N = 257

UNARY = {
    # name: (kernel function, numpy reference, input domain)
    "sin": (ti.sin, np.sin, (-10, 10)),
    "cos": (ti.cos, np.cos, (-10, 10)),
    "tan": (ti.tan, np.tan, (-1.4, 1.4)),
    "asin": (ti.asin, np.arcsin, (-0.999, 0.999)),
    "acos": (ti.acos, np.arccos, (-0.999, 0.999)),
    "atan": (ti.atan, np.arctan, (-20, 20)),
    "tanh": (ti.tanh, np.tanh, (-5, 5)),
    "exp": (ti.exp, np.exp, (-20, 20)),
    "log": (ti.log, np.log, (1e-3, 1e3)),
    "sqrt": (ti.sqrt, np.sqrt, (0, 1e4)),
    "rsqrt": (ti.rsqrt, lambda x: 1 / np.sqrt(x), (1e-2, 1e4)),
    "abs": (ti.abs, np.abs, (-50, 50)),
    "floor": (ti.floor, np.floor, (-50, 50)),
    "ceil": (ti.ceil, np.ceil, (-50, 50)),
    # random inputs never sit exactly on a half, so the tie rule does not matter here
    "round": (ti.round, np.round, (-50, 50)),
}
NAMES = list(UNARY)


@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_unary_math_functions(dt):
    rng = np.random.default_rng(7)
    xs = np.stack([rng.uniform(*UNARY[k][2], N) for k in NAMES]).astype(dt.np_dtype)
    x = ti.field(dt, shape=xs.shape)
    out = ti.field(dt, shape=xs.shape)
    x.from_numpy(xs)

    @ti.kernel
    def run():
        for i in range(N):
            for k in ti.static(range(len(NAMES))):
                out[k, i] = UNARY[NAMES[k]][0](x[k, i])

    run()
    got = out.to_numpy()
    rtol = 2e-6 if dt is ti.f32 else 1e-13
    for k, name in enumerate(NAMES):
        ref = UNARY[name][1](xs[k].astype(np.float64))
        np.testing.assert_allclose(got[k], ref, rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.parametrize("dt", [ti.f32, ti.f64], ids=str)
def test_binary_math_functions(dt):
    rng = np.random.default_rng(11)
    a_np = rng.uniform(-5, 5, N).astype(dt.np_dtype)
    b_np = rng.uniform(-5, 5, N).astype(dt.np_dtype)
    a_np[:5] = [0.0, 1.0, -1.0, 0.0, -1.0]
    b_np[:5] = [1.0, 0.0, 0.0, -1.0, -1.0]
    a, b = ti.field(dt, shape=N), ti.field(dt, shape=N)
    a.from_numpy(a_np)
    b.from_numpy(b_np)
    out = ti.field(dt, shape=(6, N))

    @ti.kernel
    def run():
        for i in a:
            out[0, i] = ti.atan2(a[i], b[i])
            out[1, i] = ti.min(a[i], b[i])
            out[2, i] = ti.max(a[i], b[i])
            out[3, i] = ti.min(a[i], b[i], 0.5)      # variadic
            out[4, i] = ti.pow(ti.abs(a[i]) + 0.1, b[i])   # 0.1: a default f32, as Taichi
            out[5, i] = ti.max(a[i], -b[i], a[i] * b[i])

    run()
    A, B = a_np.astype(np.float64), b_np.astype(np.float64)
    rtol = 3e-6 if dt is ti.f32 else 1e-13
    ref = np.stack([np.arctan2(A, B), np.minimum(A, B), np.maximum(A, B),
                    np.minimum(np.minimum(A, B), 0.5), (np.abs(A) + np.float64(np.float32(0.1))) ** B,
                    np.maximum(np.maximum(A, -B), A * B)])
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=rtol, atol=rtol)


def test_math_on_integer_arguments_uses_default_float():
    i = ti.field(ti.i32, shape=4)
    out = ti.field(ti.f64, shape=(5, 4))
    i.from_numpy(np.array([1, 2, 3, 4], np.int32))

    @ti.kernel
    def run():
        for k in i:
            out[0, k] = ti.sqrt(i[k])
            out[1, k] = ti.exp(i[k])
            out[2, k] = ti.atan2(i[k], 3)
            out[3, k] = ti.log(i[k])
            out[4, k] = ti.min(i[k], 2.5)          # int and float: float result
            # (sin, cos, tan, asin, acos, tanh, floor, ceil, round reject integers, as in the
            # original system: tests/errors/test_taichi_checks.py)

    run()
    xs = np.arange(1, 5, dtype=np.float64)
    ref = np.stack([np.sqrt(xs), np.exp(xs), np.arctan2(xs, 3), np.log(xs), np.minimum(xs, 2.5)])
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-6)


def test_floor_ceil_with_result_dtype_and_int_minmax():
    x = ti.field(ti.f32, shape=4)
    out = ti.field(ti.i32, shape=(4, 4))
    x.from_numpy(np.array([-2.5, -0.2, 0.7, 3.9], np.float32))

    @ti.kernel
    def run():
        for k in x:
            out[0, k] = ti.floor(x[k], ti.i32)
            out[1, k] = ti.ceil(x[k], ti.i32)
            out[2, k] = ti.min(k, 2)
            out[3, k] = ti.max(-k, ti.cast(x[k], ti.i32))

    run()
    xs = np.array([-2.5, -0.2, 0.7, 3.9])
    ks = np.arange(4)
    ref = np.stack([np.floor(xs), np.ceil(xs), np.minimum(ks, 2), np.maximum(-ks, np.trunc(xs))])
    np.testing.assert_array_equal(out.to_numpy(), ref.astype(np.int32))


def test_ti_math_helpers():
    rng = np.random.default_rng(3)
    n = 64
    u_np = rng.uniform(-2, 2, (n, 3)).astype(np.float32)
    w_np = rng.uniform(-2, 2, (n, 3)).astype(np.float32)
    s_np = rng.uniform(-3, 3, n).astype(np.float32)
    u = ti.Vector.field(3, ti.f32, shape=n)
    w = ti.Vector.field(3, ti.f32, shape=n)
    s = ti.field(ti.f32, shape=n)
    u.from_numpy(u_np)
    w.from_numpy(w_np)
    s.from_numpy(s_np)
    sc = ti.field(ti.f32, shape=(12, n))
    vc = ti.Vector.field(3, ti.f32, shape=(4, n))

    @ti.kernel
    def run():
        for i in s:
            x = s[i]
            sc[0, i] = ti.math.clamp(x, -1.0, 2.0)
            sc[1, i] = ti.math.mix(x, 2.0 * x + 1.0, 0.25)
            sc[2, i] = ti.math.step(0.5, x)
            sc[3, i] = ti.math.smoothstep(-1.0, 1.0, x)
            sc[4, i] = ti.math.sign(x)
            sc[5, i] = ti.math.fract(x)
            sc[6, i] = ti.math.length(u[i])
            sc[7, i] = ti.math.distance(u[i], w[i])
            sc[8, i] = ti.math.dot(u[i], w[i])
            sc[9, i] = ti.math.degrees(x) + ti.math.radians(x)
            sc[10, i] = ti.math.log2(ti.abs(x) + 1.0) + ti.math.exp2(x)
            sc[11, i] = ti.math.mod(x, 1.25) + ti.math.pi * 0 + ti.math.e * 0
            vc[0, i] = ti.math.normalize(u[i])
            vc[1, i] = ti.math.cross(u[i], w[i])
            vc[2, i] = ti.math.reflect(u[i], ti.math.normalize(w[i]))
            vc[3, i] = ti.math.clamp(u[i], -0.5, 0.5)

    run()
    x = s_np.astype(np.float64)
    U, W = u_np.astype(np.float64), w_np.astype(np.float64)
    t = np.clip((x + 1) / 2, 0, 1)
    ref = np.stack([
        np.clip(x, -1, 2), x * 0.75 + (2 * x + 1) * 0.25, (x >= 0.5).astype(float),
        t * t * (3 - 2 * t), np.sign(x), x - np.floor(x), np.linalg.norm(U, axis=1),
        np.linalg.norm(U - W, axis=1), (U * W).sum(1), np.degrees(x) + np.radians(x),
        np.log2(np.abs(x) + 1) + np.exp2(x), np.mod(x, 1.25)])
    np.testing.assert_allclose(sc.to_numpy(), ref, rtol=1e-5, atol=1e-5)
    nw = W / np.linalg.norm(W, axis=1, keepdims=True)
    vref = np.stack([U / np.linalg.norm(U, axis=1, keepdims=True), np.cross(U, W),
                     U - 2 * (U * nw).sum(1, keepdims=True) * nw, np.clip(U, -0.5, 0.5)])
    np.testing.assert_allclose(vc.to_numpy(), vref, rtol=1e-5, atol=1e-5)


def test_math_constants_and_vector_types():
    out = ti.field(ti.f32, shape=4)
    iv = ti.Vector.field(3, ti.i32, shape=())

    @ti.kernel
    def run():
        v = ti.math.vec3(1.0, 2.0, 2.0)
        out[0] = v.norm()
        out[1] = ti.cos(ti.math.pi)
        m = ti.math.mat2([[1.0, 2.0], [3.0, 4.0]])
        out[2] = m.determinant()
        out[3] = ti.math.vec2(0.5).sum()      # one value fills the vector
        iv[None] = ti.math.ivec3(7, -2, 3) * 2

    run()
    np.testing.assert_allclose(out.to_numpy(), [3.0, -1.0, -2.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(iv.to_numpy(), [14, -4, 6])


def test_isnan_isinf_on_field_values():
    x = ti.field(ti.f32, shape=5)
    out = ti.field(ti.i32, shape=(2, 5))
    x.from_numpy(np.array([0.0, np.nan, np.inf, -np.inf, 1.0], np.float32))

    @ti.kernel
    def run():
        for i in x:
            out[0, i] = ti.math.isnan(x[i])
            out[1, i] = ti.math.isinf(x[i])

    run()
    np.testing.assert_array_equal(out.to_numpy(), [[0, 1, 0, 0, 0], [0, 0, 1, 1, 0]])


def test_math_in_python_scope_matches_math_module():
    assert ti.sin(0.5) == pytest.approx(math.sin(0.5))
    assert ti.floor(-1.5) == -2.0
    assert ti.max(1, 5, 3) == 5
    assert ti.math.clamp(5.0, 0.0, 1.0) == 1.0


def test_variadic_min_max_fold_from_the_right_with_each_steps_promoted_type():
    # ti.max(a, b, c) is max(a, max(b, c)), as in the original: with mixed integer types the
    # order decides which type each step promotes to. Here max(u16 10, i32 5) is an i32 10,
    # and max(i8 -27, i32 10) is 10; folded from the left, max(i8 -27, u16 10) first turned
    # -27 into the u16 65509 (found by the fuzzer, seed 11078)
    o = ti.field(ti.i64, shape=4)

    @ti.kernel
    def k(a: ti.i8, b: ti.u16):
        o[0] = ti.max(a, b, 5)
        o[1] = ti.max(5, a, b)        # max(a, b) is a u16 step: -27 wraps to 65509
        o[2] = ti.min(b, 5, a)        # min(i32 5, i8 -27) is an i32 -27 before b joins
        o[3] = ti.min(a, b)           # one u16 step: 65509 > 10

    k(-27, 10)
    np.testing.assert_array_equal(o.to_numpy(), [10, 2**16 - 27, -27, 10])


def test_min_max_of_one_argument_return_it_unchanged():
    # the original's rule: one argument, array-like or not, is returned as it is
    out = ti.Vector.field(3, ti.f32, shape=())

    @ti.kernel
    def k():
        out[None] = ti.max(ti.Vector([1.0, 7.0, 3.0])) + ti.min(ti.Vector([0.5, 0.5, 0.5]))

    k()
    np.testing.assert_array_equal(out.to_numpy(), [1.5, 7.5, 3.5])
    assert ti.max([1, 5]) == [1, 5]


def test_round_of_halves_python_numbers_and_kernel_values():
    # the original's rule (its ops.round): a Python number rounds with NumPy (half to even),
    # in Python scope and as a literal argument inside a kernel; a kernel value rounds half
    # away from zero, as C's round
    halves = [2.5, -2.5, 0.5, -0.5, 3.5, 1.5]
    away = [math.copysign(math.floor(abs(h) + 0.5), h) for h in halves]
    assert [ti.round(h) for h in halves] == [float(np.round(h)) for h in halves]
    assert ti.round(ti.Vector([2.5, 3.5])).to_numpy().tolist() == [2.0, 4.0]
    x = ti.field(ti.f64, shape=len(halves))
    lit = ti.field(ti.f64, shape=2)
    x.from_numpy(np.array(halves))

    @ti.kernel
    def k():
        for i in x:
            x[i] = ti.round(x[i])
        lit[0] = ti.round(2.5)
        lit[1] = ti.round(-2.5)

    k()
    assert x.to_numpy().tolist() == away
    assert lit.to_numpy().tolist() == [2.0, -2.0]


def math_on_edges(ti):
    """ti.math's scalar functions on zeros, infinities, NaN and large values."""
    vals = [0.0, -0.0, 0.5, -1.0, 2.5, 1e-7, 1e30, -1e30, float("inf"), float("-inf"),
            float("nan")]
    n = len(vals)
    a = ti.field(ti.f32, n)
    out = ti.field(ti.f32, (9, n))

    @ti.kernel
    def k():
        for i in range(n):
            x = a[i]
            out[0, i] = ti.math.step(0.5, x)
            out[1, i] = ti.math.sign(x)
            out[2, i] = ti.math.clamp(x, 0.0, 1.0)
            out[3, i] = ti.math.fract(x)
            out[4, i] = ti.math.smoothstep(0.0, 1.0, x)
            out[5, i] = ti.math.mix(1.0, 3.0, x)
            out[6, i] = ti.math.log2(x)
            out[7, i] = ti.math.length(ti.Vector([x, 2.0]))
            out[8, i] = ti.math.radians(x)

    for i, v in enumerate(vals):
        a[i] = v
    k()
    return {"out": out}


@pytest.mark.cpu_only   # (fast math regroups mix(1, 3, inf) to inf on the CPU, NaN elsewhere)
def test_math_functions_on_edge_values_match_taichi():
    """`ti.math.step(edge, NaN)` was 1 (`x < edge` is false for NaN); the original computes
    `x >= edge`, which gives 0."""
    check_against_taichi(math_on_edges, rtol=1e-6)
