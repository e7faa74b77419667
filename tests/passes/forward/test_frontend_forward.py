"""The frontend's forwarding of locals (ir/builder.py's known_value, frontend/variables.py's
Var.load): a read of a local takes the value stored before it in the same block, instead of
emitting a load that simplify's store_to_load would replace; everywhere else the load stays.

Each kernel here runs twice, with the forwarding and with FLUXION_NO_FRONTEND_FORWARD=1 (the
frontend as it was): the results must be the same, and so must the IR after simplify; the
frontend's own IR is counted for where the loads must go and where they must stay."""
import re

import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import builder
from fluxion.ir import stmts as S
from fluxion.ir.builder import BuildContext, building
from fluxion.ir.printer import print_kernel
from fluxion.frontend.transformer import Transformer
from fluxion.lang import runtime
from fluxion.passes import simplify

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False)
    yield
    ti.reset()


def frontend_ir(kern, forward=True):
    """The frontend's IR of `kern` (a ti.kernel without arguments), built as a kernel's
    build is (lang/kernel.py) with or without the forwarding."""
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config(), forward_locals=forward)):
        Transformer(kern.source(), kern.globals(), kern.name).build_function({})
        builder.drop_unread_locals()
    return ir


def loads(ir):
    return sum(1 for s in S.walk(ir.body) if isinstance(s, S.LocalLoadStmt))


def allocas(ir):
    return sum(1 for s in S.walk(ir.body) if isinstance(s, S.AllocaStmt))


def stores(ir):
    return sum(1 for s in S.walk(ir.body) if isinstance(s, S.LocalStoreStmt))


def _simplified(kern, monkeypatch, forward):
    """(the kernel's IR after simplify, with statement numbers renumbered) as the compile
    driver makes it, with or without the frontend's forwarding; runs the kernel."""
    seen = []
    plain = simplify.run

    def spy(ir, cfg, *args, **kwargs):
        out = plain(ir, cfg, *args, **kwargs)
        if kwargs.get("only") is None:
            seen.append(print_kernel(ir, locs=False))
        return out

    with monkeypatch.context() as m:
        m.setattr(simplify, "run", spy)
        if not forward:
            m.setenv("FLUXION_NO_FRONTEND_FORWARD", "1")
        kern()
    return _renumber(seen[0])


def _renumber(text):
    names = {}
    return re.sub(r"\$\d+", lambda g: names.setdefault(g.group(0), f"${len(names)}"), text)


def both_ways(make, monkeypatch, outputs):
    """Build `make()` (fields, kernel) twice: the numpy values of `outputs(fields)` after a
    run with and without the forwarding must be equal, and the IR after simplify too;
    returns the values."""
    got = []
    for forward in (True, False):
        ti.reset()
        ti.init(arch=ti.cpu, offline_cache=False)
        fields, kern = make()
        ir = _simplified(kern, monkeypatch, forward)
        got.append((ir, [np.copy(o) for o in outputs(fields)]))
    (ir_f, out_f), (ir_p, out_p) = got
    assert ir_f == ir_p
    for a, b in zip(out_f, out_p):
        np.testing.assert_array_equal(a, b)
    return out_f


# -- where the loads go ------------------------------------------------------------------------
def test_a_local_assigned_once_is_read_as_its_value():
    x = ti.field(ti.f32, shape=4)
    y = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            a = x[i] * 2.0
            b = a + a
            y[i] = b * a

    plain, fwd = frontend_ir(k, forward=False), frontend_ir(k)
    assert loads(plain) == 4 and stores(plain) == 2 and allocas(plain) == 2
    # every read forwarded, the locals are not made at all (dce would remove them)
    assert loads(fwd) == stores(fwd) == allocas(fwd) == 0


def test_the_arguments_of_an_inlined_function_are_read_as_their_values():
    x = ti.field(ti.f32, shape=4)

    @ti.func
    def f(u, v):
        return u * v + u

    @ti.kernel
    def k():
        for i in x:
            x[i] = f(x[i], 3.0 * x[i])

    assert loads(frontend_ir(k, forward=False)) == 3
    fwd = frontend_ir(k)
    assert loads(fwd) == stores(fwd) == allocas(fwd) == 0


def test_a_static_loop_temporary_is_read_as_the_value_of_each_unrolled_iteration(monkeypatch):
    def make():
        x = ti.Vector.field(2, ti.f32, shape=4)
        y = ti.field(ti.f32, shape=4)

        @ti.kernel
        def k():
            for i in x:
                x[i] = [i, 2 * i]
                s = 0.0
                for d in ti.static(range(2)):
                    t = x[i][d] * (d + 1)
                    s += t * t
                y[i] = s
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    i = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(y, i * i + 16 * i * i)


