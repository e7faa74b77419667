"""Gradients of whole programs that used to come out silently wrong (issue 13): `ti.stop_grad`,
locals swapped in a loop, fields written and read back in one kernel, `ti.ad.no_grad` on Python
functions, singular points of the derivative rules, kernel-level locals shared with parallel
loops, branches and overwrites under the global data access rules. Expected values are
analytic or central differences in float64."""
import math

import numpy as np
import pytest

import fluxion as ti
from op_cases import fd as central_diff
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir.expr import Expr
from fluxion.ir import stmts as S
from fluxion.lang import builtins as B


# -- ti.stop_grad ------------------------------------------------------------------------------
def test_stop_grad_on_a_field_stops_its_reads_in_that_loop_only():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 8
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(n):
            loss[None] += x[i] ** 3
            ti.stop_grad(x)          # after the read: it still counts for the whole block
        for i in range(n):
            if x[i] > -10.0:
                loss[None] += x[i] ** 2

    xs = np.linspace(-1.0, 2.0, n)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs, rtol=1e-12)


def test_stop_grad_covers_reads_nested_in_its_block_and_forward_mode():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 5
    x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    w = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        for i in range(n):
            ti.stop_grad(x)
            if i % 2 == 0:
                for j in range(2):
                    loss[None] += x[i] * w[i] * (j + 1)

    xs = np.arange(1.0, n + 1.0)
    ws = np.linspace(0.5, 1.5, n)
    x.from_numpy(xs)
    w.from_numpy(ws)
    even = (np.arange(n) % 2 == 0).astype(np.float64)
    with ti.ad.Tape(loss=loss):
        k()
    assert np.all(x.grad.to_numpy() == 0.0)
    np.testing.assert_allclose(w.grad.to_numpy(), 3 * xs * even, rtol=1e-12)
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] * n):
        k()
    assert loss.dual[None] == 0.0
    with ti.ad.FwdMode(loss=loss, param=w, seed=[1.0] * n):
        k()
    assert loss.dual[None] == pytest.approx(float((3 * xs * even).sum()), rel=1e-12)


# -- locals carried through a loop -------------------------------------------------------------
def test_locals_swapped_in_a_loop_fibonacci():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 9
    a = ti.field(ti.f64, shape=n, needs_grad=True)
    b = ti.field(ti.f64, shape=n, needs_grad=True)
    c = ti.field(ti.i32, shape=n)
    f = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def fib():
        for i in range(n):
            p = a[i]
            q = b[i]
            for _ in range(c[i]):
                p, q = q, p * q + 0.5 * p
            f[i] = q

    def ref(av, bv, steps):
        p, q = av, bv
        for _ in range(steps):
            p, q = q, p * q + 0.5 * p
        return q

    av = np.linspace(0.3, 0.9, n)
    bv = np.linspace(1.1, 0.6, n)
    a.from_numpy(av)
    b.from_numpy(bv)
    c.from_numpy(np.arange(n, dtype=np.int32) % 5)
    fib()
    f.grad.fill(1.0)
    fib.grad()
    for i in range(n):
        steps = i % 5
        da = central_diff(lambda v: ref(v[0], bv[i], steps), np.array([av[i]]))[0]
        db = central_diff(lambda v: ref(av[i], v[0], steps), np.array([bv[i]]))[0]
        assert a.grad[i] == pytest.approx(da, rel=1e-7, abs=1e-9)
        assert b.grad[i] == pytest.approx(db, rel=1e-7, abs=1e-9)


# -- fields written and read back in one kernel --------------------------------------------------
def test_values_stored_then_read_back_do_not_touch_intermediate_grads():
    ti.init(arch=ti.cpu)
    x, a, b, c, e = [ti.field(ti.f32, shape=(), needs_grad=True) for _ in range(5)]

    @ti.kernel
    def k():
        a[None] = x[None]
        b[None] = a[None] * 2
        c[None] = b[None] * 3
        e[None] = c[None] * 4

    x[None] = 1.0
    with ti.ad.Tape(loss=e):
        k()
    assert x.grad[None] == 24.0
    assert a.grad[None] == 0.0 and b.grad[None] == 0.0 and c.grad[None] == 0.0


