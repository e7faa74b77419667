"""The CPU target: LLVM's O3 pipeline and MCJIT through llvmlite, the runtime symbols kernels
call (`fluxion_parallel_for`, `fluxion_print`), and the compiled kernel's launch."""
from __future__ import annotations

import collections
import ctypes
import re
import sys
import threading

import llvmlite.binding as llvm
import numpy as np

from fluxion.codegen.lower import ModuleLowering, finish_text
from fluxion.lang.exceptions import (FluxionAssertionError, FluxionOutOfBoundsError,
                                     FluxionZeroDivisionError, format_location)

_initialized = False
_print_tables = []           # print id -> (pieces, kinds), shared by every kernel
_print_lock = threading.Lock()

_PRINT_CB = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))


def _print_callback(pid, values):
    pieces, kinds = _print_tables[pid]
    out = []
    for p in pieces:
        if isinstance(p, str):
            out.append(p)
            continue
        k, spec = p
        dt = kinds[k]
        raw = values[k]
        if dt.is_float:
            v = ctypes.c_double.from_buffer_copy(ctypes.c_int64(raw)).value
            if dt.bits == 32:
                v = float(np.float32(v))
        else:
            v = raw if dt.is_signed else raw & ((1 << 64) - 1)
        if spec:
            out.append(format(v, spec))
        elif dt.is_float:
            out.append(repr(float(np.float32(v))) if dt.bits == 32 else repr(v))
        else:
            out.append(str(v))
    with _print_lock:
        sys.stdout.write("".join(out))


_print_cb = _PRINT_CB(_print_callback)


def _serial_parallel_for_ir(triple, layout):
    """Fallback dispatcher: runs the whole range on the calling thread."""
    return f"""
target triple = "{triple}"
target datalayout = "{layout}"
define void @fluxion_parallel_for(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain) {{
  %nonempty = icmp slt i64 %begin, %end
  br i1 %nonempty, label %run, label %done
run:
  call void %task(ptr %closure, i64 %begin, i64 %end, i64 0)
  br label %done
done:
  ret void
}}
"""


