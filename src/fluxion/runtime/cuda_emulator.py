"""A CUDA device emulated on the CPU: the CUDA backend's own kernels, run where no GPU exists.

`FLUXION_CUDA_EMULATOR=1` makes `ti.cuda` open this device instead of libcuda. It runs the
kernels of the emulated CUDA target (codegen/targets.py): the CUDA lowering
(`codegen/nvptx.py`), compiled for the host, with the same tasks, launches, grid-stride and
exact loops, context by value, output and temporaries buffers, staging of host arrays and
device copies of the fields as on a GPU. Only the leaves that exist solely on a GPU differ,
emitted by the lowering itself as calls of host functions of the same meaning (no NVPTX code
is rewritten):
- the special registers (thread, block, block size, grid size) read the running lane's record;
- the block barrier waits for the block's live threads (a thread that returned no longer
  counts, as on the device), and `shfl.sync.down` exchanges through the block's buffer between
  two barriers (these are in LLVM IR: cuda_emulator_ir.py);
- the hardware approximations (`sin.approx.f`, ...) and libdevice's functions are the host's
  libm; `vprintf` formats on the host (`_vprintf`).

A task that synchronizes (barriers, shuffles) runs every lane of a block on its own OS thread,
one block after another; any other task runs its lanes one after another on the calling thread
(the last lane first, the opposite of the CPU backend's order), which is a valid schedule for
lanes that never wait for each other. A grid-stride loop whose
only synchronization is a warp's shuffles runs on at most two warps per block: any block size
computes the same result there, and each lane costs a thread. A kernel calling a function
that exists on the host but not on a GPU fails to load, naming it (`check_calls`).

Device memory is one reserved range of the address space, and every address a kernel makes
from an integer (a context slot, a temporary) or has built in (a field) is checked against it:
host memory reaching a kernel is an error, as it is on a GPU.

What this cannot check: speed, PTX itself (ptxas does), and races between lanes.
"""
from __future__ import annotations

import collections
import ctypes
import mmap
import re
import sys
import threading

import numpy as np

from fluxion._llvm import llvm
from fluxion.codegen import targets
from fluxion.runtime import compile_worker, cuda_driver, cuda_emulator_ir, libcalls
from fluxion.runtime.cuda_emulator_ir import MAX_BLOCK as _MAX_BLOCK

_TARGET = targets.EMULATED_CUDA


enabled = cuda_driver.emulator_requested


class EmulatorError(RuntimeError):
    pass


# --- what a kernel may call ---------------------------------------------------------------------
# the emulator's functions (the runtime's, and vprintf's host side) and the C library functions
# that stand for libdevice's; anything else outside the module exists on the host only. (Fixed
# here, when the module is imported: what the target's tables say at that time.)
_CALLABLE = frozenset(_TARGET.calls.values()) | {targets.DEVICE_PTR} | _TARGET.host_functions()


def check_calls(mod):
    """Raise if the host module `mod` (llvm.binding) declares a function a GPU does not have:
    an NVVM intrinsic (the emulated target emits none), or a host function."""
    for f in mod.functions:
        if not f.is_declaration:
            continue
        name = f.name
        if name.startswith("llvm.nvvm."):
            raise EmulatorError(f"the CUDA emulator has no host version of {name}")
        if not name.startswith("llvm.") and name not in _CALLABLE:
            raise EmulatorError(f"a CUDA kernel calls `{name}`, which does not exist on a GPU")


# --- vprintf ----------------------------------------------------------------------------------
_SPEC = re.compile(r'%([-+ #0]*\d*(?:\.\d+)?)(ll[duxXo]|[eEfFgG]|%)')


def _vprintf(fmt, args):
    """Device printf's formatting: the values are 8 bytes each (64-bit integers, doubles)."""
    out, k, pos = [], 0, 0
    text = fmt.decode()
    for m in _SPEC.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        flags, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        raw = ctypes.c_int64.from_address(args + 8 * k).value
        k += 1
        if conv[-1] in "eEfFgG":
            v = ctypes.c_double.from_buffer_copy(ctypes.c_int64(raw)).value
        else:
            v = raw if conv == "lld" else raw & ((1 << 64) - 1)
        out.append(("%" + flags + conv[-1].replace("u", "d")) % v)
    out.append(text[pos:])
    sys.stdout.write("".join(out))
    return 0


_VPRINTF = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(_vprintf)
_RUN_SERIAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)
_RUN_THREADED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                 ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p)
_LANE_BYTES = 16 + 5 * 8
_BLOCK_BYTES = 128 + 16 + 8 * _MAX_BLOCK


def _target_machine():
    # the host's own CPU, as the CPU backend compiles for (half conversions need F16C)
    return _TARGET.machine()


_device = None


