"""Forward mode: every rule's tangent against finite differences in float64, the seed
document's examples, forward against reverse, Hessian-vector products and Jacobians."""
import numpy as np
import pytest

import fluxion as ti
from op_cases import BINARY_CASES, UNARY_CASES

N = 12
RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _f64_session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_unary_tangent_matches_finite_differences(name):
    kf, nf, (lo, hi) = UNARY_CASES[name]
    x = ti.field(ti.f64, shape=N, needs_dual=True)
    y = ti.field(ti.f64, shape=N, needs_dual=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = kf(x[i])

    xs = RNG.uniform(lo, hi, N)
    if name == "abs":
        xs[np.abs(xs) < 0.05] += 0.2
    x.from_numpy(xs)
    direction = RNG.uniform(-1, 1, N)
    with ti.ad.FwdMode(loss=y, param=x, seed=direction):
        k()
    h = 1e-6
    fd = (nf(xs + h * direction) - nf(xs - h * direction)) / (2 * h)
    np.testing.assert_allclose(y.dual.to_numpy(), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(BINARY_CASES))
def test_binary_tangent_matches_finite_differences(name):
    kf, nf, (alo, ahi), (blo, bhi) = BINARY_CASES[name]
    ab = ti.Vector.field(2, ti.f64, shape=N, needs_dual=True)
    y = ti.field(ti.f64, shape=N, needs_dual=True)

    @ti.kernel
    def k():
        for i in ab:
            y[i] = kf(ab[i][0], ab[i][1])

    av, bv = RNG.uniform(alo, ahi, N), RNG.uniform(blo, bhi, N)
    if name in ("min", "max"):
        bv[np.abs(av - bv) < 0.05] += 0.3
    if name == "mod":
        frac = av / bv - np.floor(av / bv)
        bad = (frac < 0.05) | (frac > 0.95)
        av[bad] += 0.3 * bv[bad]
    ab.from_numpy(np.stack([av, bv], 1))
    direction = RNG.uniform(-1, 1, (N, 2))
    with ti.ad.FwdMode(loss=y, param=ab, seed=direction.reshape(-1)):
        k()
    h = 1e-6
    fd = (nf(av + h * direction[:, 0], bv + h * direction[:, 1])
          - nf(av - h * direction[:, 0], bv - h * direction[:, 1])) / (2 * h)
    np.testing.assert_allclose(y.dual.to_numpy(), fd, rtol=1e-6, atol=1e-8)


def test_seed_document_examples():
    ti.reset()
    ti.init(arch=ti.cpu)
    x = ti.field(dtype=ti.f32, shape=(), needs_dual=True)
    y = ti.field(dtype=ti.f32, shape=(), needs_dual=True)

    @ti.kernel
    def compute_y():
        y[None] = ti.sin(x[None])

    x[None] = 0.4
    with ti.ad.FwdMode(loss=y, param=x):
        compute_y()
    assert y.dual[None] == pytest.approx(np.cos(0.4), rel=1e-6)

    N_param, N_loss = 2, 5
    x2 = ti.field(dtype=ti.f32, shape=N_param, needs_dual=True)
    y2 = ti.field(dtype=ti.f32, shape=N_loss, needs_dual=True)

    @ti.kernel
    def compute_y2():
        for i in range(N_loss):
            for j in range(N_param):
                y2[i] += i * ti.sin(x2[j])

    x2.from_numpy(np.array([0.2, 0.9], np.float32))
    for j, seed in enumerate(([1.0, 0.0], [0.0, 1.0])):
        with ti.ad.FwdMode(loss=y2, param=x2, seed=seed):
            compute_y2()
        np.testing.assert_allclose(y2.dual.to_numpy(),
                                   np.arange(N_loss) * np.cos([0.2, 0.9][j]), rtol=1e-6)


def test_seed_is_required_and_checked():
    x = ti.field(ti.f64, shape=3, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)
    with pytest.raises(ti.FluxionError, match="seed"):
        ti.ad.FwdMode(loss=y, param=x)
    with pytest.raises(ti.FluxionError, match="seed has 2 values"):
        ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 2.0])


