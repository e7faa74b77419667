"""The CUDA backend. PTX checks run anywhere ptxas exists; the device tests run on a GPU where
one exists, else on the CPU emulator of the CUDA backend (tests/conftest.py), which runs the
same lowered kernels; only the tests of torch CUDA tensors need a real device."""
import ctypes
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import fluxion as ti
from fluxion.runtime import cuda_driver

from fluxion.lang import runtime

pytestmark = pytest.mark.cuda_only


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here (the CPU emulator runs without it)")
    return torch


@pytest.fixture
def cuda():
    ti.init(arch=ti.cuda)
    yield
    ti.reset()


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_of_a_mixed_kernel_assembles_with_ptxas():
    ti.init(arch=ti.cpu)
    try:
        n = 256
        x = ti.field(ti.f32, shape=n)
        y = ti.field(ti.f32, shape=n)
        s = ti.field(ti.f32, shape=())

        @ti.kernel
        def k(a: ti.f32) -> ti.f32:
            b = a * 2.0                       # recomputed by the loop's kernel
            for i in x:
                y[i] = b * ti.sin(x[i]) + ti.exp(y[i]) + ti.random()
                s[None] += y[i]
            return s[None]

        ptx = k.ptx(1.5, sm=90)
        # the loop and the serial return: `b` and the reduction's pointer need no launch
        assert ptx.count(".entry") == 2
        assert "atom." in ptx or "red." in ptx      # the reduction's one atomic per thread
        _assemble(ptx)
    finally:
        ti.reset()


def _assemble(ptx):
    from fluxion.runtime.cuda_jit import assemble_ptx
    err = assemble_ptx(ptx)
    assert not err, err


def test_bounds_from_constants_and_arguments_need_no_serial_launch():
    """A loop's bounds built from constants, arguments and shapes are recomputed by the loop's
    own kernel: nothing else is launched. A serial statement with an effect still is."""
    ti.init(arch=ti.cpu)
    try:
        x = ti.field(ti.f32, shape=64)
        s = ti.field(ti.f32, shape=())

        @ti.kernel
        def fill(a: ti.types.ndarray(ndim=2), n: ti.i32):
            for i, j in ti.ndrange(a.shape[0], n * 2 - 1):
                a[i, j] = i + j

        @ti.kernel
        def total():
            s[None] = 0.0
            for i in x:
                s[None] += x[i]

        arr = np.zeros((4, 9), np.float32)
        ptx = fill.ptx(arr, 5)
        assert ptx.count(".entry") == 1
        # the context arrives by value in the parameter space: no copy before the launch
        assert re.search(r"\.param \.align 8 \.b8 \w+_param_0\[\d+\]", ptx)
        assert "ld.param.b64" in ptx
        _assemble(ptx)
        ptx2 = total.ptx()
        assert ptx2.count(".entry") == 2
        _assemble(ptx2)
        # the CPU runs the same kernel: the bounds are right
        fill(arr, 5)
        np.testing.assert_array_equal(arr, np.add.outer(np.arange(4), np.arange(9)))

        # a local stored twice (a copy of an argument, which itself is immutable): the serial
        # task still passes it on
        @ti.kernel
        def grow(a: ti.types.ndarray(ndim=1), n: ti.i32):
            m = n
            m = m * 2
            for i in range(m):
                a[i] = m

        line = np.zeros(12, np.float32)
        ptx3 = grow.ptx(line, 3)
        assert ptx3.count(".entry") == 2
        _assemble(ptx3)
        grow(line, 3)
        np.testing.assert_array_equal(line, [6] * 6 + [0] * 6)
    finally:
        ti.reset()


@pytest.mark.cpu_only
def test_without_a_device_cuda_falls_back_to_the_cpu_with_a_warning():
    if cuda_driver.available():
        pytest.skip("a CUDA device is present")
    with pytest.warns(UserWarning, match="no CUDA device"):
        ti.init(arch=ti.cuda)
    ti.reset()


