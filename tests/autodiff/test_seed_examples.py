"""Every example of the seed document on differentiable programming, with its stated values."""
import math

import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def test_compute_y_sin_gives_cos():
    x = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    y = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_y():
        y[None] = ti.sin(x[None])

    x[None] = 0.7
    with ti.ad.Tape(y):
        compute_y()
    assert x.grad[None] == pytest.approx(math.cos(0.7), rel=1e-6)


def test_kernel_grad_with_two_outputs():
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    loss2 = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func():
        for i in x:
            loss[None] += x[i] ** 2
            loss2[None] += x[i]

    for i in range(N):
        x[i] = i
    func()
    loss.grad[None] = 1
    loss2.grad[None] = 1
    func.grad()
    for i in range(N):
        assert x.grad[i] == i * 2 + 1


def _rule_fields():
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    for i in range(N):
        x[i] = i
    return x, loss, b


def test_rule_1_broken_is_an_error_and_the_equivalent_gives_10():
    x, loss, b = _rule_fields()

    @ti.kernel
    def func_broke_rule_1():
        loss[None] = x[1] * b[None]
        b[None] += 100

    @ti.kernel
    def func_equivalent():
        loss[None] = x[1] * 10

    b[None] = 10
    loss.grad[None] = 1
    with pytest.raises(ti.FluxionCompilationError, match="rule #1"):
        func_broke_rule_1.grad()
    with ti.ad.Tape(loss):
        func_equivalent()
    assert x.grad[1] == 10.0


def test_rule_2_broken_is_an_error_and_the_equivalent_gives_4_and_3():
    x, loss, _ = _rule_fields()

    @ti.kernel
    def func_break_rule_2():
        loss[None] += x[1] ** 2
        loss[None] *= x[2]

    @ti.kernel
    def func_equivalent():
        loss[None] = (2 + x[1] ** 2) * x[2]

    loss.grad[None] = 1
    loss[None] = 2
    with pytest.raises(ti.FluxionCompilationError, match="global data access rule"):
        func_break_rule_2.grad()
    func_equivalent()
    func_equivalent.grad()
    assert x.grad[1] == 4.0
    assert x.grad[2] == 3.0


def test_legal_patterns_do_not_raise():
    x, loss, b = _rule_fields()
    y = ti.field(ti.f32, shape=16, needs_grad=True)

    @ti.kernel
    def accumulate_and_read_after_write():
        for i in x:
            y[i] = x[i] * 2.0            # write ...
            loss[None] += y[i] * x[i]    # ... then read: allowed; += accumulates: allowed
            loss[None] += x[i]

    with ti.ad.Tape(loss):
        accumulate_and_read_after_write()
    np.testing.assert_allclose(x.grad.to_numpy(), 4.0 * np.arange(16) + 1.0)


def test_python_scope_inside_the_tape_runs_forward_only():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(dtype=float, shape=(), needs_grad=True)
    loss = ti.field(dtype=float, shape=(), needs_grad=True)

    @ti.kernel
    def differentiable_task():
        for l in range(3):
            loss[None] += ti.sin(x[None]) + 1.0

    @ti.kernel
    def manipulation_in_kernel():
        loss[None] += ti.sin(x[None]) + 1.0

    x[None] = 0.0
    with ti.ad.Tape(loss=loss):
        loss[None] += ti.sin(x[None]) + 1.0
        manipulation_in_kernel()
        differentiable_task()
    assert loss[None] == 5.0
    assert x.grad[None] == 4.0
    x.grad[None] = 0.0
    assert x.grad[None] == 0.0


def test_custom_gradient_gives_4():
    x = ti.field(ti.f32)
    total = ti.field(ti.f32)
    n = 128
    ti.root.dense(ti.i, n).place(x)
    ti.root.place(total)
    ti.root.lazy_grad()

    @ti.kernel
    def func(mul: ti.f32):
        for i in range(n):
            ti.atomic_add(total[None], x[i] * mul)

    @ti.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @ti.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)

    with ti.ad.Tape(loss=total):
        forward(4)
    assert x.grad[0] == 4


def test_gravity_forces_from_the_tape_match_the_analytic_gradient():
    N = 8
    x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(N, N):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    xs = np.random.default_rng(0).random((N, 2)).astype(np.float32)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=U):
        compute_U()
    d = xs[:, None].astype(np.float64) - xs[None]
    r2 = (d ** 2).sum(-1) + 1e-3
    assert U[None] == pytest.approx((-1 / np.sqrt(r2)).sum(), rel=1e-5)
    np.testing.assert_allclose(x.grad.to_numpy(), (2 * d / r2[..., None] ** 1.5).sum(1),
                               rtol=2e-4, atol=1e-3)
