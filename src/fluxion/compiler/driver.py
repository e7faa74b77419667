"""The compile driver: one kernel instance from its frontend build to loaded machine code.

    frontend build -> verify -> simplify -> lower struct-fors and ndrange-fors
        -> simplify's cse and bounds on the lowered loops -> autodiff
        -> write checks -> sparse instrumentation
        -> pipeline (optimise, offload) -> argument facts -> scratch buffers -> codegen

`compile_kernel` is the only place that orders these steps; each step is a function of its
own module. `lang/kernel.py` supplies the frontend build (it binds the template signature's
arguments to IR values and runs the transformer) and wraps the result in a launchable
`Instance` (runtime/launch.py); the offline cache (lang/kernel_cache.py) calls the same
`Kernel._compile` on a miss.

Checks: with `ti.init(debug=True)` or FLUXION_VERIFY_IR=1 the IR is verified after the
frontend and after every pass (a failure is a compiler bug, raised as FluxionInternalError).
"""
from __future__ import annotations

import os

from fluxion.autodiff import access_check, forward, primal, reverse, tape_log, validate
from fluxion.ir.modes import VALIDATE, Mode
from fluxion.ir import stmts as S
from fluxion.passes import dce, lower_struct_for, pipeline, simplify, verify, write_checks
from fluxion.runtime import jit, program, scratch


class Target:
    """Where the code runs, as far as the compiler cares: which target-only passes apply and
    whether codegen runs at all (`ir_only`: the driver returns the optimised IR)."""
    __slots__ = ("name", "cpu", "ir_only")

    def __init__(self, name, cpu, ir_only=False):
        self.name, self.cpu, self.ir_only = name, cpu, ir_only

    def __repr__(self):
        return f"<target {self.name}>"


CPU = Target("cpu", cpu=True)
CUDA = Target("cuda", cpu=False)
# the IR that the CUDA lowering takes, without compiling it (`Kernel.ptx`, tools)
CUDA_IR = Target("cuda-ir", cpu=False, ir_only=True)


def current_target():
    """The target of the running `ti.init` (the CUDA emulator is CUDA here)."""
    return CUDA if program.on_cuda() else CPU


class Program:
    """A compiled kernel instance: its machine code (`code`, the JIT's object that `Instance`
    launches) and what the runtime needs to know about it."""
    __slots__ = ("code", "tape_log_capacity", "trees", "build_taint", "outer_reads")

    def __init__(self, code, ir, build):
        self.code = code
        self.tape_log_capacity = getattr(ir, "tape_log_capacity", 0)
        # the SNode trees whose fields it accesses: destroying one drops the instance
        self.trees = {st.place.field._snode.tree for st in S.walk(ir.body)
                      if isinstance(st, S.GlobalPtrStmt)}
        # why the frontend made the code uncacheable, and the globals it read (offline cache)
        self.build_taint = build.taint
        self.outer_reads = build.outer_reads


def compile_kernel(frontend, mode: Mode, target: Target, cfg, instrument_writes):
    """Compile one kernel instance. `frontend()` builds its IR and returns (the IR, the
    frontend's build context); `mode` picks the autodiff transforms; `instrument_writes(ir)`
    is the language's instrumentation of writes into sparse fields (lang/sparse.py: the
    levels of a field's SNode are the language's, so lang/kernel.py passes it). Returns a
    `Program`, or the IR after the pipeline for an `ir_only` target."""
    if target is CPU:
        # LLVM's work is shared with a second process, which loads LLVM meanwhile
        jit.start_compile_worker()
    ir, build = frontend()
    check = bool(cfg.debug or os.environ.get("FLUXION_VERIFY_IR"))
    if check:
        verify.run(ir, cfg, after="frontend")
    # before autodiff: the adjoint and dual of a smaller kernel are smaller, and the Tape's
    # instrumentation must not count the reads behind `x[i] = ...` targets (dce drops them)
    simplify.run(ir, cfg, cpu=target.cpu)
    if check:
        verify.run(ir, cfg, after="simplify")
    # autodiff and the passes after it know range-fors only; the lowered loops' constants
    # and index arithmetic are simplified with the code around them (passes/simplify.py)
    if lower_struct_for.run(ir, cfg):
        if check:
            verify.run(ir, cfg, after="lower_struct_for")
        simplify.run(ir, cfg, cpu=target.cpu, only=simplify.AFTER_LOWERING)
        if check:
            verify.run(ir, cfg, after="simplify of the lowered loops")
    ir = _autodiff(ir, mode, cfg)
    # simplify ended with dce; whether the IR is still as dce left it (nothing since has
    # replaced or added statements), so that the pipeline's dce can be skipped: False is
    # the only answer of instrument_writes that says so (None: it does not tell)
    dead_free = mode is Mode.PRIMAL
    # after autodiff (the adjoint's writes are checked too), before the sparse activation
    # that a write brings with it (an index outside the field activates nothing)
    if getattr(cfg, "check_writes", False):
        # (the checks it adds, and bounds after them, may leave code dce removes)
        if write_checks.run(ir, cfg, cpu=target.cpu):
            dead_free = False
    # after autodiff: the writes of dual kernels activate sparse cells too; an adjoint's
    # writes into a gradient with its primal's cells only where they are active
    if instrument_writes(ir, reverse=mode.reverse) is not False:
        dead_free = False
    # the CPU's loop passes size unroll-and-jam by the JIT's target (its SIMD registers)
    pipeline.run(ir, cfg, cpu=target.cpu and jit.get_jit(), dead_free=dead_free)
    _mark_written_arrays(ir)
    if target.ir_only:
        return ir
    # the per-thread copies and other scratch memory that passes asked for
    scratch.allocate(ir)
    code = jit.get_jit().compile(ir)
    return Program(code, ir, build)


def _autodiff(ir, mode, cfg):
    """The IR of the instance that `mode` asks for (the primal IR itself for PRIMAL)."""
    if mode is Mode.PRIMAL:
        return ir
    if mode.on_tape:
        (access_check if mode is VALIDATE else tape_log).run(ir, cfg)
        return ir
    primal.reject_real_functions(ir, mode)
    if mode.reverse:
        validate.run(ir, cfg)
        ir = reverse.run(ir, cfg)
    if mode.forward:
        if mode.reverse:
            dce.run(ir)      # what the adjoint left unused is not differentiated again
        ir = forward.run(ir, cfg)
    return ir


def _mark_written_arrays(ir):
    """Which ndarray arguments the code writes (the launch checks read-only arrays and
    bumps torch's version counters for them); stores in the real functions it calls count
    too."""
    for st in S.walk_all(ir):
        if isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                isinstance(st.ptr, S.ExternalPtrStmt) and not st.ptr.grad:
            st.ptr.arg.written = True
