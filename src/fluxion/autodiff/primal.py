"""What the reverse (and forward) transforms read off the primal IR: its scopes (a loop body
is one), the roles of kernel-level locals in a parallel loop, the locals a serial loop carries
from one iteration to the next, the values computed inside `if`s, flat clones of statements,
and the errors that name the statement that cannot be differentiated."""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionCompilationError, format_location
from fluxion.ir.ops import Op

_SCOPE_OWNERS = (S.RangeForStmt, S.WhileStmt)


class AutodiffError(FluxionCompilationError, RuntimeError):
    # also a RuntimeError: what the original system raises when it cannot differentiate
    pass


def _error(stmt, message, kernel_name):
    err = AutodiffError(f"in kernel '{kernel_name}':\n" + format_location(stmt.loc, message))
    err._located = True
    return err


def is_scope_root(block, kernel):
    return block is kernel.body or isinstance(block.parent_stmt, _SCOPE_OWNERS)


def scope_of(stmt, kernel):
    b = stmt.parent
    while not is_scope_root(b, kernel):
        b = b.parent_stmt.parent
    return b


def _grad_place(place):
    return place.grad_place()


def gradients_stopped(load):
    """Whether `ti.stop_grad` named the field / ndarray `load` reads, in its block or a block
    around it (where in the block the call stands does not matter)."""
    ptr = load.ptr
    if isinstance(ptr, S.GlobalPtrStmt):
        target = ptr.place.field
    elif isinstance(ptr, S.ExternalPtrStmt):
        target = ptr.arg
    else:
        return False
    b = load.parent
    while b is not None:
        if any(t is target for t in b.stop_gradients):
            return True
        b = b.parent_stmt.parent if b.parent_stmt is not None else None
    return False


def _in_if(stmt, kernel):
    return stmt.parent is not scope_of(stmt, kernel)


class _IndexAlias:
    """Stands for a replaced loop in `map`: LoopIndexStmt clones resolve to `index`."""

    def __init__(self, index):
        self.index = index


def local_roles(loop, kernel):
    """How the parallel `loop` uses each local declared at the kernel's top level:
    "reduction" when every update is `s = s + v`, `s = s - v` or an atomic add/sub (the
    passes compile those as reductions: the local ends as its start value plus every
    iteration's v); "read" when the loop only reads it; "scratch" otherwise (assigned and
    read back within an iteration, which the compiled loop keeps per iteration)."""
    users = {}
    for x in S.walk(loop.body):
        for o in x.operands():
            users.setdefault(id(o), []).append(x)
    roles = {}

    def top(a):
        return isinstance(a, S.AllocaStmt) and a.parent is kernel.body

    def sole_user(x, user):
        return len(users.get(id(x), [])) == 1 and users[id(x)][0] is user

    def self_update(st):
        v, user = st.value, st
        while _is_cast(v) and sole_user(v, user):
            v, user = v.operand, v
        if not (isinstance(v, S.BinaryOpStmt) and v.op in (Op.ADD, Op.SUB) and sole_user(v, user)):
            return False
        own = 0
        for o in ((v.lhs, v.rhs) if v.op == Op.ADD else (v.lhs,)):
            u = v
            while _is_cast(o) and sole_user(o, u):
                o, u = o.operand, o
            if isinstance(o, S.LocalLoadStmt) and o.alloca is st.alloca and sole_user(o, u):
                own += 1
        return own == 1

    for x in S.walk(loop.body):
        if isinstance(x, S.LocalLoadStmt) and top(x.alloca):
            roles.setdefault(id(x.alloca), "read")
        elif isinstance(x, S.LocalStoreStmt) and top(x.alloca):
            ok = self_update(x) and roles.get(id(x.alloca)) != "scratch"
            roles[id(x.alloca)] = "reduction" if ok else "scratch"
        elif isinstance(x, S.AtomicOpStmt) and top(x.ptr):
            ok = x.op in (Op.ADD, Op.SUB) and roles.get(id(x.ptr)) != "scratch"
            roles[id(x.ptr)] = "reduction" if ok else "scratch"
    # a read of a reduction local that is not its own update's read: it reads the value the
    # loop started with (the reduction's partial sums are not defined)
    return roles


def _is_cast(x):
    return isinstance(x, S.UnaryOpStmt) and x.op == Op.CAST and x.ret_type.is_float and \
        x.operand.ret_type.is_float


def _strip_casts(x):
    while _is_cast(x):
        x = x.operand
    return x


def _kernel_level_writes(loop, kernel):
    """The locals declared at the kernel's top level that `loop` accumulates into."""
    roles = local_roles(loop, kernel)
    out = []
    for x in S.walk(loop.body):
        target = x.alloca if isinstance(x, S.LocalStoreStmt) else \
            x.ptr if isinstance(x, S.AtomicOpStmt) else None
        if target is not None and roles.get(id(target)) == "reduction" and target not in out:
            out.append(target)
    return out