def test_fields_kernels_and_python_scope_stay_coherent(cuda):
    n = 100_000
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f32, shape=n)
    xs = np.random.default_rng(0).random(n, dtype=np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def saxpy(a: ti.f32):
        for i in x:
            y[i] = a * x[i] + y[i]

    saxpy(2.0)
    saxpy(2.0)
    np.testing.assert_allclose(y.to_numpy(), 4 * xs, rtol=1e-6)
    y[3] = 100.0                       # a Python write reaches the next kernel
    saxpy(1.0)
    assert y[3] == pytest.approx(100.0 + xs[3])


def test_reductions_atomics_returns_and_serial_values(cuda):
    n = 1 << 20
    x = ti.field(ti.f32, shape=n)
    hist = ti.field(ti.i32, shape=16)
    total = ti.field(ti.f32, shape=())

    @ti.kernel
    def k(scale: ti.f32) -> ti.f32:
        c = scale * 0.5                     # a serial value used by both loops
        for i in x:
            x[i] = (i % 7) * c
        for i in x:
            total[None] += x[i]
            hist[i % 16] += 1
        return total[None]

    got = k(2.0)
    ref = float(((np.arange(n) % 7) * 1.0).sum())
    assert got == pytest.approx(ref, rel=1e-4)
    np.testing.assert_array_equal(hist.to_numpy(), np.full(16, n // 16))


def test_math_functions_match_numpy(cuda):
    n = 4096
    x = ti.field(ti.f32, shape=n)
    out = ti.Vector.field(6, ti.f32, shape=n)
    xs = np.linspace(0.1, 3.0, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def k():
        for i in x:
            v = x[i]
            out[i] = ti.Vector([ti.sin(v), ti.cos(v), ti.exp(v), ti.log(v), ti.sqrt(v),
                                ti.tanh(v)])

    k()
    ref = np.stack([np.sin(xs), np.cos(xs), np.exp(xs), np.log(xs), np.sqrt(xs), np.tanh(xs)], 1)
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=2e-5, atol=2e-5)


def test_torch_cuda_tensors_without_copies(cuda):
    torch = _torch_cuda()

    @ti.kernel
    def fill(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i, j in a:
            b[i, j] = a[i, j] * 2.0 + j

    a = torch.rand(64, 32, device="cuda")
    b = torch.zeros(64, 32, device="cuda")
    fill(a, b)
    ti.sync()
    ref = a * 2.0 + torch.arange(32, device="cuda")[None, :]
    assert torch.allclose(b, ref)


class _HostMemoryDevice:
    """Stands in for the CUDA device in the staging test: 'device' buffers in host memory."""

    def __init__(self):
        self.buffers = {}

    def alloc(self, nbytes):
        b = ctypes.create_string_buffer(max(1, nbytes))
        self.buffers[ctypes.addressof(b)] = b
        return ctypes.addressof(b)

    def to_device(self, dptr, host, nbytes):
        ctypes.memmove(dptr, host, nbytes)

    def to_host(self, host, dptr, nbytes):
        ctypes.memmove(host, dptr, nbytes)

    def free(self, dptr):
        del self.buffers[dptr]


@pytest.mark.parametrize("back", [True, False])
def test_host_staging_copies_a_strided_view_in_and_back(back):
    """A host array in a CUDA session: its span goes to the device, the kernel's addressing
    (pointer + index * stride) finds each element in the copy, and a written array comes back
    without touching the elements outside the view."""
    from fluxion.lang.ndarray import HostStaging
    base = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6)
    view = base[::-1, ::2, 1:5]                  # a negative, a step and an offset stride
    before = base.copy()
    dev = _HostMemoryDevice()
    st = HostStaging(dev, view.ctypes.data, view.shape, view.strides, 4, back)
    d0 = st.device_pointer(view.ctypes.data)
    for idx in np.ndindex(view.shape):
        addr = d0 + sum(i * s for i, s in zip(idx, view.strides))
        cell = ctypes.c_float.from_address(addr)
        assert cell.value == view[idx]
        cell.value = -cell.value - 1.0           # what a kernel would write
    st.finish()
    assert dev.buffers == {}                     # the device copy is freed
    expect = before.copy()
    if back:
        expect[::-1, ::2, 1:5] = -before[::-1, ::2, 1:5] - 1.0
    np.testing.assert_array_equal(base, expect)


def test_numpy_arrays_and_ti_ndarrays_are_staged_through_the_device(cuda):
    @ti.kernel
    def axpy(a: ti.f32, x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = a * x[i] + y[i]

    xs = np.arange(1000, dtype=np.float32)
    ys = np.ones(1000, dtype=np.float32)
    axpy(2.0, xs, ys)
    np.testing.assert_allclose(ys, 2 * xs + 1)
    np.testing.assert_array_equal(xs, np.arange(1000, dtype=np.float32))   # read only
    yv = ti.ndarray(ti.f32, 1000)
    axpy(3.0, xs[::-1].copy(), yv)
    np.testing.assert_allclose(yv.to_numpy(), 3 * xs[::-1])
    zs = np.zeros(2000, dtype=np.float32)
    axpy(1.0, xs, zs[::2])                       # a strided view written through its base
    np.testing.assert_allclose(zs[::2], xs)
    assert not zs[1::2].any()


def test_reverse_mode_on_the_device(cuda):
    n = 1000
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    xs = np.linspace(-1, 1, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.sin(x[i]) * x[i] ** 2

    with ti.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(xs) * xs ** 2 + 2 * xs * np.sin(xs),
                               rtol=1e-4, atol=1e-5)


def test_zero_dim_fields_and_serial_kernels(cuda):
    x = ti.field(ti.f32, shape=())
    x[None] = 2.5

    @ti.kernel
    def bump():
        x[None] = x[None] * 4 + 1

    bump()
    assert x[None] == 11.0
    bump()
    assert x.to_numpy() == 45.0


def test_print_and_block_dim_on_the_device(cuda, capfd):
    x = ti.field(ti.i32, shape=1000)

    @ti.kernel
    def k(a: ti.i32):
        ti.loop_config(block_dim=64)
        for i in x:
            x[i] = i * a
        print("done", a, 1.5)

    k(3)
    ti.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1000) * 3)
    assert "done 3 1.5" in capfd.readouterr().out


@pytest.mark.cpu_only
def test_block_level_programming_needs_cuda():
    ti.init(arch=ti.cpu)
    try:
        x = ti.field(ti.f32, shape=8)

        @ti.kernel
        def k():
            for i in x:
                tile = ti.simt.block.SharedArray((8,), ti.f32)
                tile[0] = x[i]

        with pytest.raises(ti.FluxionCompilationError, match="needs the CUDA backend"):
            k()
    finally:
        ti.reset()


def test_shared_arrays_and_block_sync(cuda):
    n, bd = 4096, 128
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f32, shape=n)
    xs = np.random.default_rng(0).random(n, dtype=np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def block_sums(m: ti.i32):
        ti.loop_config(block_dim=bd)
        for i in range(m):
            tile = ti.simt.block.SharedArray((bd,), ti.f32)
            tid = ti.simt.block.thread_idx()
            tile[tid] = x[i]
            ti.simt.block.sync()
            s = 0.0
            for k in range(bd):
                s += tile[k]
            y[i] = s + ti.simt.block.block_idx() * 0

    block_sums(n)
    ref = np.repeat(xs.reshape(-1, bd).sum(1), bd)
    np.testing.assert_allclose(y.to_numpy(), ref, rtol=1e-5)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_ptx_of_the_shared_memory_rwkv_kernel_assembles():
    torch = pytest.importorskip("torch")
    from fluxion.examples.rwkv_conv import make_backward_v2, make_forward_v2
    ti.init(arch=ti.cpu)
    try:
        T = 64
        fwd = make_forward_v2(T)
        out, w, k = torch.empty(2, 3, T), torch.rand(3, 1, T), torch.rand(2, 3, 2 * T - 1)
        ptx = fwd.ptx(out, w, k, 0.1, sm=90)
        assert ".shared" in ptx and "bar.sync" in ptx
        _assemble(ptx)
        ptx = make_backward_v2(T).ptx(torch.zeros(3, 1, T), torch.empty(2, 3, 2 * T - 1), w, k,
                                      out, sm=90)
        assert ".shared" in ptx and "bar.sync" in ptx and ("atom." in ptx or "red." in ptx)
        _assemble(ptx)
        if not runtime.on_cuda():
            with pytest.raises(ti.FluxionCompilationError, match="CUDA"):
                fwd(out, w, k, 0.1)           # block-level code on the CPU: a clear error
    finally:
        ti.reset()


@pytest.mark.cpu_only
def test_the_gpu_benchmark_script_runs_on_the_cpu():
    """`python -m benchmarks.gpu --arch cpu`: the GPU script's own logic (peers, padding and
    RWKV checks against PyTorch) runs here, so it does not rot between GPU sessions."""
    pytest.importorskip("torch")
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-m", "benchmarks.gpu", "--arch", "cpu"], cwd=root,
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=root + os.pathsep + os.path.join(root, "src")))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fluxion  pad" in r.stdout and "output identical" in r.stdout
    assert "DIFFERS" not in r.stdout
    assert "fluxion  rwkv fwd v0" in r.stdout
    diffs = [float(line.rsplit("max abs diff ", 1)[1].rstrip(")"))
             for line in r.stdout.splitlines() if "max abs diff" in line]
    assert diffs and max(diffs) < 1e-3


