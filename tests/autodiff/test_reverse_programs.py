"""Reverse mode on whole programs: control flow, loops with carried locals, vectors, funcs,
mixed kernels, the Tape, custom gradients and the global data access rules."""
import numpy as np
import pytest

import fluxion as ti
from op_cases import fd

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _f64_session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def grad_of(kernel_fn, fields_in, out, xs):
    """Run kernel under a Tape with loss `out`, return d out / d fields_in[0]."""
    x = fields_in[0]
    x.from_numpy(xs)
    with ti.ad.Tape(loss=out):
        kernel_fn()
    return x.grad.to_numpy()


def test_loop_carried_locals_use_the_autodiff_stack():
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            p = 1.0
            for t in range(5):          # p = v^5 + ... built with a carried, nonlinear p
                p = p * v + ti.sin(p)
            loss[None] += p

    def ref(xs):
        total = 0.0
        for v in xs:
            p = 1.0
            for _ in range(5):
                p = p * v + np.sin(p)
            total += p
        return total

    xs = RNG.uniform(-1, 1, n)
    np.testing.assert_allclose(grad_of(k, [x], loss, xs), fd(ref, xs), rtol=1e-6, atol=1e-9)


def test_while_loop_with_data_dependent_trip_count():
    n = 5
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            s = 0.0
            j = 0
            while j < i + 2:
                s = s * 0.5 + v * v
                j += 1
            loss[None] += s

    def ref(xs):
        total = 0.0
        for i, v in enumerate(xs):
            s = 0.0
            for _ in range(i + 2):
                s = s * 0.5 + v * v
            total += s
        return total

    xs = RNG.uniform(-1, 1, n)
    np.testing.assert_allclose(grad_of(k, [x], loss, xs), fd(ref, xs), rtol=1e-6, atol=1e-9)


def test_nested_serial_loops_and_branches_inside():
    n = 4
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            a = x[i]
            for p in range(3):
                for q in range(2):
                    if a > 0.2:
                        a = a * 0.9 + 0.1 * ti.cos(a)
                    else:
                        a = a + 0.3 * a * a
            loss[None] += a

    def ref(xs):
        total = 0.0
        for a in xs:
            for _ in range(6):
                a = a * 0.9 + 0.1 * np.cos(a) if a > 0.2 else a + 0.3 * a * a
            total += a
        return total

    xs = RNG.uniform(-1, 1, n)
    np.testing.assert_allclose(grad_of(k, [x], loss, xs), fd(ref, xs), rtol=1e-6, atol=1e-9)


def test_autodiff_stack_overflow_is_a_clear_error():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64, ad_stack_size=8)
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            p = x[i]
            for t in range(20):
                p = p * 0.5 + 1.0
            loss[None] += p

    with pytest.raises(ti.FluxionError, match="ad_stack_size"):
        with ti.ad.Tape(loss=loss):
            k()


def test_vectors_matrices_and_funcs():
    n = 5
    x = ti.Vector.field(3, ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def energy(v):
        m = ti.Matrix([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
        return v.dot(m @ v) + v.norm(1e-3) + v.cross(ti.Vector([1.0, 0.0, 0.0])).norm_sqr()

    @ti.kernel
    def k():
        for i in x:
            loss[None] += energy(x[i]) * ti.exp(-x[i].normalized()[0])

    M = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])

    def ref(flat):
        vs = flat.reshape(n, 3)
        total = 0.0
        for v in vs:
            e = v @ M @ v + np.sqrt(v @ v + 1e-3) + np.sum(np.cross(v, [1.0, 0, 0]) ** 2)
            total += e * np.exp(-v[0] / np.linalg.norm(v))
        return total

    xs = RNG.uniform(-1, 1, (n, 3))
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), fd(ref, xs.reshape(-1)).reshape(n, 3),
                               rtol=1e-6, atol=1e-9)


