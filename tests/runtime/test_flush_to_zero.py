"""Denormal results flush to zero on the CPU, as in the original system (FTZ): constants,
products, on the launching thread and on the pool's workers; Python's own arithmetic keeps
IEEE denormals after a launch (the launch restores the thread's floating-point mode).
CPU only: the CUDA backend keeps denormals for now."""
import numpy as np
import pytest

import fluxion as ti

pytestmark = pytest.mark.cpu_only

TINY32, TINY64 = 2.0 ** -126, 2.0 ** -1022     # the smallest normal numbers


def test_denormal_constants_and_results_become_zero():
    a = ti.field(ti.f32, 5)
    b = ti.field(ti.f64, 4)
    # f64 factors from a field: a bare literal in a kernel is a default f32, as in the original
    c = ti.field(ti.f64, 4)
    c.from_numpy(np.array([1e-300, 1e-23, 1e-310, 1e-290]))

    @ti.kernel
    def k(x: ti.f32, y: ti.f64):
        a[0] = 1e-45
        a[1] = 1e-10 * 1e-35
        a[2] = x * 1e-30
        a[3] = -x * 1e-30
        a[4] = x * 1e-20              # normal: kept
        b[0] = 1e-323
        p = y * c[0]
        b[1] = p * c[1]
        b[2] = -y * c[2]
        b[3] = y * c[3]               # normal: kept

    k(1e-10, 1e-10)
    ra, rb = a.to_numpy(), b.to_numpy()
    np.testing.assert_array_equal(ra[:4], [0, 0, 0, 0])
    assert np.signbit(ra[3]) and not np.signbit(ra[2])       # the sign stays
    assert ra[4] == np.float32(np.float32(1e-10) * np.float32(1e-20)) and ra[4] >= TINY32
    np.testing.assert_array_equal(rb[:3], [0, 0, 0])
    assert np.signbit(rb[2])
    assert rb[3] == 1e-10 * 1e-290 and rb[3] >= TINY64


def test_parallel_loops_flush_on_every_thread_and_python_keeps_denormals():
    ti.init(arch=ti.cpu, cpu_max_num_threads=4)
    n = 200_000
    c = ti.field(ti.f32, n)

    @ti.kernel
    def k(x: ti.f32):
        for i in c:
            c[i] = x * (1e-30 + i * 1e-45)

    k(1e-10)
    assert np.count_nonzero(c.to_numpy()) == 0
    # the launching thread's mode is restored: Python and NumPy still make denormals (the
    # factors are read at run time: a product of literals is folded when the file compiles)
    assert float("1e-300") * float("1e-23") != 0.0
    assert np.float32(1e-30) * np.float32(1e-10) != 0