# -- where they must stay ----------------------------------------------------------------------
def test_a_local_assigned_in_a_branch_is_loaded_after_it(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=6)
        y = ti.field(ti.f32, shape=6)

        @ti.kernel
        def k():
            for i in x:
                x[i] = i - 2.0
            for i in x:
                a = x[i]
                if a < 0:
                    a = -a * 10.0
                else:
                    b = a + 1.0
                    a = b * a
                y[i] = a + 1.0
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    xs = np.arange(6, dtype=np.float32) - 2
    np.testing.assert_allclose(y, np.where(xs < 0, -xs * 10, (xs + 1) * xs) + 1)


def test_a_local_read_in_a_loop_before_its_assignment_there_is_loaded(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=())
        y = ti.field(ti.f32, shape=5)

        @ti.kernel
        def k():
            x[None] = 3.0
            a = x[None]
            for j in range(5):
                y[j] = a          # the value of the previous iteration's assignment
                a = a * 2.0 + 1.0
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    np.testing.assert_allclose(y, [3, 7, 15, 31, 63])


def test_a_loop_read_of_a_local_assigned_before_the_loop_is_loaded(monkeypatch):
    # (the load in the loop's body: simplify's forward takes it, not the frontend)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        a = x[0] + 1.0
        for j in range(4):
            x[j] = a * j

    ir = frontend_ir(k)
    loop = next(s for s in ir.body.stmts if s.BLOCKS)
    assert any(isinstance(s, S.LocalLoadStmt) for s in S.walk(loop.body))


def test_augmented_assignments_read_the_value_they_stored(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=4)
        y = ti.field(ti.f32, shape=4)

        @ti.kernel
        def k():
            for i in x:
                x[i] = i
            for i in x:
                a = x[i]
                a += 1.0
                a *= 3.0
                s = 0.0
                for j in range(i + 1):
                    s += a      # in a loop: loaded
                    a -= 1.0
                y[i] = s + a
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    want = []
    for i in range(4):
        a, s = (i + 1.0) * 3.0, 0.0
        for _ in range(i + 1):
            s += a
            a -= 1.0
        want.append(s + a)
    np.testing.assert_allclose(y, want)


def test_an_element_store_into_a_vector_local_is_seen_by_later_reads(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=4)
        y = ti.Vector.field(3, ti.f32, shape=4)

        @ti.kernel
        def k():
            for i in x:
                x[i] = i
            for i in x:
                v = ti.Vector([x[i], x[i] + 1.0, x[i] + 2.0])
                v[0] = 7.0
                w = v * 2.0
                v[i % 3] = -1.0           # a run-time index: a select per entry
                if x[i] > 1.5:
                    v[1] += 10.0          # in a branch
                y[i] = v + w
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    want = []
    for i in range(4):
        v = [7.0, i + 1.0, i + 2.0]
        w = [2 * e for e in v]
        v[i % 3] = -1.0
        if i > 1.5:
            v[1] += 10.0
        want.append([a + b for a, b in zip(v, w)])
    np.testing.assert_allclose(y, want)


def test_atomics_and_template_arguments_on_a_local_are_seen(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=4)
        y = ti.field(ti.f32, shape=4)

        @ti.func
        def bump(v: ti.template(), by):
            v += by

        @ti.func
        def set_to(v: ti.template(), value):
            v = value

        @ti.kernel
        def k():
            for i in x:
                a = x[i] + 1.0
                old = ti.atomic_add(a, 2.0)
                b = a                         # 3 + x[i]
                bump(a, 10.0)
                c = a                         # 13 + x[i]
                for j in range(2):
                    d = a                     # read before the call below, each trip
                    bump(a, d)
                set_to(b, 100.0)
                y[i] = old + b * 1000.0 + c * 10.0 + a
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    np.testing.assert_allclose(y, [1 + 100000 + 130 + 52] * 4)


def test_a_shared_local_updated_atomically_in_a_parallel_loop_is_loaded_after_it(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=8)
        y = ti.field(ti.f32, shape=())

        @ti.kernel
        def k():
            for i in x:
                x[i] = i
            s = x[1] * 2.0
            for i in x:
                s += x[i]           # an atomic on the kernel-level local
            y[None] = s
        return (y,), k

    (y,) = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy()])
    assert y == 2.0 + sum(range(8))


def test_a_local_passed_to_a_real_function_by_reference_is_loaded_after_the_call(monkeypatch):
    def make():
        x = ti.field(ti.f32, shape=4)
        y = ti.field(ti.f32, shape=4)

        @ti.real_func
        def triple(v: ti.ref(ti.f32)):
            v *= 3.0

        @ti.real_func
        def put(v: ti.ref(ti.f32), at: ti.i32):
            x[at] = v * 100.0

        @ti.kernel
        def k():
            for i in x:
                x[i] = i
            for i in x:
                a = x[i] + 1.0
                b = x[i] * 2.0
                triple(a)
                y[i] = a * 10.0 + b
            c = y[3] + 1.0          # read by the function only: the local must stay
            put(c, 0)
        return (x, y), k

    x, y = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy(), f[1].to_numpy()])
    np.testing.assert_allclose(y, [(i + 1) * 30 + 2 * i for i in range(4)])
    np.testing.assert_allclose(x, [(4 * 30 + 6 + 1) * 100.0, 1, 2, 3])


