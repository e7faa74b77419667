"""IR verifier: every operand is defined before its use, in a block that encloses the use.

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
    return False
