"""Atomic demotion.

Requires: offload-ready IR (parallel loops marked). Guarantees: an atomic update inside a
parallel loop whose element is the loop's own (`x[p] += dt * v[p]` in `for p in x`,
`grid[i, j] -= g` in `for i, j in grid`, `x.grad[i] += ...` in an adjoint), with its old value
unused, becomes a plain load, operation and store, when every access to that field component
(or array) in the loop uses the same own index: no other iteration can touch the element, so
the update needs no atomicity. An atomic read-modify-write costs ~20 cycles on x86 (a float add
is a compare-exchange loop) and serializes on GPUs.

Must not fire in a loop that calls a real function: the call is opaque (the callee may
access any field or array, at any index), so no element is known to be the iteration's own.

The own index of a loop is its index for a 1-D loop, or for an ndrange or a struct-for over a
field the tuple that the frontend decomposes it into (`index // W`, `index % W`, ...): either is
a bijection of the iteration space, so distinct iterations give distinct elements.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.ops import Op

_OPS = {"add", "min", "max", "bit_and", "bit_or", "bit_xor"}


def run(kernel, cfg=None) -> bool:
    changed = False
    for loop in kernel.body.stmts:
        if isinstance(loop, S.RangeForStmt) and loop.parallel:
            changed |= _demote(loop)
    return changed


def _demote(loop):
    if S.has_call(loop.body):
        return False
    users = {}
    for s in S.walk(loop.body):
        for o in s.operands():
            users.setdefault(id(o), []).append(s)
    ptrs = {}
    for s in S.walk(loop.body):
        if isinstance(s, (S.GlobalPtrStmt, S.ExternalPtrStmt)):
            ptrs.setdefault(_where(s), []).append(s)
    chosen = []
    for where, ps in ptrs.items():
        if not all(_own(p.indices, loop) for p in ps):
            continue
        for p in ps:
            for u in users.get(id(p), []):
                if (isinstance(u, S.AtomicOpStmt) and u.ptr is p and u.op in _OPS
                        and not users.get(id(u)) and u.value.ret_type == u.ret_type):
                    chosen.append(u)
    for a in chosen:
        block = a.parent
        pos = block.stmts.index(a)
        old = S.GlobalLoadStmt(a.ptr, ret_type=a.ret_type, loc=a.loc)
        new = S.BinaryOpStmt(old, a.value, a.op, ret_type=a.ret_type, loc=a.loc)
        store = S.GlobalStoreStmt(a.ptr, new, loc=a.loc)
        for k, st in enumerate((old, new, store)):
            st.parent = block
            block.stmts.insert(pos + k, st)
        block.stmts.remove(a)
    return bool(chosen)


def _where(ptr):
    if isinstance(ptr, S.GlobalPtrStmt):
        return ptr.place
    return (id(ptr.arg), ptr.grad)


def _own(indices, loop):
    """Whether `indices` are the loop's own index tuple: [i] for a 1-D loop, or exactly the
    frontend's decomposition [.. (i // W1) % W0 .., (i // W2) % W1, i % W2] of an ndrange."""
    rest = None
    for k in range(len(indices) - 1, -1, -1):
        ix = indices[k]
        if k == 0:
            return _is_index(ix, loop) if rest is None else ix is rest
        if not (isinstance(ix, S.BinaryOpStmt) and ix.op == Op.MOD_NONNEG):
            return False
        base = ix.lhs
        if rest is None:
            if not _is_index(base, loop):
                return False
        elif base is not rest:
            return False
        rest = _div_of(base, ix.rhs, loop, indices)
        if rest is None:
            return False
    return False


def _div_of(x, w, loop, indices):
    """The statement `x // w` (div_nonneg) that the next outer index builds on."""
    users = [s for s in S.walk(loop.body) if isinstance(s, S.BinaryOpStmt)
             and s.op == Op.DIV_NONNEG and s.lhs is x and _same(s.rhs, w)]
    return users[0] if len(users) == 1 else None


def _same(a, b):
    if a is b:
        return True
    return isinstance(a, S.ConstStmt) and isinstance(b, S.ConstStmt) and a.value == b.value


def _is_index(x, loop):
    return isinstance(x, S.LoopIndexStmt) and x.loop is loop
