"""Values of IR expressions on the host at launch time, from the launch's context (arguments,
array shapes): loop bounds that the launcher needs before the kernel runs."""
from __future__ import annotations

from fluxion.ir import ops as O
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.ops import Op


def host_value(stmt, ctx_i, ctx_f, body):
    """The value of `stmt`, or None when it depends on more than constants, arguments and
    arithmetic on them (a kernel variable assigned once at the top level counts too)."""
    if isinstance(stmt, S.ConstStmt):
        return stmt.value
    if isinstance(stmt, S.ArgLoadStmt):
        return float(ctx_f[stmt.index]) if stmt.ret_type.is_float else int(ctx_i[stmt.index])
    if isinstance(stmt, S.UnaryOpStmt) and stmt.op == Op.CAST:
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


def host_expr(stmt, body):
    """`stmt` as plain nested lists that `eval_host_expr` computes from a launch's context,
    with None for what host_value could not compute: a form that outlives the IR (the
    launcher of a kernel loaded from the offline cache has no IR)."""
    if isinstance(stmt, S.ConstStmt):
        v = stmt.value
        return ["c", float(v) if isinstance(v, float) or stmt.ret_type.is_float else int(v)]
    if isinstance(stmt, S.ArgLoadStmt):
        return ["a", int(stmt.index), bool(stmt.ret_type.is_float)]
    if isinstance(stmt, S.UnaryOpStmt) and stmt.op == Op.CAST:
        sub = host_expr(stmt.operand, body)
        return None if sub is None else ["u", "cast", stmt.ret_type.name, sub]
    if isinstance(stmt, S.BinaryOpStmt):
        a, b = host_expr(stmt.lhs, body), host_expr(stmt.rhs, body)
        return None if a is None or b is None else ["b", stmt.op, stmt.ret_type.name, a, b]
    if isinstance(stmt, S.LocalLoadStmt):
        stores = [s for s in body.stmts
                  if isinstance(s, S.LocalStoreStmt) and s.alloca is stmt.alloca]
        if len(stores) == 1 and not _escapes(stmt.alloca, body):
            return host_expr(stores[0].value, body)
    return None


def eval_host_expr(e, ctx_i, ctx_f):
    """The value of a `host_expr` form in a launch's context, or None (as host_value)."""
    if e is None:
        return None
    kind = e[0]
    if kind == "c":
        return e[1]
    if kind == "a":
        return float(ctx_f[e[1]]) if e[2] else int(ctx_i[e[1]])
    if kind == "u":
        v = eval_host_expr(e[3], ctx_i, ctx_f)
        return None if v is None else O.eval_unary(e[1], v, T.by_name(e[2]))
    a, b = eval_host_expr(e[3], ctx_i, ctx_f), eval_host_expr(e[4], ctx_i, ctx_f)
    if a is None or b is None:
        return None
    return O.eval_binary(e[1], a, b, T.by_name(e[2]))


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
