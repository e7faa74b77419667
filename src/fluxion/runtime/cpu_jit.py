"""The CPU target: machine code linked into the process (by fluxion's object loader, or by
MCJIT where that does not serve: `link`), the runtime symbols kernels call
(`fluxion_parallel_for`, `fluxion_print`), and the compiled kernel's launch. Compiling (the
lowering, LLVM's O3 pipeline, the object file) is runtime/cpu_build.py's, and every other use
of LLVM runtime/mcjit.py's, both loaded when first needed: a process whose machine code all
comes from the offline cache does not load LLVM."""
from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
from typing import TYPE_CHECKING

import numpy as np

from fluxion.ir.assert_message import assert_text
from fluxion.ir.errors import (FluxionAssertionError, FluxionInternalError,
                                     FluxionOutOfBoundsError, FluxionZeroDivisionError,
                                     format_location)
from fluxion.ir.evaluate import eval_host_expr
from fluxion.runtime import libcalls, object_blobs, object_loader, offline_cache, program
from fluxion.runtime.jit import jit_module
from fluxion.runtime.thread_pool import ThreadPool, pool_ir

if TYPE_CHECKING:
    from fluxion.runtime import cpu_build, mcjit  # noqa: F401
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
            # a C conversion (`%.2f`: frontend/print_format.py) or a Python format spec
            out.append(spec % v if spec[0] == "%" else format(v, spec))
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
        self.cfg = cfg
        self._tm = None
        self._vector_registers = None
        # the names kernels call that fluxion's runtime defines (the dispatcher, below)
        self._symbols = {"fluxion_print": ctypes.cast(_print_cb, ctypes.c_void_p).value}
        cache = _runtime_cache(cfg)
        self.host = offline_cache.host_description()
        self.triple = self.host["process_triple"]
        self.datalayout = self.host["datalayout"]
        self.pool = None
        self._dispatcher = None
        nthreads = cfg.cpu_max_num_threads
        if nthreads > 1:
            text = pool_ir(self.host["triple"], self.datalayout)
            self.pool = ThreadPool(runtime_code(text, cache, "the thread pool"), nthreads)
            self._symbols["fluxion_parallel_for"] = self.pool.parallel_for_addr
        else:
            text = _serial_parallel_for_ir(self.host["triple"], self.datalayout)
            self._dispatcher = runtime_code(text, cache, "the serial dispatcher")
            self._symbols["fluxion_parallel_for"] = \
                self._dispatcher.address("fluxion_parallel_for")

    @property
    def tm(self):
        """The target machine of the optimizer and of `emit_object`, made by the first compile:
        a process whose kernels all come from the offline cache only links objects, and never
        makes one (nor loads LLVM)."""
        if self._tm is None:
            self._tm = jit_module("mcjit").target_machine()
        return self._tm

    @property
    def vector_registers(self):
        """SIMD registers of the host, which the CPU loop passes size unroll-and-jam by."""
        if self._vector_registers is None:
            self._vector_registers = jit_module("mcjit").vector_registers()
        return self._vector_registers

    def shutdown(self):
        if self.pool is not None:
            self.pool.stop()
            self.pool = None

    def build(self, kernel) -> cpu_build.Artifact:
        """The Artifact of a kernel's IR (cpu_build.build)."""
        return jit_module("cpu_build").build(self, kernel)

    def load(self, obj, meta, bindings, llvm_ir=None):
        """A CompiledKernel running the machine code `obj` (from `build`, maybe in another
        process) with the tree symbols bound to `bindings` {symbol: address}."""
        symbols = dict(self._symbols)
        symbols.update(bindings)
        code = link(object_blobs.split_objects(obj), symbols, meta.name)
        addr = code.address(meta.entry)
        if not addr:
            raise FluxionInternalError(f"kernel '{meta.name}': no function {meta.entry} in its "
                                       f"machine code")
        return CompiledKernel(meta, addr, self, code, llvm_ir)

    def compile(self, kernel):
        art = self.build(kernel)
        c = self.load(art.obj, art.meta, art.bindings(), art.llvm_ir)
        c.artifact = art
        return c


def linker():
    """How machine code is linked into this process: "flat" (runtime/object_loader.py, no
    LLVM) where it can be, else "mcjit"; FLUXION_OBJECT_LOADER=mcjit chooses MCJIT, =strict
    the flat loader with no fallback (an object it does not link is an error: for tests)."""
    choice = os.environ.get("FLUXION_OBJECT_LOADER", "")
    if choice == "mcjit" or not object_loader.available():
        return "mcjit"
    return "strict" if choice == "strict" else "flat"


def link(objects, symbols, what):
    """The objects `objects` linked into this process, calling `symbols` {name: address}
    and the process's functions: an object_loader.Image, or an mcjit.Engine where the flat
    loader does not link them. `what` names them in errors."""
    how = linker()
    if how != "mcjit":
        def resolve(name):
            addr = symbols.get(name)
            return addr if addr is not None else libcalls.address(name)
        try:
            return object_loader.Image(objects, resolve, what)
        except object_loader.Unsupported as e:
            if how == "strict":
                raise FluxionInternalError(f"{what}: the object loader does not link its "
                                           f"machine code: {e}") from None
    return jit_module("mcjit").Engine(objects, symbols, what)