class CpuJit:
    def __init__(self, cfg):
        global _initialized
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True
        self.cfg = cfg
        # An execution engine takes ownership of the target machine it is created with, so
        # every engine gets its own; `self.tm` serves the optimizer only.
        self.tm = _target_machine()
        self.triple = llvm.get_process_triple()
        self.datalayout = str(self.tm.target_data)
        # all kernels of a session live in one engine: it is freed with the session (ti.reset)
        self.engine = llvm.create_mcjit_compiler(
            llvm.parse_assembly(f'target triple = "{self.triple}"'), _target_machine())
        self._serial_engine = None
        self._ids = 0
        self.pool = None
        nthreads = cfg.cpu_max_num_threads
        try:
            from fluxion.runtime.thread_pool import ThreadPool
            if nthreads > 1:
                self.pool = ThreadPool(_target_machine(), nthreads)
        except ImportError:
            self.pool = None
        if self.pool is not None:
            llvm.add_symbol("fluxion_parallel_for", self.pool.parallel_for_addr)
        else:
            mod = llvm.parse_assembly(_serial_parallel_for_ir(self.triple, self.datalayout))
            self._serial_engine = llvm.create_mcjit_compiler(mod, _target_machine())
            self._serial_engine.finalize_object()
            llvm.add_symbol("fluxion_parallel_for",
                            self._serial_engine.get_function_address("fluxion_parallel_for"))
        llvm.add_symbol("fluxion_print", ctypes.cast(_print_cb, ctypes.c_void_p).value)

    def shutdown(self):
        if self.pool is not None:
            self.pool.stop()
            self.pool = None

    def optimize(self, mod):
        # advanced_optimization=False: LLVM's basic cleanups only (registers for locals,
        # no vectorization or unrolling)
        full = getattr(self.cfg, "advanced_optimization", True)
        pto = llvm.create_pipeline_tuning_options(speed_level=3 if full else 1)
        pto.loop_vectorization = full
        pto.slp_vectorization = full
        pto.loop_unrolling = full
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(mod, pb)

    def _optimized(self, text, prefix):
        """The module of `text`, verified and optimized. Each run of LLVM's optimizer through
        llvmlite leaks 30-80 KB (its PassBuilder allocates pass-instrumentation callbacks
        that nothing frees), so a kernel compiled again (after ti.reset, say: the same code
        with fields at new addresses) reuses the optimized text of its first compilation,
        with its addresses and names put back (_Canonical)."""
        canon = _Canonical(text, prefix)
        # the optimization level is part of what the optimized text depends on
        key = (getattr(self.cfg, "advanced_optimization", True), canon.key)
        opt = _optimized_cache.get(key) if canon.key is not None else None
        if opt is not None:
            real = canon.restore(opt)
            if real is not None:
                _optimized_cache.move_to_end(key)
                return llvm.parse_assembly(real)
        if canon.key is None:
            mod = llvm.parse_assembly(text)
            mod.verify()
            self.optimize(mod)
            return mod
        mod = llvm.parse_assembly(canon.key)
        mod.verify()
        self.optimize(mod)
        opt = str(mod)
        real = canon.restore(opt)
        if real is None:
            # the optimizer computed something from the stand-in addresses themselves: this
            # kernel is optimized with its real ones, and not cached
            mod = llvm.parse_assembly(text)
            mod.verify()
            self.optimize(mod)
            return mod
        _optimized_cache[key] = opt
        while len(_optimized_cache) > _OPTIMIZED_CACHE_SIZE:
            _optimized_cache.popitem(last=False)
        return llvm.parse_assembly(real)

    def compile(self, kernel):
        self._ids += 1
        with _print_lock:
            ml = ModuleLowering(kernel, self.triple, self.datalayout, _print_tables,
                                self.cfg.fast_math, prefix=f"k{self._ids}_",
                                transform_loops=getattr(self.cfg, "advanced_optimization", True))
            module = ml.lower()
        text = finish_text(str(module))
        entry = ml.entry_name
        if _x86(self.triple):
            text, entry = flush_to_zero(text, entry)
        mod = self._optimized(text, f"k{self._ids}_")
        self.engine.add_module(mod)
        self.engine.finalize_object()
        addr = self.engine.get_function_address(entry)
        return CompiledKernel(kernel, ml, addr, self, text)


_OPTIMIZED_CACHE_SIZE = 256
_optimized_cache = collections.OrderedDict()   # canonical text -> optimized canonical text
_ADDRESS = re.compile(r'inttoptr \(i64 (\d+) to ')
_BIG = re.compile(r'(?<![\w.%@"$-])(-?\d{10,})(?![\w.])')
_STAND_IN_BASE = 0x2B6D << 48           # where the stand-in addresses start
_STAND_IN_STEP = 1 << 40                # between groups of addresses
_CLOSE = 1 << 28                        # addresses this close stay together, as they are
_NAME = "fluxionCANON_"


class _Canonical:
    """A kernel module's text with what changes between compilations of one kernel taken
    out: the names' prefix (one per compilation) and the fields' addresses. Addresses close
    to each other (the fields of a tree) form a group that keeps its relative layout and its
    alignment up to 64 bytes, moved to a stand-in base, so the optimizer sees the same
    layout it would see with the real ones; `restore` maps every stand-in address (and any
    address the optimizer derived within a group) back. `key` is None for a module without
    a prefix to replace."""

    def __init__(self, text, prefix):
        self.prefix = prefix
        if prefix not in text or _NAME in text:
            self.key = None
            return
        addrs = sorted({int(a) for a in _ADDRESS.findall(text)})
        groups = []                      # [first real address, last real address]
        for a in addrs:
            if groups and a - groups[-1][1] < _CLOSE:
                groups[-1][1] = a
            else:
                groups.append([a, a])
        # stand-in base of each group: same address modulo 64, far from the others
        self.groups = [(lo, hi, _STAND_IN_BASE + k * _STAND_IN_STEP + 4096 + lo % 64)
                       for k, (lo, hi) in enumerate(groups)]
        fake = {a: self._to_fake(a) for a in addrs}
        key = _ADDRESS.sub(lambda m: f"inttoptr (i64 {fake[int(m.group(1))]} to ", text)
        self.key = key.replace(prefix, _NAME)

    def _to_fake(self, a):
        for lo, hi, base in self.groups:
            if lo <= a <= hi:
                return base + (a - lo)
        raise AssertionError(a)

    def restore(self, opt):
        """`opt` (an optimized key) with real addresses and names, or None if it holds a
        large number that is no address of a group (a difference of two stand-ins, say)."""
        groups = self.groups
        bad = []

        def back(m):
            v = int(m.group(1))
            if -(1 << 32) < v < (1 << 32):
                return m.group(1)
            for lo, hi, base in groups:
                if base - (1 << 32) <= v <= base + (hi - lo) + (1 << 32):
                    return str(lo + (v - base))
            bad.append(v)
            return m.group(1)

        real = _BIG.sub(back, opt)
        if bad:
            return None
        return real.replace(_NAME, self.prefix)


