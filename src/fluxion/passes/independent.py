"""Mark the parallel loops whose iterations touch memory independently (CPU).

By the language's rule, the iterations of a parallel for run in any order, on any thread, so
they touch memory independently. Codegen tells LLVM so for a marked loop (codegen/loops.py,
mark_parallel: `llvm.loop.parallel_accesses`); without it a loop that gathers through computed
indices is not vectorized, LLVM being unable to bound the gathered range to check it against
the stores at run time.

Requires: top-level parallel loops marked; run after the scatter privatization (whose
statements it looks for), on the CPU only, with advanced_optimization.
Guarantees: `loop.independent` is True for each parallel loop that may be marked; the IR is
not otherwise changed.

Must not fire (the loop stays unmarked):
- when the scatter pass turned atomics into plain adds into per-thread copies: into ndarray
  copies (PrivateAddStmt) or into copy fields indexed by the worker (WorkerIndexStmt). Several
  iterations of one thread may add to one element of its copy, so they are not independent;
- when the body calls a real function: what the callee accesses would not be marked, and an
  unmarked access keeps LLVM from taking the loop as parallel anyway;
- on CUDA (grid-stride loops are not given these marks), or with
  ti.init(advanced_optimization=False) (the pipeline does not run it).
"""
from __future__ import annotations

from fluxion.ir import stmts as S

_DEPENDENT = (S.PrivateAddStmt, S.WorkerIndexStmt, S.FuncCallStmt)


def run(kernel, cfg=None) -> bool:
    changed = False
    for loop in kernel.body.stmts:
        if isinstance(loop, S.RangeForStmt) and loop.parallel and not loop.independent:
            if not any(isinstance(st, _DEPENDENT) for st in S.walk(loop.body)):
                loop.independent = True
                changed = True
    return changed
