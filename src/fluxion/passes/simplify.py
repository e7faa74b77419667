"""Simplification: the cleanup that the compile driver runs on the frontend's IR before
autodiff (compiler/driver.py).

    forward (locals stored once, to the loads the store dominates) -> store_to_load (within a block)
        -> fold (constants) -> cse (pure statements, loads)
        -> bounds (bounds checks that hold on every run) -> dce

Each step's module states when it must not fire. The order: forwarding turns loads of
locals into the values stored, which exposes constants to folding and equal operands to
CSE; bounds reads the folded index arithmetic; dce last removes what the others replaced
(a removed check's comparisons).

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


def run(kernel, cfg, cpu=True) -> bool:
    """`cpu`: false for a GPU target (bounds moves no check out of a parallel loop there)."""
    changed = False
    if getattr(cfg, "advanced_optimization", True) and \
            not os.environ.get("FLUXION_NO_SIMPLIFY"):
        check = cfg.debug or os.environ.get("FLUXION_VERIFY_IR")
        for name, step in STEPS:
            if step is bounds.run:
                changed |= bounds.run(kernel, cfg, parallel=cpu)
            else:
                changed |= step(kernel, cfg)
            if check:
                verify.run(kernel, cfg, after=f"simplify.{name}")
    changed |= dce.run(kernel, cfg)
    if "after:simplify" in os.environ.get("FLUXION_PRINT_IR", ""):
        print(f"[fluxion] IR of kernel '{kernel.name}' after simplify:")
        print(print_kernel(kernel))
    return changed
