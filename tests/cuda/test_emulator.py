"""The CPU emulator of the CUDA backend (src/fluxion/runtime/cuda_emulator.py) itself: what it
refuses, and the host side of device printf."""
import pytest

from fluxion.codegen.nvptx import _printf_conversion
from fluxion.ir import types as T
from fluxion.runtime import cuda_emulator

pytestmark = pytest.mark.cpu_only


@pytest.mark.parametrize("spec,dt,value", [
    ("", T.i32, -12), ("", T.u64, 2 ** 63 + 5), ("05d", T.i32, 7), (">6d", T.i64, -3),
    ("<6d", T.i16, 42), ("+d", T.i32, 9), ("x", T.u32, 255), ("#X", T.i32, 255),
    ("o", T.i32, 8), (".3f", T.f32, 0.1), ("08.2f", T.f64, -3.14159), ("+.2e", T.f64, 12345.0),
    (".4g", T.f32, 0.000123456), ("10.3f", T.f64, 2.5), (".1f", T.i32, 7), ("e", T.i64, 3)])
def test_printf_conversions_print_what_python_format_prints(spec, dt, value):
    conv = _printf_conversion(spec, dt)
    c_style = "%" + conv[1:].replace("ll", "").replace("u", "d")
    if not spec:
        return          # no spec: the device prints enough digits (checked below)
    assert c_style % value == format(value, spec)


def test_printf_without_a_spec_prints_values_that_read_back_exactly():
    import numpy as np
    x = np.float32(0.1)
    assert np.float32(float("%.9g" % x)) == x and _printf_conversion("", T.f32) == "%.9g"
    assert _printf_conversion("", T.f64) == "%.17g"


@pytest.mark.parametrize("spec,dt", [("^7d", T.i32), (",d", T.i32), ("d", T.f32),
                                     (".2d", T.i32), ("%", T.f32), ("=+8d", T.i32)])
def test_printf_refuses_specs_it_cannot_honour(spec, dt):
    assert _printf_conversion(spec, dt) is None


def test_vprintf_formats_eight_byte_values():
    import ctypes
    import sys
    from io import StringIO
    vals = (ctypes.c_int64 * 3)(-5, 0, 255)
    ctypes.c_double.from_address(ctypes.addressof(vals) + 8).value = 2.5
    saved, sys.stdout = sys.stdout, StringIO()
    try:
        cuda_emulator._vprintf(b"a %05lld b %.2f c %llx 100%%\n", ctypes.addressof(vals))
        out = sys.stdout.getvalue()
    finally:
        sys.stdout = saved
    assert out == "a -0005 b 2.50 c ff 100%\n"


_MODULE = '''target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-i64:64"
define ptx_kernel void @"task0"([4 x i64]* byval([4 x i64]) align 8 %".1", i64* %".2", i64* %".3")
{
entry:
  %".4" = call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
  CALL
  ret void
}
declare i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
DECL
'''


def test_a_host_only_function_in_a_kernel_is_an_error():
    text = _MODULE.replace("CALL", '%".5" = call float @"expm1f"(float 0.0)').replace(
        "DECL", 'declare float @"expm1f"(float %".1")')
    with pytest.raises(cuda_emulator.EmulatorError, match="expm1f.*does not exist on a GPU"):
        cuda_emulator.host_module_text(text, "x86_64-unknown-linux-gnu", "")


def test_an_intrinsic_without_a_host_version_is_an_error():
    text = _MODULE.replace("CALL", 'call void @"llvm.nvvm.membar.gl"()').replace(
        "DECL", 'declare void @"llvm.nvvm.membar.gl"()')
    with pytest.raises(cuda_emulator.EmulatorError, match="llvm.nvvm.membar.gl"):
        cuda_emulator.host_module_text(text, "x86_64-unknown-linux-gnu", "")


def test_tasks_are_found_with_their_context_size_and_synchronization():
    text = _MODULE.replace("CALL", 'call void @"llvm.nvvm.barrier0"()').replace(
        "DECL", 'declare void @"llvm.nvvm.barrier0"()')
    host, tasks = cuda_emulator.host_module_text(text, "x86_64-unknown-linux-gnu", "")
    assert tasks == {"task0": (4, "barrier")}
    assert "nvptx" not in host and "llvm.nvvm" not in host and "ptx_kernel" not in host
    assert 'byval([4 x i64])' in host.split("emu_lane_task0")[1]


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
@pytest.mark.parametrize("nbytes", [1000, 3 << 20])
def test_emulated_device_memory_is_zeroed_when_reused(nbytes):
    """cuda_driver.Device.alloc returns zeroed memory; so does the emulator's arena, also when
    it hands out a freed block again (small ones are cleared, large ones were given back)."""
    import ctypes
    arena = cuda_emulator._Arena()
    p = arena.alloc(nbytes)
    assert arena.lo <= p < arena.hi and p % 256 == 0
    ctypes.memset(p, 0x5A, nbytes)
    arena.free(p)
    q = arena.alloc(nbytes)
    assert q == p
    assert ctypes.string_at(q, nbytes) == bytes(nbytes)
    r = arena.alloc(nbytes)                 # a second live block: a different address
    assert r != q and not (q <= r < q + nbytes)


def test_init_reset_cycles_give_device_memory_back(monkeypatch):
    """Fields' device copies are freed by ti.reset and a compiled kernel's buffers with the
    kernel: the emulated device's arena does not grow over init/reset cycles (it grew by three
    blocks per cycle), and a recompiled kernel finds its optimized module in the cache."""
    import gc
    import fluxion as ti
    monkeypatch.setenv("FLUXION_CUDA_EMULATOR", "1")

    def cycle():
        ti.init(arch=ti.cuda)
        x = ti.field(ti.f32, shape=64)

        @ti.kernel
        def k():
            for i in x:
                x[i] += 1.0
        k()
        assert x[3] == 1.0
        ti.reset()
        gc.collect()
    try:
        for _ in range(3):
            cycle()
        arena = cuda_emulator.device()._arena
        top, cached = arena.top, len(cuda_emulator._optimized_cache)
        for _ in range(8):
            cycle()
        assert arena.top == top
        # (freed blocks come back in another order now and then: a few texts, not one a cycle)
        assert len(cuda_emulator._optimized_cache) <= cached + 2
    finally:
        ti.reset()
