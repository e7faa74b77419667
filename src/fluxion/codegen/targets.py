"""The targets codegen emits code for, as data: the CPU, a CUDA GPU, and the CUDA emulator.

One lowering (`lower.py`, with `nvptx.py` for the way a GPU runs a kernel's tasks) serves all
three; what differs is described here:
- the triple and the target machine (its data layout), and the address spaces of fields and
  of block-shared arrays;
- which function implements each math op: an LLVM intrinsic, the C library, CUDA's libdevice,
  or a hardware approximation (the tables `*_MATH` below);
- on a GPU target, the symbol each GPU-only leaf is emitted as: the special registers, the
  block barrier, the warp shuffle, printf; and the calling convention of a task's kernel;
- the denormal floats that constants are flushed to zero in (the CPU's kernels run with FTZ);
  on CUDA, whether f32 arithmetic flushes denormals (the FTZ forms of PTX's instructions, as
  the original system's CUDA backend; PTX has no FTZ form for f64, so f64 results keep their
  denormals on a GPU);
- the LLVM fast-math flags of float arithmetic under `fast_math=True`. The CPU takes them all
  (reassociation vectorizes float reductions). A GPU keeps only fused multiply-adds and signed
  zeros: with `arcp`/`afn` NVPTX divides with div.approx (x / x misses 1 by an ulp; its error
  grows for divisors above 2**126), and with `reassoc` (division already exact) MPM's
  `Jp *= sig / new_sig` with new_sig == sig still drifted from 1 by 1e-5 in 1,500 steps on an
  H100 (the product regrouped around the quotient, it seems); a GPU has no vector unit for
  reassociation to feed.

The emulated CUDA target is the CUDA target run on the host (runtime/cuda_emulator.py): the
same lowering, with the GPU-only leaves emitted as calls of the emulator's host functions
(`emu_*`), libdevice's functions as the host's libm, and two hooks: every address a kernel
makes from an integer at run time goes through `emu_device_ptr`, which checks it against the
emulated device's memory (`DeviceAddressBuilder`), and each task gets a host entry that passes
the context by value as a launch does (`add_lane_entry`).
"""
from __future__ import annotations

from llvmlite import ir

from fluxion._llvm import llvm
from fluxion.codegen.llvm_types import I8P, I64, I64P, VOID
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionCompilationError, format_location
from fluxion.ir.ops import Op

CUDA_TRIPLE = "nvptx64-nvidia-cuda"


def _float_type(dt):
    return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dt.bits]


# --- math ops ---------------------------------------------------------------------------------
# A table maps each math op (an ir.ops.Op) to a rule, how the target computes it: (kind, what)
#   ("intrinsic", "llvm.sin")   LLVM's intrinsic, overloaded on the value's type
#   ("rsqrt", None)             1 / llvm.sqrt
#   ("libm", "tan")             the C library's `tan` (f64) or `tanf` (f32); f16 through f32
#   ("libdevice", "tan")        libdevice's `__nv_tan` / `__nv_tanf`; f16 through f32
#   ("host_rsqrt", None)        libdevice's rsqrt on the host (libm has none): 1 / llvm.sqrt,
#                               f16 through f32
#   ("approx", recipe)          recipe(fl, *args) from the GPU's hardware approximations
#                               (fast, f32 only), emitted through Target.approx
#   ("missing", message)        an error naming the op, `message` formatted with op and dt
_LLVM = {"sqrt": "llvm.sqrt", "floor": "llvm.floor", "ceil": "llvm.ceil", "round": "llvm.round",
         "abs": "llvm.fabs"}


def _ops(table):
    return {Op(name): rule for name, rule in table.items()}


CPU_MATH = _ops({
    **{op: ("intrinsic", name) for op, name in _LLVM.items()},
    **{op: ("intrinsic", "llvm." + op) for op in ("sin", "cos", "exp", "log", "pow")},
    "rsqrt": ("rsqrt", None),
    **{op: ("libm", op) for op in ("tan", "asin", "acos", "atan", "tanh", "atan2")},
})

# with libdevice (accurate, linked into the PTX by cuda_jit.kernel_to_ptx)
CUDA_MATH = _ops({
    **{op: ("intrinsic", name) for op, name in _LLVM.items()},
    **{op: ("libdevice", op) for op in ("sin", "cos", "tan", "asin", "acos", "atan", "tanh",
                                         "exp", "log", "rsqrt", "pow", "atan2")},
})

_LOG2E, _LN2 = 1.4426950408889634, 0.6931471805599453


def _f(x):
    return ir.Constant(ir.FloatType(), x)


