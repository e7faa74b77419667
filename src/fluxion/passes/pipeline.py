"""The pass pipeline, in order. Each step names why it sits where it does."""
from __future__ import annotations

import os

from fluxion.ir.printer import print_kernel
from fluxion.passes import (dce, demote, forward, independent, jam, offload, reduction, rows,
                            scatter, verify)


def _print_stages(cfg):
    env = os.environ.get("FLUXION_PRINT_IR", "")
    return cfg.print_ir, {x.split(":", 1)[1] for x in env.split(",") if x.startswith("after:")}


def run(kernel, cfg, cpu=True, dead_free=False):
    """`cpu`: false for other targets; for the CPU (whose loop passes then run), True or its
    target, whose `vector_registers` (the host's SIMD registers: runtime/cpu_jit.py's CpuJit)
    size unroll-and-jam; passes read no host feature themselves. `dead_free`: the kernel is
    as dce left it (compiler/driver.py says when), so dce runs only after a pass that
    changed it: dce removes all it can in one run, and a second finds nothing."""
    print_all, print_after = _print_stages(cfg)
    check = cfg.debug or os.environ.get("FLUXION_VERIFY_IR")

    def step(name, fn):
        changed = fn(kernel, cfg)
        if check:
            verify.run(kernel, cfg, after=name)
        if print_all or name in print_after:
            print(f"[fluxion] IR of kernel '{kernel.name}' after {name}:")
            print(print_kernel(kernel))
        return changed

    if print_all or getattr(cfg, "print_preprocessed_ir", False):
        print(f"[fluxion] IR of kernel '{kernel.name}' from the frontend:")
        print(print_kernel(kernel))
    # locals stored once (scalar arguments, locals set once in a body) read as their value
    # where the store dominates; before dce, which then drops the locals
    changed = step("forward", forward.run)
    # the frontend folds constants as it builds; what is left unused goes before offloading
    if changed or not dead_free:
        step("dce", dce.run)
    # ti.init(advanced_optimization=False) keeps every atomic an atomic: the passes that
    # trade them for plain or per-thread updates are the ones whose preconditions matter
    optimize = getattr(cfg, "advanced_optimization", True)
    if optimize:
        # after dce, so only the accesses that survive decide; an update of the loop's own
        # element needs no atomic at all, so demotion goes before the privatizations
        # (it leaves nothing dead: the atomic it replaces had no use, and its pointer and
        # value are the operands of the load and store that replace it)
        step("demote", demote.run)
        # after dce, so only the accesses that survive decide whether a reduction is private
        if step("reduction", reduction.run):
            step("dce", dce.run)  # the pointers that reductions replaced
    if cpu and optimize:
        # after reductions, which handle adds into one element better (a register per thread);
        # before offload, which makes the merge loop it adds a task of its own
        step("scatter", scatter.run)
    step("offload", offload.run)
    if cpu and optimize:
        # how the CPU runs each parallel task's iterations: after everything that rewrites
        # loop bodies (a privatization's accumulator, scatter's per-thread copies), as the
        # last word before codegen, which lowers what they decide
        step("rows", rows.run)
        registers = getattr(cpu, "vector_registers", jam.DEFAULT_VECTOR_REGISTERS)
        step("jam", lambda k, c: jam.run(k, c, registers))
        # after scatter, whose per-thread copies make iterations dependent
        step("independent", independent.run)
