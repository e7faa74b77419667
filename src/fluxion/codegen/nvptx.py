"""How a GPU runs a kernel: one GPU kernel per offloaded task, for the CUDA target and the
emulated one (codegen/targets.py says what differs between those two: the symbols of the
GPU-only leaves, the math functions, the address checks of the emulator).

What differs from the CPU (lower.py's ModuleLowering, whose statement lowering this reuses):
- each task is its own `ptx_kernel`, launched in order on one stream: a serial task on one
  thread, a parallel loop as a grid-stride loop over the whole device;
- values that one task computes and a later task uses (and locals of the serial part that a
  loop reads) live in a small device buffer of 8-byte "temporaries" instead of the entry
  function's registers and stack;
- the context (arguments, shapes, seed) is a kernel parameter passed by value: the launch
  itself carries it to the device, with no copy before each launch; what a kernel writes
  for the host (return values, error code) goes to a small device buffer at the same offsets;
- math functions are libdevice's, or PTX's hardware approximations without it (targets.py).
"""
from __future__ import annotations

import glob
import os
import re

from llvmlite import ir

from fluxion.codegen import targets
from fluxion.codegen.lower import FunctionLowering, I8P, I32, I64, I64P, ModuleLowering, llvm_type
from fluxion.codegen.targets import unsupported as _unsupported
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionCompilationError
from fluxion.ir.ops import Op

BLOCK = 256
# the context's bytes in the parameter space: within the 4 KB every device accepts
MAX_CTX_SLOTS = 480
# pure statements that mean the same in every task (not a thread's or block's own values)
_NOT_REMAT = (S.SharedPtrStmt, S.WorkerIndexStmt)


def kernel_type(ctx_slots):
    """(context by value, output slots, temporaries)."""
    return ir.FunctionType(ir.VoidType(), [ir.ArrayType(I64, ctx_slots).as_pointer(), I64P, I64P])


