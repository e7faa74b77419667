"""Scatter privatization: atomic adds of a parallel loop into a field go to per-thread copies
that a merge loop adds back. Results must equal NumPy's, launch after launch, whatever the
thread count; loops that also read the field, or that scatter too little, keep atomics."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.frontend.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import dce, reduction, scatter


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    ti.init(arch=ti.cpu, cpu_max_num_threads=request.param, default_fp=ti.f64)
    yield request.param
    ti.reset()


def privatized(kern, *template_args):
    """Run the frontend and the passes up to scatter; the adds left atomic and made plain."""
    src = kern.source()
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(src, kern.globals(), kern.name).build_function(
            dict(zip(kern.params(), template_args)))
    cfg = runtime.config()
    dce.run(ir)
    reduction.run(ir, cfg)
    scatter.run(ir, cfg)
    atomics = sum(isinstance(s, S.AtomicOpStmt) for s in S.walk(ir.body))
    workers = sum(isinstance(s, S.WorkerIndexStmt) for s in S.walk(ir.body))
    return atomics, workers


def test_histogram_counts_match_numpy_on_every_launch(threads):
    n, bins = 100_000, 37
    data = np.random.default_rng(0).integers(0, 10**6, n).astype(np.int32)
    src = ti.field(ti.i32, n)
    hist = ti.field(ti.i32, bins)
    src.from_numpy(data)

    @ti.kernel
    def count():
        for i in src:
            hist[src[i] % bins] += 1

    expect = np.bincount(data % bins, minlength=bins)
    count()
    np.testing.assert_array_equal(hist.to_numpy(), expect)
    count()   # the copies were zeroed by the merge: a second launch adds exactly as much
    np.testing.assert_array_equal(hist.to_numpy(), 2 * expect)
    if threads > 1:
        assert privatized(count) == (0, 1)


def test_weighted_vector_scatter_with_offsets_matches_numpy(threads):
    n, m = 20_000, 64
    rng = np.random.default_rng(1)
    cell = rng.integers(0, m, n).astype(np.int32)
    w = rng.random(n)
    vel = rng.random((n, 2))
    c = ti.field(ti.i32, n)
    wt = ti.field(ti.f64, n)
    v = ti.Vector.field(2, ti.f64, n)
    grid = ti.Vector.field(2, ti.f64, m, offset=-5)
    mass = ti.field(ti.f64, (m, 3))
    c.from_numpy(cell)
    wt.from_numpy(w)
    v.from_numpy(vel)

    @ti.kernel
    def p2g():
        for p in c:
            for k in ti.static(range(3)):
                mass[c[p], k] += wt[p] * (k + 1)
            grid[c[p] - 5] += wt[p] * v[p]

    p2g()
    want_grid = np.zeros((m, 2))
    np.add.at(want_grid, cell, w[:, None] * vel)
    want_mass = np.zeros((m, 3))
    for k in range(3):
        np.add.at(want_mass[:, k], cell, w * (k + 1))
    np.testing.assert_allclose(grid.to_numpy(), want_grid, rtol=1e-12)
    np.testing.assert_allclose(mass.to_numpy(), want_mass, rtol=1e-12)
    if threads > 1:
        assert privatized(p2g) == (0, 1)


def test_loops_that_read_the_field_or_scatter_little_keep_atomics(threads):
    if threads == 1:
        pytest.skip("privatization needs threads")
    big = ti.field(ti.f64, (1024, 1024))
    small = ti.field(ti.f64, 16)

    @ti.kernel
    def few():
        for i in range(8):      # 8 adds into a million elements: the merge would cost more
            big[i, i] += 1.0

    @ti.kernel
    def reads():
        for i in range(10_000):
            small[i % 16] += small[(i + 1) % 16] * 0.0 + 1.0

    assert privatized(few) == (1, 0)
    assert privatized(reads) == (1, 0)
    reads()
    np.testing.assert_array_equal(small.to_numpy(), np.full(16, 10_000 / 16))


def test_gradient_through_a_privatized_scatter_matches_the_analytic_one(threads):
    n, m = 5_000, 32
    rng = np.random.default_rng(2)
    cell = rng.integers(0, m, n).astype(np.int32)
    c = ti.field(ti.i32, n)
    x = ti.field(ti.f64, n, needs_grad=True)
    grid = ti.field(ti.f64, m, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    c.from_numpy(cell)
    xs = rng.random(n)
    x.from_numpy(xs)

    @ti.kernel
    def scatter_sq():
        for p in x:
            grid[c[p]] += x[p] ** 2

    @ti.kernel
    def energy():
        for i in grid:
            loss[None] += grid[i] ** 2

    with ti.ad.Tape(loss):
        scatter_sq()
        energy()
    g = np.zeros(m)
    np.add.at(g, cell, xs ** 2)
    # d/dx_p sum_i g_i^2 = 2 g_{c_p} * 2 x_p
    np.testing.assert_allclose(loss[None], np.sum(g ** 2), rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * g[cell] * xs, rtol=1e-12)


def test_launches_from_several_python_threads_stay_exact(threads):
    # two kernels share the per-thread copies of `hist`; launched from two Python threads at
    # once they must not interleave
    import threading
    n, bins = 1_000_000, 16
    hist = ti.field(ti.i64, bins)

    @ti.kernel
    def ones():
        for i in range(n):
            hist[i % bins] += 1

    @ti.kernel
    def twos():
        for i in range(n):
            hist[(i * 7) % bins] += 2

    ones()
    twos()
    hist.fill(0)
    rounds = 10

    def work(k):
        for _ in range(rounds):
            k()

    ts = [threading.Thread(target=work, args=(k,)) for k in (ones, twos)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_array_equal(hist.to_numpy(), np.full(bins, rounds * 3 * n // bins))


def test_debug_mode_keeps_atomics_so_a_failed_check_leaves_nothing_behind():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2, debug=True)
    hist = ti.field(ti.i32, 8)

    @ti.kernel
    def count(limit: ti.i32):
        for i in range(10_000):
            hist[i % limit] += 1

    with pytest.raises(IndexError):
        count(9)                 # index 8 is out of bounds: the launch stops with an error
    hist.fill(0)
    count(8)
    np.testing.assert_array_equal(hist.to_numpy(), np.full(8, 10_000 // 8))
    ti.reset()
