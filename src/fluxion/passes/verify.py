"""IR verifier: every operand is defined before its use, in a block that encloses the use;
the index of a struct-for or ndrange-for lies in its loop.

Run between passes in debug mode and in tests; a failure is a compiler bug.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionInternalError


def run(kernel, cfg=None, after="?"):
    visible = set()

    def visit(block, scope):
        local = set(scope)
        for s in block.stmts:
            for o in s.operands():
                if id(o) not in local:
                    raise FluxionInternalError(
                        f"IR verification failed after pass '{after}': {type(s).__name__} "
                        f"${s.id} uses ${o.id} which is not defined before it in an enclosing "
                        f"block")
            if s.parent is not block:
                raise FluxionInternalError(f"after '{after}': ${s.id} has a wrong parent block")
            for b in s.blocks():
                visit(b, local)
            local.add(id(s))

    for body in S.bodies(kernel):
        visit(body, visible)
    for s in S.walk_all(kernel):
        if isinstance(s, S.FuncCallStmt) and s.func not in kernel.functions:
            raise FluxionInternalError(f"after '{after}': ${s.id} calls a function that is not "
                                       f"in the kernel's list")
        if isinstance(s, S.StructIndexStmt) and not (
                _encloses(s.loop, s) and 0 <= s.axis < _dimensions(s.loop)):
            kind = "ndrange-for" if isinstance(s.loop, S.NdRangeForStmt) else "struct-for"
            raise FluxionInternalError(f"after '{after}': ${s.id} is an index of a {kind} that "
                                       f"does not enclose it or has no dimension {s.axis}")
        if isinstance(s, S.NdRangeForStmt) and len(s.begins) != len(s.ends):
            raise FluxionInternalError(f"after '{after}': ${s.id} has {len(s.begins)} begins "
                                       f"and {len(s.ends)} ends")
    return False


def _dimensions(loop):
    if isinstance(loop, S.StructForStmt):
        return len(loop.bounds)
    if isinstance(loop, S.NdRangeForStmt):
        return len(loop.begins)
    return 0        # not a loop that has indices of this kind


def _encloses(loop, s):
    """Whether statement `loop` owns a block that holds `s`, at any depth."""
    block = s.parent
    while block is not None:
        owner = block.parent_stmt
        if owner is loop:
            return True
        block = owner.parent if owner is not None else None
    return False
