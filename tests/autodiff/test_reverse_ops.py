"""Reverse mode, op by op: every rule of autodiff/rules.py against central finite differences
in float64, plus a check that every op of the IR has a derivative rule or is declared without."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.autodiff import rules
from fluxion.ir import ops as O
from op_cases import BINARY_CASES, UNARY_CASES

N = 16
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _f64_session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def fd_grad(f, xs, h=1e-6):
    return (f(xs + h) - f(xs - h)) / (2 * h)


@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_unary_rule_matches_finite_differences(name):
    kf, nf, (lo, hi) = UNARY_CASES[name]
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = kf(x[i]) * 1.5

    xs = RNG.uniform(lo, hi, N)
    if name == "abs":
        xs[np.abs(xs) < 0.05] += 0.2  # keep away from the kink
    x.from_numpy(xs)
    k()
    np.testing.assert_allclose(y.to_numpy(), nf(xs) * 1.5, rtol=1e-12, atol=1e-12)
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), fd_grad(lambda a: nf(a) * 1.5, xs),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(BINARY_CASES))
def test_binary_rule_matches_finite_differences(name):
    kf, nf, (alo, ahi), (blo, bhi) = BINARY_CASES[name]
    a = ti.field(ti.f64, shape=N, needs_grad=True)
    b = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def k():
        for i in a:
            y[i] = kf(a[i], b[i])

    av, bv = RNG.uniform(alo, ahi, N), RNG.uniform(blo, bhi, N)
    if name in ("min", "max"):
        bv[np.abs(av - bv) < 0.05] += 0.3   # no ties
    if name == "mod":
        frac = av / bv - np.floor(av / bv)
        av[(frac < 0.05) | (frac > 0.95)] += 0.3 * bv[(frac < 0.05) | (frac > 0.95)]
    a.from_numpy(av)
    b.from_numpy(bv)
    k()
    np.testing.assert_allclose(y.to_numpy(), nf(av, bv), rtol=1e-12, atol=1e-12)
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), fd_grad(lambda t: nf(t, bv), av),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(b.grad.to_numpy(), fd_grad(lambda t: nf(av, t), bv),
                               rtol=1e-6, atol=1e-8)


def test_every_op_has_a_rule_or_is_declared_without_one():
    declared = (set(rules.UNARY) | set(rules.BINARY) | rules.ZERO_DERIVATIVE
                | rules.INTEGER_ONLY | rules.STRUCTURAL)
    missing = (set(O.UNARY) | set(O.BINARY) | set(O.BINARY_INTERNAL)) - declared
    assert not missing, f"ops without a derivative rule: {sorted(missing)}"
    assert set(UNARY_CASES) == set(rules.UNARY)
    assert set(BINARY_CASES) == set(rules.BINARY)


@pytest.mark.parametrize("op", ["floor", "ceil", "round"])
def test_piecewise_constant_ops_have_zero_gradient(op):
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    fn = {"floor": ti.floor, "ceil": ti.ceil, "round": ti.round}[op]

    @ti.kernel
    def k():
        for i in x:
            y[i] = fn(x[i]) + x[i]       # only the identity part has a derivative

    x.from_numpy(RNG.uniform(-3, 3, N) + 0.25)
    k()
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.ones(N))


def test_casts_pass_gradients_between_floats_and_block_them_through_ints():
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = ti.cast(ti.cast(x[i], ti.f32), ti.f64) * 3.0 + ti.cast(ti.cast(x[i], ti.i32), ti.f64)

    x.from_numpy(RNG.uniform(0, 5, N))
    k()
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 3.0))


def test_stop_grad_of_a_value_carries_no_gradient():
    # (ti.random() in a reverse-differentiated kernel is an error: test_program_regressions)
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = x[i] * ti.stop_grad(x[i])

    xs = RNG.uniform(-2, 2, N)
    x.from_numpy(xs)
    k()
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), xs)   # d(x * const)/dx, const = x


def test_select_and_ternary_route_the_gradient():
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = ti.select(x[i] > 0, x[i] ** 2, -3.0 * x[i]) + (x[i] if x[i] < 1 else 0.0)

    xs = RNG.uniform(-2, 2, N)
    x.from_numpy(xs)
    k()
    y.grad.fill(1.0)
    k.grad()
    ref = np.where(xs > 0, 2 * xs, -3.0) + np.where(xs < 1, 1.0, 0.0)
    np.testing.assert_allclose(x.grad.to_numpy(), ref)
