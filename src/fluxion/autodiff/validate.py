"""The global data access rules, checked on the IR of a kernel being differentiated.

Reverse mode replays a kernel's reads after the forward pass ran, so a field element that the
kernel reads and then modifies would be replayed with its new value: a silently wrong gradient.
Within one kernel (one iteration of a parallel loop, or the serial code) this pass finds, in
program order:
  rule 1: an element read, then written (by a store or an atomic update): a compile error;
  (an element written, then overwritten by a plain store, is no error: reverse mode hands the
  element's gradient to the overwriting store's value and zeroes it there, so the writes
  before it, whose values did not survive, get none)
Accesses in the two branches of an `if` are not in sequence with each other.
Elements are compared by field component and index values; different index expressions are
assumed to name different elements.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionCompilationError, format_location


class GlobalDataAccessRuleError(FluxionCompilationError):
    pass


def _element(ptr):
    where = id(ptr.place) if isinstance(ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)) else \
        (id(ptr.arg), ptr.component)
    return (where, tuple(("c", i.value) if isinstance(i, S.ConstStmt) else ("s", id(i))
                                 for i in ptr.indices))


def run(kernel, cfg=None):
    def check_region(stmts):
        def visit(block_stmts, read):
            for s in block_stmts:
                if isinstance(s, S.GlobalLoadStmt):
                    read.setdefault(_element(s.ptr), s)
                elif isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                        isinstance(s.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt, S.ExternalPtrStmt)):
                    e = _element(s.ptr)
                    if e in read:
                        _fail(kernel, s, 1, read[e])
                if isinstance(s, S.IfStmt):
                    # the two branches exclude each other: a read in one and a write in the
                    # other are not in sequence
                    seen = []
                    for b in (s.then_block, s.else_block):
                        r = dict(read)
                        visit(b.stmts, r)
                        seen.append(r)
                    for r in seen:
                        for e, x in r.items():
                            read.setdefault(e, x)
                    continue
                for b in s.blocks():
                    if isinstance(s, S.RangeForStmt) and s.parallel:
                        check_region(b.stmts)
                    else:
                        visit(b.stmts, read)

        visit(stmts, {})

    check_region(kernel.body.stmts)
    return False


def _fail(kernel, stmt, rule, earlier):
    place = stmt.ptr.place if isinstance(stmt.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)) else \
        stmt.ptr.arg
    what = "is read and then modified"
    first = f"(first accessed on line {earlier.loc.line})" if earlier.loc else ""
    msg = (f"global data access rule #{rule} is broken: field element {place!r} {what} "
           f"{first}. Its gradient would be silently wrong; write the result to another field "
           f"or split the kernel.")
    err = GlobalDataAccessRuleError(f"in kernel '{kernel.name}':\n" + format_location(stmt.loc, msg))
    err._located = True
    raise err
