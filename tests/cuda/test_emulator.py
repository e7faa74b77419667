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


def _emulated(monkeypatch):
    import fluxion as ti
    monkeypatch.setenv("FLUXION_CUDA_EMULATOR", "1")
    ti.init(arch=ti.cuda)
    return ti


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
def test_a_host_only_function_in_a_kernel_is_an_error(monkeypatch):
    """A kernel calling a C library function that no GPU has (here: `tan` made libm's expm1,
    which libdevice's tables never name) fails to load, naming it."""
    from fluxion.codegen import targets
    ti = _emulated(monkeypatch)
    for table in (targets.EMULATED_CUDA.math, targets.EMULATED_CUDA.math_without_libdevice):
        monkeypatch.setitem(table, "tan", ("libm", "expm1"))
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            x[i] = ti.tan(x[i])
    try:
        with pytest.raises(cuda_emulator.EmulatorError, match="expm1f.*does not exist on a GPU"):
            k()
    finally:
        ti.reset()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
def test_an_intrinsic_without_a_host_version_is_an_error(monkeypatch):
    from fluxion.codegen import targets
    ti = _emulated(monkeypatch)
    monkeypatch.setitem(targets.EMULATED_CUDA.calls, "barrier", "llvm.nvvm.barrier0")
    a = ti.field(ti.f32, shape=64)

    @ti.kernel
    def k():
        ti.loop_config(block_dim=32)
        for i in range(64):
            ti.simt.block.sync()
            a[i] = 1.0
    try:
        # (named as LLVM knows it now: barrier0 is upgraded to barrier.cta.sync.aligned.all)
        with pytest.raises(cuda_emulator.EmulatorError, match="no host version of llvm.nvvm."):
            k()
    finally:
        ti.reset()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
def test_the_emulated_target_emits_host_calls_and_finds_how_tasks_synchronize(monkeypatch):
    """The emulated target's module is a host module made by the lowering itself: the GPU's
    leaves are calls of the emulator's functions, each task has a lane entry passing the
    context by value, and the lowering says which tasks wait at barriers or shuffles."""
    import re
    import numpy as np
    ti = _emulated(monkeypatch)
    a = ti.field(ti.f32, shape=64)
    total = ti.field(ti.f32, shape=())

    @ti.kernel
    def k(n: ti.i32, b: ti.types.ndarray()):
        ti.loop_config(block_dim=32)
        for i in range(64):
            ti.simt.block.sync()
            a[i] = ti.sin(ti.cast(i, ti.f32))
        for i in range(n):
            total[None] += a[i]
        for i in range(n):
            a[i] += b[i]
    try:
        k(64, np.ones(64, np.float32))
        np.testing.assert_allclose(a.to_numpy(), np.sin(np.arange(64, dtype=np.float32)) + 1,
                                   rtol=1e-6, atol=1e-6)
        compiled = list(k.instances.values())[0].compiled
        text = compiled.llvm_ir
        assert "nvptx" not in text and "llvm.nvvm" not in text and "ptx_kernel" not in text
        assert "emu_barrier" in text and "emu_shfl_down_f32" in text
        # the array's address, from the context, is checked against device memory
        assert "emu_device_ptr" in text and not re.search(r"= inttoptr i64 %", text)
        syncs = sorted(compiled.module.tasks.values(), key=str)
        assert syncs == [None, "barrier", "shuffle"]
        for name in compiled.module.tasks:
            assert f'@"emu_lane_{name}"' in text and "byval" in text
    finally:
        ti.reset()


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


def test_every_target_has_a_rule_for_every_math_op():
    from fluxion.codegen import targets
    for t in (targets.CPU, targets.CUDA, targets.EMULATED_CUDA):
        for table in (t.math, t.math_without_libdevice):
            assert set(table) == targets.MATH_OPS, t
    # the emulated target computes what CUDA computes, libdevice's functions on the host
    for gpu, host in ((targets.CUDA.math, targets.EMULATED_CUDA.math),
                      (targets.CUDA.math_without_libdevice,
                       targets.EMULATED_CUDA.math_without_libdevice)):
        for op, (kind, what) in gpu.items():
            if kind == "libdevice":
                assert host[op] in (("libm", what), ("host_rsqrt", None)), op
            else:
                assert host[op] == (kind, what), op


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
def test_the_emulators_libm_functions_exist_in_the_process():
    import ctypes
    from fluxion.codegen import targets
    libc = ctypes.CDLL(None)
    for name in sorted(targets.EMULATED_CUDA.host_functions()):
        assert hasattr(libc, name), name


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="Linux only")
def test_without_libdevice_the_emulator_runs_the_hardware_approximations(monkeypatch):
    """Where libdevice is not found, CUDA computes math with PTX's approximations (f32) and
    refuses what has none; the emulated target makes the same choices."""
    import numpy as np
    from fluxion.runtime import cuda_jit
    monkeypatch.setattr(cuda_jit, "find_libdevice", lambda: None)
    ti = _emulated(monkeypatch)
    n = 256
    x = ti.field(ti.f32, shape=n)
    out = ti.Vector.field(7, ti.f32, shape=n)
    xs = np.linspace(0.1, 3.0, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            out[i] = ti.Vector([ti.sin(v), ti.cos(v), ti.exp(v), ti.log(v), ti.tanh(v),
                                ti.rsqrt(v), v ** 1.5])

    @ti.kernel
    def arcsine():
        for i in x:
            x[i] = ti.asin(x[i])
    try:
        k()
        ref = np.stack([np.sin(xs), np.cos(xs), np.exp(xs), np.log(xs), np.tanh(xs),
                        1 / np.sqrt(xs), xs ** 1.5], 1)
        np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-6)
        with pytest.raises(Exception, match="`asin` needs CUDA's libdevice"):
            arcsine()
    finally:
        ti.reset()