class CudaModuleLowering(ModuleLowering):
    """A kernel's module for a GPU target: `lower_tasks` makes each task a GPU kernel."""

    def __init__(self, kernel, target, datalayout, fast_math):
        ModuleLowering.__init__(self, kernel, target, datalayout, [], fast_math, prefix="")
        self.tasks_meta = []       # ("serial" | "parallel", function name, block size)
        self.task_sync = {}        # task name -> "barrier" | "shuffle" | None: how its
        #                            lanes wait for each other (the emulator runs them so)
        self.addresses = set()     # the field addresses built into the code

    def place_address(self, place):
        """Fields live in device memory: the same offset in the tree's device buffer."""
        tree = place.snode.tree
        return place.addr - tree.buffer.ctypes.data + tree.device_ptr

    def place_base(self, place):
        """A field's address is global memory: said so (a cast from the global address
        space), the loads and stores through it are `ld.global`/`st.global` instead of
        generic ones that check the space at run time."""
        addr = self.place_address(place)
        self.addresses.add(addr)
        space = self.target.global_addrspace
        return ir.FormattedConstant(
            I8P, f"addrspacecast (i8 addrspace({space})* inttoptr (i64 {addr} to "
                 f"i8 addrspace({space})*) to i8*)")

    def lower_tasks(self):
        """Each task a GPU kernel (real functions are device functions called from them;
        recursion uses the thread's stack, which a deep recursion may need enlarged)."""
        k = self.kernel
        if self.layout.size > MAX_CTX_SLOTS:
            raise FluxionCompilationError(
                f"kernel '{k.name}': its arguments take {self.layout.size} context slots, more "
                f"than the {MAX_CTX_SLOTS} a CUDA launch carries; pass fewer arrays (group "
                f"them into fields or one larger array)")
        self.stmt_by_id = {id(st): st for st in S.walk(k.body)}
        self.temp_slot = {}        # id(stmt) -> temporaries slot
        owner = {}
        for t, (kind, payload) in enumerate(k.tasks):
            stmts = payload if kind == "serial" else [payload]
            for st in stmts:
                owner[id(st)] = t
        # Pure top-level values built from constants and arguments (loop bounds, shapes,
        # their arithmetic) are recomputed by every task that uses them instead of passing
        # through the temporaries: a serial task made only of them is then never launched.
        self.remat = set()
        for kind, payload in k.tasks:
            if kind == "serial":
                for st in payload:
                    if st.PURE and not isinstance(st, _NOT_REMAT) \
                            and all(id(o) in self.remat for o in st.operands()):
                        self.remat.add(id(st))
        for t, (kind, payload) in enumerate(k.tasks):
            stmts = payload if kind == "serial" else [payload]
            for st in stmts:
                for x in S.walk_one(st):
                    for o in x.operands():
                        if id(o) in owner and owner[id(o)] != t and id(o) not in self.temp_slot \
                                and id(o) not in self.remat:
                            self.temp_slot[id(o)] = len(self.temp_slot)
        # a local of the serial part is one memory cell for every task that touches it
        for st in S.walk(k.body):
            if isinstance(st, (S.LocalLoadStmt, S.LocalStoreStmt)) and id(st.alloca) in owner \
                    and id(st.alloca) not in self.temp_slot:
                self.temp_slot[id(st.alloca)] = len(self.temp_slot)
        # an autodiff stack of the serial part that another task pushes to or pops from (a
        # serialized top-level loop's carried locals, restored by the adjoint after a parallel
        # task): its size and arrays live in the temporaries too, one slot per entry
        self.stack_slot = {}       # id(AdStackAllocaStmt) -> first of 1 + capacity * types slots
        count = len(self.temp_slot)
        for t, (kind, payload) in enumerate(k.tasks):
            stmts = payload if kind == "serial" else [payload]
            for st in stmts:
                for x in S.walk_one(st):
                    a = getattr(x, "stack", None)
                    if isinstance(a, S.AdStackAllocaStmt) and id(a) in owner \
                            and owner[id(a)] != t and id(a) not in self.stack_slot:
                        self.stack_slot[id(a)] = count
                        count += 1 + a.capacity[0] * len(a.dtypes)
        self.temp_count = max(1, count)
        for t, (kind, payload) in enumerate(k.tasks):
            if kind == "serial" and all(id(st) in self.remat for st in payload):
                continue
            name = f"{self.prefix}task{t}"
            fn = ir.Function(self.module, kernel_type(self.layout.size), name)
            if self.target.kernel_cc:
                fn.calling_convention = self.target.kernel_cc
            fn.args[0].add_attribute("byval")
            fn.args[0].attributes.align = 8
            fl = CudaFunctionLowering(self, fn, parallel=(kind != "serial"))
            fl.read_only = _read_only_places(payload if kind == "serial" else [payload])
            fl.prologue()
            exact = kind != "serial" and any(isinstance(x, S.BlockSyncStmt)
                                             for x in S.walk(payload.body))
            if kind != "serial":
                _check_block(self, payload)
            if kind == "serial":
                for st in payload:
                    fl.lower(st)
                    fl.export(st)
            elif exact:
                fl.lower_exact_loop(payload)
            else:
                fl.lower_grid_loop(payload)
            fl.finish()
            self.task_sync[name] = fl.sync
            if self.target.lane_entries:
                targets.add_lane_entry(self.module, fn, self.layout.size)
            block = (payload.block_dim or BLOCK) if kind != "serial" else 1
            if kind == "serial":
                self.tasks_meta.append(("serial", name, 1))
            elif exact:
                self.tasks_meta.append(("exact", name, int(block), payload.begin, payload.end))
            else:
                self.tasks_meta.append(("parallel", name, int(block)))

    def function_lowering(self, fn):
        fl = CudaFunctionLowering(self, fn, parallel=True)
        fl.temps = None          # values of other tasks never reach a function's body
        return fl