@pytest.mark.parametrize("T", [32, 64])
def test_rwkv_v2_shared_memory_forward_matches_conv1d(cuda, T):
    """The seed's block-level variant: one block per row, taps and window in shared memory."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from fluxion.examples.rwkv_conv import make_forward_v2
    torch.manual_seed(5)
    B, C, eps = 2, 3, 0.1
    w, k = torch.rand(C, 1, T), torch.rand(B, C, T)
    out = torch.empty(B, C, T)
    make_forward_v2(T)(out, w, F.pad(k, (T - 1, 0)), eps)
    torch.testing.assert_close(out, eps + F.conv1d(F.pad(k, (T - 1, 0)), w, groups=C),
                               rtol=1e-5, atol=1e-5)


def test_threads_past_the_end_leave_the_block_barrier(cuda):
    """A synchronizing loop whose last block is partial: the threads past the end return at
    once, and the barrier waits only for the threads that remain (as on the device)."""
    n, bd = 200, 64

    @ti.kernel
    def reverse_in_blocks(src: ti.types.ndarray(), dst: ti.types.ndarray()):
        ti.loop_config(block_dim=bd)
        for i in range(n):
            tile = ti.simt.block.SharedArray((bd,), ti.f32)
            t = ti.simt.block.thread_idx()
            tile[t] = src[i]
            ti.simt.block.sync()
            start = i - t
            count = ti.min(bd, n - start)
            dst[i] = tile[count - 1 - t]

    src = np.arange(n, dtype=np.float32)
    dst = np.zeros(n, np.float32)
    reverse_in_blocks(src, dst)
    ref = np.concatenate([src[s:s + bd][::-1] for s in range(0, n, bd)])
    np.testing.assert_array_equal(dst, ref)


@pytest.mark.parametrize("block_dim", [16, 48, 256])
def test_reductions_in_blocks_of_any_size(cuda, block_dim):
    """A float sum is reduced across each warp by shuffles only where blocks are whole warps;
    partial warps add atomically (a shuffle from a missing lane is undefined on the device,
    and NaN on the emulator)."""
    n = 1000
    x = ti.field(ti.f32, shape=n)
    s = ti.field(ti.f32, shape=())
    xs = np.random.default_rng(1).random(n, dtype=np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def total():
        ti.loop_config(block_dim=block_dim)
        for i in x:
            s[None] += x[i]

    total()
    assert s[None] == pytest.approx(float(xs.astype(np.float64).sum()), rel=1e-5)


def test_print_format_specs_on_the_device(cuda, capfd):
    @ti.kernel
    def show(x: ti.f32, n: ti.i32, m: ti.u8):
        print(f"[{x:.3f}|{n:05d}|{n:<4d}|{m:x}|{x:+.2e}|{x * 10:.1f}]")

    show(0.1, 7, 200)
    ti.sync()
    assert f"[{0.1:.3f}|{7:05d}|{7:<4d}|{200:x}|{0.1:+.2e}|{1:.1f}]" in capfd.readouterr().out

    @ti.kernel
    def centred(n: ti.i32):
        print(f"{n:^7d}")

    with pytest.raises(ti.FluxionCompilationError, match="no printf equivalent on CUDA"):
        centred(3)


def test_host_memory_reaching_a_kernel_is_caught(cuda, monkeypatch):
    """The emulated device keeps its memory apart from the host's: a host address that reaches
    a kernel (here: an array that skipped its staging) is an error, as it is on a GPU."""
    from fluxion.runtime import cuda_emulator
    if not cuda_emulator.enabled():
        pytest.skip("a real GPU reports this itself (an illegal address)")
    from fluxion.lang import kernel as kernel_mod

    @ti.kernel
    def double(a: ti.types.ndarray()):
        for i in a:
            a[i] *= 2

    a = np.arange(8, dtype=np.float32)
    double(a)
    np.testing.assert_array_equal(a, np.arange(8) * 2)
    monkeypatch.setattr(kernel_mod.Instance, "_stage",
                        lambda self, ptr, shape, strides, desc, back, keep: (ptr, keep))
    with pytest.raises(cuda_emulator.EmulatorError, match="host memory"):
        double(a)


class _DeviceArray:
    """Device memory behind `__cuda_array_interface__` (as CuPy and Numba arrays expose it),
    allocated on fluxion's own device."""
    def __init__(self, values, readonly=False):
        from fluxion.lang import runtime
        self.dev = runtime.get_jit().device
        self.values = np.ascontiguousarray(values)
        self.ptr = self.dev.alloc(self.values.nbytes)
        self.dev.to_device(self.ptr, self.values.ctypes.data, self.values.nbytes)
        self.__cuda_array_interface__ = {
            "shape": self.values.shape, "typestr": self.values.dtype.str,
            "data": (self.ptr, readonly), "strides": None, "version": 3}

    def transposed(self):
        """A view of the same memory with the axes swapped (strides, no copy)."""
        view = _DeviceArray.__new__(_DeviceArray)
        view.dev, view.ptr, view.values = self.dev, self.ptr, self.values.T
        view.__cuda_array_interface__ = dict(self.__cuda_array_interface__,
                                             shape=view.values.shape,
                                             strides=view.values.strides)
        return view

    def get(self):
        assert self.values.flags.c_contiguous
        out = np.empty_like(self.values)
        self.dev.to_host(out.ctypes.data, self.ptr, out.nbytes)
        return out


