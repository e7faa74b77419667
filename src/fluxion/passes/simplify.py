"""Simplification: the cleanup that the compile driver runs on the frontend's IR before
autodiff (compiler/driver.py).

    forward (locals stored once, to the loads the store dominates) -> store_to_load (within a block)
        -> fold (constants) -> cse (pure statements, loads)
        -> bounds (bounds checks that hold on every run) -> dce

Each step's module states when it must not fire. The order: forwarding turns loads of
locals into the values stored, which exposes constants to folding and equal operands to
CSE; bounds reads the folded index arithmetic; dce last removes what the others replaced
(a removed check's comparisons).

The compile driver runs it on the structured loops (struct-fors and ndrange-fors, which its
passes treat as range-fors), then lowers them (passes/lower_struct_for.py), then runs the
steps of `AFTER_LOWERING` again, so that the code is what simplifying the lowered loops
would give. Only those: the lowering adds no locals (nothing for forward or store_to_load)
and its arithmetic on constants is folded as it is built (ir/expr.py), but its constants
and index arithmetic repeat values that the body computes (cse: the earlier statement
stays), and a check of an index may move in front of a range-for (bounds) that it could not
leave as a struct-for's body. Running the whole of simplify again instead gives the same
code (every kernel of the benchmark workloads, the loop cases and 200 random programs,
2026-11-28) at about a third more of simplify's time.

`ti.init(advanced_optimization=False)` keeps the IR as the frontend made it, but for dce,
which always runs (autodiff and the Tape's instrumentation expect the reads that stores'
targets left behind to be gone). FLUXION_NO_SIMPLIFY=1 does the same, for measuring what
simplify buys (it is not part of the offline cache's key: measure with the cache off).
"""
from __future__ import annotations

import os

from fluxion.ir.printer import print_kernel
from fluxion.passes import bounds, cse, dce, fold, forward, store_to_load, verify

STEPS = (("forward", forward.run), ("store_to_load", store_to_load.run), ("fold", fold.run),
         ("cse", cse.run), ("bounds", bounds.run))
AFTER_LOWERING = ("cse", "bounds")


def run(kernel, cfg, cpu=True, only=None) -> bool:
    """`cpu`: false for a GPU target (bounds moves no check out of a parallel loop there).
    `only`: the names of the steps to run (`AFTER_LOWERING`), dce always; all by default."""
    changed = False
    if getattr(cfg, "advanced_optimization", True) and \
            not os.environ.get("FLUXION_NO_SIMPLIFY"):
        check = cfg.debug or os.environ.get("FLUXION_VERIFY_IR")
        for name, step in STEPS:
            if only is not None and name not in only:
                continue
            if step is bounds.run:
                changed |= bounds.run(kernel, cfg, parallel=cpu)
            else:
                changed |= step(kernel, cfg)
            if check:
                verify.run(kernel, cfg, after=f"simplify.{name}")
    changed |= dce.run(kernel, cfg)
    if "after:simplify" in os.environ.get("FLUXION_PRINT_IR", ""):
        what = "simplify" if only is None else "simplify of the lowered loops"
        print(f"[fluxion] IR of kernel '{kernel.name}' after {what}:")
        print(print_kernel(kernel))
    return changed
