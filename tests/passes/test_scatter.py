"""Scatter privatization: atomic adds of a parallel loop into a field go to per-thread copies
that a merge loop adds back. Results must equal NumPy's, launch after launch, whatever the
thread count; loops that also read the field, or that scatter too little, keep atomics."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import dce, lower_struct_for, reduction, scatter


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    ti.init(arch=ti.cpu, cpu_max_num_threads=request.param, default_fp=ti.f64)
    # per-thread copies are the CPU backend's; a CUDA session (FLUXION_ARCH=cuda) has none
    yield 1 if runtime.on_cuda() else request.param
    ti.reset()


def privatized(kern, *template_args):
    """Run the frontend and the passes up to scatter; the adds left atomic and made plain."""
    src = kern.source()
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(src, kern.globals(), kern.name).build_function(
            dict(zip(kern.params(), template_args)))
    cfg = runtime.config()
    lower_struct_for.run(ir, cfg)     # (as the compile driver does first)
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


def test_scatter_into_ndarrays_of_any_size_matches_numpy(threads):
    import fluxion.runtime.cpu_jit as cj

    @ti.kernel
    def count(data: ti.types.ndarray(), hist: ti.types.ndarray(), vec: ti.types.ndarray(
            dtype=ti.math.vec2, ndim=1)):
        for i in data:
            b = data[i] % hist.shape[0]
            hist[b] += 1
            vec[b] += ti.Vector([1.0, data[i] * 0.5])

    rng = np.random.default_rng(5)
    for n, bins in [(10_000, 7), (50_000, 300), (3_000, 2)]:   # copies grow and shrink
        data = rng.integers(0, 1000, n).astype(np.int32)
        hist = np.zeros(bins, np.int32)
        vec = np.zeros((bins, 2))
        count(data, hist, vec)
        count(data, hist, vec)
        want = np.bincount(data % bins, minlength=bins)
        np.testing.assert_array_equal(hist, 2 * want)
        np.testing.assert_allclose(vec[:, 0], 2 * want)
        np.testing.assert_allclose(vec[:, 1], 2 * np.bincount(data % bins, data * 0.5,
                                                              minlength=bins))
    assert len(count.instances) == 1
    inst = next(iter(count.instances.values()))
    assert len(getattr(inst.compiled, "private", ())) == (2 if threads > 1 else 0)  # hist, vec
    # over the memory budget the same instance adds atomically, with the same result
    saved = cj.PRIVATE_ARRAY_BUDGET
    cj.PRIVATE_ARRAY_BUDGET = 0
    try:
        hist = np.zeros(7, np.int32)
        vec = np.zeros((7, 2))
        count(data, hist, vec)
        np.testing.assert_array_equal(hist, np.bincount(data % 7, minlength=7))
    finally:
        cj.PRIVATE_ARRAY_BUDGET = saved
    # a strided array is never privatized, and still right
    hist2 = np.zeros((5, 2), np.int32)[:, 0]
    count(data, hist2, np.zeros((5, 2)))
    np.testing.assert_array_equal(hist2, np.bincount(data % 5, minlength=5))


def test_gradient_of_a_gather_over_ndarrays_matches_the_analytic_one(threads):
    # out[i] = sum_j w[j] x[i + j]; its adjoint scatters into x.grad and w.grad
    n, taps = 300, 5
    rng = np.random.default_rng(6)
    x = ti.ndarray(ti.f64, n + taps - 1, needs_grad=True)
    w = ti.ndarray(ti.f64, taps, needs_grad=True)
    out = ti.ndarray(ti.f64, n, needs_grad=True)
    xs, ws, g = rng.random(n + taps - 1), rng.random(taps), rng.random(n)
    x.from_numpy(xs)
    w.from_numpy(ws)

    @ti.kernel
    def corr(x: ti.types.ndarray(), w: ti.types.ndarray(), out: ti.types.ndarray()):
        for i in out:
            s = 0.0
            for j in range(taps):
                s += w[j] * x[i + j]
            out[i] = s

    corr(x, w, out)
    np.testing.assert_allclose(out.to_numpy(), np.correlate(xs, ws, "valid"), rtol=1e-12)
    for _ in range(2):    # a second backward gives the same grads: the copies were zeroed
        out.grad.from_numpy(g)
        x.grad.fill(0)
        w.grad.fill(0)
        corr.grad(x, w, out)
        np.testing.assert_allclose(x.grad.to_numpy(), np.convolve(g, ws, "full"), rtol=1e-12)
        np.testing.assert_allclose(w.grad.to_numpy(), np.correlate(xs, g, "valid"), rtol=1e-12)
    if threads > 1:   # the adjoint's adds into x.grad and w.grad went to per-thread copies
        grads = [i for k, i in corr._instances.items() if i.compiled.private]
        assert grads and {grad for _, _, grad, _ in grads[0].compiled.private} == {True}


def test_sparse_scatters_into_big_arrays_keep_their_atomics(threads):
    # an embedding-style gradient: a few rows of a big table; copies of the whole table
    # would cost far more to merge than the atomics they save
    @ti.kernel
    def scatter_rows(rows: ti.types.ndarray(), table: ti.types.ndarray()):
        for r in rows:
            for c in range(table.shape[1]):
                table[rows[r], c] += 1.0

    rows = np.array([3, 70_000, 3, 12], np.int32)
    table = np.zeros((100_000, 8))
    scatter_rows(rows, table)
    want = np.zeros((100_000, 8))
    np.add.at(want, rows, 1.0)
    np.testing.assert_array_equal(table, want)
    c = next(iter(scatter_rows.instances.values())).compiled
    if threads > 1:
        slot = c.private[0][0]
        assert c.ctx_i[slot] == 0                       # no copies this launch
        dense = np.arange(400_000, dtype=np.int32) % 100_000
        scatter_rows(dense, table)                      # 32 adds per element: copies pay
        assert c.ctx_i[slot] != 0
        np.add.at(want, dense, 1.0)
        np.testing.assert_array_equal(table, want)


def test_half_precision_scatters_keep_their_atomics(threads):
    # float16 sums round at every add (a count stops growing past 2048), so per-thread partial
    # sums would give other values than one sequence of adds, and other values per thread count
    if threads == 1:
        pytest.skip("privatization needs threads")
    h = ti.field(ti.f16, 4)
    n = 40_000

    @ti.kernel
    def hist():
        for i in range(n):
            h[i % 4] += 1.0

    assert privatized(hist) == (1, 0)
    hist()
    # each bin's sequence of float16 increments saturates where 1 is below half an ulp
    expected = np.float16(0)
    for _ in range(n // 4):
        expected = np.float16(expected + np.float16(1))
    np.testing.assert_array_equal(h.to_numpy(), np.full(4, expected))