def test_cuda_array_interface_arrays_are_used_in_place(cuda):
    """Device arrays of other libraries (`__cuda_array_interface__`) go to kernels without
    copies, strided ones too; read-only ones cannot be written; their gradient, when no
    gradient array exists, is scratch device memory."""
    @ti.kernel
    def axpy(a: ti.f32, x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i, j in y:
            y[i, j] += a * x[i, j]

    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    x, y = _DeviceArray(xs), _DeviceArray(np.ones((3, 4), np.float32))
    axpy(2.0, x, y)
    np.testing.assert_array_equal(y.get(), 1 + 2 * xs)
    # a transposed view: the same memory with swapped strides
    xt = _DeviceArray(xs.T.copy()).transposed()
    assert xt.__cuda_array_interface__["strides"] == (4, 12)
    axpy(1.0, xt, y)
    np.testing.assert_array_equal(y.get(), 1 + 3 * xs)
    ro = _DeviceArray(np.ones((3, 4), np.float32), readonly=True)
    with pytest.raises(ti.FluxionTypeError, match="'y'.*cannot be written"):
        axpy(1.0, x, ro)
    # a grad launch with no gradient arrays given: the adjoint writes into scratch memory
    axpy.grad(2.0, x, y)


@pytest.mark.cpu_only
def test_cuda_arrays_in_a_cpu_session_are_refused():
    class Foreign:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                    "strides": None, "version": 3}

    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in a:
            a[i] = 1

    with pytest.raises(ti.FluxionRuntimeTypeError, match="'a' is on device 'cuda'.*CPU"):
        fill(Foreign())


