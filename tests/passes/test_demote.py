"""Atomic demotion: an update of the parallel loop's own element becomes a plain
read-modify-write; an element other iterations may touch keeps its atomic. Results are
checked against NumPy either way."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import dce, demote, lower_struct_for


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def atomics_left(kern, *template_args):
    src = kern.source()
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(src, kern.globals(), kern.name).build_function(
            dict(zip(kern.params(), template_args)))
    lower_struct_for.run(ir, runtime.config())     # (as the compile driver does first)
    dce.run(ir)
    demote.run(ir)
    return sum(isinstance(s, S.AtomicOpStmt) for s in S.walk(ir.body))


def test_own_elements_of_1d_2d_and_3d_loops_are_demoted():
    x = ti.Vector.field(2, ti.f64, 1000)
    v = ti.Vector.field(2, ti.f64, 1000)
    g = ti.field(ti.f64, (30, 40))
    c = ti.field(ti.i32, (5, 6, 7))
    xs, vs = np.random.default_rng(0).random((2, 1000, 2))
    x.from_numpy(xs)
    v.from_numpy(vs)

    @ti.kernel
    def update():
        for p in x:
            x[p] += 0.5 * v[p]
        for i, j in g:
            g[i, j] -= i * 100 + j
        for i, j, k in ti.ndrange(5, 6, 7):
            c[i, j, k] += i + j * k
            ti.atomic_max(c[i, j, k], 3)

    assert atomics_left(update) == 0
    update()
    update()
    np.testing.assert_allclose(x.to_numpy(), xs + vs, rtol=1e-12)
    i, j = np.meshgrid(np.arange(30), np.arange(40), indexing="ij")
    np.testing.assert_array_equal(g.to_numpy(), -2 * (i * 100 + j))
    i, j, k = np.meshgrid(np.arange(5), np.arange(6), np.arange(7), indexing="ij")
    first = np.maximum(i + j * k, 3)
    np.testing.assert_array_equal(c.to_numpy(), np.maximum(first + i + j * k, 3))


def test_elements_other_iterations_touch_keep_their_atomics():
    n = 4096
    x = ti.field(ti.i32, n)
    t = ti.field(ti.i32, (64, 64))
    row = ti.field(ti.i32, 64)

    @ti.kernel
    def neighbours():
        for i in x:
            x[i] += 1
            x[(i + 1) % n] += 1          # another iteration's element too

    @ti.kernel
    def transposed():
        for i, j in t:
            t[j, i] += 1                 # a bijection too, but not the loop's own order
            row[i] += 1                  # shared along j

    assert atomics_left(neighbours) == 2
    assert atomics_left(transposed) == 2
    for _ in range(3):
        neighbours()
        transposed()
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 6))
    np.testing.assert_array_equal(t.to_numpy(), np.full((64, 64), 3))
    np.testing.assert_array_equal(row.to_numpy(), np.full(64, 3 * 64))


def test_ndarray_own_elements_and_the_gradient_through_them():
    @ti.kernel
    def axpy(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            a[i] += 2.0 * b[i]

    a = np.arange(10.0)
    b = np.ones(10)
    axpy(a, b)
    np.testing.assert_array_equal(a, np.arange(10.0) + 2)

    x = ti.field(ti.f64, 50, needs_grad=True)
    y = ti.field(ti.f64, 50, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    xs = np.random.default_rng(1).random(50)
    x.from_numpy(xs)

    @ti.kernel
    def f():
        for i in x:
            y[i] += ti.sin(x[i]) * x[i]

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    with ti.ad.Tape(loss):
        f()
        total()
    ys = np.sin(xs) * xs
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * ys * (np.cos(xs) * xs + np.sin(xs)),
                               rtol=1e-12)
