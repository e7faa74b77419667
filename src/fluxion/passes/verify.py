"""IR verifier: every operand is defined before its use, in a block that encloses the use.

Run between passes in debug mode and in tests; a failure is a compiler bug.
"""
from __future__ import annotations

from fluxion.lang.exceptions import FluxionInternalError


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

    visit(kernel.body, visible)
    return False