def _tanh(fl, x):
    # tanh x = 1 - 2 / (exp(2x) + 1): saturates cleanly at both ends
    e = approx(fl, "ex2", fl.b.fmul(x, _f(2 * _LOG2E)))
    return fl.b.fsub(_f(1.0), fl.b.fdiv(_f(2.0), fl.b.fadd(e, _f(1.0))))


_NO_LIBDEVICE = ("missing", "`{op}` needs CUDA's libdevice, which was not found (set "
                            "FLUXION_LIBDEVICE to libdevice.10.bc)")
# without libdevice: the hardware approximations
CUDA_MATH_APPROX = _ops({
    **{op: ("intrinsic", name) for op, name in _LLVM.items()},
    "sin": ("approx", lambda fl, x: approx(fl, "sin", x)),
    "cos": ("approx", lambda fl, x: approx(fl, "cos", x)),
    "tan": ("approx", lambda fl, x: fl.b.fdiv(approx(fl, "sin", x), approx(fl, "cos", x))),
    "exp": ("approx", lambda fl, x: approx(fl, "ex2", fl.b.fmul(x, _f(_LOG2E)))),
    "log": ("approx", lambda fl, x: fl.b.fmul(approx(fl, "lg2", x), _f(_LN2))),
    "tanh": ("approx", _tanh),
    "rsqrt": ("approx", lambda fl, x: approx(fl, "rsqrt", x)),
    "pow": ("approx", lambda fl, x, y: approx(fl, "ex2", fl.b.fmul(y, approx(fl, "lg2", x)))),
    "asin": _NO_LIBDEVICE, "acos": _NO_LIBDEVICE, "atan": _NO_LIBDEVICE,
    "atan2": ("missing", "`{op}` on {dt} is not available on CUDA yet"),
})


def _on_host(table):
    """A GPU math table for the emulator: libdevice's functions are the host libm's (rsqrt,
    which libm lacks, is 1 / sqrt)."""
    out = {}
    for op, (kind, what) in table.items():
        if kind == "libdevice":
            out[op] = ("host_rsqrt", None) if what == "rsqrt" else ("libm", what)
        else:
            out[op] = (kind, what)
    return out


MATH_OPS = frozenset(CPU_MATH)

# --- the GPU-only leaves ------------------------------------------------------------------------
_CUDA_CALLS = {
    "tid": "llvm.nvvm.read.ptx.sreg.tid.x", "ctaid": "llvm.nvvm.read.ptx.sreg.ctaid.x",
    "ntid": "llvm.nvvm.read.ptx.sreg.ntid.x", "nctaid": "llvm.nvvm.read.ptx.sreg.nctaid.x",
    "barrier": "llvm.nvvm.barrier0",
    "shfl_down_i32": "llvm.nvvm.shfl.sync.down.i32",
    "shfl_down_f32": "llvm.nvvm.shfl.sync.down.f32",
    "printf": "vprintf",
}
_CUDA_APPROX = {"sin": "llvm.nvvm.sin.approx.f", "cos": "llvm.nvvm.cos.approx.f",
                "ex2": "llvm.nvvm.ex2.approx.f", "lg2": "llvm.nvvm.lg2.approx.f",
                "rsqrt": "llvm.nvvm.rsqrt.approx.f"}
# the emulator's host functions (runtime/cuda_emulator.py defines them)
_EMULATED_CALLS = {
    "tid": "emu_sreg_tid", "ctaid": "emu_sreg_ctaid", "ntid": "emu_sreg_ntid",
    "nctaid": "emu_sreg_nctaid", "barrier": "emu_barrier",
    "shfl_down_i32": "emu_shfl_down_i32", "shfl_down_f32": "emu_shfl_down_f32",
    "printf": "emu_vprintf",
}
DEVICE_PTR = "emu_device_ptr"
# the approximations on the host: libm's accurate functions (None: 1 / sqrt)
_EMULATED_APPROX = {"sin": "llvm.sin.f32", "cos": "llvm.cos.f32", "ex2": "llvm.exp2.f32",
                    "lg2": "llvm.log2.f32", "rsqrt": None}


ALL_FAST_MATH = ("reassoc", "nsz", "arcp", "contract", "afn")
GPU_FAST_MATH = ("nsz", "contract")