def test_forward_and_reverse_agree_on_a_kernel_with_loops_and_branches():
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        for i in x:
            a = x[i]
            for t in range(4):
                if a > 0:
                    a = a * ti.cos(a) + 0.1
                else:
                    a = ti.tanh(a) * 2.0
            y[None] += a * x[(i + 1) % n]

    x.from_numpy(RNG.uniform(-1, 1, n))
    with ti.ad.Tape(loss=y):
        k()
    grad = x.grad.to_numpy()
    v = RNG.uniform(-1, 1, n)
    y[None] = 0
    with ti.ad.FwdMode(loss=y, param=x, seed=v):
        k()
    assert y.dual[None] == pytest.approx(grad @ v, rel=1e-9)   # J v == (grad . v)


def test_hessian_vector_product_matches_finite_differences_of_gradients():
    n = 5
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in range(n - 1):
            d = x[i + 1] - x[i]
            loss[None] += ti.sin(x[i]) * d * d + ti.exp(0.1 * x[i]) * x[i + 1] ** 3

    def f(xs):
        return sum(np.sin(xs[i]) * (xs[i + 1] - xs[i]) ** 2 + np.exp(0.1 * xs[i]) * xs[i + 1] ** 3
                   for i in range(n - 1))

    def grad(xs, h=1e-6):
        return np.array([(f(xs + h * e) - f(xs - h * e)) / (2 * h) for e in np.eye(n)])

    xs = RNG.uniform(-1, 1, n)
    x.from_numpy(xs)
    v = RNG.uniform(-1, 1, n)
    g, hv = ti.ad.hvp(energy, loss, x, v)
    np.testing.assert_allclose(g, grad(xs), rtol=1e-7, atol=1e-8)
    h = 1e-4
    np.testing.assert_allclose(hv, (grad(xs + h * v) - grad(xs - h * v)) / (2 * h),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_in, n_out", [(2, 3), (4, 2)])
def test_jacobian_in_either_mode(n_in, n_out):
    y = ti.field(ti.f64, shape=n_out, needs_grad=True, needs_dual=True)
    p = ti.field(ti.f64, shape=n_in, needs_grad=True, needs_dual=True)

    @ti.kernel
    def f():
        for i in range(n_out):
            acc = 0.0
            for j in range(n_in):
                acc += ti.sin(p[j] * (i + 1)) * (j + 1)
            y[i] = acc

    ps = RNG.uniform(-1, 1, n_in)
    p.from_numpy(ps)
    J = ti.ad.jacobian(f, y, p)
    ref = np.array([[np.cos(ps[j] * (i + 1)) * (i + 1) * (j + 1) for j in range(n_in)]
                    for i in range(n_out)])
    np.testing.assert_allclose(J, ref, rtol=1e-10)


def test_atomic_min_max_tangents_follow_the_winner():
    n = 9
    x = ti.field(ti.f64, shape=n, needs_dual=True)
    lo = ti.field(ti.f64, shape=(), needs_dual=True)
    hi = ti.field(ti.f64, shape=(), needs_dual=True)
    s = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        for i in x:                       # parallel: decided by a second pass
            ti.atomic_min(lo[None], x[i] * 2.0)
            ti.atomic_max(hi[None], x[i] * 3.0)
        ti.atomic_max(s[None], x[0] * 5.0)    # serial: decided at once
        ti.atomic_max(s[None], x[1] * 5.0)

    xs = RNG.permutation(np.linspace(-1, 1, n))
    x.from_numpy(xs)
    v = RNG.uniform(-1, 1, n)
    lo[None], hi[None], s[None] = 10.0, -10.0, -10.0
    with ti.ad.FwdMode(loss=[lo, hi, s], param=x, seed=v):
        k()
    assert lo[None] == pytest.approx(2 * xs.min()) and hi[None] == pytest.approx(3 * xs.max())
    assert lo.dual[None] == pytest.approx(2 * v[np.argmin(xs)])
    assert hi.dual[None] == pytest.approx(3 * v[np.argmax(xs)])
    assert s.dual[None] == pytest.approx(5 * v[0] if xs[0] >= xs[1] else 5 * v[1])