class CudaFunctionLowering(FunctionLowering):
    def __init__(self, ml, fn, parallel):
        FunctionLowering.__init__(self, ml, fn, ctx=None, parallel=parallel)
        # the target's builders (the emulator's check the addresses made from integers)
        self.b = ml.target.builder(self.b.block)
        self.ab = ml.target.builder(self.alloca_block)
        self.sync = None           # "barrier" | "shuffle" once this function emits one
        self.ctx = self.ab.bitcast(fn.args[0], I64P)
        self.out = fn.args[1]
        self.temps = fn.args[2]
        self.tid = None
        self.read_only = set()     # ids of places this kernel only reads (set by lower)

    def lower_GlobalLoadStmt(self, s):
        v = FunctionLowering.lower_GlobalLoadStmt(self, s)
        if isinstance(s.ptr, S.GlobalPtrStmt) and id(s.ptr.place) in self.read_only:
            # nothing in this kernel writes the field: its loads may take the read-only
            # (non-coherent) cache path, ld.global.nc
            v.set_metadata("invariant.load", self.ml.module.add_metadata([]))
        return v

    def out_base(self):
        return self.out

    def ctx_out(self, index, ty=I64):
        p = self.b.gep(self.out, [ir.Constant(I64, index)])
        return p if ty is I64 else self.b.bitcast(p, ty.as_pointer())

    def temp_ptr(self, slot, ty, b=None):
        b = b or self.b
        p = b.gep(self.temps, [ir.Constant(I64, slot)])
        return p if ty == I64 else b.bitcast(p, ty.as_pointer())

    def prologue(self):
        """Values and locals of other tasks, read from the temporaries."""
        ab = self.ab
        for st_id, slot in self.ml.temp_slot.items():
            st = self.ml.stmt_by_id[st_id]
            if isinstance(st, S.AllocaStmt):
                self.values[st_id] = self.temp_ptr(slot, llvm_type(st.ret_type), ab)
        for st_id, slot in self.ml.stack_slot.items():
            st = self.ml.stmt_by_id[st_id]
            cap, code = st.capacity
            arrays = []
            for k, dt in enumerate(st.dtypes):
                p = ab.gep(self.temps, [ir.Constant(I64, slot + 1 + k * cap)])
                # `cap` 8-byte slots per type: room for `cap` entries of any type
                arrays.append(ab.bitcast(p, ir.ArrayType(llvm_type(dt), cap).as_pointer()))
            self.stacks[st_id] = (self.temp_ptr(slot, I64, ab), arrays, cap, code)

    def import_value(self, st):
        slot = self.ml.temp_slot[id(st)]
        raw = self.ab.load(self.temp_ptr(slot, I64, self.ab))
        self.values[id(st)] = _from_bits(self.ab, raw, st)

    def v(self, stmt):
        if id(stmt) not in self.values:
            if id(stmt) in self.ml.remat:
                # computed in the entry block, which dominates every use in this task
                saved, self.b = self.b, self.ab
                try:
                    self.lower(stmt)
                finally:
                    self.b = saved
            elif id(stmt) in self.ml.temp_slot:
                self.import_value(stmt)
        return FunctionLowering.v(self, stmt)

    def export(self, st):
        """A value a later task needs goes to the temporaries right after it is computed."""
        if id(st) in self.ml.temp_slot and not isinstance(st, S.AllocaStmt) \
                and id(st) in self.values and not self.b.block.is_terminated:
            slot = self.ml.temp_slot[id(st)]
            self.b.store(_to_bits(self.b, self.values[id(st)], st), self.temp_ptr(slot, I64))

    def lower_AdStackAllocaStmt(self, s):
        if id(s) in self.ml.stack_slot:
            self.b.store(ir.Constant(I64, 0), self.stacks[id(s)][0])
            return None
        return FunctionLowering.lower_AdStackAllocaStmt(self, s)

    def lower_AllocaStmt(self, s):
        if id(s) in self.ml.temp_slot:
            return self.values[id(s)]
        return FunctionLowering.lower_AllocaStmt(self, s)

    def rng_stream(self):
        return self.global_tid()

    # -- the GPU-only leaves, as the target emits them ------------------------------------------
    def gpu_call(self, leaf, ret, args=(), b=None):
        """A call of the target's symbol for `leaf` (targets.py: an NVVM intrinsic, vprintf,
        or the emulator's host function)."""
        b = b or self.b
        f = self.ml.declare(self.ml.target.calls[leaf], ir.FunctionType(ret, [a.type for a in args]))
        return b.call(f, list(args))

    def sreg(self, name, b=None):
        """A special register (tid, ctaid, ntid, nctaid: their x), as i64."""
        b = b or self.b
        return b.zext(self.gpu_call(name, I32, b=b), I64)

    def global_tid(self):
        if self.tid is None:
            ab = self.ab
            self.tid = ab.add(ab.mul(self.sreg("ctaid", ab), self.sreg("ntid", ab)),
                              self.sreg("tid", ab))
        return self.tid

    def lower_grid_loop(self, loop):
        """A parallel loop: every thread of the grid takes indices tid, tid + threads, ..."""
        b = self.b
        begin = b.sext(self.v(loop.begin), I64)
        end = b.sext(self.v(loop.end), I64)
        threads = b.mul(self.sreg("nctaid"), self.sreg("ntid"))
        accs = self.open_reductions(loop)
        self.counted_loop(loop, b.add(begin, self.global_tid()), end, stride=threads,
                          unroll=_grid_unroll(loop))
        # every lane reaches this point unless a check can end a thread early
        # (and the block is whole warps: a shuffle from a lane past a partial warp's end
        # reads nothing defined)
        whole_warps = (loop.block_dim or BLOCK) % 32 == 0 and not any(
            isinstance(st, (S.AssertStmt, S.AdStackPushStmt)) for st in S.walk(loop.body))

        def apply(red, ptr, value):
            if whole_warps and red.op == Op.ADD and red.ret_type.bits == 32:
                self.warp_sum_then_atomic(red, ptr, value, red.ret_type)
            else:
                self.atomic_apply(red, ptr, value)

        self.close_reductions(accs, apply)

    def lower_exact_loop(self, loop):
        """A loop whose body synchronizes its block: one index per thread, on exactly enough
        blocks; threads past the end leave at once (they never reach a barrier)."""
        b = self.b
        begin = b.sext(self.v(loop.begin), I64)
        end = b.sext(self.v(loop.end), I64)
        i = b.add(begin, self.global_tid())
        body = self.fn.append_basic_block("thread_body")
        leave = self.fn.append_basic_block("thread_leave")
        b.cbranch(b.icmp_signed("<", i, end), body, leave)
        b.position_at_end(leave)
        b.ret_void()
        b.position_at_end(body)
        self.loop_index[id(loop)] = i
        self.loops.append((leave, leave))
        accs = self.open_reductions(loop)
        self.lower_block(loop.body)
        if not b.block.is_terminated:
            self.close_reductions(accs)
        self.loops.pop()

    def lower_SharedArrayStmt(self, s):
        m = self.ml.module
        count = 1
        for d in s.shape:
            count *= d
        ty = ir.ArrayType(llvm_type(s.dtype), count)
        self.ml.shared_count = getattr(self.ml, "shared_count", 0) + 1
        g = ir.GlobalVariable(m, ty, f"{self.ml.prefix}shared{self.ml.shared_count}",
                              addrspace=self.ml.target.shared_addrspace)
        g.initializer = ir.Constant(ty, ir.Undefined)
        g.linkage = "internal"
        return self.b.addrspacecast(g, ty.as_pointer())

    def lower_SharedPtrStmt(self, s):
        b = self.b
        shape = s.array.shape
        flat = None
        for k, i in enumerate(s.indices):
            # 64-bit index arithmetic from the loop counters (index64): the loop's addresses
            # are then affine in its counter, with no sign extension in the inner loop
            v = self.index64(i)
            flat = v if flat is None else b.add(b.mul(flat, ir.Constant(I64, shape[k]),
                                                      flags=("nsw",)), v, flags=("nsw",))
        return b.gep(self.v(s.array), [ir.Constant(I64, 0), flat])

    def lower_BlockSyncStmt(self, s):
        self.gpu_call("barrier", ir.VoidType())
        self.sync = "barrier"

    def lower_ThreadIndexStmt(self, s):
        b = self.b
        v = {"thread": lambda: self.sreg("tid"), "block": lambda: self.sreg("ctaid"),
             "global": self.global_tid}[s.kind]()
        return b.trunc(v, I32)

    def warp_sum_then_atomic(self, red, ptr, value, dt):
        """Sum the 32 lanes' partial results with shuffles; one atomic per warp instead of
        one per thread (a reduction's atomics on one address are what would serialize)."""
        b = self.b
        leaf = "shfl_down_" + ("f32" if dt.is_float else "i32")
        for offset in (16, 8, 4, 2, 1):
            other = self.gpu_call(leaf, value.type, [ir.Constant(I32, -1), value,
                                                      ir.Constant(I32, offset),
                                                      ir.Constant(I32, 31)])
            value = b.fadd(value, other) if dt.is_float else b.add(value, other)
        self.sync = self.sync or "shuffle"
        lane = b.and_(self.sreg("tid"), ir.Constant(I64, 31))
        first = self.fn.append_basic_block("warp_leader")
        done = self.fn.append_basic_block("warp_done")
        b.cbranch(b.icmp_unsigned("==", lane, ir.Constant(I64, 0)), first, done)
        b.position_at_end(first)
        self.atomic_apply(red, ptr, value)
        b.branch(done)
        b.position_at_end(done)

    def lower_PrintStmt(self, s):
        """Device-side printf (`vprintf`): the text appears when the device synchronizes."""
        b, m = self.b, self.ml.module
        fmt, vals = [], []
        for piece in s.fmt:
            if isinstance(piece, str):
                fmt.append(piece.replace("%", "%%"))
                continue
            k, spec = piece
            dt = s.values[k].ret_type
            v = self.v(s.values[k])
            conv = _printf_conversion(spec, dt)
            if conv is None:
                raise _unsupported(self.ml, s, f"the format spec ':{spec}' has no printf "
                                              f"equivalent on CUDA (use fill ' ' or '0', "
                                              f"'<' or '>', width, precision, one of "
                                              f"d x X o e E f F g G)")
            fmt.append(conv)
            if conv[-1] in "eEfFgG":
                if not dt.is_float:
                    v = b.sitofp(v, ir.DoubleType()) if dt.is_signed else \
                        b.uitofp(v, ir.DoubleType())
                vals.append(b.fpext(v, ir.DoubleType()) if dt.is_float and dt.bits < 64 else v)
            else:
                vals.append(v if dt.bits == 64 else (b.sext(v, I64) if dt.is_signed
                                                     else b.zext(v, I64)))
        data = bytearray("".join(fmt).encode() + b"\0")
        self.ml.print_count = getattr(self.ml, "print_count", 0) + 1
        g = ir.GlobalVariable(m, ir.ArrayType(ir.IntType(8), len(data)),
                              f"{self.ml.prefix}fmt{self.ml.print_count}")
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), data)
        fmt_ptr = b.bitcast(g, ir.IntType(8).as_pointer())
        # every argument takes 8 bytes (doubles and 64-bit integers), so the buffer is dense
        buf = self.alloca(ir.ArrayType(I64, max(1, len(vals))), "printf_args")
        for k, v in enumerate(vals):
            slot = b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, k)])
            b.store(v, b.bitcast(slot, v.type.as_pointer()))
        self.gpu_call("printf", I32, [fmt_ptr, b.bitcast(buf, ir.IntType(8).as_pointer())])


