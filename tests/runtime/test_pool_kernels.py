"""Kernels on the thread pool: every index exactly once, exact atomics under contention, many
small dispatches, restarts, and the single-thread setting."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


@pytest.mark.parametrize("n", [0, 1, 7, 4095, 4097, 100_003, 2_000_000])
def test_every_index_is_visited_exactly_once(n):
    hits = ti.field(ti.i32, shape=max(n, 1))

    @ti.kernel
    def visit(m: ti.i32):
        for i in range(m):
            hits[i] += 1

    visit(n)
    expect = np.zeros(max(n, 1), np.int32)
    expect[:n] = 1
    np.testing.assert_array_equal(hits.to_numpy(), expect)


def test_atomics_are_exact_under_contention():
    bins = ti.field(ti.i64, shape=7)
    fsum = ti.field(ti.f64, shape=3)
    n = 1_000_000

    @ti.kernel
    def hist():
        for i in range(n):
            bins[i % 7] += 1
            ti.atomic_add(fsum[i % 3], 0.5)    # exactly representable: no rounding

    hist()
    ref = np.bincount(np.arange(n) % 7, minlength=7)
    np.testing.assert_array_equal(bins.to_numpy(), ref)
    np.testing.assert_array_equal(fsum.to_numpy(), np.bincount(np.arange(n) % 3) * 0.5)


def test_many_small_and_large_dispatches_in_a_row():
    x = ti.field(ti.i32, shape=50_000)

    @ti.kernel
    def bump(m: ti.i32):
        for i in range(m):
            x[i] += 1

    for k in range(2000):
        bump(50_000 if k % 10 == 0 else 64)
    ref = np.full(50_000, 200, np.int32)        # 200 launches cover everything
    ref[:64] += 1800                             # 1800 cover the first 64
    np.testing.assert_array_equal(x.to_numpy(), ref)


def test_restart_and_single_thread():
    for threads in (1, 2, 1):
        ti.reset()
        ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
        x = ti.field(ti.f32, shape=300_000)

        @ti.kernel
        def fill():
            for i in x:
                x[i] = i * 0.5

        fill()
        np.testing.assert_array_equal(x.to_numpy(), np.arange(300_000, dtype=np.float32) * 0.5)


def test_augmented_assignment_on_array_elements_is_atomic():
    n = 400_000
    keys = (np.arange(n) * 7919 % 13).astype(np.int32)
    hist = np.zeros(13, np.int64)
    total = np.zeros(1, np.float64)

    @ti.kernel
    def count(k: ti.types.ndarray(), h: ti.types.ndarray(), t: ti.types.ndarray()):
        for i in k:
            h[k[i]] += 1          # contended: must be atomic
            t[0] += 0.25          # a fixed element: privatized per thread

    count(keys, hist, total)
    np.testing.assert_array_equal(hist, np.bincount(keys, minlength=13))
    assert total[0] == n * 0.25


@pytest.mark.parametrize("shape", [(1, 5), (37, 1001), (3000, 7), (5, 6, 4099)])
def test_ndrange_chunks_split_into_rows_visit_every_index_once(shape):
    # chunks of the flattened range start and end mid-row: each row-split chunk must still
    # visit exactly its own indices (constant extents here, runtime extents below)
    hits = ti.field(ti.i32, shape=shape)
    flat = ti.field(ti.i32, shape=shape)
    n = len(shape)

    @ti.kernel
    def visit():
        for I in ti.grouped(ti.ndrange(*shape)):
            hits[I] += 1
            lin = 0
            for d in ti.static(range(n)):
                lin = lin * shape[d] + I[d]
            flat[I] = lin

    visit()
    np.testing.assert_array_equal(hits.to_numpy(), np.ones(shape, np.int32))
    np.testing.assert_array_equal(flat.to_numpy(), np.arange(int(np.prod(shape))).reshape(shape))


def test_ndrange_with_runtime_extents_offsets_and_continue():
    a = np.zeros((41, 1003), np.int32)

    @ti.kernel
    def fill(x: ti.types.ndarray(), lo: ti.i32):
        for i, j in ti.ndrange((lo, x.shape[0]), (lo, x.shape[1])):
            if j % 3 == 0:
                continue
            x[i, j] = i * 10000 + j

    fill(a, 2)
    i, j = np.meshgrid(np.arange(41), np.arange(1003), indexing="ij")
    expect = np.where((i >= 2) & (j >= 2) & (j % 3 != 0), i * 10000 + j, 0)
    np.testing.assert_array_equal(a, expect)
