"""Forwarding of stores to later loads of a local in the same block.

Requires: any IR. Guarantees: a load of a local that follows a store to it (or another load
of it) in the same block, with nothing between them that may assign the local, reads the
stored (or loaded) value directly; the load becomes dead for dce. What may assign a local between the two: another store to it,
an atomic on it, a statement owning blocks that stores to it or updates it anywhere inside
(a loop, a branch), a call of a real function (it may assign any local passed by reference).

Never forwarded:
- a reference parameter of a real function (`ti.ref`): it is the caller's local, and two
  of them may be one variable, so a store through the other one is not seen here;
- a local of the kernel body read inside a parallel loop: every iteration shares it
  (frontend: a local defined before a parallel `for` and assigned inside it), so another
  iteration may assign it between this iteration's store and load;
- a store of a value of another type than the load's.

Why: `a = f(x); b = a * 2` in a loop body reads `a` back from its local; the kernel-level
forwarding (passes/forward.py) only takes locals stored once at the top level. LLVM's
mem2reg would do the same later, at a higher price per statement. The frontend already
forwards by this rule as it builds a kernel (ir/builder.py's known_value), so in a kernel
from the frontend little is left here; IR from elsewhere (IR text, a build with
FLUXION_NO_FRONTEND_FORWARD=1) gets it all here.
"""
from __future__ import annotations

from fluxion.ir import stmts as S


def run(kernel, cfg=None) -> bool:
    changed = False
    for body in S.bodies(kernel):
        shared = _shared_locals(body)
        subst = {}
        _forward_block(body, shared, subst, [])
        changed |= bool(subst)
    return changed


def _shared_locals(body):
    """The locals of `body`'s top level that a parallel loop of it reads or writes."""
    top = {id(s) for s in body.stmts if isinstance(s, S.AllocaStmt)}
    out = set()
    for loop in body.stmts:
        if isinstance(loop, S.INDEX_LOOPS) and loop.parallel:
            for s in S.walk(loop.body):
                for o in s.operands():
                    if id(o) in top:
                        out.add(id(o))
    return out


def _assigned_in(stmt):
    """id() of the locals that code nested in `stmt` may assign; None: any local."""
    out = set()
    for b in stmt.blocks():
        for s in S.walk(b):
            if isinstance(s, (S.LocalStoreStmt, S.AtomicOpStmt)):
                a = s.alloca if isinstance(s, S.LocalStoreStmt) else s.ptr
                out.add(id(a))
            elif isinstance(s, S.FuncCallStmt):
                return None
    return out


def _forward_block(block, shared, subst, replaced):
    stored = {}     # id(local) -> the value last stored to it in this block
    for s in block.stmts:
        if subst:
            for o in s.operands():
                new = subst.get(id(o))
                if new is not None:
                    s.replace_operand(o, new)
        if isinstance(s, S.LocalStoreStmt):
            a = s.alloca
            if isinstance(a, S.FuncRefArgStmt) or id(a) in shared:
                continue
            stored[id(a)] = s.value
        elif isinstance(s, S.LocalLoadStmt):
            a = s.alloca
            v = stored.get(id(a))
            if v is not None and v.ret_type == s.ret_type:
                subst[id(s)] = v
                replaced.append(s)
            elif not isinstance(a, S.FuncRefArgStmt) and id(a) not in shared:
                stored[id(a)] = s       # a later load reads what this one read
        elif isinstance(s, S.AtomicOpStmt):
            stored.pop(id(s.ptr), None)
        elif isinstance(s, S.FuncCallStmt):
            stored.clear()
        elif s.BLOCKS:
            if stored:
                assigned = _assigned_in(s)
                if assigned is None:
                    stored.clear()
                else:
                    for a in assigned:
                        stored.pop(a, None)
            for b in s.blocks():
                _forward_block(b, shared, subst, replaced)