def test_store_then_read_back_in_a_parallel_loop():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 16
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = ti.sin(x[i])
            loss[None] += y[i] * y[i] + x[i]

    xs = np.linspace(-2.0, 2.0, n)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.sin(xs) * np.cos(xs) + 1, rtol=1e-12)
    assert np.all(y.grad.to_numpy() == 0.0)


# -- ti.ad.no_grad -----------------------------------------------------------------------------
def test_no_grad_on_a_python_function_records_none_of_its_launches():
    ti.init(arch=ti.cpu)
    n = 16
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    total = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def acc(mul: ti.f32):
        for i in range(n):
            total[None] += x[i] * mul

    @ti.ad.no_grad
    def twice(mul):
        acc(mul)
        acc(mul)

    with ti.ad.Tape(loss=total):
        twice(4.0)
        acc(5.0)
    assert np.all(x.grad.to_numpy() == 5.0)
    x.grad.fill(0)
    total.grad[None] = 1.0
    twice.grad(4.0)
    assert np.all(x.grad.to_numpy() == 0.0)


# -- singular points of the rules --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [ti.f32, ti.f64])
def test_sqrt_gradient_is_inf_at_zero_in_both_modes(dtype):
    ti.init(arch=ti.cpu, default_fp=dtype)   # fast math on, the default
    x = ti.field(dtype, shape=4, needs_grad=True, needs_dual=True)
    y = ti.field(dtype, shape=4, needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        for i in range(2):
            y[i] = ti.sqrt(x[i])
        for i in range(2, 4):
            y[i] = x[i] ** 0.5

    xs = np.array([0.0, 2.25, 0.0, 0.25])
    x.from_numpy(xs.astype(np.float32 if dtype == ti.f32 else np.float64))
    k()
    y.grad.fill(1.0)
    k.grad()
    g = x.grad.to_numpy()
    assert g[0] == math.inf and g[2] == math.inf
    assert g[1] == pytest.approx(0.5 / 1.5, rel=1e-6) and g[3] == pytest.approx(1.0, rel=1e-6)
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0, 1.0]):
        k()
    d = y.dual.to_numpy()
    assert d[0] == math.inf and d[2] == math.inf
    assert d[1] == pytest.approx(0.5 / 1.5, rel=1e-6)


def test_pow_partial_in_the_exponent_and_min_max_ties():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    y = ti.field(ti.f64, shape=3, needs_grad=True)
    out = ti.field(ti.f64, shape=5, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(3):
            out[i] = x[i] ** y[i]
        out[3] = ti.min(x[0], x[0] + y[0] * 0.0)
        out[4] = ti.max(x[1], x[1] + y[1] * 0.0)

    x.from_numpy(np.array([0.0, 1.5, -2.0]))
    y.from_numpy(np.array([2.0, 1.3, 2.0]))
    k()
    out.grad.from_numpy(np.array([1.0, 1.0, 1.0, 0.0, 0.0]))
    k.grad()
    gy = y.grad.to_numpy()
    assert gy[0] == 0.0                               # 0**y is 0 around y = 2
    assert gy[1] == pytest.approx(math.log(1.5) * 1.5 ** 1.3, rel=1e-12)
    assert math.isnan(gy[2])                          # (-2)**y has no real derivative in y
    # ties: the adjoint goes to the second operand only
    x.grad.fill(0)
    y.grad.fill(0)
    out.grad.from_numpy(np.array([0.0, 0.0, 0.0, 1.0, 1.0]))
    k.grad()
    assert x.grad[0] == 1.0 and x.grad[1] == 1.0      # through the second operand x + 0*y
    assert y.grad[0] == 0.0 and y.grad[1] == 0.0


# -- kernel-level locals and parallel loops --------------------------------------------------
def test_kernel_local_reassigned_between_parallel_loops():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 8
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        s = 1.5
        for i in range(n):
            loss[None] += x[i] * s
        s = 5.0
        for i in range(n):
            loss[None] += x[i] * x[i] * s

    xs = np.linspace(-1.0, 1.0, n)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 1.5 + 10.0 * xs, rtol=1e-12)


