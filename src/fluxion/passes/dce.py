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

_REMOVABLE = (S.GlobalLoadStmt, S.LocalLoadStmt, S.GlobalPtrStmt) + S.LOOP_INDICES


def _reads(s):
    """The locals statement `s` reads (so their stores must stay)."""
    if isinstance(s, S.LocalLoadStmt):
        return (s.alloca,)
    if isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, S.AllocaStmt):
        return (s.ptr,)
    if isinstance(s, S.FuncCallStmt):
        return tuple(a for a in s.args if isinstance(a, S.AllocaStmt))
    if isinstance(s, S.FuncRefArgStmt):
        return (s,)
    return ()


# the classes whose statements `_reads` may name locals of, or that store into one
_READERS = (S.LocalLoadStmt, S.AtomicOpStmt, S.FuncCallStmt, S.FuncRefArgStmt,
            S.LocalStoreStmt)
# what dce may do with a statement, by its class (asked once per class, not per statement:
# a cold compile runs dce on thousands of statements, most of them of a dozen classes)
_KEEP, _ALLOCA, _STORE, _REMOVABLE_KIND = 0, 1, 2, 3
_CLASS_FACTS = {}


def _facts(cls):
    """(whether `_reads` may name a local for statements of `cls`, what may make one dead)."""
    if issubclass(cls, S.AllocaStmt):
        kind = _ALLOCA
    elif issubclass(cls, S.LocalStoreStmt):
        kind = _STORE
    elif cls.PURE or issubclass(cls, _REMOVABLE):
        kind = _REMOVABLE_KIND
    else:
        kind = _KEEP
    out = _CLASS_FACTS[cls] = (issubclass(cls, _READERS), kind)
    return out


def _sweep(block, dead):
    keep = [s for s in block.stmts if id(s) not in dead]
    for s in keep:
        for b in s.blocks():
            _sweep(b, dead)
    block.stmts = keep


def _run_body(body):
    """One walk counts uses and reads; removing a statement takes one use from each operand
    (a load, one read from its local) and may make them dead in turn: a worklist, so the cost
    is one walk and a sweep, not a walk per round of removals."""
    uses, reads, stores, candidates = {}, {}, {}, []
    get = uses.get
    facts = _CLASS_FACTS
    for s in S.walk(body):
        for o in s.operands():
            uses[id(o)] = get(id(o), 0) + 1
        cls = type(s)
        f = facts.get(cls) or _facts(cls)
        if f[0]:
            for a in _reads(s):
                reads[id(a)] = reads.get(id(a), 0) + 1
            if f[1] == _STORE:
                stores.setdefault(id(s.alloca), []).append(s)
        if f[1]:
            candidates.append(s)

    def dead_now(s):
        kind = (facts.get(type(s)) or _facts(type(s)))[1]
        if kind == _ALLOCA:
            return not reads.get(id(s))
        if kind == _STORE:
            return not reads.get(id(s.alloca))
        return kind == _REMOVABLE_KIND and not uses.get(id(s))

    dead = set()
    work = [s for s in candidates if dead_now(s)]
    while work:
        s = work.pop()
        if id(s) in dead:
            continue
        dead.add(id(s))
        nxt = [o for o in s.operands()]
        for o in nxt:
            uses[id(o)] -= 1
        for a in _reads(s):
            reads[id(a)] -= 1
            if not reads[id(a)]:      # its local is read no more: its stores die with it
                nxt.append(a)
                nxt.extend(stores.get(id(a), ()))
        work.extend(o for o in nxt if id(o) not in dead and dead_now(o))
    if dead:
        _sweep(body, dead)
    return bool(dead)


def run(kernel, cfg=None) -> bool:
    changed_any = False
    for body in S.bodies(kernel):
        changed_any |= _run_body(body)
    return changed_any