# A thread of a grid-stride loop takes this many indices per round when its body is small
# and loop-free: their loads are independent, so that many are in flight at once (one per
# thread leaves a memory-bound loop waiting on latency, not bandwidth).
GRID_UNROLL = 4
_SMALL_BODY = 48


# what every device since sm_50 accepts: threads per block, static shared memory per block
MAX_BLOCK_DIM = 1024
MAX_SHARED_BYTES = 48 * 1024


def _check_block(ml, loop):
    """A block size or static shared memory a launch cannot have is an error here, naming
    the loop, rather than a driver error at load or launch."""
    if loop.block_dim is not None and not 1 <= loop.block_dim <= MAX_BLOCK_DIM:
        raise _unsupported(ml, loop, f"ti.loop_config(block_dim={loop.block_dim}): a CUDA "
                                     f"block has 1 to {MAX_BLOCK_DIM} threads")
    shared = 0
    for st in S.walk(loop.body):
        if isinstance(st, S.SharedArrayStmt):
            count = 1
            for d in st.shape:
                count *= d
            shared += count * st.dtype.nbytes
    if shared > MAX_SHARED_BYTES:
        raise _unsupported(ml, loop, f"the loop's ti.simt.block.SharedArrays take {shared} "
                                     f"bytes; a CUDA block has {MAX_SHARED_BYTES}")


