"""The CUDA target's compiler and launcher: IR -> LLVM (NVPTX) -> PTX -> a loaded module (or,
on the emulated device, IR -> LLVM for the emulated CUDA target -> a host module), and the
launch of a kernel's tasks in order on the device."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
import weakref

import numpy as np

from fluxion._llvm import llvm
from fluxion.codegen import targets
from fluxion.codegen.nvptx import BLOCK, CudaModuleLowering, find_libdevice
from fluxion.codegen.lower import finish_text
from fluxion.codegen.targets import CUDA_TRIPLE
from fluxion.ir.errors import FluxionRuntimeError
from fluxion.ir.evaluate import host_value
from fluxion.runtime import compile_worker, cuda_driver, cuda_emulator, program
from fluxion.runtime.cpu_jit import CompiledKernel, raise_kernel_error

_bitcode = {}


def _read(path):
    if path not in _bitcode:
        with open(path, "rb") as fh:
            _bitcode[path] = fh.read()
    return _bitcode[path]


def open_device():
    """Device 0, or the CPU emulator of runtime/cuda_emulator.py when FLUXION_CUDA_EMULATOR=1."""
    if cuda_emulator.enabled():
        return cuda_emulator.device()
    return cuda_driver.Device()


def lower_for_cuda(kernel, sm=90, fast_math=True, address_of=None, target=targets.CUDA):
    """The kernel's IR lowered for `target` (CUDA's NVPTX, or the emulated CUDA target) as LLVM
    assembly text (not optimized), its lowering (task list, context layout) and the target
    machine."""
    tm = target.machine(sm)
    ml = CudaModuleLowering(kernel, target, str(tm.target_data), fast_math)
    # the same math on the emulator as on this machine's GPU: libdevice's where it is found
    ml.have_libdevice = find_libdevice() is not None
    if address_of is not None:
        ml.place_address = address_of
    return finish_text(str(ml.lower())), ml, tm


def kernel_to_ptx(kernel, sm=90, fast_math=True, address_of=None):
    """The PTX of a kernel's IR (after the pass pipeline) and its task list; usable without a
    GPU (`ti.cuda_ptx` uses it), checked with ptxas by the tests."""
    text, ml, tm = lower_for_cuda(kernel, sm, fast_math, address_of, targets.CUDA)
    def make():
        mod = llvm.parse_assembly(text)
        mod.verify()
        if ml.uses_libdevice:
            lib = llvm.parse_bitcode(_read(find_libdevice()))
            lib.triple = CUDA_TRIPLE
            lib.data_layout = str(tm.target_data)
            mod.link_in(lib)
            # only what the kernels call survives the optimizer
            for f in mod.functions:
                if f.name.startswith("__nv") and not f.is_declaration:
                    f.linkage = "internal"
        return mod
    # (checked: LLVM's SLP vectorizer can leave an invalid module, compile_worker.optimized)
    return tm.emit_assembly(compile_worker.optimized(llvm, tm, make, 3)), ml


def assemble_ptx(ptx, sm=90):
    """Assemble `ptx` with ptxas for sm_`sm`: ptxas's error text, '' when it assembles, or
    None where ptxas is not installed. A check of generated code on machines without a GPU."""
    if shutil.which("ptxas") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        r = subprocess.run(["ptxas", f"-arch=sm_{sm}", path, "-o", os.path.join(d, "k.o")],
                           capture_output=True, text=True)
    return "" if r.returncode == 0 else (r.stderr or f"ptxas exited with {r.returncode}")


class CudaJit:
    def __init__(self, cfg):
        self.cfg = cfg
        self.device = open_device()
        self.sm = self.device.sm
        self.grid = getattr(self.device, "grid_blocks", self.device.multiprocessors * 8)
        # launches of different kernels from several Python threads go one at a time, as on
        # one stream: each moves the fields' host copy to the device first (when Python wrote
        # it) and marks the device copy newer after, and a second launch's copy must not land
        # on the device while the first one's tasks add into the same memory. The launch in
        # flight holds the token (a list pop, atomic under the GIL: cheaper than a Lock)
        self.launch_token = [True]
        # kernels launched with checks whose result was not read back yet (see
        # CudaCompiledKernel.lazy): read at the device's next synchronization
        self.unchecked = {}
        self._checking = False
        self.device.after_sync = self.check_launched

    def shutdown(self):
        self.unchecked.clear()
        if getattr(self.device, "after_sync", None) == self.check_launched:
            self.device.after_sync = None

    def check_launched(self):
        """After the device synchronized (`ti.sync()`, a copy back to the host): raise the
        error of the first launch since the last check whose index checks failed."""
        if not self.unchecked or self._checking:
            return
        self._checking = True
        try:
            # (a swap, not a copy and a clear: a launch from another thread in between stays
            # for the next check)
            pending, self.unchecked = self.unchecked, {}
            for c in pending.values():
                c.read_error()
        finally:
            self._checking = False

    def compile(self, kernel):
        if getattr(self.device, "runs_llvm", False):
            # the CPU emulator runs the emulated CUDA target's host module
            text, ml, _ = lower_for_cuda(kernel, min(self.sm, 90), self.cfg.fast_math,
                                         target=targets.EMULATED_CUDA)
            module = self.device.load_llvm(text, ml.task_sync, ml.addresses)
            c = CudaCompiledKernel(kernel, ml, module, self, None)
            c.llvm_ir = text
            return c
        ptx, ml = kernel_to_ptx(kernel, min(self.sm, 90), self.cfg.fast_math)
        # ti.init(cuda_stack_limit=...): the stack a kernel calling real functions (which may
        # recurse: ptxas cannot bound it) gets per thread; 0 keeps the driver's
        stack = int(getattr(self.cfg, "cuda_stack_limit", 0) or 0)
        if stack and kernel.functions:
            self.device.ensure_stack(stack)
        module = self.device.load_ptx(ptx)
        return CudaCompiledKernel(kernel, ml, module, self, ptx)


def _free_all(dev, ptrs):
    for p in ptrs:
        dev.free(p)


class CudaCompiledKernel:
    # numpy arrays, ti.ndarrays and CPU tensors are copied to the device around each launch
    stages_host_arrays = True

    def __init__(self, kernel, ml, module, jit, ptx):
        self.kernel = kernel
        self.layout = ml.layout
        self.uses_random = ml.uses_random
        self.jit = jit
        self.ptx = ptx
        self.llvm_ir = None        # (the emulated target's module text, on the emulator)
        self.module = module
        dev = jit.device
        # a parallel task keeps about the same number of threads whatever its block size
        threads = jit.grid * BLOCK
        self.tasks = []
        for kind, name, block, *bounds in ml.tasks_meta:
            grid = bounds if kind == "exact" else max(1, threads // block)
            self.tasks.append((kind, module.function(name), block, grid))
        self.ctx_i = np.zeros(self.layout.size, dtype=np.int64)
        self.ctx_f = self.ctx_i.view(np.float64)
        # the context goes by value with each launch (the driver copies the parameters when
        # the launch is queued, so ctx_i may change right after); what kernels write for the
        # host (returns, error code and arguments: slots ret0 .. seed) lands in `out_dev`
        self.out_dev = dev.alloc(self.ctx_i.nbytes)
        self.temps_dev = dev.alloc(8 * ml.temp_count)
        # given back by ti.reset (release), or with the compiled kernel if that comes first
        self.release = weakref.finalize(self, _free_all, dev, (self.out_dev, self.temps_dev))
        self.errors = kernel.errors
        self.ret_types = kernel.ret_types
        # results come back only when someone may look at them. The default checks of writes
        # (passes/write_checks.py) are read lazily: a copy back after every launch would
        # cost each one its overlap with the host, so a failed check is raised at the next
        # synchronization (ti.sync(), reading a field or an array back, a kernel's return)
        # naming the kernel and line, like the GPU's own asynchronous errors. Checks asked
        # for (debug, check_out_of_bound) and kernels that return values read at once.
        cfg = jit.cfg
        lazy_codes = getattr(kernel, "write_check_codes", ())
        self.lazy = bool(kernel.errors) and not kernel.ret_types and not cfg.debug and \
            all(code in lazy_codes for code in range(len(kernel.errors)))
        self.readback = bool(kernel.ret_types or (kernel.errors and not self.lazy))
        # a GPU's printf writes into a driver buffer that reaches the process's standard output
        # (file descriptor 1) only at a synchronization: a kernel that prints waits for its end,
        # so its lines come out when the call returns, after what Python printed before it
        self.prints = bool(ptx) and "vprintf" in ptx
        self._args = (ctypes.c_uint64(self.out_dev), ctypes.c_uint64(self.temps_dev))
        self._params = (ctypes.c_void_p * 3)(
            self.ctx_i.ctypes.data, *[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p)
                                      for a in self._args])
        lay = self.layout
        self._out_offset = 8 * lay.ret0
        self._out_bytes = 8 * (lay.seed - lay.ret0)

    def run(self):
        token = self.jit.launch_token
        try:
            token.pop()
        except IndexError:
            while True:           # another thread's launch is in flight
                time.sleep(2e-5)
                try:
                    token.pop()
                    break
                except IndexError:
                    pass
        try:
            self._run()
        finally:
            token.append(True)
        if self.lazy:
            self.jit.unchecked[id(self)] = self
        elif self.readback and self.ctx_i[self.layout.err]:
            self._raise()

    def read_error(self):
        """The error slots as the last launch left them (synchronizes), raised if set."""
        lay = self.layout
        at = 8 * lay.err
        self.jit.device.to_host(self.ctx_i.ctypes.data + at, self.out_dev + at,
                                8 * (lay.seed - lay.err))
        if self.ctx_i[lay.err]:
            self._raise()

    def _run(self):
        dev = self.jit.device
        st = program.state()
        for tree in st.trees:
            tree.push()
        if self.prints:
            sys.stdout.flush()
        if self.uses_random:
            st.launch_counter += 1
            self.ctx_i[self.layout.seed] = (st.config.random_seed * 0x100000001B3 +
                                            st.launch_counter) & 0x7FFFFFFFFFFFFFFF
        for kind, fn, block, grid in self.tasks:
            if kind == "serial":
                dev.launch(fn, 1, 1, self._params)
            elif kind == "exact":
                n = host_eval(grid[1], self) - host_eval(grid[0], self)
                if n > 0:
                    dev.launch(fn, (n + block - 1) // block, block, self._params)
            else:
                dev.launch(fn, grid, block, self._params)
        for tree in st.trees:
            tree.device_newer = True
        if self.prints:
            dev.synchronize()
        if self.readback:
            dev.to_host(self.ctx_i.ctypes.data + self._out_offset,
                        self.out_dev + self._out_offset, self._out_bytes)

    def _raise(self):
        code = int(self.ctx_i[self.layout.err]) - 1
        self.ctx_i[self.layout.err] = 0
        err = 8 * self.layout.err
        self.jit.device.to_device(self.out_dev + err, self.ctx_i.ctypes.data + err, 8)
        raise_kernel_error(self, code)

    def read_returns(self):
        return CompiledKernel.read_returns(self)


def host_eval(stmt, c):
    """The value of a loop bound on the host, from the launch's arguments: a loop that
    synchronizes its blocks is launched on exactly enough of them."""
    v = host_value(stmt, c.ctx_i, c.ctx_f, c.kernel.body)
    if v is None:
        raise FluxionRuntimeError(f"kernel '{c.kernel.name}': a loop using ti.simt.block.sync() "
                                  f"needs bounds known at launch (constants, arguments, array "
                                  f"shapes)")
    return v