class Target:
    """One target, as data (see the module's docstring); `gpu`: a kernel's tasks are GPU
    kernels (nvptx.CudaModuleLowering), else one entry function (lower.ModuleLowering)."""

    def __init__(self, name, *, gpu, triple, math, math_without_libdevice=None,
                 flushed_float_bits=(), kernel_cc=None, global_addrspace=0, shared_addrspace=0,
                 calls=None, approx=None, libdevice_prefix=None, checks_addresses=False,
                 lane_entries=False, ftz_f32=False, fast_math_flags=ALL_FAST_MATH):
        self.name = name
        self.gpu = gpu
        self._triple = triple                     # None: the host's
        self.math = math
        self.math_without_libdevice = math_without_libdevice or math
        self.flushed_float_bits = flushed_float_bits
        self.kernel_cc = kernel_cc                # a task's kernel's calling convention
        self.global_addrspace = global_addrspace  # of fields' addresses
        self.shared_addrspace = shared_addrspace  # of ti.simt.block.SharedArray
        self.calls = calls or {}                  # GPU leaf -> the symbol it is emitted as
        self.approx = approx or {}                # hardware approximation -> symbol
        self.libdevice_prefix = libdevice_prefix  # libdevice's names: prefix + libm's name
        self.checks_addresses = checks_addresses  # run-time addresses go through DEVICE_PTR
        self.lane_entries = lane_entries          # each task gets a host entry (emu_lane_*)
        self.ftz_f32 = ftz_f32                    # kernels' f32 arithmetic flushes denormals
        self.fast_math_flags = fast_math_flags    # float ops' flags under fast_math=True

    def __repr__(self):
        return f"<target {self.name}>"

    @property
    def triple(self):
        return self._triple or llvm.get_process_triple()

    def machine(self, sm=90):
        """An LLVM target machine for this target (a fresh one: an execution engine takes
        ownership of the machine it is given)."""
        if self._triple == CUDA_TRIPLE:
            return nvptx_machine(sm)
        return host_machine()

    def math_table(self, have_libdevice):
        return self.math if have_libdevice else self.math_without_libdevice

    def builder(self, block):
        """The IRBuilder a task's or function's code is emitted with."""
        return DeviceAddressBuilder(block) if self.checks_addresses else ir.IRBuilder(block)

    def host_functions(self):
        """The C library functions this target's kernels may call (the emulator accepts
        these and no other outside function)."""
        names = set()
        for table in (self.math, self.math_without_libdevice):
            for kind, what in table.values():
                if kind == "libm":
                    names.update((what, what + "f"))
        return names


CPU = Target("cpu", gpu=False, triple=None, math=CPU_MATH, flushed_float_bits=(32, 64))
CUDA = Target("cuda", gpu=True, triple=CUDA_TRIPLE, math=CUDA_MATH,
              math_without_libdevice=CUDA_MATH_APPROX, kernel_cc="ptx_kernel",
              global_addrspace=1, shared_addrspace=3, calls=_CUDA_CALLS, approx=_CUDA_APPROX,
              libdevice_prefix="__nv_", flushed_float_bits=(32, 64), ftz_f32=True,
              fast_math_flags=GPU_FAST_MATH)
# the address spaces stay CUDA's: on the host they are plain memory, and the lowering is the
# same code path for both
EMULATED_CUDA = Target("cuda-emulated", gpu=True, triple=None, math=_on_host(CUDA_MATH),
                       math_without_libdevice=_on_host(CUDA_MATH_APPROX), global_addrspace=1,
                       shared_addrspace=3, calls=_EMULATED_CALLS, approx=_EMULATED_APPROX,
                       checks_addresses=True, lane_entries=True, flushed_float_bits=(32, 64),
                       fast_math_flags=GPU_FAST_MATH)


_FTZ_F32 = '"denormal-fp-math-f32"="preserve-sign,preserve-sign"'


def mark_float_modes(module, target):
    """Every function `module` defines flushes f32 denormals where `target` does: NVPTX then
    emits the .ftz forms, and libdevice's functions (linked later) pick their FTZ paths through
    the module flag nvvm-reflect-ftz. llvmlite knows no string attributes, so this one is
    added to the function's own set of known names first."""
    if not target.ftz_f32:
        return
    for fn in module.functions:
        if fn.is_declaration:
            continue
        fn.attributes._known = fn.attributes._known | {_FTZ_F32}
        fn.attributes.add(_FTZ_F32)
    i32 = ir.IntType(32)
    # 4: the flag's behaviour "override", as nvcc sets it
    module.add_named_metadata("llvm.module.flags",
                              module.add_metadata([i32(4), "nvvm-reflect-ftz", i32(1)]))


def host_machine():
    """The host's CPU, with all its features (the CPU backend's, and the emulator's; both
    initialize LLVM's native target first)."""
    opts = host_machine_options()
    return llvm.Target.from_triple(opts.pop("triple")).create_target_machine(**opts)


def host_machine_options():
    """What makes `host_machine`, as plain data (the compile worker makes the same machine in
    its process: runtime/compile_worker.py)."""
    name, features = host_cpu()
    return dict(triple=llvm.get_default_triple(), cpu=name, features=features, opt=3,
                codemodel="jitdefault")


def host_cpu():
    """(name, features) of the host's CPU as LLVM sees it. Asked once per process: reading
    the features parses a long string into a dict, about half a millisecond, and a process
    starts with three machines (its engine, the pool's, the optimizer's)."""
    if not _host_cpu:
        _host_cpu.append((llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()))
    return _host_cpu[0]


