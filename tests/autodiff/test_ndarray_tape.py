"""ndarrays in reverse mode across kernels: a store's adjoint consumes the stored element's
gradient (as it does for fields, and as the original system does for both), and a Tape keeps
the old contents of an array that a recorded kernel overwrites after an earlier recorded kernel
was passed it, so the earlier kernel's gradient sees the values it read.

Expected values: closed-form derivatives, and central differences in float64 of the forward
kernels run without a Tape."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _f64_session(fluxion_arch):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def _scale_kernels():
    kernels = []
    for c in (1.0, 2.0, 4.0):
        @ti.kernel
        def k(x: ti.types.ndarray(), loss: ti.types.ndarray(), c: ti.f64):
            loss[None] = c * x[None]
        kernels.append((k, c))
    return kernels


def test_a_later_store_to_the_loss_takes_its_gradient_from_the_earlier_stores():
    # loss = 1 x, then 2 x, then 4 x: only the last store reaches the loss, so dloss/dx = 4
    x = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x[None] = 1.5
    with ti.ad.Tape(loss=loss):
        for k, c in _scale_kernels():
            k(x, loss, c)
    assert loss[None] == 6.0
    assert x.grad[None] == 4.0


def test_kernel_grad_consumes_the_gradient_of_the_elements_it_stored():
    @ti.kernel
    def double(a: ti.types.ndarray(), p: ti.types.ndarray()):
        for i in p:
            p[i] = a[i] * 2.0

    a = ti.ndarray(ti.f64, shape=5, needs_grad=True)
    p = ti.ndarray(ti.f64, shape=5, needs_grad=True)
    a.from_numpy(np.arange(5.0))
    double(a, p)
    p.grad.fill(1.0)
    double.grad(a, p)
    np.testing.assert_array_equal(a.grad.to_numpy(), np.full(5, 2.0))
    np.testing.assert_array_equal(p.grad.to_numpy(), np.zeros(5))
    # nothing is left to hand on: a second call adds nothing
    double.grad(a, p)
    np.testing.assert_array_equal(a.grad.to_numpy(), np.full(5, 2.0))


@ti.kernel
def _square(x: ti.types.ndarray(), y: ti.types.ndarray()):
    for i in x:
        y[i] = x[i] * x[i]


@ti.kernel
def _clobber(x: ti.types.ndarray()):
    for i in x:
        x[i] = 0.5


@ti.kernel
def _total(y: ti.types.ndarray(), loss: ti.types.ndarray()):
    for i in y:
        loss[None] += y[i]


def test_an_array_overwritten_after_a_recorded_kernel_read_it_is_restored():
    n = 5
    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x0 = np.linspace(-1.0, 2.0, n)
    x.from_numpy(x0)
    with ti.ad.Tape(loss=loss) as tape:
        _square(x, y)
        _clobber(x)          # overwrites x, which _square read
        _total(y, loss)
    np.testing.assert_allclose(loss[None], np.sum(x0 ** 2), rtol=1e-12)
    # d/dx sum(x^2) = 2 x at the values _square read, not at the overwritten ones
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * x0, rtol=1e-12)
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 0.5))   # forward results kept
    assert tape.saved_bytes >= x0.nbytes


def test_a_numpy_array_overwritten_after_a_recorded_kernel_read_it_is_restored():
    # the weights are a numpy array (no gradient of their own); the gradient of x needs the
    # weights that the first kernel multiplied by
    @ti.kernel
    def scale(w: ti.types.ndarray(), x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = w[i] * x[i]

    @ti.kernel
    def reset_weights(w: ti.types.ndarray()):
        for i in w:
            w[i] = 7.0

    n = 4
    w = np.array([0.5, -1.0, 2.0, 3.0])
    w0 = w.copy()
    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.ones(n))
    with ti.ad.Tape(loss=loss):
        scale(w, x, y)
        reset_weights(w)
        _total(y, loss)
    np.testing.assert_array_equal(x.grad.to_numpy(), w0)
    np.testing.assert_array_equal(w, np.full(n, 7.0))


def test_rule_abiding_array_programs_copy_nothing():
    n = 3
    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss=loss) as tape:
        _square(x, y)
        _total(y, loss)
    assert tape.saved_bytes == 0
    np.testing.assert_array_equal(x.grad.to_numpy(), [2.0, 4.0, 6.0])


@ti.kernel
def _k1(x: ti.types.ndarray(), w: ti.types.ndarray(), y: ti.types.ndarray()):
    for i in x:
        y[i] = ti.sin(x[i]) * w[i]


@ti.kernel
def _k2(y: ti.types.ndarray(), w: ti.types.ndarray()):
    for i in y:
        w[i] = y[i] * y[i]          # overwrites w, which _k1 read


@ti.kernel
def _k3(x: ti.types.ndarray(), w: ti.types.ndarray(), loss: ti.types.ndarray()):
    for i in x:
        loss[None] += w[i] * x[i]


def test_a_chain_with_an_overwrite_matches_float64_finite_differences():
    n = 4
    xs = np.array([0.3, -0.7, 1.1, 2.0])
    ws = np.array([1.5, 0.25, -2.0, 0.8])
    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    w = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)

    def forward(xv, wv):
        x.from_numpy(xv)
        w.from_numpy(wv)
        loss[None] = 0.0
        _k1(x, w, y)
        _k2(y, w)
        _k3(x, w, loss)
        return loss[None]

    x.from_numpy(xs)
    w.from_numpy(ws)
    with ti.ad.Tape(loss=loss):
        _k1(x, w, y)
        _k2(y, w)
        _k3(x, w, loss)
    gx, gw = x.grad.to_numpy(), w.grad.to_numpy()
    # loss = sum (sin(x) w)^2 x
    s = np.sin(xs)
    np.testing.assert_allclose(gx, ws ** 2 * (2 * s * np.cos(xs) * xs + s ** 2), rtol=1e-10)
    np.testing.assert_allclose(gw, 2 * ws * s ** 2 * xs, rtol=1e-10)
    h = 1e-6
    for k in range(n):
        e = np.zeros(n)
        e[k] = h
        fx = (forward(xs + e, ws) - forward(xs - e, ws)) / (2 * h)
        fw = (forward(xs, ws + e) - forward(xs, ws - e)) / (2 * h)
        assert abs(fx - gx[k]) < 1e-6 * max(1.0, abs(fx))
        assert abs(fw - gw[k]) < 1e-6 * max(1.0, abs(fw))


def test_torch_function_leaves_the_gradient_torch_hands_it_unchanged():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def square(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = x[i] * x[i]

    op = ti.ad.torch_function(square, outputs={"y": lambda x: torch.empty_like(x)})
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64)
    op(x).backward(g)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -40.0, 600.0])
    np.testing.assert_array_equal(g.numpy(), [1.0, 10.0, 100.0])


def test_a_kernel_reads_and_writes_the_gradient_array_of_an_argument():
    @ti.kernel
    def total_grad(x: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in x:
            out[None] += x.grad[i] * x[i]

    @ti.kernel
    def halve_grad(x: ti.types.ndarray()):
        for i in x:
            x.grad[i] = x.grad[i] * 0.5

    n = 6
    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    out = ti.ndarray(ti.f64, shape=())
    xs = np.arange(1.0, n + 1)
    gs = np.linspace(-2.0, 3.0, n)
    x.from_numpy(xs)
    x.grad.from_numpy(gs)
    total_grad(x, out)
    np.testing.assert_allclose(out[None], np.dot(gs, xs), rtol=1e-12)
    halve_grad(x)
    np.testing.assert_array_equal(x.grad.to_numpy(), gs * 0.5)
    np.testing.assert_array_equal(x.to_numpy(), xs)
    with pytest.raises(TypeError, match="has no gradient"):
        total_grad(ti.ndarray(ti.f64, shape=n), out)
    # differentiating through a gradient array is refused, naming it
    with pytest.raises(RuntimeError, match=r"Cannot automatically differentiate through a grad "
                                           r"tensor \('x.grad'\)"):
        total_grad.grad(x, out)


def test_a_kernel_reads_the_grad_of_a_torch_tensor():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def total_grad(x: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in x:
            out[0] += x.grad[i]

    x = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    x.grad = torch.arange(5.0, dtype=torch.float64)
    out = torch.zeros(1, dtype=torch.float64)
    total_grad(x, out)
    assert out.item() == 10.0


def test_a_tape_over_torch_tensors_that_kernels_write():
    torch = pytest.importorskip("torch")
    n = 4
    x0 = torch.tensor([0.5, -1.0, 2.0, 3.0], dtype=torch.float64)
    x = x0.clone().requires_grad_()
    y = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    loss = torch.zeros(1, dtype=torch.float64, requires_grad=True)

    @ti.kernel
    def total(y: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in y:
            loss[0] += y[i]

    with ti.ad.Tape(loss=loss):
        _square(x, y)
        _clobber(x)          # overwrites x, which _square read: its old values are restored
        total(y, loss)
    assert loss.item() == float((x0 ** 2).sum())
    np.testing.assert_array_equal(x.grad.numpy(), 2 * x0.numpy())
    np.testing.assert_array_equal(x.detach().numpy(), np.full(n, 0.5))


def test_steps_through_one_array_keep_only_the_elements_each_step_changed():
    steps, n = 12, 16

    @ti.kernel
    def step(x: ti.types.ndarray(), t: ti.i32):
        for i in range(x.shape[1]):
            x[t + 1, i] = ti.sin(x[t, i]) * 0.9

    @ti.kernel
    def total(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in range(x.shape[1]):
            loss[None] += x[x.shape[0] - 1, i]

    x = ti.ndarray(ti.f64, shape=(steps, n), needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x0 = np.linspace(-1.0, 1.7, n)
    x.from_numpy(np.vstack([x0, np.zeros((steps - 1, n))]))
    with ti.ad.Tape(loss=loss) as tape:
        for t in range(steps - 1):
            step(x, t)
        total(x, loss)
    # d x[t+1] / d x[t] = 0.9 cos(x[t]), chained from x[0]
    v, d = x0.copy(), np.ones(n)
    for _ in range(steps - 1):
        d *= 0.9 * np.cos(v)
        v = np.sin(v) * 0.9
    np.testing.assert_allclose(loss[None], v.sum(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy()[0], d, rtol=1e-12)
    # a step's worth (values and two index arrays) per step, not a copy of the whole array
    assert 0 < tape.saved_bytes <= (steps - 1) * n * 3 * 8 + 64
