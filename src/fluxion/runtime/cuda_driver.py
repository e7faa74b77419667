"""A small ctypes layer over the CUDA driver API (libcuda): the primary context (shared with
PyTorch), memory, modules loaded from PTX, and kernel launches. Imported only when CUDA is
asked for."""
from __future__ import annotations

import ctypes
import os
import threading

_lib = None


def emulator_requested():
    """FLUXION_CUDA_EMULATOR=1: the CUDA backend runs on the CPU emulator of
    runtime/cuda_emulator.py (which runtime/cuda_jit.py opens instead of a device)."""
    return os.environ.get("FLUXION_CUDA_EMULATOR", "") not in ("", "0")


class CudaError(RuntimeError):
    pass


def _load():
    global _lib
    if _lib is not None:
        return _lib
    import ctypes.util          # (it loads subprocess and more; needed only to find libcuda)
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")):
        if not name:
            continue
        try:
            _lib = ctypes.CDLL(name)
            return _lib
        except OSError:
            continue
    raise CudaError("the CUDA driver (libcuda) was not found")


def _check(res, what):
    if res != 0:
        msg = ctypes.c_char_p()
        try:
            _lib.cuGetErrorString(res, ctypes.byref(msg))
            text = msg.value.decode() if msg.value else ""
        except Exception:
            text = ""
        raise CudaError(f"{what} failed: CUDA error {res} {text}")


def available():
    """True when a CUDA device can be used (or the CPU emulator is asked for)."""
    if emulator_requested():
        return True
    try:
        lib = _load()
        if lib.cuInit(0) != 0:
            return False
        n = ctypes.c_int()
        return lib.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0
    except (CudaError, AttributeError):
        return False


class Device:
    """Device 0 in its primary context (the one PyTorch uses)."""
    # called after each synchronization (a copy back, synchronize): the JIT reads there the
    # results of the checks of kernels launched since (runtime/cuda_jit.py: check_launched)
    after_sync = None

    def __init__(self):
        lib = _load()
        _check(lib.cuInit(0), "cuInit")
        self.dev = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(self.dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev),
               "cuDevicePrimaryCtxRetain")
        _check(lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        major, minor = ctypes.c_int(), ctypes.c_int()
        _check(lib.cuDeviceGetAttribute(ctypes.byref(major), 75, self.dev), "attribute")
        _check(lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, self.dev), "attribute")
        self.sm = major.value * 10 + minor.value
        sms = ctypes.c_int()
        _check(lib.cuDeviceGetAttribute(ctypes.byref(sms), 16, self.dev), "attribute")
        self.multiprocessors = sms.value
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, self.dev)
        self.name = name.value.decode()
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.lib = lib
        # A context is current per OS thread: a kernel launched (or a field read) from another
        # Python thread than the one that opened the device found none there ("invalid device
        # context"). Each thread makes it current once, before its first driver call.
        self._thread = threading.local()
        self._thread.bound = True

    def current(self):
        _check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self._thread.bound = True

    def bind(self):
        """Make the device's context current on the calling thread (once per thread)."""
        if not getattr(self._thread, "bound", False):
            self.current()

    def ensure_stack(self, nbytes):
        """At least `nbytes` of stack per GPU thread (CU_LIMIT_STACK_SIZE): real functions
        that recurse deeply need more than the driver's default of about 1 KB."""
        self.bind()
        have = ctypes.c_size_t()
        _check(self.lib.cuCtxGetLimit(ctypes.byref(have), 0), "cuCtxGetLimit")
        if have.value < nbytes:
            _check(self.lib.cuCtxSetLimit(0, ctypes.c_size_t(nbytes)), "cuCtxSetLimit")

    def alloc(self, nbytes):
        self.bind()
        p = ctypes.c_uint64()
        _check(self.lib.cuMemAlloc_v2(ctypes.byref(p), max(1, nbytes)), "cuMemAlloc")
        _check(self.lib.cuMemsetD8_v2(p.value, 0, max(1, nbytes)), "cuMemset")
        return p.value

    def free(self, ptr):
        self.bind()
        self.lib.cuMemFree_v2(ptr)

    def to_device(self, dptr, host_ptr, nbytes):
        self.bind()
        _check(self.lib.cuMemcpyHtoD_v2(dptr, host_ptr, nbytes), "cuMemcpyHtoD")

    def to_host(self, host_ptr, dptr, nbytes):
        self.bind()
        _check(self.lib.cuMemcpyDtoH_v2(host_ptr, dptr, nbytes), "cuMemcpyDtoH")
        if self.after_sync is not None:
            self.after_sync()

    def synchronize(self):
        self.bind()
        _check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")
        if self.after_sync is not None:
            self.after_sync()

    def load_ptx(self, ptx):
        self.bind()
        mod = ctypes.c_void_p()
        data = ptx.encode() + b"\0"
        log = ctypes.create_string_buffer(8192)
        # options: error log buffer and its size, so a failing load says why
        opts = (ctypes.c_int * 2)(5, 6)
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p).value, 8192)
        res = self.lib.cuModuleLoadDataEx(ctypes.byref(mod), data, 2, opts, vals)
        if res != 0:
            raise CudaError(f"loading PTX failed (CUDA error {res}): {log.value.decode()}")
        return Module(self, mod)

    @staticmethod
    def params(args):
        """The kernel-parameter array for `args` (ctypes values the caller keeps alive)."""
        return (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p)
                                               for a in args])

    def launch(self, func, grid, block, params):
        self.bind()
        res = self.lib.cuLaunchKernel(func, grid, 1, 1, block, 1, 1, 0, None, params, None)
        if res:
            _check(res, "cuLaunchKernel")


class Module:
    def __init__(self, device, handle):
        self.device = device
        self.handle = handle

    def function(self, name):
        f = ctypes.c_void_p()
        self.device.bind()
        _check(self.device.lib.cuModuleGetFunction(ctypes.byref(f), self.handle, name.encode()),
               f"cuModuleGetFunction({name})")
        return f
