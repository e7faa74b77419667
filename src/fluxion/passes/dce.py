"""Dead code elimination.

Requires: any IR. Guarantees: no pure statement, load or pointer computation is left without
a use; allocas that are never loaded lose their stores too.
"""
from __future__ import annotations

from fluxion.ir import stmts as S

_REMOVABLE = (S.GlobalLoadStmt, S.LocalLoadStmt, S.GlobalPtrStmt, S.LoopIndexStmt)


def _uses(kernel):
    counts = {}
    loaded = set()
    for s in S.walk(kernel.body):
        for o in s.operands():
            counts[id(o)] = counts.get(id(o), 0) + 1
        if isinstance(s, S.LocalLoadStmt):
            loaded.add(id(s.alloca))
        if isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, S.AllocaStmt):
            loaded.add(id(s.ptr))
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
    while True:
        counts, loaded = _uses(kernel)
        if not _sweep(kernel.body, counts, loaded):
            return changed_any
        changed_any = True