def test_a_local_of_the_kernel_body_assigned_in_a_parallel_loop_is_not_forwarded(monkeypatch):
    # every iteration shares it (as store_to_load, the frontend does not forward it there)
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        t = 0
        for i in x:
            t = i
            x[i] = t

    ir = frontend_ir(k)
    loop = next(s for s in ir.body.stmts if s.BLOCKS)
    assert any(isinstance(s, S.LocalLoadStmt) for s in S.walk(loop.body))


def test_a_constant_or_comparison_taken_from_a_local_builds_what_its_load_built(monkeypatch):
    # (the frontend folds operations on constants as it builds them, and makes a condition
    # of a comparison as it is: a local's value is neither, as its load was not, so
    # `x ** n` stays a pow and an index's bounds check stays for simplify's bounds pass)
    def make():
        x = ti.field(ti.f32, shape=4)
        y = ti.field(ti.f32, shape=8)

        @ti.kernel
        def k():
            for i in x:
                x[i] = i + 0.5
            for i in x:
                n = 3
                h = 0.5
                m = 2
                c = x[i] > 1.0
                x[i] = x[i] ** n + ti.select(c, h, -h) + 2 ** m
                y[m + i] = n * h
                if c:
                    x[i] = 0.0
        return (x, y), k

    x, y = both_ways(make, monkeypatch, lambda f: [f[0].to_numpy(), f[1].to_numpy()])
    xs = np.arange(4) + 0.5
    np.testing.assert_allclose(x, np.where(xs > 1, 0, xs ** 3 - 0.5 + 4), rtol=1e-6)
    np.testing.assert_allclose(y, [0, 0, 1.5, 1.5, 1.5, 1.5, 0, 0])

    ti.reset()
    ti.init(arch=ti.cpu, offline_cache=False)
    _, k = make()
    fwd, plain = frontend_ir(k), frontend_ir(k, forward=False)
    assert loads(fwd) == 0 and loads(plain) > 0

    def ops(ir):
        return sorted(str(s.op) for s in S.walk(ir.body) if isinstance(s, (S.BinaryOpStmt,
                                                                          S.UnaryOpStmt)))
    assert ops(fwd) == ops(plain)
    assert any(isinstance(s, S.BinaryOpStmt) and str(s.op).endswith("pow")
               for s in S.walk(fwd.body))


# -- autodiff ----------------------------------------------------------------------------------
def _loss_kernel():
    n = 5
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def g(u, v: ti.template()):
        v += u * u
        return ti.sin(u) * v

    @ti.kernel
    def k():
        for i in x:
            a = x[i] * 1.5
            b = a * a + x[i]
            acc = 0.0
            acc2 = b
            for d in ti.static(range(3)):
                t = a * (d + 1)
                acc += ti.exp(-t * t) * b
            if x[i] > 0.5:
                acc2 = acc2 * a
            m = g(a, acc2)
            loss[None] += acc + acc2 + m
    return x, loss, k


def _grad(xs):
    x, loss, k = _loss_kernel()
    x.from_numpy(xs)
    loss[None] = 0.0
    with ti.ad.Tape(loss=loss):
        k()
    return loss[None], x.grad.to_numpy()


def test_gradients_are_those_of_the_unforwarded_frontend_and_of_finite_differences(monkeypatch):
    xs = np.array([0.1, 0.3, 0.6, 0.8, 1.1])
    got = {}
    for forward in (True, False):
        with monkeypatch.context() as m:
            if not forward:
                m.setenv("FLUXION_NO_FRONTEND_FORWARD", "1")
            ti.reset()
            ti.init(arch=ti.cpu, offline_cache=False, default_fp=ti.f64)
            got[forward] = _grad(xs)
    assert got[True][0] == got[False][0]
    np.testing.assert_array_equal(got[True][1], got[False][1])
    # central differences of the loss, each entry of x in turn (f64: the step is small)
    h = 1e-6
    fd = []
    for j in range(len(xs)):
        up, down = xs.copy(), xs.copy()
        up[j] += h
        down[j] -= h
        ti.reset()
        ti.init(arch=ti.cpu, offline_cache=False, default_fp=ti.f64)
        lu = _grad(up)[0]
        ti.reset()
        ti.init(arch=ti.cpu, offline_cache=False, default_fp=ti.f64)
        ld = _grad(down)[0]
        fd.append((lu - ld) / (2 * h))
    np.testing.assert_allclose(got[True][1], fd, rtol=1e-5, atol=1e-6)