@pytest.fixture
def atomic_locals(monkeypatch):
    """`ti.atomic_add(s, v)` on a local builds AtomicOpStmt(add, ptr=the alloca), the form
    `s += v` on a kernel-level local takes in a parallel loop."""
    plain = B.atomic_update

    def update(op, target, value):
        if isinstance(target.lvalue, S.AllocaStmt) and op == "add":
            v = E.cast(E.to_expr(value, like=target.dtype), target.dtype)
            return Expr(builder.emit(S.AtomicOpStmt(target.lvalue, v.stmt, "add",
                                                    ret_type=target.dtype)))
        return plain(op, target, value)

    monkeypatch.setattr(B, "atomic_update", update)


def test_atomic_add_into_a_kernel_local_then_used_nonlinearly(atomic_locals):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 300
    x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        s = 0.0
        for i in range(n):
            ti.atomic_add(s, x[i] * x[i])
        loss[None] = ti.sin(s)

    xs = np.linspace(-0.05, 0.05, n)
    x.from_numpy(xs)
    sq = float((xs ** 2).sum())
    with ti.ad.Tape(loss=loss):
        k()
    assert loss[None] == pytest.approx(math.sin(sq), rel=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), math.cos(sq) * 2 * xs, rtol=1e-10, atol=1e-15)
    seed = np.linspace(1.0, 2.0, n)
    with ti.ad.FwdMode(loss=loss, param=x, seed=seed):
        k()
    assert loss.dual[None] == pytest.approx(math.cos(sq) * float((2 * xs * seed).sum()),
                                            rel=1e-10)


def test_atomic_add_into_a_local_of_a_serial_loop(atomic_locals):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n, m = 4, 3
    x = ti.field(ti.f64, shape=(n, m), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(n):
            t = 0.0
            for j in range(m):
                ti.atomic_add(t, x[i, j] * t + x[i, j])   # reads t: t is carried
            loss[None] += t * t

    def ref(v):
        v = v.reshape(n, m)
        total = 0.0
        for i in range(n):
            t = 0.0
            for j in range(m):
                t += v[i, j] * t + v[i, j]
            total += t * t
        return total

    xs = np.linspace(0.1, 0.9, n * m).reshape(n, m)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    expect = central_diff(lambda v: ref(v), xs.reshape(-1)).reshape(n, m)
    np.testing.assert_allclose(x.grad.to_numpy(), expect, rtol=1e-7)


# -- the global data access rules --------------------------------------------------------------
def test_the_two_branches_of_an_if_may_write_the_same_element():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=2, needs_grad=True)
    y = ti.field(ti.f32, shape=2, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(2):
            t = x[i]
            if t > 0:
                y[i] = t
            else:
                y[i] = 3 * t

    x.from_numpy(np.array([-1.0, 1.0], dtype=np.float32))
    k()
    y.grad.fill(1.0)
    k.grad()
    assert x.grad.to_numpy().tolist() == [3.0, 1.0]


def test_an_overwritten_element_gives_no_gradient_to_the_first_write():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 6
    a = ti.field(ti.f64, shape=n, needs_grad=True)
    p = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(n):
            v = a[i]
            for _ in range(2):
                p[i] += v * v          # overwritten below: contributes nothing
            p[i] = v * i

    a.from_numpy(np.linspace(1.0, 2.0, n))
    k()
    p.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), np.arange(n, dtype=np.float64))
    assert np.all(p.grad.to_numpy() == 0.0)


def test_random_numbers_in_a_reverse_differentiated_kernel_are_an_error():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def noisy():
        loss[None] = x[None] * ti.random()

    with pytest.raises(RuntimeError, match="noisy") as e:
        with ti.ad.Tape(loss=loss):
            noisy()
    assert "ti.random()" in str(e.value)


