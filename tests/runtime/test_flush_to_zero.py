"""Denormal results flush to zero on the CPU, as in the original system (FTZ): constants,
products, on the launching thread and on the pool's workers; Python's own arithmetic keeps
IEEE denormals after a launch (the launch restores the thread's floating-point mode).
On CUDA (the last tests): denormal constants flush on every backend; a GPU's f32 arithmetic
flushes (PTX's .ftz forms, as the original's CUDA backend), its f64 arithmetic cannot (PTX has
no such form); the CPU emulator of CUDA keeps its host's IEEE denormals in arithmetic.
Division stays IEEE's under fast math on CUDA, so x / x is exactly 1 as on the CPU."""
import numpy as np
import pytest

import fluxion as ti


TINY32, TINY64 = 2.0 ** -126, 2.0 ** -1022     # the smallest normal numbers


@pytest.mark.cpu_only
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


@pytest.mark.cpu_only
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


def _on_a_gpu():
    from fluxion.runtime import cuda_driver, cuda_emulator
    return ti.cfg.arch == ti.cuda and not cuda_emulator.enabled() and cuda_driver.available()


def test_denormal_constants_flush_and_division_is_exact_on_every_backend():
    a = ti.field(ti.f32, 4)
    b = ti.field(ti.f64, 2)
    q = ti.field(ti.f32, 64)
    d = ti.field(ti.f32, 64)
    d.from_numpy(np.geomspace(1e-30, 1e37, 64).astype(np.float32))

    @ti.kernel
    def k(x: ti.f32, y: ti.f32):
        a[0] = 1e-45
        a[1] = x * y                  # 1e-45: denormal
        a[2] = -x * y
        a[3] = x * 1e-20              # normal: kept
        b[0] = 1e-323
        b[1] = 1e-300
        for i in q:
            q[i] = d[i] / d[i]        # an approximate division misses 1 by an ulp

    k(1e-10, 1e-35)
    ra = a.to_numpy()
    assert ra[0] == 0 and b.to_numpy()[0] == 0 and b.to_numpy()[1] == 1e-300
    assert ra[3] == np.float32(np.float32(1e-10) * np.float32(1e-20))
    if ti.cfg.arch == ti.cpu or _on_a_gpu():
        assert ra[1] == 0 and ra[2] == 0 and np.signbit(ra[2])
    np.testing.assert_array_equal(q.to_numpy(), np.ones(64, np.float32))


@pytest.mark.cpu_only
def test_cuda_code_uses_the_ftz_forms_and_ieee_division():
    x = ti.field(ti.f32, 16)
    y = ti.field(ti.f64, 16)

    @ti.kernel
    def k():
        for i in x:
            x[i] = x[i] / (x[i] + 1.0) + ti.sqrt(x[i])
            y[i] = y[i] / (y[i] + 1.0)

    ptx = k.ptx()
    assert "div.rn.ftz.f32" in ptx and "sqrt.rn.ftz.f32" in ptx and "div.rn.f64" in ptx
    assert "div.approx" not in ptx and "div.full" not in ptx