_host_cpu = []


_nvptx_ready = []


def nvptx_machine(sm):
    if not _nvptx_ready:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _nvptx_ready.append(True)
    target = llvm.Target.from_triple(CUDA_TRIPLE)
    # PTX ISA 7.8 is understood by every driver that supports sm_90 and older targets
    return target.create_target_machine(cpu=f"sm_{sm}", features="+ptx78", opt=3)


# --- emitting math ops --------------------------------------------------------------------------
def emit_math(fl, op, dt, args, stmt=None):
    """`op` of `args` (LLVM values of type `dt`) by the rule of the module's math table.
    `stmt` locates the error when the target cannot compute it."""
    ml, b = fl.ml, fl.b
    kind, what = ml.target.math_table(ml.have_libdevice)[op]
    ty = _float_type(dt)
    if kind == "intrinsic":
        return b.call(ml.intrinsic(what, ty, len(args)), args)
    if kind == "rsqrt":
        return _recip_sqrt(fl, args[0])
    if kind in ("libm", "libdevice", "host_rsqrt"):
        if dt.bits == 16:
            args = [b.fpext(a, ir.FloatType()) for a in args]
            return b.fptrunc(emit_math(fl, op, T.f32, args, stmt), ir.HalfType())
        if kind == "host_rsqrt":
            return _recip_sqrt(fl, args[0])
        name = what + ("f" if dt.bits == 32 else "")
        if kind == "libdevice":
            name = ml.target.libdevice_prefix + name
            ml.uses_libdevice = True
        return b.call(ml.declare(name, ir.FunctionType(ty, [ty] * len(args))), args)
    if kind == "approx":
        if dt.bits != 32:
            raise unsupported(ml, stmt, f"`{op}` on {dt} is not available on CUDA yet "
                                        f"(f32 only)")
        return what(fl, *args)
    raise unsupported(ml, stmt, what.format(op=op, dt=dt))


def approx(fl, leaf, x):
    """A hardware approximation of the GPU (f32), as the target emits it."""
    name = fl.ml.target.approx[leaf]
    if name is None:
        return _recip_sqrt(fl, x)
    return fl.b.call(fl.ml.declare(name, ir.FunctionType(x.type, [x.type])), [x])


def _recip_sqrt(fl, x):
    return fl.b.fdiv(ir.Constant(x.type, 1.0), fl.b.call(fl.ml.intrinsic("llvm.sqrt", x.type),
                                                         [x]))


def unsupported(ml, s, msg):
    """The error for a statement `s` the target cannot compile (located when `s` is given)."""
    if s is None:
        return FluxionCompilationError(f"in kernel '{ml.kernel.name}': {msg}")
    err = FluxionCompilationError(f"in kernel '{ml.kernel.name}':\n" + format_location(s.loc, msg))
    err._located = True
    return err


# --- the emulated target's hooks ----------------------------------------------------------------
class DeviceAddressBuilder(ir.IRBuilder):
    """An IRBuilder whose addresses made from integers at run time (a context slot, a value
    through the temporaries, a bit-packed field's word) are checked against the emulated
    device's memory: `inttoptr` becomes a call of the emulator's `emu_device_ptr`, which
    notes the first address outside it for the launch's error (a host address reaching a
    kernel is an illegal address on a GPU)."""

    def inttoptr(self, value, typ, name=""):
        if isinstance(value, ir.Constant):
            return ir.IRBuilder.inttoptr(self, value, typ, name)
        module = self.block.parent.module
        f = module.globals.get(DEVICE_PTR)
        if f is None:
            f = ir.Function(module, ir.FunctionType(I8P, [I64]), DEVICE_PTR)
            # no side effect LLVM must keep: a check whose address is not used may go, one in
            # a loop may be hoisted (llvmlite knows no `willreturn`: added as a plain word)
            f.attributes.add("nounwind")
            f.attributes.add("readnone")
            set.add(f.attributes, "willreturn")
        return self.bitcast(self.call(f, [value]), typ, name)


LANE_PREFIX = "emu_lane_"


def add_lane_entry(module, task, slots):
    """`emu_lane_<task>(ctx, out, temps)`: the task with its context passed by value (each lane
    gets its copy, as each GPU thread reads the launch's parameters), for the emulator's
    launchers, which call every task through the same plain-pointer signature."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I64P, I64P, I64P]), LANE_PREFIX + task.name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = b.bitcast(fn.args[0], ir.ArrayType(I64, slots).as_pointer())
    b.call(task, [ctx, fn.args[1], fn.args[2]], arg_attrs={0: ("byval",)})
    b.ret_void()
    return fn
