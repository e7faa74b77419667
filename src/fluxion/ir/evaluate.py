"""Values of IR expressions on the host at launch time, from the launch's context (arguments,
array shapes): loop bounds that the launcher needs before the kernel runs."""
from __future__ import annotations

from fluxion.ir import ops as O
from fluxion.ir import stmts as S


def host_value(stmt, ctx_i, ctx_f, body):
    """The value of `stmt`, or None when it depends on more than constants, arguments and
    arithmetic on them (a kernel variable assigned once at the top level counts too)."""
    if isinstance(stmt, S.ConstStmt):
        return stmt.value
    if isinstance(stmt, S.ArgLoadStmt):
        return float(ctx_f[stmt.index]) if stmt.ret_type.is_float else int(ctx_i[stmt.index])
    if isinstance(stmt, S.UnaryOpStmt) and stmt.op == "cast":
        v = host_value(stmt.operand, ctx_i, ctx_f, body)
        return None if v is None else O.eval_unary("cast", v, stmt.ret_type)
    if isinstance(stmt, S.BinaryOpStmt):
        a = host_value(stmt.lhs, ctx_i, ctx_f, body)
        b = host_value(stmt.rhs, ctx_i, ctx_f, body)
        if a is None or b is None:
            return None
        return O.eval_binary(stmt.op, a, b, stmt.ret_type)
    if isinstance(stmt, S.LocalLoadStmt):
        stores = [s for s in body.stmts
                  if isinstance(s, S.LocalStoreStmt) and s.alloca is stmt.alloca]
        if len(stores) == 1 and not _escapes(stmt.alloca, body):
            return host_value(stores[0].value, ctx_i, ctx_f, body)
    return None


def _escapes(alloca, body):
    """Whether anything but its loads and top-level stores may change the local: a store in
    a nested block, or a real function it is passed to by reference."""
    for s in S.walk(body):
        if isinstance(s, S.LocalLoadStmt):
            continue
        if isinstance(s, S.LocalStoreStmt):
            if s.alloca is alloca and s.parent is not body:
                return True
            continue
        if any(o is alloca for o in s.operands()):
            return True
    return False
