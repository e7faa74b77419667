"""Store-to-load forwarding of field elements, run on a kernel before it is differentiated.

    a[None] = x[None]
    b[None] = a[None] * 2        # this read of a[None] becomes the value just stored

The gradient then flows from b to x directly, as a value, and never through `a.grad`: the
grads of intermediate fields that a kernel writes and reads back stay as they were, as in the
original system (its own store forwarding runs before its autodiff). The primal result is the
same either way.

Precondition (when it fires): the load and the store are in the same block, address the same
field component with structurally equal indices (the same statement, equal constants, the
same loop's index or the same scalar argument), the stored value has the load's type, and no
statement between them may write that field component: any store or atomic to it (whatever
its indices, which may be equal at run time), or any nested block that writes it. Loads of
ndarrays are never forwarded (two arguments may be the same array).
"""
from __future__ import annotations

from fluxion.ir import stmts as S


def _index_key(i):
    if isinstance(i, S.ConstStmt):
        return ("c", i.value)
    if isinstance(i, S.LoopIndexStmt):
        return ("l", id(i.loop))
    if isinstance(i, S.ArgLoadStmt):
        return ("a", i.index)
    return ("s", id(i))


def _key(ptr):
    return (id(ptr.place), tuple(_index_key(i) for i in ptr.indices))


def _field_writes(stmt):
    """The field components (ids of places) that `stmt`, or anything nested in it, writes."""
    out = set()
    for s in S.walk_one(stmt):
        if isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                isinstance(s.ptr, S.GlobalPtrStmt):
            out.add(id(s.ptr.place))
    return out


def run(kernel):
    replaced = {}     # id(load) -> the stored value that replaces it
    dropped = []      # (block, load)

    def forward_block(block):
        known = {}    # element key -> stored value
        for s in block.stmts:
            if isinstance(s, S.GlobalLoadStmt) and isinstance(s.ptr, S.GlobalPtrStmt):
                v = known.get(_key(s.ptr))
                if v is not None and v.ret_type is s.ret_type:
                    replaced[id(s)] = v
                    dropped.append((block, s))
                continue
            if s.blocks():
                for b in s.blocks():
                    forward_block(b)
            written = _field_writes(s)
            if written:
                for k in [k for k in known if k[0] in written]:
                    del known[k]
            if isinstance(s, S.GlobalStoreStmt) and isinstance(s.ptr, S.GlobalPtrStmt):
                known[_key(s.ptr)] = s.value

    forward_block(kernel.body)
    if not replaced:
        return False

    def resolve(v):
        while id(v) in replaced:
            v = replaced[id(v)]
        return v

    for s in S.walk(kernel.body):
        for o in s.operands():
            if id(o) in replaced:
                s.replace_operand(o, resolve(o))
    for block, load in dropped:
        block.stmts.remove(load)
    return True
