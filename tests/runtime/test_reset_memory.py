"""ti.init / ti.reset cycles that compile one kernel each do not grow memory: the optimized
module of a kernel compiled again is reused (each run of LLVM's optimizer through llvmlite
leaks tens of KB), and nothing else of a session outlives its reset. Measured with glibc's
count of allocated bytes (not the resident size, which other threads' caches move)."""
import ctypes
import sys

import numpy as np
import pytest

import fluxion as ti

pytestmark = [pytest.mark.cpu_only,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallinfo2")]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]


def _allocated():
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("no mallinfo2 (glibc before 2.33)")
    libc.mallinfo2.restype = _MallInfo2
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd


def _cycle(arch="cpu"):
    ti.init(arch=getattr(ti, arch), cpu_max_num_threads=1)
    x = ti.field(ti.f32, 16)

    @ti.kernel
    def k(a: ti.f32):
        for i in x:
            x[i] = a * i

    k(2.0)
    assert x[3] == 6.0
    ti.reset()


@pytest.mark.parametrize("arch", ["cpu", "cuda"])
def test_init_reset_cycles_do_not_grow_memory(arch, monkeypatch):
    """(cuda: on the emulator, where every kernel's module stayed loaded: 870 KB a cycle)"""
    import gc
    monkeypatch.setenv("FLUXION_CUDA_EMULATOR", "1")
    for _ in range(5):            # first compilation, caches of Python and of fluxion
        _cycle(arch)
    gc.collect()
    before = _allocated()
    cycles = 25
    for _ in range(cycles):
        _cycle(arch)
    gc.collect()
    grown = _allocated() - before
    # before the fix: about 80 KB a cycle (2 MB here); now well under 1 KB a cycle
    assert grown < cycles * 16 * 1024, f"{grown / cycles / 1024:.1f} KB per cycle"


def test_a_kernel_compiled_again_after_reset_uses_the_new_fields():
    # the reused optimized code gets the new session's field addresses
    for value in (1.0, 2.0, 3.0):
        ti.init(arch=ti.cpu)
        x = ti.Vector.field(3, ti.f32, 64)
        y = ti.field(ti.f32, 64)

        @ti.kernel
        def k(a: ti.f32):
            for i in x:
                x[i] = ti.Vector([a, a * i, -a])
                y[i] = x[i].sum()

        k(value)
        i = np.arange(64, dtype=np.float32)
        np.testing.assert_array_equal(x.to_numpy()[:, 1], value * i)
        np.testing.assert_array_equal(y.to_numpy(), value * i)
        ti.reset()