def _read_only_places(stmts):
    """ids of the field places that statements `stmts` (one GPU kernel) only load from: every
    use of an address of theirs is a GlobalLoadStmt's (any other use may write), in them and
    in the real functions they call (at any depth), which run in the same GPU kernel."""
    loaded, other = set(), set()
    block = S.Block()
    block.stmts = list(stmts)          # (a view for the walk: the statements keep their parent)
    for top in list(stmts) + [f.body for f in S.reachable(block)]:
        for st in (S.walk(top) if isinstance(top, S.Block) else S.walk_one(top)):
            for o in st.operands():
                if isinstance(o, S.GlobalPtrStmt):
                    (loaded if isinstance(st, S.GlobalLoadStmt) else other).add(id(o.place))
    return loaded - other


def _grid_unroll(loop):
    n = 0
    for st in S.walk(loop.body):
        n += 1
        if st.BLOCKS or n > _SMALL_BODY:
            return None
    return GRID_UNROLL


_SPEC = re.compile(r"^(?:(?P<fill>[ 0])?(?P<align>[<>]))?(?P<sign>[+ -]?)(?P<alt>#?)"
                   r"(?P<zero>0?)(?P<width>\d*)(?:\.(?P<prec>\d+))?(?P<type>[dxXoeEfFgG]?)$")