# -- where store forwarding must not fire ------------------------------------------------------
def test_store_forwarding_stops_at_writes_that_may_alias_or_are_nested():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    a = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k(j: ti.i32, c: ti.i32):
        a[0] = x[0]
        a[j] += x[1] * 5.0          # j == 0 at run time: the same element
        if c > 0:
            a[0] += x[2] * 7.0      # a write in a nested block
        loss[None] = a[0] * 3.0

    x.from_numpy(np.array([0.5, 1.5, 2.5]))
    k(0, 1)
    assert loss[None] == pytest.approx(3.0 * (0.5 + 7.5 + 17.5), rel=1e-12)
    loss.grad[None] = 1.0
    k.grad(0, 1)
    np.testing.assert_allclose(x.grad.to_numpy(), [3.0, 15.0, 21.0], rtol=1e-12)


def test_ndarray_annotated_needs_grad_false_gets_no_gradient():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 4

    @ti.kernel
    def k(x: ti.types.ndarray(needs_grad=False), w: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in range(n):
            y[0] += x[i] * w[i] * w[i]

    x = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    w = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=1, needs_grad=True)
    xs, ws = np.arange(1.0, n + 1.0), np.linspace(0.5, 2.0, n)
    x.from_numpy(xs)
    w.from_numpy(ws)
    k(x, w, y)
    y.grad.fill(1.0)
    k.grad(x, w, y)
    assert np.all(x.grad.to_numpy() == 0.0)
    np.testing.assert_allclose(w.grad.to_numpy(), 2 * xs * ws, rtol=1e-12)


def test_tape_with_a_one_element_ndarray_loss():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 5
    x = ti.ndarray(ti.f64, shape=(n,), needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(1,), needs_grad=True)

    @ti.kernel
    def k(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in range(n):
            loss[0] += ti.exp(x[i]) * 0.5

    xs = np.linspace(-1.0, 1.0, n)
    x.from_numpy(xs)
    loss.fill(123.0)                      # the Tape zeroes the loss on entry
    with ti.ad.Tape(loss=loss):
        k(x, loss)
    assert loss[0] == pytest.approx(0.5 * np.exp(xs).sum(), rel=1e-12)
    assert loss.grad[0] == 1.0
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 * np.exp(xs), rtol=1e-12)
    with pytest.raises(ti.FluxionError, match="one element"):
        ti.ad.Tape(loss=x)


def test_tape_validation_without_debug_warns_that_it_does_not_check():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        x[None] = 1.0

    with pytest.warns(UserWarning, match="debug=True"):
        with ti.ad.Tape(loss=x, validation=True):
            k()


def test_grad_for_a_function_not_grad_replaced_is_a_runtime_error():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, shape=4, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            x[i] += 1.0

    with pytest.raises(RuntimeError, match="grad_replaced"):
        @ti.ad.grad_for(k)
        def backward():
            pass


def test_matrix_field_element_written_and_read_by_run_time_index():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    m = ti.Matrix.field(2, 2, ti.f64, 3, needs_grad=True)
    src = ti.Matrix.field(2, 2, ti.f64, 3, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(3):
            for j, l in ti.ndrange(2, 2):
                m[i][j, l] = (j + 1) * (l + 2) * src[i][j, l] ** 2
                loss[None] += m[i][j, l]

    s = np.linspace(0.5, 2.0, 12).reshape(3, 2, 2)
    src.from_numpy(s)
    with ti.ad.Tape(loss=loss):
        k()
    coef = np.array([[2.0, 3.0], [4.0, 6.0]])
    assert loss[None] == pytest.approx(float((coef * s ** 2).sum()), rel=1e-12)
    np.testing.assert_allclose(src.grad.to_numpy(), 2 * coef * s, rtol=1e-12)


def test_an_element_overwritten_in_a_serial_loop_gets_only_the_last_gradient():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 4
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def k():
        for i in range(n):
            for j in range(3):
                y[i] = x[i] * x[i] * j          # only j = 2 survives

    @ti.kernel
    def k_arrays(xa: ti.types.ndarray(), ya: ti.types.ndarray(), za: ti.types.ndarray()):
        for i in range(n):
            for j in range(3):
                ya[i] = xa[i] * xa[i] * j
            za[i] = xa[i] * 5.0
            za[i] = xa[i] * 7.0                 # overwrites the line above

    xs = np.linspace(0.5, 2.0, n)
    x.from_numpy(xs)
    k()
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * xs, rtol=1e-12)
    assert np.all(y.grad.to_numpy() == 0.0)      # consumed, as in the original system

    xa = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    ya = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    za = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    xa.from_numpy(xs)
    k_arrays(xa, ya, za)
    ya.grad.fill(1.0)
    za.grad.fill(1.0)
    k_arrays.grad(xa, ya, za)
    np.testing.assert_allclose(xa.grad.to_numpy(), 4 * xs + 7.0, rtol=1e-12)