def _clone_flat(s, m, mapping):
    """Copy of a statement without blocks, operands mapped through `m`."""
    if isinstance(s, S.LoopIndexStmt):
        target = mapping.get(id(s.loop), s.loop)
        if isinstance(target, _IndexAlias):
            return S.UnaryOpStmt(target.index, "cast", ret_type=s.ret_type, loc=s.loc) \
                if target.index.ret_type is not s.ret_type else _Same(target.index)
        return S.LoopIndexStmt(target, ret_type=s.ret_type, loc=s.loc)
    cls = type(s)
    new = cls.__new__(cls)
    S.Stmt.__init__(new, s.ret_type, s.loc)
    for name in s.OPERANDS:
        v = getattr(s, name)
        if isinstance(v, list):
            setattr(new, name, [m(x) for x in v])
        else:
            setattr(new, name, m(v) if v is not None else None)
    for name in s.ATTRS:
        setattr(new, name, getattr(s, name))
    return new


def _Same(stmt):  # noqa: N802
    # a loop index that is already of the right type: a no-op cast keeps the IR uniform
    return S.UnaryOpStmt(stmt, "cast", ret_type=stmt.ret_type, loc=stmt.loc)


def _is_parallel(s):
    return isinstance(s, S.RangeForStmt) and s.parallel


def _if_values(block, kernel):
    """Values computed inside the `if`s of a scope (not inside its nested loops)."""
    out = []

    def visit(b, in_if):
        for s in b.stmts:
            if in_if and s.ret_type is not None and not isinstance(
                    s, (S.AllocaStmt, S.GlobalPtrStmt, S.QuantPtrStmt, S.ExternalPtrStmt,
                        S.LoopIndexStmt)
                    + _SCOPE_OWNERS):
                out.append(s)
            if isinstance(s, S.IfStmt):
                visit(s.then_block, True)
                visit(s.else_block, True)

    visit(block, False)
    return out


def _carried(loop):
    """Locals declared outside `loop` and assigned inside it: their values differ per
    iteration, so the reversed loop needs each iteration's value back. Pure accumulators
    (`s += f(...)`, read only to be added to) are left out: no derivative needs their values,
    so they cost no stack space however long the loop runs."""
    inside = {id(s) for s in S.walk(loop.body)}
    users = {}
    for s in S.walk(loop.body):
        for o in s.operands():
            users.setdefault(id(o), []).append(s)
    out, seen = [], set()
    for s in S.walk(loop.body):
        a = s.alloca if isinstance(s, S.LocalStoreStmt) else \
            s.ptr if isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, S.AllocaStmt) else None
        if a is not None and id(a) not in inside and id(a) not in seen:
            seen.add(id(a))
            if not _pure_accumulator(a, loop, users):
                out.append(a)
    return out


def _invariant_reads(loop):
    """Locals declared outside `loop`, read inside it and assigned nowhere inside it: the
    loop sees one value of each, the value it had when the loop started. The code after the
    loop may assign them again (`t = t + a` after a loop that reads t), so the reversed loop,
    which replays its body after the whole scope has been replayed, must read that starting
    value from a snapshot, not the local's latest value."""
    inside = {id(s) for s in S.walk(loop.body)}
    written = set()
    for s in S.walk(loop.body):
        if isinstance(s, S.LocalStoreStmt):
            written.add(id(s.alloca))
        elif isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, S.AllocaStmt):
            written.add(id(s.ptr))
    out, seen = [], set()
    for s in S.walk(loop.body):
        if isinstance(s, S.LocalLoadStmt):
            a = s.alloca
            if id(a) not in inside and id(a) not in written and id(a) not in seen:
                seen.add(id(a))
                out.append(a)
    return out


def _pure_accumulator(alloca, loop, users):
    for s in S.walk(loop.body):
        if isinstance(s, S.LocalLoadStmt) and s.alloca is alloca:
            for u in users.get(id(s), []):
                if not (isinstance(u, S.BinaryOpStmt) and u.op in (Op.ADD, Op.SUB)
                        and u.lhs is s and u.ret_type.is_float):
                    return False
                if [type(x) for x in users.get(id(u), [])] != [S.LocalStoreStmt] or \
                        users[id(u)][0].alloca is not alloca:
                    return False
    return alloca.ret_type.is_float


def _condition_end(loop):
    """Index just past the `if not cond: break` that the frontend puts at a while loop's top."""
    for k, s in enumerate(loop.body.stmts):
        if isinstance(s, S.IfStmt) and len(s.then_block.stmts) == 1 and \
                isinstance(s.then_block.stmts[0], S.BreakStmt) and not s.else_block.stmts:
            return k + 1
    return 0


def reject_real_functions(kernel, mode):
    """Real functions are not differentiated (nor are they in the original system): a
    kernel that calls one has no adjoint or dual instance. The error names the function."""
    for s in S.walk(kernel.body):
        if isinstance(s, S.FuncCallStmt):
            what = "reverse" if mode.reverse else "forward"
            raise _error(s, f"ti.real_func '{s.func.name}' cannot be differentiated ({what} "
                            f"mode is not supported through real functions); use a ti.func, "
                            f"which is inlined and differentiated with the kernel",
                         kernel.name)