def _printf_conversion(spec, dt):
    """The C conversion for a value of type `dt` printed with Python format spec `spec`
    (None when printf has no equivalent). Without a spec, floats print with enough digits
    to read back the same value (%.9g, %.17g): device printf has no shortest repr."""
    if spec and spec[0] == "%" and spec[-1].isalpha():
        # already a C conversion (frontend/print_format.py); integers are passed as 64 bits
        return spec[:-1] + "ll" + spec[-1] if spec[-1] in "diouxX" else spec
    if not spec:
        if dt.is_float:
            return "%.9g" if dt.bits <= 32 else "%.17g"
        return "%lld" if dt.is_signed else "%llu"
    m = _SPEC.match(spec)
    if m is None:
        return None
    g = m.groupdict()
    kind = g["type"] or ("g" if dt.is_float else "d")
    if dt.is_float and kind in "dxXo":
        return None
    if kind in "dxXo" and g["prec"] is not None:
        return None
    if dt.is_float and not g["type"] and g["prec"] is None:
        g["prec"] = "9" if dt.bits <= 32 else "17"
    flags = ("-" if g["align"] == "<" else "") + (g["sign"] if g["sign"] != "-" else "") + \
        g["alt"] + ("0" if g["zero"] or g["fill"] == "0" else "")
    prec = f".{g['prec']}" if g["prec"] is not None else ""
    if kind in "dxXo":
        size = "ll" + (kind if kind != "d" else ("d" if dt.is_signed else "u"))
        return f"%{flags}{g['width']}{prec}{size}"
    return f"%{flags}{g['width']}{prec}{kind}"


def find_libdevice():
    """CUDA's libdevice bitcode: $FLUXION_LIBDEVICE, the CUDA toolkit, or the pip package
    nvidia-cuda-nvcc; None if none is found."""
    candidates = [os.environ.get("FLUXION_LIBDEVICE")]
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidates.append(os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc"))
    try:
        import nvidia.cuda_nvcc as pkg
        candidates += glob.glob(os.path.join(os.path.dirname(pkg.__file__), "nvvm",
                                             "libdevice", "libdevice*.bc"))
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.exists(c):
            return c
    return None


def _to_bits(b, v, st):
    ty = v.type
    if isinstance(ty, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(ty, ir.IntType):
        return v if ty.width == 64 else (b.sext(v, I64) if st.ret_type.is_signed else b.zext(v, I64))
    width = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)]
    raw = b.bitcast(v, ir.IntType(width))
    return raw if width == 64 else b.zext(raw, I64)


def _from_bits(b, raw, st):
    dt = st.ret_type
    if isinstance(st, (S.GlobalPtrStmt, S.ExternalPtrStmt)):
        return b.inttoptr(raw, llvm_type(dt).as_pointer())
    ty = llvm_type(dt)
    if dt.is_float:
        narrow = raw if dt.bits == 64 else b.trunc(raw, ir.IntType(dt.bits))
        return b.bitcast(narrow, ty)
    return raw if dt.bits == 64 else b.trunc(raw, ty)