@pytest.mark.cpu_only
@pytest.mark.parametrize("local_fp", [ti.f64, ti.f32])   # f32: casts around the update
def test_reduction_into_a_kernel_local_then_used_nonlinearly(local_fp):
    # one thread: `s = s + v` in a parallel loop is a race in the primal itself on several
    # (what is tested is the gradient: the local's value replayed for the code after the
    # loop, and the local's adjoint reaching every v; the atomic form is tested below with
    # threads)
    ti.init(arch=ti.cpu, default_fp=local_fp, cpu_max_num_threads=1)
    rtol = 1e-9 if local_fp == ti.f64 else 1e-5
    n = 20000
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        s = 0.25
        for i in range(n):
            s = s + x[i] * x[i]       # a reduction, as the passes compile it
        loss[None] = s * s

    xs = np.linspace(-0.01, 0.01, n)
    x.from_numpy(xs)
    k()
    total = 0.25 + float((xs ** 2).sum())
    assert loss[None] == pytest.approx(total ** 2, rel=rtol)
    loss.grad[None] = 1.0
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * total * 2 * xs, rtol=rtol, atol=1e-12)


def test_kernel_local_used_as_scratch_inside_a_parallel_loop():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=4)
    n = 5000
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def k():
        t = 0.0
        for i in range(n):
            t = x[i] * 2.0            # assigned, then read, in every iteration
            y[i] = t * t

    xs = np.linspace(0.0, 1.0, n)
    x.from_numpy(xs)
    k()
    y.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 8 * xs, rtol=1e-12)


def test_integer_ndarray_with_needs_grad_is_an_error():
    ti.init(arch=ti.cpu)
    with pytest.raises(ti.FluxionRuntimeError, match="i32"):
        ti.ndarray(ti.i32, shape=3, needs_grad=True)
    ti.ndarray(ti.i32, shape=3)                      # without a gradient: fine


# -- a local read by a serial loop and assigned again after it ---------------------------------
# The reversed loop replays its body after its whole scope has been replayed; it read such a
# local's last value (`t` after `t = t + 0.25 * a`) instead of the value the loop saw (fuzz seed
# 20002: a 3x3 matrix carried through `for j in range(1)` scaled by tanh(t)). Forms: a range
# loop and a while loop in a parallel loop, one inside an `if`, one nested in a serial loop
# whose body assigns t after it, one in the kernel's serial part (a serialized top-level loop)
# on kernel-level locals, and a matrix; each checked against central differences of the same kernel in float64.
def _invariant_program(form):
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        if ti.static(form == "serial part"):
            t = x[0] * 0.5
            a = ti.sin(x[1])
            ti.loop_config(serialize=True)      # (a top-level loop is parallel otherwise)
            for j in range(2):
                a = a * t + x[j + 2]
            t = t + 0.25 * a
            loss[None] += t * t
        for i in x:
            if ti.static(form == "range"):
                t = x[i] * 0.5
                a = ti.sin(x[i])
                for j in range(2):
                    a = a * t
                t = t + 0.25 * a
                loss[None] += t
            if ti.static(form == "while"):
                t = x[i] * 0.5
                a = ti.sin(x[i])
                j = 0
                while j < 2:
                    a = a * t
                    j += 1
                t = t * t + 0.25 * a
                loss[None] += t
            if ti.static(form == "in an if"):
                t = x[i] * 0.5
                a = ti.cos(x[i])
                if i % 2 == 0:
                    for j in range(3):
                        a = a * t + 0.1
                    t = t * a
                loss[None] += t + a
            if ti.static(form == "nested"):
                t = x[i] * 0.5
                a = ti.sin(x[i])
                for m in range(2):
                    for j in range(2):
                        a = ti.tanh(a * t)
                    t = t + 0.5 * a
                loss[None] += t
            if ti.static(form == "matrix"):
                t = x[i] * 0.5
                A = ti.Matrix([[ti.sin(x[i]), t, 0.1], [0.2, t * t, 0.3], [t, 0.4, x[i]]])
                for j in range(1):
                    A = ti.tanh(0.5 * (A @ A.transpose()) + A * ti.tanh(t))
                t = t + 0.25 * A.trace()
                loss[None] += t
    return x, loss, k


