"""Dead code elimination.

Requires: any IR. Guarantees: no pure statement, load or pointer computation is left without
a use; allocas that are never loaded lose their stores too. Each body (the kernel's and each
real function's) is swept on its own: no statement of one is an operand in another.

A local passed to a real function by reference (`ti.ref`, an operand of the call) counts as
loaded: the callee may read it. A reference parameter is the caller's local, so its stores
stay even when the function itself never reads it back.
"""
from __future__ import annotations

from fluxion.ir import stmts as S

_REMOVABLE = (S.GlobalLoadStmt, S.LocalLoadStmt, S.GlobalPtrStmt, S.LoopIndexStmt)


def _uses(body):
    counts = {}
    loaded = set()
    for s in S.walk(body):
        for o in s.operands():
            counts[id(o)] = counts.get(id(o), 0) + 1
        if isinstance(s, S.LocalLoadStmt):
            loaded.add(id(s.alloca))
        elif isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, S.AllocaStmt):
            loaded.add(id(s.ptr))
        elif isinstance(s, S.FuncCallStmt):
            loaded.update(id(a) for a in s.args if isinstance(a, S.AllocaStmt))
        elif isinstance(s, S.FuncRefArgStmt):
            loaded.add(id(s))
    return counts, loaded


def _dead(s, counts, loaded):
    if isinstance(s, S.AllocaStmt):
        return id(s) not in loaded
    if isinstance(s, S.LocalStoreStmt):
        return id(s.alloca) not in loaded
    if s.PURE or isinstance(s, _REMOVABLE):
        return counts.get(id(s), 0) == 0
    return False


def _sweep(block, counts, loaded):
    changed = False
    keep = []
    for s in block.stmts:
        if _dead(s, counts, loaded):
            changed = True
            continue
        keep.append(s)
        for b in s.blocks():
            changed |= _sweep(b, counts, loaded)
    block.stmts = keep
    return changed


def run(kernel, cfg=None) -> bool:
    changed_any = False
    for body in S.bodies(kernel):
        while True:
            counts, loaded = _uses(body)
            if not _sweep(body, counts, loaded):
                break
            changed_any = True
    return changed_any
