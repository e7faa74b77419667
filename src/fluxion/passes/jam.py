"""Unroll-and-jam of parallel loops whose body is a serial reduction (CPU).

A parallel loop whose body is `pre; for j in range(...): acc += f(load...); post` (a
convolution's tap loop, an n-body force sum) runs each iteration's inner loop on its own: a
load that does not depend on the iteration (a filter tap, another body's position) is made
once per iteration. Fusing the inner loops of `jam` consecutive iterations into one (codegen/
loops.py, lower_jammed) makes that load once for all of them, and each loaded value feeds
`jam` accumulators. Parallel iterations may interleave in any order, so the fusion is legal
whenever the fused loops have the same trip count (codegen checks it at run time and runs
them one after another otherwise).

Requires: top-level parallel loops marked; run after the passes that rewrite loop bodies, on
the CPU only, with advanced_optimization. `vector_registers` is the target's number of SIMD
registers, given as data by the caller (the CPU target reads it from the host's features).
Guarantees: `loop.jam` is the number of iterations to fuse (4 or 8) for a parallel loop whose
body, at its top level, is straight-line code around exactly one RangeForStmt (and no
WhileStmt) that loads memory and stores none; codegen takes that loop as the inner one and
the statements before and after it as `pre` and `post`. The IR is not otherwise changed.

Must not fire:
- when the inner loop stores or updates memory atomically: the fused loops would interleave
  their side effects in another order than any schedule of the iterations;
- when the inner loop loads nothing: there is no load to share;
- when the body has more than one loop (or a while loop, anywhere in it);
- when the body has a break, continue, return, print, random number, autodiff stack, Tape log,
  block-level (SIMT) statement or a call of a real function: a call may store anywhere and its
  result is not a load the fused iterations could share;
- on CUDA, or with ti.init(advanced_optimization=False) (the pipeline does not run it).
"""
from __future__ import annotations

from fluxion.ir import stmts as S

# a target with this many SIMD registers when none is given (AVX2, NEON)
DEFAULT_VECTOR_REGISTERS = 16

# statements whose presence anywhere in the parallel loop's body rules the fusion out
_NO_JAM = (S.WhileStmt, S.BreakStmt, S.ContinueStmt, S.ReturnStmt, S.PrintStmt, S.RandStmt,
           S.AdStackAllocaStmt, S.TapeLogStmt, S.SharedArrayStmt, S.BlockSyncStmt,
           S.FuncCallStmt)


def run(kernel, cfg=None, vector_registers=DEFAULT_VECTOR_REGISTERS) -> bool:
    changed = False
    for loop in kernel.body.stmts:
        if isinstance(loop, S.RangeForStmt) and loop.parallel and not loop.jam:
            inner = jam_inner(loop)
            if inner is not None:
                loop.jam = jam_width(inner, vector_registers)
                changed = True
    return changed


def jam_inner(loop):
    """The inner loop of `loop` when its body is straight-line code around one serial range
    loop that loads memory and stores none, else None."""
    stmts = loop.body.stmts
    at = [k for k, st in enumerate(stmts) if isinstance(st, (S.RangeForStmt, S.WhileStmt))]
    if len(at) != 1 or not isinstance(stmts[at[0]], S.RangeForStmt):
        return None
    inner = stmts[at[0]]
    for st in S.walk(loop.body):
        if isinstance(st, _NO_JAM) or (isinstance(st, S.RangeForStmt) and st is not inner):
            return None
    loads = stores = False
    for st in S.walk(inner.body):
        loads |= isinstance(st, S.GlobalLoadStmt)
        stores |= isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt))
    if not loads or stores:
        return None
    return inner


def jam_width(inner, vector_registers):
    """Iterations to fuse: each keeps its accumulators (the locals the serial loop updates) in
    vector registers, and each iteration more shares every iteration-independent load once
    more (on the seed's RWKV kernel, 8 columns run 1.25x faster than 4 on AVX-512). Four when
    eight iterations' accumulators would take more than three quarters of the registers."""
    accs = {id(st.alloca) for st in S.walk(inner.body) if isinstance(st, S.LocalStoreStmt)}
    inside = {id(st) for st in S.walk(inner.body) if isinstance(st, S.AllocaStmt)}
    n = max(1, len(accs - inside))
    return 8 if 8 * n <= 3 * vector_registers // 4 else 4
