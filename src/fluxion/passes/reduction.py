"""Reduction privatization.

Requires: offload-ready IR (parallel loops marked). Guarantees: an atomic update of one fixed
field element inside a parallel loop (`s[None] += x[i]`), or of a kernel-level local (`s += x[i]`
with `s` defined before the loop: the frontend makes that update atomic), whose old value is
unused and whose element or local the loop does not otherwise touch, is recorded in the loop's
`reductions`; a field pointer is hoisted before the loop. Codegen then accumulates in a
per-thread register and applies one atomic per chunk, which also lets LLVM vectorize the
reduction.

Must not fire when the loop also reads or writes the target in any other way (`s += x[i]` and
`y[i] = s` in one body; `s[None] += 1` beside `s[None] = 0`), when the updates mix operations,
or when an update's old value is used (`k = ti.atomic_add(s, 1)`): each of those observes the
shared value in the middle of the loop, which per-thread accumulators would change.

A call of a real function in the loop is opaque: it may read or write any field or array
element, so no field or array reduction of that loop is privatized. A kernel-level local
reduction still is, unless the local is passed to the call (by `ti.ref`): the callee reaches
no other local of the caller, and that use shows as an operand of the call.
"""
from __future__ import annotations

from fluxion.ir import stmts as S

_OPS = {"add", "min", "max", "bit_and", "bit_or", "bit_xor"}


def run(kernel, cfg=None) -> bool:
    changed = False
    for loop in list(kernel.body.stmts):
        if isinstance(loop, S.RangeForStmt) and loop.parallel:
            changed |= _privatize(kernel, loop)
    return changed


def _privatize(kernel, loop):
    inside = {id(s) for s in S.walk(loop.body)}
    used = set()
    places = {}
    for s in S.walk(loop.body):
        for o in s.operands():
            used.add(id(o))
            # every use of a local or a pointer counts: one pointer may serve an update and a
            # load (IR from text or after CSE; the frontend makes one pointer per access).
            # Not the Tape's log of the element before an update: per-thread sums leave the
            # value before the kernel's first update, the one a restore needs, unchanged
            if isinstance(o, S.AllocaStmt) or (
                    isinstance(o, (S.GlobalPtrStmt, S.ExternalPtrStmt))
                    and not isinstance(s, S.TapeLogStmt)):
                places.setdefault(_where(o), []).append(o)
    candidates = []
    opaque = S.has_call(loop.body)
    for s in S.walk(loop.body):
        if not (isinstance(s, S.AtomicOpStmt) and s.op in _OPS and id(s) not in used):
            continue
        ptr = s.ptr
        if isinstance(ptr, S.AllocaStmt):
            if ptr.parent is kernel.body:   # a kernel-level local; one inside is per iteration
                candidates.append(s)
            continue
        if not isinstance(ptr, (S.GlobalPtrStmt, S.ExternalPtrStmt)) or opaque:
            continue
        if any(id(i) in inside and not isinstance(i, S.ConstStmt) for i in ptr.indices):
            continue
        candidates.append(s)
    if not candidates:
        return False
    # a place touched by anything other than its reductions (loads, stores, another op) is
    # left alone: privatizing would change what those accesses see
    by_place = {}
    for s in candidates:
        by_place.setdefault(_where(s.ptr), []).append(s)
    chosen = []
    for place, atomics in by_place.items():
        ptrs = places[place]
        ops = {a.op for a in atomics}
        if len(ops) != 1 or len(ptrs) != len(atomics):
            continue
        if len({tuple(_index_key(i) for i in getattr(a.ptr, "indices", ())) for a in atomics}) != 1:
            continue
        chosen.extend(atomics)
    if not chosen:
        return False
    pos = kernel.body.stmts.index(loop)
    hoisted = {}
    reductions = list(loop.reductions or [])
    for a in chosen:
        if isinstance(a.ptr, S.AllocaStmt):
            if a.ptr not in [p for p, _ in reductions]:
                reductions.append((a.ptr, a.op))
            continue
        key = (_where(a.ptr), tuple(_index_key(i) for i in a.ptr.indices))
        if key not in hoisted:
            indices = []
            for i in a.ptr.indices:
                if id(i) in inside:  # a constant: recreate it before the loop
                    c = S.ConstStmt(i.value, ret_type=i.ret_type, loc=i.loc)
                    c.parent = kernel.body
                    kernel.body.stmts.insert(pos, c)
                    pos += 1
                    i = c
                indices.append(i)
            if isinstance(a.ptr, S.GlobalPtrStmt):
                p = S.GlobalPtrStmt(indices, a.ptr.place, ret_type=a.ptr.ret_type, loc=a.ptr.loc)
            else:
                p = S.ExternalPtrStmt(indices, a.ptr.arg, a.ptr.component, a.ptr.grad,
                                      ret_type=a.ptr.ret_type, loc=a.ptr.loc)
            p.parent = kernel.body
            kernel.body.stmts.insert(pos, p)
            pos += 1
            hoisted[key] = p
            reductions.append((p, a.op))
        a.ptr = hoisted[key]
    loop.reductions = reductions
    return True


def _where(ptr):
    """What a pointer addresses, up to its indices: a field component, an array's, a local."""
    if isinstance(ptr, S.AllocaStmt):
        return ("local", id(ptr))
    if isinstance(ptr, S.GlobalPtrStmt):
        return ptr.place
    return (id(ptr.arg), ptr.component, ptr.grad)


def _index_key(i):
    return ("c", i.value) if isinstance(i, S.ConstStmt) else ("s", id(i))