def runtime_code(text, cache=None, what="runtime code"):
    """The runtime IR module `text` (the thread pool, the serial dispatcher) compiled (or
    found in `cache`, _runtime_cache's (get, put)) and linked."""
    obj = cache[0](text) if cache else _runtime_objects.get(text)
    if obj is None:
        obj = jit_module("mcjit").emit_object(text)
        if cache:
            cache[1](text, obj)
        else:
            _runtime_objects[text] = obj
    return link([obj], {}, what)


def session_runtime_code(text, what):
    """runtime_code of `text` through the current session's runtime cache (the offline
    cache's runtime file when that is on): for runtime IR other than the pool's, made on
    first need (lang/sparse_sweep.py's native deactivate_all)."""
    return runtime_code(text, _runtime_cache(program.config()), what)


# the runtime's machine code by its IR text, once made in this process: every ti.init makes a
# new pool, and compiling it takes about 45 ms (LLVM's code generator), which a program or test
# that cycles ti.init/ti.reset without the offline cache paid each time
_runtime_objects: dict[str, bytes] = {}


def _runtime_cache(cfg):
    """(get, put) of the runtime's machine code: made once a process, and kept in the offline
    cache (its runtime file) when that is on, so that a process does not compile the pool
    when an earlier one did."""
    store = offline_cache.store_for(cfg) if offline_cache.enabled(cfg) else None

    def name(ir_text):
        h = hashlib.blake2b(digest_size=20)
        h.update(offline_cache.environment().encode())
        h.update(ir_text.encode())
        return "rt-" + h.hexdigest()

    def get(ir_text):
        obj = _runtime_objects.get(ir_text)
        if obj is None and store is not None:
            obj = store.get_runtime(name(ir_text))
            if obj is not None:
                _runtime_objects[ir_text] = obj
        return obj

    def put(ir_text, obj):
        _runtime_objects[ir_text] = obj
        if store is not None:
            store.put_runtime(name(ir_text), obj)

    return get, put


_launch_lock = threading.Lock()
PRIVATE_ARRAY_BUDGET = 256 << 20   # bytes of per-thread copies of one ndarray
PRIVATE_UNKNOWN_TRIPS = 1 << 16    # elements worth copies when the trip count is unknown


def _exclusive(fn, arg):
    with _launch_lock:
        fn(arg)


class CompiledKernel:
    def __init__(self, meta, addr, jit, engine=None, llvm_text=None):
        self.kernel = meta         # (its name names the kernel in errors)
        self.meta = meta
        self.layout = meta.layout
        self.uses_random = meta.uses_random
        self.jit = jit             # keeps the engine holding the machine code alive
        self.engine = engine       # an engine of its own (see CpuJit.load), or None
        self.llvm_ir = llvm_text   # (the text before optimization; None when loaded)
        self.artifact = None
        self.ctx_i = np.zeros(self.layout.size, dtype=np.int64)
        self.ctx_f = self.ctx_i.view(np.float64)
        self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
        self._arg = ctypes.c_void_p(self.ctx_i.ctypes.data)
        self._err = self.layout.err
        self.errors = meta.errors
        self.ret_types = meta.ret_types
        if meta.prints:
            with _print_lock:
                self.ctx_i[self.layout.print_base] = len(_print_tables)
                _print_tables.extend(meta.prints)
        # per-thread copies of ndarrays (passes/scatter.py): (context slot, arg, grad, bytes
        # per element) and the buffer of each, kept at zero between launches
        self.private = [(self.layout.private + 2 * k, arg, grad,
                         arg.desc.dtype.nbytes * int(np.prod(arg.desc.elem_shape, dtype=np.int64)))
                        for k, (arg, grad) in enumerate(meta.private_arrays)]
        self.private_trips = meta.private_trips
        self.private_threads = meta.private_threads
        self.private_fields = meta.private_fields
        self._buffers = [None] * len(self.private)
        if meta.private_copies:
            # per-thread copies of fields (passes/scatter.py) are shared by every kernel that
            # scatters into those fields: launches from several Python threads take turns
            fn = self._fn
            self._fn = lambda arg: _exclusive(fn, arg)

    def _provide_copies(self):
        """Zeroed copies of every private array, or of none (then the kernel adds atomically):
        the compiled loop has one version for each case."""
        ctx = self.ctx_i
        sizes = []
        for (slot, arg, grad, esize), (begin, end, adds) in zip(self.private, self.private_trips):
            n = esize
            for d in range(arg.desc.ndim):
                n *= int(ctx[arg.shape_slot + d])
            sizes.append(n)
            lo, hi = eval_host_expr(begin, ctx, self.ctx_f), eval_host_expr(end, ctx, self.ctx_f)
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
            st = program.state()
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
    if nargs == "division by zero":       # (ir/expr.py's DIVISION_BY_ZERO)
        raise FluxionZeroDivisionError(f"in kernel '{c.kernel.name}':\n"
                                       + format_location(loc, msg))
    if isinstance(nargs, int):
        args = tuple(int(x) for x in c.ctx_i[lay.err_args:lay.err_args + nargs])
        text = msg.format(args if len(args) != 1 else f"({args[0]},)")
        raise FluxionOutOfBoundsError(f"in kernel '{c.kernel.name}':\n" + format_location(loc, text))
    if isinstance(nargs, (tuple, list)) and nargs and nargs[0] == "assert":  # shown values
        # (a list once read back from the offline cache's JSON)
        words = c.ctx_i[lay.err_args:lay.err_args + len(nargs[1])]
        msg = assert_text(msg, nargs[1], words)
    raise FluxionAssertionError(f"in kernel '{c.kernel.name}':\n" + format_location(loc, msg))
