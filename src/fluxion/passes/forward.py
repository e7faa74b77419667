"""Forwarding of locals stored once.

Requires: frontend IR. Guarantees: a local stored by exactly one statement, and otherwise only
loaded, has every load that the store dominates replaced by the stored value (a local whose
loads all go is then dead for dce).

Dominance in structured IR: the store sits in some block; a load is dominated when the
statement that holds it in that same block (the load itself, or the `if`/loop around it)
comes after the store. Control that reaches such a load has passed the store in the same run
of that block (the same iteration, where the block is a loop body), so the value the store
wrote is the SSA value it stored, which dominates the load because it dominates the store.
A load elsewhere (before the store, in an earlier iteration's reach, after the loop or `if`
that holds the store) keeps reading the local.

Scalar arguments are mutable locals in the language, so `for i in range(n * 2)` reads `n`
through a local; `bi = b // 64` inside an `if` is a local too. With the loads gone, a loop
bound built from arguments is an expression of arguments and constants (the CUDA code
generator recomputes it in the loop's own kernel instead of launching a serial one to store
it), and an index built from such locals is arithmetic that bounds.py can reason about.

A real function's body is forwarded the same way (its parameters are locals stored once from
the arguments). Never forwarded: a local whose address is an operand of anything but its loads
and stores (passed by reference to a real function, which may assign it: a call is opaque), a
reference parameter (the caller's local, which another reference to it may change), and a load
whose type differs from the stored value's.
"""
from __future__ import annotations

from fluxion.ir import stmts as S


def _single_stores(body):
    """id(alloca) -> its only store, for allocas stored once in `body` and otherwise only
    loaded."""
    stores, bad = {}, set()
    for s in S.walk(body):
        if isinstance(s, S.LocalStoreStmt):
            a = id(s.alloca)
            if a in stores or isinstance(s.alloca, S.FuncRefArgStmt):
                bad.add(a)
            stores[a] = s
            continue
        if isinstance(s, S.LocalLoadStmt):
            continue
        for o in s.operands():
            if isinstance(o, S.AllocaStmt):
                bad.add(id(o))       # address taken by an atomic or anything else
    return {a: st for a, st in stores.items() if a not in bad}


def run(kernel, cfg=None) -> bool:
    changed = False
    for body in S.bodies(kernel):
        changed |= _forward(body)
    return changed


def _dominates(store, load, positions):
    """Whether `store` runs before `load` on every path that reaches `load` (see the module's
    docstring). `positions`: id(block) -> {id(stmt): index}, filled on demand."""
    block = store.parent
    cur = load
    while cur is not None and cur.parent is not block:
        owner = cur.parent.parent_stmt if cur.parent is not None else None
        cur = owner
    if cur is None:
        return False
    pos = positions.get(id(block))
    if pos is None:
        pos = positions[id(block)] = {id(s): n for n, s in enumerate(block.stmts)}
    return pos[id(cur)] > pos[id(store)]


def _forward(body):
    stores = _single_stores(body)
    if not stores:
        return False
    positions, subst = {}, {}
    for s in S.walk(body):
        if isinstance(s, S.LocalLoadStmt) and id(s.alloca) in stores:
            store = stores[id(s.alloca)]
            value = store.value
            if value.ret_type == s.ret_type and _dominates(store, s, positions):
                subst[id(s)] = value
    if not subst:
        return False
    for s in S.walk(body):
        for o in s.operands():
            if id(o) in subst:
                # a stored value may itself be a forwarded load (an inlined function's
                # parameter stored from a read of a kernel argument's local): follow the chain
                v = subst[id(o)]
                while id(v) in subst:
                    v = subst[id(v)]
                s.replace_operand(o, v)
    return True