def test_kernel_mixing_serial_statements_and_parallel_loops():
    n = 8
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        c = x[0] * 2.0                   # serial, read by the loop below
        for i in x:
            loss[None] += c * x[i] ** 2
        loss[None] += ti.sin(x[1]) * c   # serial again, after the loop
        for i in range(3):
            loss[None] += x[i + 2]

    def ref(xs):
        c = xs[0] * 2.0
        return c * np.sum(xs ** 2) + np.sin(xs[1]) * c + xs[2:5].sum()

    xs = RNG.uniform(-1, 1, n)
    np.testing.assert_allclose(grad_of(k, [x], loss, xs), fd(ref, xs), rtol=1e-6, atol=1e-9)


def test_atomic_min_max_send_the_gradient_to_the_winner():
    n = 9
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    lo = ti.field(ti.f64, shape=(), needs_grad=True)
    hi = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            ti.atomic_min(lo[None], x[i] * 2.0)
            ti.atomic_max(hi[None], x[i] * 3.0)

    xs = RNG.permutation(np.linspace(-1, 1, n))
    x.from_numpy(xs)
    lo[None], hi[None] = 10.0, -10.0
    k()
    assert lo[None] == pytest.approx(2 * xs.min()) and hi[None] == pytest.approx(3 * xs.max())
    lo.grad[None], hi.grad[None] = 1.0, 1.0
    k.grad()
    ref = np.zeros(n)
    ref[np.argmin(xs)] += 2.0
    ref[np.argmax(xs)] += 3.0
    np.testing.assert_allclose(x.grad.to_numpy(), ref)


def test_tape_requires_a_0d_loss_with_grad():
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    no_grad = ti.field(ti.f64, shape=())
    with pytest.raises(ti.FluxionError, match="0-D"):
        ti.ad.Tape(loss=x)
    with pytest.raises(ti.FluxionError, match="needs_grad"):
        ti.ad.Tape(loss=no_grad)


def test_tape_grad_check_agrees_with_finite_differences(capsys):
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.exp(x[i]) * x[(i + 1) % 6]

    x.from_numpy(RNG.uniform(-1, 1, 6))
    with ti.ad.Tape(loss=loss, grad_check=[x]) as tape:
        k()
    assert tape.report < 1e-6
    assert "grad_check passed" in capsys.readouterr().out


def test_no_grad_kernels_are_skipped_by_the_tape():
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += 3.0 * x[i]

    @ti.ad.no_grad
    @ti.kernel
    def touch():
        for i in x:
            x.grad[i] += 100.0

    with ti.ad.Tape(loss=loss):
        k()
        touch()        # recorded nowhere: its effect on x.grad stays, no grad of it runs
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(4, 103.0))


def test_global_data_access_rule_1_is_a_compile_error_naming_field_and_line():
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    b = ti.field(ti.f64, shape=(), needs_grad=True, name="b")
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def broke():
        loss[None] = x[1] * b[None]
        b[None] += 100

    with pytest.raises(ti.FluxionCompilationError) as e:
        broke.grad()
    msg = str(e.value)
    assert "rule #1" in msg and "b" in msg and "b[None] += 100" in msg


def test_custom_gradient_with_kernel_grad_inside_backward():
    n = 32
    x = ti.field(ti.f64)
    total = ti.field(ti.f64)
    ti.root.dense(ti.i, n).place(x)
    ti.root.place(total)
    ti.root.lazy_grad()

    @ti.kernel
    def func(mul: ti.f64):
        for i in range(n):
            ti.atomic_add(total[None], x[i] * mul)

    @ti.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @ti.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)

    x.from_numpy(np.arange(n, dtype=np.float64))
    with ti.ad.Tape(loss=total):
        forward(4)
    assert total[None] == pytest.approx(2 * 4 * np.arange(n).sum())  # forward ran twice
    # the custom backward runs func.grad once: 4, where two recorded launches would give 8
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(n, 4.0))


def test_tape_validation_reports_a_kernel_overwriting_what_an_earlier_one_read():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
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
    with pytest.raises(ti.FluxionError) as e:
        with ti.ad.Tape(loss, validation=True):
            func_1()
            func_2()
    msg = str(e.value)
    assert "func_2" in msg and "b[None] += 100" in msg and "global data access rule" in msg
    # the same kernels in an order that respects the rule pass validation, with correct grads
    b[None] = 10
    x.from_numpy(np.arange(n, dtype=np.float64))
    with ti.ad.Tape(loss, validation=True):
        func_2()
        func_1()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(n, 110.0))