def device():
    """The process's one emulated device (its runtime is compiled once)."""
    global _device
    if _device is None:
        _device = Device()
    return _device


class Device:
    """The emulated device: `cuda_driver.Device`'s interface, with memory in host RAM."""
    name = "fluxion CUDA emulator (CPU)"
    sm = 90
    multiprocessors = 1
    # blocks of a grid-stride launch: two, so that work crosses blocks as on a device
    grid_blocks = 2
    runs_llvm = True
    # called after each synchronization (a copy back, synchronize): the JIT reads there the
    # results of the checks of kernels launched since (runtime/cuda_jit.py: check_launched)
    after_sync = None

    def __init__(self):
        if not sys.platform.startswith("linux"):
            # glibc's pthread types: a 4-byte key, all-zero static initializers
            raise EmulatorError("the CUDA emulator runs on Linux (glibc) only")
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libcalls.provide()      # compiler runtime functions the host code may call
        libc = ctypes.CDLL(None)
        key = ctypes.c_uint32()
        if libc.pthread_key_create(ctypes.byref(key), None) != 0:
            raise EmulatorError("pthread_key_create failed")
        self.triple = _TARGET.triple
        self.datalayout = str(_target_machine().target_data)
        mod = llvm.parse_assembly(cuda_emulator_ir.runtime_text(key.value, self.triple,
                                                                self.datalayout))
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, _target_machine())
        self.engine.finalize_object()
        # kernels are modules of their own, which find the runtime's functions by name
        for name in cuda_emulator_ir.EXPORTS:
            llvm.add_symbol(name, self.engine.get_function_address(name))
        llvm.add_symbol(_TARGET.calls["printf"], ctypes.cast(_VPRINTF, ctypes.c_void_p).value)
        missing = (set(_TARGET.calls.values()) | {targets.DEVICE_PTR}) - set(
            cuda_emulator_ir.EXPORTS) - {_TARGET.calls["printf"]}
        if missing:
            raise EmulatorError(f"the emulated target calls {sorted(missing)}, which the "
                                f"emulator does not define")
        self._serial = _RUN_SERIAL(self.engine.get_function_address("emu_run_serial"))
        self._threaded = _RUN_THREADED(self.engine.get_function_address("emu_run_threaded"))
        self._lane = np.zeros(_LANE_BYTES, np.uint8)
        self._lanes = np.zeros(_LANE_BYTES * _MAX_BLOCK, np.uint8)
        self._tids = np.zeros(_MAX_BLOCK, np.uint64)
        # mutex and condition variable all zero bytes: their static initializers (glibc)
        self._block = np.zeros(_BLOCK_BYTES, np.uint8)
        # lane threads with 1 MiB stacks (not the default 8): they start faster
        self._attr = np.zeros(256, np.uint8)
        libc.pthread_attr_init(self._attr.ctypes.data_as(ctypes.c_void_p))
        libc.pthread_attr_setstacksize(self._attr.ctypes.data_as(ctypes.c_void_p),
                                       ctypes.c_size_t(1 << 20))
        self._arena = _Arena()
        for name, value in (("arena_lo", self._arena.lo), ("arena_hi", self._arena.hi)):
            ctypes.c_uint64.from_address(self.engine.get_global_value_address(name)).value = value
        self._bad = ctypes.c_uint64.from_address(self.engine.get_global_value_address(
            "bad_pointer"))
        # one launch at a time, as on one stream (the lane records are shared)
        self._lock = threading.Lock()

    # device memory: one reserved range of host memory, so that an address tells device
    # memory from host memory
    def alloc(self, nbytes):
        return self._arena.alloc(nbytes)

    def free(self, ptr):
        self._arena.free(ptr)

    def _check_address(self, addr, what):
        if addr and not self._arena.lo <= addr < self._arena.hi:
            raise EmulatorError(f"a CUDA kernel {what} {addr:#x}, which is host memory, not "
                                f"device memory (on a GPU: an illegal address)")

    def to_device(self, dptr, host_ptr, nbytes):
        ctypes.memmove(dptr, host_ptr, nbytes)

    def to_host(self, host_ptr, dptr, nbytes):
        ctypes.memmove(host_ptr, dptr, nbytes)
        if self.after_sync is not None:
            self.after_sync()

    def synchronize(self):
        if self.after_sync is not None:
            self.after_sync()

    def current(self):
        pass

    def load_llvm(self, text, tasks, addresses=()):
        """A kernel's module of the emulated CUDA target, loaded: `text` its LLVM IR (not
        optimized), `tasks` {task name: how its lanes synchronize, "barrier" | "shuffle" |
        None}, `addresses` the field addresses built into it."""
        for addr in sorted(addresses):
            self._check_address(addr, "has the address")
        mod = _optimized(text)
        engine = llvm.create_mcjit_compiler(mod, _target_machine())
        engine.finalize_object()
        # the compiled kernel holds the module (and so its engine): no list here, which
        # would keep every kernel of every ti.init of the process alive
        return Module(engine, tasks)

    def launch(self, func, grid, block, params):
        if not 1 <= block <= _MAX_BLOCK:
            raise EmulatorError(f"block size {block} is outside 1..{_MAX_BLOCK}")
        ctx = params[0]
        out = ctypes.c_uint64.from_address(params[1]).value
        temps = ctypes.c_uint64.from_address(params[2]).value
        for addr in (out, temps):
            self._check_address(addr, "was launched with the buffer")
        with self._lock:
            self._run(func, grid, block, ctx, out, temps)
            bad, self._bad.value = self._bad.value, 0
        if bad:
            self._check_address(bad, "used the address")

    def _run(self, func, grid, block, ctx, out, temps):
        if func.sync:
            if func.sync == "shuffle" and block % 32 == 0:
                block = min(block, 64)
            err = self._threaded(func.entry, ctx, out, temps, grid, block,
                                 self._lanes.ctypes.data, self._tids.ctypes.data,
                                 self._block.ctypes.data, self._attr.ctypes.data)
            if err:
                raise EmulatorError(f"could not start a thread for the emulated block ({err})")
        else:
            self._serial(func.entry, ctx, out, temps, grid, block, self._lane.ctypes.data)


