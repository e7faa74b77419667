"""Forwarding of kernel-level locals.

Requires: frontend IR. Guarantees: a local stored exactly once, by a statement at the top
level of the kernel, and otherwise only loaded, has every load replaced by the stored value
(the local and its store are then dead for dce).

Scalar arguments are mutable locals in the language, so `for i in range(n * 2)` reads `n`
through a local. Top-level statements run once, in order, so that single store precedes every
load and its value (an SSA value defined before it) dominates them. With the loads gone, a loop
bound built from arguments is an expression of arguments and constants, which the CUDA code
generator recomputes in the loop's own kernel instead of launching a serial one to store it.

A real function's body is forwarded the same way (its statements at the top level run once per
call, in order; its parameters are locals stored once from the arguments). Never forwarded: a
local whose address is an operand of anything but its loads and stores (passed by reference to
a real function, which may assign it: a call is opaque), and a reference parameter (the
caller's local, which another reference to it may change).
"""
from __future__ import annotations

from fluxion.ir import stmts as S


def _single_stores(body):
    """id(alloca) -> its only store, for allocas stored once at the top level of `body` and
    otherwise only loaded."""
    top = {id(s) for s in body.stmts}
    stores, bad = {}, set()
    for s in S.walk(body):
        if isinstance(s, S.LocalStoreStmt):
            a = id(s.alloca)
            if a in stores or id(s) not in top or isinstance(s.alloca, S.FuncRefArgStmt):
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


def _forward(body):
    stores = _single_stores(body)
    if not stores:
        return False
    # a load that runs before the store (earlier in program order) keeps reading the local
    seen, subst = set(), {}
    for s in S.walk(body):
        if isinstance(s, S.LocalStoreStmt) and id(s.alloca) in stores:
            seen.add(id(s.alloca))
        elif isinstance(s, S.LocalLoadStmt) and id(s.alloca) in seen:
            value = stores[id(s.alloca)].value
            if value.ret_type == s.ret_type:
                subst[id(s)] = value
    if not subst:
        return False
    for s in S.walk(body):
        for o in s.operands():
            if id(o) in subst:
                s.replace_operand(o, subst[id(o)])
    return True
