"""Parallel loops whose body is a serial reduction loop run several iterations with their
inner loops fused (codegen: lower_jammed). Every shape of that pattern must give NumPy's
answer: equal and unequal trip counts, leftover columns, 1-D and 2-D iteration spaces,
branches inside, side effects before and after the inner loop."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


@pytest.mark.parametrize("n", [1, 3, 4, 5, 31, 257])
def test_convolution_with_equal_trip_counts(n):
    taps = 9
    rng = np.random.default_rng(n)
    x = rng.random(n + taps - 1)
    w = rng.random(taps)
    out = np.zeros(n)

    @ti.kernel
    def conv(out: ti.types.ndarray(), x: ti.types.ndarray(), w: ti.types.ndarray()):
        for t in out:
            s = 0.0
            for u in range(t, t + taps):
                s += w[u - t] * x[u]
            out[t] = s

    conv(out, x, w)
    np.testing.assert_allclose(out, np.convolve(x, w[::-1], "valid"), rtol=1e-12)


def test_triangular_inner_loops_have_different_trip_counts():
    n = 103
    a = ti.field(ti.f64, n)
    prefix = ti.field(ti.f64, n)
    xs = np.random.default_rng(0).random(n)
    a.from_numpy(xs)

    @ti.kernel
    def cumulative():
        for i in a:
            s = 0.0
            for j in range(i + 1):
                s += a[j]
            prefix[i] = s

    cumulative()
    np.testing.assert_allclose(prefix.to_numpy(), np.cumsum(xs), rtol=1e-12)


@pytest.mark.parametrize("shape", [(3, 2), (7, 13), (2, 64)])
def test_2d_rows_with_branches_and_side_effects_around_the_inner_loop(shape):
    h, w = shape
    k = 6
    src = ti.field(ti.f64, (h, w + k))
    out = ti.field(ti.f64, (h, w))
    count = ti.field(ti.i32, ())
    before = ti.field(ti.f64, (h, w))
    data = np.random.default_rng(1).random((h, w + k)) - 0.5
    src.from_numpy(data)

    @ti.kernel
    def run():
        for i, j in out:
            before[i, j] = i * 100 + j        # a store before the loop
            s = 0.0
            m = -1.0
            for u in range(k):
                v = src[i, j + u]
                if v > 0:
                    s += v
                m = ti.max(m, v)
            out[i, j] = s + m
            count[None] += 1                    # an atomic after it

    run()
    win = np.lib.stride_tricks.sliding_window_view(data, k, axis=1)[:, :w]
    expect = np.where(win > 0, win, 0).sum(-1) + win.max(-1)
    np.testing.assert_allclose(out.to_numpy(), expect, rtol=1e-12)
    ii, jj = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    np.testing.assert_array_equal(before.to_numpy(), ii * 100 + jj)
    assert count[None] == h * w


def test_nbody_accelerations_match_numpy():
    n = 67
    rng = np.random.default_rng(3)
    p = rng.standard_normal((n, 3))
    m = rng.random(n)
    pos = ti.Vector.field(3, ti.f64, n)
    mass = ti.field(ti.f64, n)
    acc = ti.Vector.field(3, ti.f64, n)
    pos.from_numpy(p)
    mass.from_numpy(m)

    @ti.kernel
    def forces():
        for i in pos:
            a = ti.Vector([0.0, 0.0, 0.0])
            for j in range(n):
                d = pos[j] - pos[i]
                r = ti.sqrt(d.dot(d) + 0.01)
                a += mass[j] * d / r ** 3
            acc[i] = a

    forces()
    d = p[None, :, :] - p[:, None, :]
    r = np.sqrt((d ** 2).sum(-1) + 0.01)
    expect = (m[None, :, None] * d / r[..., None] ** 3).sum(1)
    np.testing.assert_allclose(acc.to_numpy(), expect, rtol=1e-10)


def test_gradient_of_a_jammed_reduction_matches_finite_differences():
    n, taps = 21, 4
    rng = np.random.default_rng(4)
    x = ti.field(ti.f64, n + taps, needs_grad=True)
    out = ti.field(ti.f64, n, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    xs = rng.random(n + taps)

    @ti.kernel
    def smooth():
        for t in out:
            s = 0.0
            for u in range(taps):
                s += x[t + u] * (u + 1)
            out[t] = s

    @ti.kernel
    def total():
        for t in out:
            loss[None] += out[t] ** 2

    def f(v):
        x.from_numpy(v)
        smooth()
        loss[None] = 0
        total()
        return loss[None]

    x.from_numpy(xs)
    with ti.ad.Tape(loss):
        smooth()
        total()
    g = x.grad.to_numpy()
    h = 1e-6
    fd = np.array([(f(xs + h * e) - f(xs - h * e)) / (2 * h) for e in np.eye(n + taps)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [5, 8, 17, 64])
def test_index_expressions_that_cancel_and_scale(n):
    """Array indices are reduced to linear forms before code is emitted: terms that cancel,
    negative and constant factors, and products of two indices must all address what the
    32-bit expression addresses."""
    rng = np.random.default_rng(n)
    x = rng.random(4 * n)
    out = np.zeros((n, 4))
    m = 3

    @ti.kernel
    def k(out: ti.types.ndarray(), x: ti.types.ndarray(), m: ti.i32):
        for t in range(n):
            s0 = 0.0
            s1 = 0.0
            for u in range(t - n + 1, t + 1):
                s0 += x[(n - 1) - (t - u)]                       # = u - t + n - 1
                s1 += x[3 * (u - t) - 2 * (u - t) + (n - 1) + 2 * t - t * 2 + u - u]
            out[t, 0] = s0
            out[t, 1] = s1
            out[t, 2] = x[n - 1 + (-1) * t + t * m - t * m]
            out[t, 3] = x[t * t - (t - 1) * (t + 1) + t]         # = t + 1

    k(out, x, m)
    ref = np.zeros((n, 4))
    for t in range(n):
        us = np.arange(t - n + 1, t + 1)
        ref[t, 0] = x[(n - 1) - (t - us)].sum()
        ref[t, 1] = x[us - t + n - 1].sum()
        ref[t, 2] = x[n - 1 - t]
        ref[t, 3] = x[t + 1]
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def _llvm_ir(kernel):
    (inst,) = kernel.instances.values()
    return inst.compiled.llvm_ir


@pytest.mark.cpu_only
def test_parallel_loops_declare_independent_iterations(no_offline_cache):
    """A parallel loop's memory accesses carry an access group that the loop declares
    parallel, so LLVM vectorizes gathers through computed indices. (A loop whose atomics the
    scatter pass turned into plain adds into per-thread copies must not declare it: guarded by
    tests/api/test_atomics_parallel.py::test_histogram_matches_bincount, which loses counts
    otherwise.)"""
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    n = 1000
    rng = np.random.default_rng(3)
    table = rng.random(64)
    idx = rng.integers(0, 64, n).astype(np.int32)
    out = np.zeros(n)

    @ti.kernel
    def gather(out: ti.types.ndarray(), table: ti.types.ndarray(), idx: ti.types.ndarray()):
        for i in out:
            out[i] = table[idx[i]] * 2.0 + table[(idx[i] * 7) % 64]

    gather(out, table, idx)
    np.testing.assert_allclose(out, table[idx] * 2.0 + table[(idx * 7) % 64])
    assert "llvm.loop.parallel_accesses" in _llvm_ir(gather)
    assert "llvm.access.group" in _llvm_ir(gather)


@pytest.mark.parametrize("n", [5, 64])
def test_fused_columns_index_through_their_own_loaded_values(n):
    # each column's inner loop reads x at an offset it loaded itself (idx[t]): the fused
    # columns lower the same statements again, so an index emitted for one column must not
    # serve another (codegen/linear.py emits a form's terms once per block, keyed by the
    # LLVM values they stand for, not by the statements)
    taps = 7
    rng = np.random.default_rng(n)
    x = rng.random(n + taps + 40)
    w = rng.random(taps)
    idx = rng.integers(0, 40, n).astype(np.int32)
    out = np.zeros(n)

    @ti.kernel
    def gather_conv(out: ti.types.ndarray(), x: ti.types.ndarray(), w: ti.types.ndarray(),
                    idx: ti.types.ndarray()):
        for t in out:
            k = idx[t]
            s = 0.0
            for u in range(taps):
                s += w[u] * x[k + u]
            out[t] = s

    gather_conv(out, x, w, idx)
    want = np.array([w @ x[k:k + taps] for k in idx])
    np.testing.assert_allclose(out, want, rtol=1e-12)