def _x86(triple):
    return triple.split("-", 1)[0].lower() in ("x86_64", "amd64", "i386", "i686")


_DEFINE = re.compile(r'^(define [^\n]*)(?=\n\{)', re.M)
_FTZ_GROUP = 7001


def flush_to_zero(text, entry):
    """Kernels run with floating-point results that would be denormal flushed to zero, as in
    the original system (which sets MXCSR's FTZ bit on the thread that launches): the module
    with an entry that sets the bit for the launch and restores the caller's MXCSR after it
    (Python code keeps IEEE denormals), and every function marked so that LLVM's constant
    folding flushes as the hardware will. The pool's workers set the bit when they start
    (runtime/thread_pool.py). Returns (text, the new entry's name)."""
    from fluxion.runtime.thread_pool import FTZ_DECL_IR, MXCSR_FTZ
    text = _DEFINE.sub(rf"\1 #{_FTZ_GROUP}", text)
    wrapper = f"""
{FTZ_DECL_IR}
define void @"{entry}_ftz"(ptr %ctx) #{_FTZ_GROUP} {{
  %saved = alloca i32, align 4
  %csr = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %saved)
  %old = load i32, ptr %saved
  %new = or i32 %old, {MXCSR_FTZ}
  store i32 %new, ptr %csr
  call void @llvm.x86.sse.ldmxcsr(ptr %csr)
  call void @"{entry}"(ptr %ctx)
  call void @llvm.x86.sse.ldmxcsr(ptr %saved)
  ret void
}}
attributes #{_FTZ_GROUP} = {{ "denormal-fp-math"="preserve-sign,ieee" "denormal-fp-math-f32"="preserve-sign,ieee" }}
"""
    return text + wrapper, f"{entry}_ftz"


def _target_machine():
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, codemodel="jitdefault")


_launch_lock = threading.Lock()
PRIVATE_ARRAY_BUDGET = 256 << 20   # bytes of per-thread copies of one ndarray
PRIVATE_UNKNOWN_TRIPS = 1 << 16    # elements worth copies when the trip count is unknown


def _exclusive(fn, arg):
    with _launch_lock:
        fn(arg)


