"""Random differentiable kernels: expression trees built by hypothesis, compiled as kernels,
their reverse-mode gradients compared with central finite differences in float64."""
import numpy as np
from hypothesis import given, settings, strategies as st

import fluxion as ti

# (kernel builder, numpy builder) for smooth ops on a safe domain
UNARY = {
    "sin": (ti.sin, np.sin),
    "tanh": (ti.tanh, np.tanh),
    "exp_small": (lambda a: ti.exp(ti.sin(a)), lambda a: np.exp(np.sin(a))),
    "softplus": (lambda a: ti.log(1.0 + ti.exp(-a * a)), lambda a: np.log(1.0 + np.exp(-a * a))),
    "sq": (lambda a: a * a, lambda a: a * a),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / (1.5 + ti.sin(b)), lambda a, b: a / (1.5 + np.sin(b))),
    "atan2": (lambda a, b: ti.atan2(a, 2.0 + b * b), lambda a, b: np.arctan2(a, 2.0 + b * b)),
}


def trees():
    leaf = st.sampled_from(["x", "y", "c"])
    return st.recursive(
        leaf,
        lambda sub: st.one_of(st.tuples(st.sampled_from(sorted(UNARY)), sub),
                              st.tuples(st.sampled_from(sorted(BINARY)), sub, sub)),
        max_leaves=8)


def build(tree, x, y, table_index):
    if tree == "x":
        return x
    if tree == "y":
        return y
    if tree == "c":
        return 0.75
    if len(tree) == 2:
        return UNARY[tree[0]][table_index](build(tree[1], x, y, table_index))
    return BINARY[tree[0]][table_index](build(tree[1], x, y, table_index),
                                        build(tree[2], x, y, table_index))


@settings(max_examples=25, deadline=None)
@given(trees(), st.integers(0, 2**31 - 1))
def test_random_kernel_gradients_match_finite_differences(tree, seed):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    try:
        n = 8
        x = ti.field(ti.f64, shape=n, needs_grad=True)
        y = ti.field(ti.f64, shape=n, needs_grad=True)
        out = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def k():
            for i in x:
                out[None] += build(tree, x[i], y[i], 0) * 1.0

        rng = np.random.default_rng(seed)
        xs, ys = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
        x.from_numpy(xs)
        y.from_numpy(ys)
        with ti.ad.Tape(loss=out):
            k()

        def f(a, b):
            return np.sum(build(tree, a, b, 1) * np.ones(n))

        assert np.isclose(out[None], f(xs, ys), rtol=1e-9, atol=1e-9)
        h = 1e-6
        for field, vals, which in ((x, xs, 0), (y, ys, 1)):
            fd = np.zeros(n)
            for j in range(n):
                e = np.zeros(n)
                e[j] = h
                fd[j] = ((f(xs + e, ys) - f(xs - e, ys)) if which == 0 else
                         (f(xs, ys + e) - f(xs, ys - e))) / (2 * h)
            np.testing.assert_allclose(field.grad.to_numpy(), fd, rtol=1e-5, atol=1e-7)
    finally:
        ti.reset()


@settings(max_examples=20, deadline=None)
@given(trees(), st.integers(0, 2**31 - 1))
def test_random_kernels_forward_mode_agrees_with_reverse_mode(tree, seed):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    try:
        n = 6
        x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
        y = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
        out = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

        @ti.kernel
        def k():
            for i in x:
                out[None] += build(tree, x[i], y[i], 0) * 1.0

        rng = np.random.default_rng(seed)
        x.from_numpy(rng.uniform(-1, 1, n))
        y.from_numpy(rng.uniform(-1, 1, n))
        with ti.ad.Tape(loss=out):
            k()
        gx = x.grad.to_numpy()
        v = rng.uniform(-1, 1, n)
        out[None] = 0
        with ti.ad.FwdMode(loss=out, param=x, seed=v):
            k()
        assert np.isclose(out.dual[None], gx @ v, rtol=1e-9, atol=1e-10)
    finally:
        ti.reset()