@pytest.mark.parametrize("form", ["range", "while", "in an if", "nested", "serial part",
                                  "matrix"])
def test_a_local_that_a_serial_loop_reads_and_later_code_assigns(form):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    _assert_tape_gives_central_differences(*_invariant_program(form))


def _assert_tape_gives_central_differences(x, loss, k):
    """x.grad after `k` under a Tape, against central differences of `k`'s loss (float64)."""
    xs = np.linspace(-0.9, 1.1, x.shape[0])

    def primal(v):
        x.from_numpy(v)
        loss[None] = 0.0
        k()
        return loss[None]
    want = central_diff(primal, xs)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-8)


def test_a_serialized_top_level_loop_carrying_a_local_then_a_parallel_loop():
    # the adjoint restores the serial loop's carried local from its autodiff stack in a task
    # after the parallel loop's: on CUDA (one GPU kernel per task) that stack lived in the
    # first task's registers and the kernel failed to compile (an internal KeyError)
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        a = ti.sin(x[1])
        ti.loop_config(serialize=True)
        for j in range(3):
            a = a * x[0] + x[j + 2]
        for i in y:
            y[i] = x[i] * 2.0
        loss[None] += a * a

    _assert_tape_gives_central_differences(x, loss, k)


# -- LLVM's SLP vectorizer -----------------------------------------------------------------------
def test_forward_mode_of_a_matrix_carried_through_a_loop_and_inverted():
    # the dual kernel's module (470 KB of LLVM text) came out of LLVM 22's SLP vectorizer with
    # an instruction that does not dominate its uses, and code generation aborted the process
    # (fuzz seed 22132, on the CPU and the emulator); compile_worker.optimized retries it
    # without that vectorizer
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 16
    w = ti.field(ti.f64, shape=n)
    y = ti.field(ti.f64, shape=n, needs_dual=True)
    mM = ti.Matrix.field(3, 3, ti.f64, shape=n, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        for i in range(n):
            t = ti.cast(0.0, ti.f64)
            b = y[(i + 5) % n]
            A = ti.Matrix([[ti.tanh(ti.log(b * b + 1.0)), ti.tanh(w[i]), ti.tanh(ti.exp(ti.sin(t)))],
                           [ti.tanh(w[i] + t), ti.tanh(w[i] / (t ** 2 + 1.0)), ti.tanh(-1.5 * b)],
                           [ti.tanh(ti.exp(ti.sin(b))), ti.tanh(b), ti.tanh(0.5 + b)]], dt=ti.f64)
            A = 0.5 * (A + ti.tanh(mM[(i + 2) % n]))
            for _ in range(2):
                A = ti.tanh(0.5 * (A @ A.transpose()) + A * ti.tanh(w[i] ** 3))
            B = 2.0 * ti.Matrix.identity(ti.f64, 3) + 0.5 * A
            t = t + 0.25 * (ti.sqrt(A.norm_sqr() + 1.0) + (B.inverse() @ A).trace())
            loss[None] += t

    rng = np.random.default_rng(5)
    ys, seed = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    w.from_numpy(rng.uniform(-1, 1, n))
    mM.from_numpy(rng.uniform(-1, 1, (n, 3, 3)))

    def primal(v):
        y.from_numpy(v)
        loss[None] = 0.0
        k()
        return loss[None]
    h = 1e-6
    want = (primal(ys + h * seed) - primal(ys - h * seed)) / (2 * h)
    y.from_numpy(ys)
    with ti.ad.FwdMode(loss=loss, param=y, seed=list(seed)):
        k()
    assert loss.dual[None] == pytest.approx(want, rel=1e-6, abs=1e-8)