def test_python_scope_access_moves_only_what_it_touches_in_large_trees(cuda, monkeypatch):
    """In a tree larger than Tree.WHOLE_BYTES, reading a scalar after a launch copies that
    scalar, not the tree; writes go back by their own bytes; writing one of two interleaved
    fields keeps the other's device values. Small trees move whole (one copy)."""
    from fluxion.lang import runtime
    n = 40_000
    state = ti.Vector.field(3, ti.f32, shape=n)      # 480 KB, interleaved x y z
    a, b = ti.field(ti.f32), ti.field(ti.f32)
    ti.root.dense(ti.i, n).place(a, b)               # a and b interleaved
    loss = ti.field(ti.f32, shape=())

    @ti.kernel
    def step():
        for i in state:
            state[i] += ti.Vector([1.0, 2.0, 3.0]) * a[i]
            b[i] += 1.0
            loss[None] += a[i]

    a.from_numpy(np.ones(n, np.float32))
    state.fill(0)
    loss[None] = 0
    dev = runtime.get_jit().device
    copies = []
    for name in ("to_host", "to_device"):
        real = getattr(dev, name)
        monkeypatch.setattr(dev, name, lambda p, q, nb, real=real, name=name: (
            copies.append((name, nb)), real(p, q, nb))[1])
    step()
    copies.clear()
    assert loss[None] == n
    assert copies == [("to_host", 4)]                 # the scalar, not the 1 MB tree
    copies.clear()
    state[7] = [10, 20, 30]                           # one element: its 12 bytes go back
    assert sorted(copies) == [("to_device", 4)] * 3
    y = state.to_numpy()
    np.testing.assert_array_equal(y[7], [10, 20, 30])
    np.testing.assert_array_equal(y[8], [1, 2, 3])
    step()
    a.from_numpy(np.full(n, 2.0, np.float32))        # b, interleaved, keeps the kernel's 2s
    a[3] = 3.0
    step()
    ref = np.tile([2.0 + 2, 4.0 + 4, 6.0 + 6], (n, 1)).astype(np.float32)
    ref[7] = [11 + 2, 22 + 4, 33 + 6]
    ref[3] = [2 + 3, 4 + 6, 6 + 9]
    np.testing.assert_array_equal(state.to_numpy(), ref)
    np.testing.assert_array_equal(b.to_numpy(), np.full(n, 3.0))
    assert loss[None] == 2 * n + 2 * n + 1
    # a small tree moves whole: one pull serves several reads
    small = ti.field(ti.f32, shape=16)

    @ti.kernel
    def fill_small():
        for i in small:
            small[i] = i

    fill_small()
    copies.clear()
    assert [small[i] for i in range(16)] == list(range(16))
    assert len(copies) == 1


