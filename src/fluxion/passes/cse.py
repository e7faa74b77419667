"""Common subexpression elimination.

Requires: any IR. Guarantees: a statement that computes what an earlier one computes is
replaced, in every use, by the earlier one (which dce then keeps alone). Two statements
compute the same when `Stmt.key` says so (class, type, operands after replacement, defining
attributes; operands of a commutative integer or equality operation in either order), and:

- a pure statement (ir/stmts.py: `PURE`, side-effect free and deterministic: arithmetic,
  constants, arguments) or a loop index reuses an earlier one in its own block or in an
  enclosing block, which dominates it in this structured IR, but never across the boundary
  of a parallel loop: its body becomes a task of its own (passes/offload.py), and what it
  uses from before the loop crosses tasks;
- addresses (field, array, quantized and shared pointers) are not merged: the passes after
  this one (demote, reduction, scatter) find every access of a field inside a loop by its
  own pointer statement there, and would miss one that shares another access's pointer;
- a load of a field or array element reuses an earlier load through an equal address (the
  same pointer class, place or array and index statements) only in the same block, with nothing between them that may write memory: a store, an atomic, a
  call of a real function (opaque), a block barrier, a statement owning blocks (a loop or
  branch, whatever it holds), autodiff stacks, privatized adds. A load is never reused in
  a nested block: a `ti.stop_grad` block must keep its own loads;
- never merged: statements with effects or fresh values (ti.random(), atomics, stores,
  loads of locals, thread and worker indices), and constants that compare equal but differ
  (0.0 and -0.0; NaN equals nothing).

Why: scalarized vectors and matrices and inlined functions repeat index arithmetic and
element addresses (`x[i][0]`, `x[i][1]` compute i's address terms twice); every statement
less is less to lower and less for LLVM to optimize.
"""
from __future__ import annotations

import math

from fluxion.ir import stmts as S

# operations whose operands may be swapped: exact for integers, and for floats these too
# (min and max are not: with a NaN operand the result depends on the order)
_COMMUTATIVE = frozenset({"add", "mul", "bit_and", "bit_or", "bit_xor", "cmp_eq", "cmp_ne"})
# statements after which no earlier load may be reused (they may write memory)
_CLOBBERS = (S.GlobalStoreStmt, S.AtomicOpStmt, S.FuncCallStmt, S.BlockSyncStmt,
             S.TapeLogStmt, S.PrivateAddStmt, S.MergeCopiesStmt, S.AdStackPushStmt,
             S.AdStackPopStmt)


_POINTERS = (S.GlobalPtrStmt, S.ExternalPtrStmt, S.QuantPtrStmt, S.SharedPtrStmt)


def _key(s):
    """The CSE key of `s`, or None when `s` is never merged."""
    if isinstance(s, S.ConstStmt):
        v = s.value
        if isinstance(v, float):
            if math.isnan(v):
                return None
            return (S.ConstStmt, s.ret_type, float, v, math.copysign(1.0, v))
        return (S.ConstStmt, s.ret_type, type(v), v)
    if isinstance(s, S.BinaryOpStmt) and s.op in _COMMUTATIVE and id(s.rhs) < id(s.lhs):
        return (S.BinaryOpStmt, s.ret_type, id(s.rhs), id(s.lhs), s.op)
    try:
        k = s.key()
        hash(k)
    except TypeError:                   # an attribute that cannot be a key
        return None
    return k


def run(kernel, cfg=None) -> bool:
    subst = {}
    replaced = []   # (keeps the replaced statements alive: `subst` is keyed by their ids)
    for body in S.bodies(kernel):
        _cse_block(body, {}, subst, replaced)
    return bool(subst)


def _cse_block(block, avail, subst, replaced):
    added = []      # keys this block made available (gone again when it ends)
    loads = {}      # key of an address -> the load through it reusable here
    for s in block.stmts:
        if subst:
            for o in s.operands():
                new = subst.get(id(o))
                if new is not None:
                    s.replace_operand(o, new)
        if s.PURE or isinstance(s, S.LOOP_INDICES):
            if isinstance(s, _POINTERS) or isinstance(s, S.WorkerIndexStmt):
                continue
            k = _key(s)
            if k is None:
                continue
            prev = avail.get(k)
            if prev is None:
                avail[k] = s
                added.append(k)
            else:
                subst[id(s)] = prev
                replaced.append(s)
            continue
        if isinstance(s, S.GlobalLoadStmt):
            k = _key(s.ptr)
            prev = loads.get(k) if k is not None else None
            if prev is not None and prev.ret_type == s.ret_type:
                subst[id(s)] = prev
                replaced.append(s)
            elif k is not None:
                loads[k] = s
            continue
        if isinstance(s, _CLOBBERS):
            loads.clear()
        blocks = s.blocks()
        if blocks:
            loads.clear()
            # a parallel loop's body starts afresh (it becomes a task of its own)
            inner = {} if isinstance(s, S.INDEX_LOOPS) and s.parallel else avail
            for b in blocks:
                _cse_block(b, inner, subst, replaced)
    for k in added:
        del avail[k]
