"""Beyond the original system: a Tape keeps gradients correct when a recorded kernel
overwrites what an earlier recorded kernel read (it logs and restores the old values)."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _f64_session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def test_in_place_update_across_kernels_gets_the_right_gradient():
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k1():
        for i in x:
            y[i] = ti.sin(x[i])

    @ti.kernel
    def k2():
        for i in x:
            x[i] = y[i] * 3.0          # overwrites x, which k1 read

    @ti.kernel
    def k3():
        for i in x:
            loss[None] += x[i] ** 2

    xs = np.linspace(0.1, 1.2, n)
    x.from_numpy(xs)
    with ti.ad.Tape(loss) as tape:
        k1()
        k2()
        k3()
    # loss = sum (3 sin x)^2  ->  d/dx = 18 sin x cos x
    np.testing.assert_allclose(x.grad.to_numpy(), 18 * np.sin(xs) * np.cos(xs), rtol=1e-12)
    np.testing.assert_allclose(x.to_numpy(), 3 * np.sin(xs))   # forward results are kept
    assert tape.saved_bytes > 0


def test_the_documents_func_1_func_2_without_validation():
    n = 5
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    b = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def func_1():
        for i in range(n):
            loss[None] += x[i] * b[None]

    @ti.kernel
    def func_2():
        b[None] += 100

    b[None] = 10
    with ti.ad.Tape(loss):
        func_1()
        func_2()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(n, 10.0))   # b as func_1 read it
    assert b[None] == 110.0


def test_rule_abiding_programs_save_nothing():
    n = 8
    x = ti.field(ti.f64, shape=(3, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = ti.sin(x[t, i]) + x[t, (i + 1) % n]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[2, i]

    x0 = np.random.default_rng(0).uniform(-1, 1, n)
    x.from_numpy(np.stack([x0, np.zeros(n), np.zeros(n)]))
    with ti.ad.Tape(loss) as tape:
        step(0)
        step(1)
        total()
    assert tape.saved_bytes == 0

    def f(v):
        a = np.sin(v) + np.roll(v, -1)
        return (np.sin(a) + np.roll(a, -1)).sum()

    h = 1e-6
    fd = np.array([(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(x.grad.to_numpy()[0], fd, rtol=1e-7)


def test_overwriting_a_written_value_drops_its_gradient():
    n = 4
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in x:
            y[i] = x[i] * 5.0          # overwritten below before anyone reads it

    @ti.kernel
    def second():
        for i in x:
            y[i] = x[i] * x[i]

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    xs = np.arange(1.0, n + 1)
    x.from_numpy(xs)
    with ti.ad.Tape(loss):
        first()
        second()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs)     # not 2x + 5


def test_jacobian_of_a_program_that_overwrites_its_input():
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    y = ti.field(ti.f64, shape=2, needs_grad=True)

    @ti.kernel
    def products():
        y[0] = x[0] * x[1]
        y[1] = x[2] * x[2]

    @ti.kernel
    def clear_x():
        for i in x:
            x[i] = 0.0

    def program():
        products()
        clear_x()          # overwrites x, which products read

    xs = np.array([1.5, -2.0, 0.5])
    x.from_numpy(xs)
    J = ti.ad.jacobian(program, y, x)
    want = np.array([[xs[1], xs[0], 0.0], [0.0, 0.0, 2 * xs[2]]])
    np.testing.assert_allclose(J, want, rtol=1e-12)
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(3))