class CompiledKernel:
    def __init__(self, kernel, ml, addr, jit, llvm_text):
        self.kernel = kernel
        self.layout = ml.layout
        self.uses_random = ml.uses_random
        self.jit = jit             # keeps the engine holding the machine code alive
        self.llvm_ir = llvm_text
        self.ctx_i = np.zeros(self.layout.size, dtype=np.int64)
        self.ctx_f = self.ctx_i.view(np.float64)
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
        self._arg = ctypes.c_void_p(self.ctx_i.ctypes.data)
        self._err = self.layout.err
        self.errors = kernel.errors
        self.ret_types = kernel.ret_types
        # per-thread copies of ndarrays (passes/scatter.py): (context slot, arg, grad, bytes
        # per element) and the buffer of each, kept at zero between launches
        self.private = [(self.layout.private + 2 * k, arg, grad,
                         arg.desc.dtype.nbytes * int(np.prod(arg.desc.elem_shape, dtype=np.int64)))
                        for k, (arg, grad) in enumerate(getattr(kernel, "private_arrays", ()))]
        self.private_trips = getattr(kernel, "private_trips", ())
        self.private_threads = getattr(kernel, "private_threads", 1)
        self.private_fields = getattr(kernel, "private_fields", ())
        self._buffers = [None] * len(self.private)
        if getattr(kernel, "private_copies", False):
            # per-thread copies of fields (passes/scatter.py) are shared by every kernel that
            # scatters into those fields: launches from several Python threads take turns
            fn = self._fn
            self._fn = lambda arg: _exclusive(fn, arg)

    def _provide_copies(self):
        """Zeroed copies of every private array, or of none (then the kernel adds atomically):
        the compiled loop has one version for each case."""
        from fluxion.ir.evaluate import host_value
        ctx = self.ctx_i
        sizes = []
        for (slot, arg, grad, esize), (begin, end, adds) in zip(self.private, self.private_trips):
            n = esize
            for d in range(arg.desc.ndim):
                n *= int(ctx[arg.shape_slot + d])
            sizes.append(n)
            body = self.kernel.body
            lo, hi = host_value(begin, ctx, self.ctx_f, body), host_value(end, ctx, self.ctx_f, body)
            elements = n // arg.desc.dtype.nbytes
            # a sparse scatter into a big array (an embedding's gradient) keeps its atomics:
            # merging the copies would cost more than it saves
            few = elements > PRIVATE_UNKNOWN_TRIPS if lo is None or hi is None else \
                (hi - lo) * adds < 0.5 * elements
            if few or not ctx[arg.grad_slot if grad else arg.ptr_slot] or not n or \
                    n * self.private_threads > PRIVATE_ARRAY_BUDGET:
                for slot, *_ in self.private:
                    ctx[slot] = 0
                return
        for k, ((slot, *_), n) in enumerate(zip(self.private, sizes)):
            total = n * self.private_threads
            buf = self._buffers[k]
            if buf is None or buf.nbytes < total:
                buf = self._buffers[k] = np.zeros(total // 8 + 8, np.float64)
            ctx[slot] = buf.ctypes.data
            ctx[slot + 1] = n

    def _discard_copies(self):
        """A failed launch stops before its merges: drop the partial sums left in the copies."""
        for buf in self._buffers:
            if buf is not None:
                buf.fill(0)
        for f in self.private_fields:
            f.fill(0)

    def run(self):
        ctx = self.ctx_i
        if self.private:
            self._provide_copies()
        if self.uses_random:
            from fluxion.lang import runtime
            st = runtime.state()
            st.launch_counter += 1
            ctx[self.layout.seed] = (st.config.random_seed * 0x100000001B3 + st.launch_counter) \
                & 0x7FFFFFFFFFFFFFFF
        self._fn(self._arg)
        if ctx[self._err]:
            if self.private or self.private_fields:
                self._discard_copies()
            self._raise()

    def _raise(self):
        code = int(self.ctx_i[self._err]) - 1
        self.ctx_i[self._err] = 0
        raise_kernel_error(self, code)

    def read_returns(self):
        out = []
        base = self.layout.ret0
        for k, dt in enumerate(self.ret_types):
            if dt.is_float:
                v = float(self.ctx_f[base + k])
                out.append(float(np.float32(v)) if dt.bits == 32 else v)
            else:
                v = int(self.ctx_i[base + k])
                if not dt.is_signed:
                    v &= (1 << dt.bits) - 1
                out.append(v)
        return out


def raise_kernel_error(c, code):
    """Raise the error a kernel reported: error `code` of its table, with its arguments."""
    msg, loc, nargs = c.errors[code]
    lay = c.layout
    if nargs == "division by zero":       # (frontend/expr.py's DIVISION_BY_ZERO)
        raise FluxionZeroDivisionError(f"in kernel '{c.kernel.name}':\n"
                                       + format_location(loc, msg))
    if isinstance(nargs, int):
        args = tuple(int(x) for x in c.ctx_i[lay.err_args:lay.err_args + nargs])
        text = msg.format(args if len(args) != 1 else f"({args[0]},)")
        raise FluxionOutOfBoundsError(f"in kernel '{c.kernel.name}':\n" + format_location(loc, text))
    raise FluxionAssertionError(f"in kernel '{c.kernel.name}':\n" + format_location(loc, msg))