@pytest.mark.cpu_only
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_small_grid_stride_bodies_take_four_indices_per_round():
    """A loop-free body is unrolled four times in its grid-stride loop (four independent
    loads in flight per thread); a body holding a loop is not."""
    # (no index checks: their failure path stores an error code, which the counts would see)
    ti.init(arch=ti.cpu, check_out_of_bound=False)

    @ti.kernel
    def saxpy(a: ti.f32, x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = a * x[i] + y[i]

    @ti.kernel
    def rows(x: ti.types.ndarray(ndim=2), y: ti.types.ndarray(ndim=1)):
        for i in y:
            s = 0.0
            for j in range(x.shape[1]):
                s += x[i, j]
            y[i] = s

    v = np.zeros(64, np.float32)
    ptx = saxpy.ptx(0.5, v, v)
    # the unrolled round reads x and y four times, the remainder loop once more each
    assert ptx.count("ld.global") == 10 and ptx.count("st.global") == 5
    _assemble(ptx)
    ptx = rows.ptx(np.zeros((4, 8), np.float32), np.zeros(4, np.float32))
    assert ptx.count("st.global") == 1
    _assemble(ptx)


@pytest.mark.cpu_only
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_fields_a_kernel_only_reads_take_the_read_only_cache():
    a = ti.field(ti.f32, shape=256)
    b = ti.field(ti.f32, shape=256)

    @ti.kernel
    def copy_scaled():
        for i in a:
            b[i] = 2 * a[i]

    @ti.kernel
    def bump():
        for i in a:
            a[i] = a[i] + b[i]

    ptx = copy_scaled.ptx()
    assert "ld.global.nc" in ptx and "st.global" in ptx     # a is only read
    _assemble(ptx)
    ptx = bump.ptx()
    # a is written: its loads must see the kernel's stores (plain); b is only read (nc)
    nc = ptx.count("ld.global.nc")
    assert nc > 0 and ptx.count("ld.global") - nc == nc
    _assemble(ptx)


@pytest.mark.parametrize("T", [32, 64])
def test_rwkv_v2_hand_written_backward_matches_autograd(cuda, T):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from fluxion.examples.rwkv_conv import make_backward_v2
    torch.manual_seed(6)
    B, C = 3, 2
    w = torch.rand(C, 1, T, dtype=torch.float64)
    kp = F.pad(torch.rand(B, C, T, dtype=torch.float64), (T - 1, 0))
    gout = torch.rand(B, C, T, dtype=torch.float64)
    wr, kr = w.clone().requires_grad_(), kp.clone().requires_grad_()
    F.conv1d(kr, wr, groups=C).backward(gout)
    gw, gk = torch.zeros(C, 1, T), torch.full((B, C, 2 * T - 1), float("nan"))
    make_backward_v2(T)(gw, gk, w.float(), kp.float(), gout.float())
    torch.testing.assert_close(gw.double(), wr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gk.double(), kr.grad, rtol=1e-5, atol=1e-5)   # every entry


def test_impossible_blocks_are_errors_naming_the_loop():
    @ti.kernel
    def wide(a: ti.types.ndarray()):
        ti.loop_config(block_dim=2048)
        for i in a:
            a[i] = 1

    @ti.kernel
    def hungry(a: ti.types.ndarray()):
        ti.loop_config(block_dim=128)
        for i in a:
            tile = ti.simt.block.SharedArray((16384,), ti.f32)     # 64 KB
            tile[ti.simt.block.thread_idx()] = a[i]
            ti.simt.block.sync()
            a[i] = tile[0]

    a = np.zeros(256, np.float32)
    with pytest.raises(ti.FluxionCompilationError, match=r"(?s)wide.*test_cuda.py.*"
                                                         r"block_dim=2048.*1 to 1024"):
        wide.ptx(a)
    with pytest.raises(ti.FluxionCompilationError, match=r"(?s)hungry.*65536 bytes.*49152"):
        hungry.ptx(a)
    if runtime.on_cuda():
        with pytest.raises(ti.FluxionCompilationError, match="block_dim=2048"):
            wide(a)


def test_writes_are_checked_and_the_result_read_at_the_next_synchronization(cuda):
    """The default checks of writes (passes/write_checks.py) on CUDA: a launch does not wait
    for its result; a failed check is raised, naming the kernel and line, at the next
    synchronization (ti.sync(), a read back, a kernel that returns), once."""
    a = ti.field(ti.i32, shape=8)
    b = ti.field(ti.i32, shape=8)

    @ti.kernel
    def put(k: ti.i32):
        a[k] = 7

    @ti.kernel
    def total() -> ti.i32:
        s = 0
        for i in a:
            s += a[i]
        return s

    put(3)
    put(8)                              # past the end: nothing raised yet, nothing written
    with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
        ti.sync()
    assert "'put'" in str(ei.value) and "(8,)" in str(ei.value) and "a[k] = 7" in str(ei.value)
    ti.sync()                           # raised once
    np.testing.assert_array_equal(b.to_numpy(), np.zeros(8, np.int32))
    put(-1)
    with pytest.raises(ti.FluxionOutOfBoundsError):
        a.to_numpy()                    # a read back synchronizes
    put(9)
    with pytest.raises(ti.FluxionOutOfBoundsError, match="put"):
        total()
    assert total() == 7
    want = np.zeros(8, np.int32)
    want[3] = 7
    np.testing.assert_array_equal(a.to_numpy(), want)


def test_debug_mode_on_cuda_raises_at_the_launch():
    ti.init(arch=ti.cuda, debug=True)
    try:
        a = ti.field(ti.i32, shape=8)

        @ti.kernel
        def put(k: ti.i32):
            a[k] = 7

        with pytest.raises(ti.FluxionOutOfBoundsError):
            put(8)
    finally:
        ti.reset()