_OPTIMIZED_CACHE_SIZE = 256
_optimized_cache = collections.OrderedDict()     # host module text -> optimized text


def _optimized(text):
    """The host module of `text`, optimized. Each run of LLVM's optimizer through llvmlite
    leaks 30-80 KB (see cpu_build.optimized_object), and a kernel compiled again after ti.reset has the
    same text here (CUDA kernels carry no per-compilation prefix, and the arena gives freed
    fields their addresses back), so the optimized text of recent modules is kept."""
    opt = _optimized_cache.get(text)
    if opt is not None:
        _optimized_cache.move_to_end(text)
        return llvm.parse_assembly(opt)
    def make():
        m = llvm.parse_assembly(text)
        m.verify()
        return m
    first = [make()]
    check_calls(first[0])
    # (checked: LLVM's SLP vectorizer can leave an invalid module, compile_worker.optimized)
    mod = compile_worker.optimized(llvm, _target_machine(), lambda: first.pop() if first else make(),
                                   2)
    _optimized_cache[text] = str(mod)
    while len(_optimized_cache) > _OPTIMIZED_CACHE_SIZE:
        _optimized_cache.popitem(last=False)
    return mod


class _Arena:
    """Device allocations from one reserved range of address space (pages are committed as
    they are touched): blocks of power-of-two sizes from 256 bytes, reused after a free."""
    def __init__(self):
        for gib in (64, 16, 4, 1):
            try:
                # MAP_NORESERVE (0x4000 on Linux): reserve address space, not memory
                self.map = mmap.mmap(-1, gib << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                                     | getattr(mmap, "MAP_NORESERVE", 0x4000))
                break
            except OSError:
                continue
        else:
            raise EmulatorError("could not reserve address space for the emulated device")
        self.lo = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.hi = self.lo + len(self.map)
        self.top = self.lo
        self.free_blocks = {}      # size -> addresses
        self.size_of = {}

    def alloc(self, nbytes):
        size = 256
        while size < nbytes:
            size *= 2
        blocks = self.free_blocks.get(size)
        if blocks:
            addr = blocks.pop()
            if size < 1 << 20:          # (larger blocks were given back: already zeros)
                ctypes.memset(addr, 0, size)
        else:
            # blocks of a page or more start on a page (they are given back by pages)
            align = min(size, 4096)
            addr = (self.top + align - 1) & ~(align - 1)
            if addr + size > self.hi:
                raise EmulatorError(f"the emulated device is out of memory ({nbytes} bytes)")
            self.top = addr + size
        self.size_of[addr] = size
        return addr

    def free(self, addr):
        size = self.size_of.pop(addr, None)
        if size is None:
            return
        if size >= 1 << 20:
            # give the pages back (they read as zeros when touched again)
            self.map.madvise(mmap.MADV_DONTNEED, addr - self.lo, size)
        self.free_blocks.setdefault(size, []).append(addr)


class Function:
    """A task: its host entry (the lane entry, targets.add_lane_entry) and how its lanes wait
    for each other."""
    __slots__ = ("entry", "sync")

    def __init__(self, entry, sync):
        self.entry, self.sync = entry, sync


class Module:
    def __init__(self, engine, tasks):
        self.engine = engine
        self.tasks = tasks

    def function(self, name):
        return Function(self.engine.get_function_address(targets.LANE_PREFIX + name),
                        self.tasks[name])
