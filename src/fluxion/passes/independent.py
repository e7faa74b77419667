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
- when an iteration reads memory it wrote itself: a field or array loaded after a store to
  it in program order, or loaded and stored within one inner loop. The mark lets LLVM's
  vectorizer skip its dependence analysis, and it then also groups accesses of one iteration
  across such a store (interleaved groups of a vector field's components): `x1[i] = [a, b, c]`
  followed by a read of `x1[i][0]` read the old value (found by tests/fuzz). A read before
  the writes (`x[p] += dt * v[p]`) keeps the mark;
- when iterations store and load a local of the kernel's body (`s = f(s)`: a race, but LLVM
  then kept its value from before the loop even on one thread);
- on CUDA (grid-stride loops are not given these marks), or with
  ti.init(advanced_optimization=False) (the pipeline does not run it).
"""
from __future__ import annotations

from fluxion.ir import stmts as S

_DEPENDENT = (S.PrivateAddStmt, S.WorkerIndexStmt, S.FuncCallStmt)


def _memory(ptr):
    """What a pointer reaches, as the unit of the dependence test: the whole field (any
    component: conservative) or the whole array argument (its grad apart)."""
    if isinstance(ptr, S.GlobalPtrStmt):
        return ("field", id(getattr(ptr.place, "field", ptr.place)))
    if isinstance(ptr, S.ExternalPtrStmt):
        return ("array", id(ptr.arg), bool(ptr.grad))
    return ("other", id(ptr))


def _accesses(block):
    """(kind, memory) of every load and store in `block`, in program order."""
    for st in S.walk(block):
        if isinstance(st, S.GlobalLoadStmt):
            yield "load", _memory(st.ptr)
        elif isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)):
            if isinstance(st, S.AtomicOpStmt):
                yield "load", _memory(st.ptr)
            yield "store", _memory(st.ptr)


def _carries_a_local(body):
    """Whether an iteration stores a local of the kernel's body (one for all iterations) that
    iterations also load: `s = f(s)` in a parallel loop. A race by the language's rules, but
    told the loop is parallel, LLVM kept the value from before the loop in a register, so even
    one thread gave other values than the serial build (tests/fuzz seed 4000809)."""
    own = {id(st) for st in S.walk(body) if isinstance(st, S.AllocaStmt)}
    stored = {id(st.alloca) for st in S.walk(body)
              if isinstance(st, S.LocalStoreStmt) and id(st.alloca) not in own}
    loaded = {id(st.alloca) for st in S.walk(body) if isinstance(st, S.LocalLoadStmt)}
    return bool(stored & loaded)


def _reads_own_writes(body):
    if _carries_a_local(body):
        return True
    stored = set()
    for kind, mem in _accesses(body):
        if kind == "store":
            stored.add(mem)
        elif mem in stored:
            return True
    for st in S.walk(body):
        if isinstance(st, (S.RangeForStmt, S.WhileStmt)):
            loads, stores = set(), set()
            for b in st.blocks():
                for kind, mem in _accesses(b):
                    (stores if kind == "store" else loads).add(mem)
            if loads & stores:
                return True
    return False


def run(kernel, cfg=None) -> bool:
    changed = False
    for loop in kernel.body.stmts:
        if isinstance(loop, S.RangeForStmt) and loop.parallel and not loop.independent:
            if not any(isinstance(st, _DEPENDENT) for st in S.walk(loop.body)) and \
                    not _reads_own_writes(loop.body):
                loop.independent = True
                changed = True
    return changed
