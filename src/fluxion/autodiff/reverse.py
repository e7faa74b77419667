"""Reverse-mode autodiff: primal kernel IR -> the IR of its adjoint (grad) kernel.

Structure of the grad kernel, task by task in reverse (offloaded tasks are differentiated
independently, so kernels mixing loops and other top-level statements work):

    replay of the top-level serial statements       (primal values, no global writes)
    for each task, last first:
      parallel loop:  parallel_for: replay(body); adjoint(body)
      serial run:     adjoint(statements)

`replay` re-executes primal statements (stores to fields, atomics and prints are dropped);
`adjoint` walks statements backwards applying the rules of `rules.py`. Before the transform,
reads of field elements the kernel itself just stored become the stored values
(store_forward.py). A store's adjoint hands the element's grad to the stored value and zeroes
it (fields and ndarrays).

Locals declared at the kernel's top level and used by a parallel loop (`local_roles`): the
replay of the serial part snapshots, at each parallel loop, those the loop reads, and runs the
loop again (without global effects) when it accumulates into some (`s = s + v`, atomic add),
so that the serial code after it sees their values; the loop's own adjoint reads the
snapshots, and gives each accumulated v the local's adjoint as the code after the loop left
it. Locals a loop assigns and reads back in each iteration are replayed as they are. Every loop body is a
scope that is replayed and then differentiated within the same iteration, so the adjoint code
sees the primal values it needs; values computed inside an `if` are kept in backup locals for
the mirrored `if` of the adjoint. Serial loops (their stacks of carried locals, the snapshots
of the locals they only read) are `serial_loops.py`'s.
"""
from __future__ import annotations

from fluxion.autodiff import rules, store_forward
from fluxion.autodiff.primal import (_clone_flat, _error, _grad_place, _if_values,
                                     _is_parallel, _kernel_level_writes, _strip_casts,
                                     gradients_stopped, local_roles, scope_of)
from fluxion.autodiff.serial_loops import SerialLoops
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir.builder import BuildContext, building, emit, into
from fluxion.ir.errors import FluxionRuntimeError, format_location
from fluxion.ir.expr import Expr
from fluxion.ir.ops import Op
from fluxion.passes.offload import split_tasks


class ReverseTransform(SerialLoops):
    def __init__(self, primal, cfg):
        self.primal = primal
        self.cfg = cfg
        self.new = S.Kernel(primal.name + ".grad", list(primal.arg_types), ())
        self.new.errors = list(primal.errors)
        self.ctx = BuildContext(self.new, cfg)
        self.map = {}          # id(primal stmt) -> its replayed counterpart
        self.backup = {}       # id(primal stmt in an `if`) -> backup alloca (new IR)
        self.adj = {}          # id(primal value) -> adjoint alloca
        self.var_adj = {}      # id(primal alloca) -> adjoint of that local variable
        self.headers = {}      # id(primal scope block) -> [new block, insertion index]
        self.stacks = {}       # id(primal loop) -> (stack stmt, carried primal allocas)
        # id(primal serial loop) -> [(primal alloca, snapshot alloca)]: the locals the loop
        # only reads, as they were when its latest replay started (see _invariant_reads)
        self.invariants = {}
        self.home = {}         # id(adjoint alloca) -> primal scope block it belongs to
        self.replay_headers = []  # [block, index] where the current scope's stacks go
        self.parallel_scope = None   # primal body of the parallel loop being differentiated
        # id(parallel loop) -> {id(kernel-level alloca): alloca holding its value when the loop
        # started}: what the loop's reads of that local see when its adjoint replays it
        self.snapshots = {}
        self.used = {id(o) for s in S.walk(primal.body) for o in s.operands()}
        self.roles = {}           # id(parallel loop) -> local_roles() of it
        self.adj_snapshots = {}   # id(kernel-level alloca) -> its adjoint before this loop's

    # -- driver ------------------------------------------------------------------------------
    def run(self):
        k = self.primal
        with building(self.ctx):
            body = k.body.stmts
            # parallel loops take part only through the kernel-level locals they read and write
            self.replay_scope(k.body, body)
            self.open_header(k.body)
            tasks = split_tasks(body)
            for kind, payload in reversed(tasks):
                if kind == "range_for":
                    self.parallel_adjoint(payload)
                else:
                    for s in reversed(payload):
                        self.adjoint_stmt(s)
        return self.new

    def parallel_adjoint(self, loop):
        begin, end = self.primal_value(loop.begin), self.primal_value(loop.end)
        # the adjoint of each kernel-level local the loop accumulates into, as the code after
        # the loop left it: what every iteration's added value receives. Read once, before the
        # loop, because the iterations' reads of the local add their adjoints to it meanwhile.
        self.adj_snapshots = {}
        for a in _kernel_level_writes(loop, self.primal):
            if a.ret_type.is_float:
                va = self.var_adj_alloca(a)
                sa = emit(S.AllocaStmt(ret_type=a.ret_type, loc=loop.loc))
                emit(S.LocalStoreStmt(sa, emit(S.LocalLoadStmt(va, ret_type=a.ret_type)),
                                      loc=loop.loc))
                self.adj_snapshots[id(a)] = sa
        new = emit(S.RangeForStmt(begin.stmt, end.stmt, True, loop.block_dim, None, loc=loop.loc))
        self.parallel_scope = loop.body
        # kernel-level locals the loop uses as per-iteration scratch get a copy, and an
        # adjoint, of each iteration's own (shared, they would race between threads)
        roles = self.roles.get(id(loop), {})
        scratch = [a for a in self.primal.body.stmts
                   if isinstance(a, S.AllocaStmt) and roles.get(id(a)) == "scratch"]
        saved = [(self.map.get(id(a)), self.var_adj.get(id(a))) for a in scratch]
        snap = self.snapshots.get(id(loop), {})
        with into(new.body):
            self.map[id(loop)] = new
            for a in scratch:
                local = emit(S.AllocaStmt(ret_type=a.ret_type, loc=a.loc))
                start = emit(S.LocalLoadStmt(snap[id(a)], ret_type=a.ret_type)) \
                    if id(a) in snap else E.const(0, a.ret_type).stmt
                emit(S.LocalStoreStmt(local, start, loc=a.loc))
                self.map[id(a)] = local
            self.replay_scope(loop.body, loop.body.stmts)
            self.open_header(loop.body)
            for a in scratch:
                if a.ret_type.is_float:
                    va = self.zero_alloca(loop.body, a.ret_type, a.loc)
                    self.var_adj[id(a)] = va
                    self.home[id(va)] = loop.body
            self.adjoint_block(loop.body)
        for a, (m, va) in zip(scratch, saved):
            if m is None:
                self.map.pop(id(a), None)
            else:
                self.map[id(a)] = m
            if va is None:
                self.var_adj.pop(id(a), None)
            else:
                self.var_adj[id(a)] = va
        self.parallel_scope = None
        self.adj_snapshots = {}

    # -- replay --------------------------------------------------------------------------------
    def replay_scope(self, block, stmts, skip_push_for=None):
        """Replay a scope root's statements; backups for values computed in its `if`s first."""
        for s in _if_values(block, self.primal):
            a = emit(S.AllocaStmt(ret_type=s.ret_type, loc=s.loc))
            self.backup[id(s)] = a
        blk = builder.current().block
        self.replay_headers.append([blk, len(blk.stmts)])
        try:
            for s in stmts:
                self.replay(s)
        finally:
            self.replay_headers.pop()

    def kernel_level(self, alloca):
        return isinstance(alloca, S.AllocaStmt) and alloca.parent is self.primal.body

    def replay_parallel(self, loop):
        """In the replay of the serial part: remember the kernel-level locals the loop reads as
        they are when it starts; if it updates kernel-level locals (a reduction `s += x[i]`),
        run it again without its global effects, so that the code after it sees their values."""
        roles = self.roles[id(loop)] = local_roles(loop, self.primal)
        read = []
        for x in S.walk(loop.body):
            if isinstance(x, S.LocalLoadStmt) and id(x.alloca) in roles \
                    and x.alloca not in read:
                read.append(x.alloca)
        written = _kernel_level_writes(loop, self.primal)
        snap = {}
        for a in read:
            sa = emit(S.AllocaStmt(ret_type=a.ret_type, loc=loop.loc))
            emit(S.LocalStoreStmt(sa, self.load_mapped(a), loc=loop.loc))
            snap[id(a)] = sa
        self.snapshots[id(loop)] = snap
        if not written:
            return
        new = emit(S.RangeForStmt(self.mapped(loop.begin), self.mapped(loop.end), True,
                                  loop.block_dim, None, loc=loop.loc))
        self.map[id(loop)] = new
        with into(new.body):
            self.replay_scope(loop.body, loop.body.stmts)

    def replay_task_local(self, s):
        """In the replay of a parallel loop that is being differentiated, the kernel-level
        locals it reads or accumulates into keep the values of the serial replay: reads see
        the value the loop started with, the accumulations were made there. (Locals used as
        per-iteration scratch are replayed as they are.) True if `s` was handled."""
        if self.parallel_scope is None:
            return False
        loop = self.parallel_scope.parent_stmt
        snap = self.snapshots.get(id(loop), {})
        roles = self.roles.get(id(loop), {})
        a = s.alloca if isinstance(s, (S.LocalLoadStmt, S.LocalStoreStmt)) else \
            s.ptr if isinstance(s, S.AtomicOpStmt) else None
        if a is None or not self.kernel_level(a) or roles.get(id(a)) == "scratch":
            return False
        if isinstance(s, S.LocalLoadStmt):
            self.record(s, emit(S.LocalLoadStmt(snap[id(a)], ret_type=s.ret_type, loc=s.loc)))
        elif isinstance(s, S.AtomicOpStmt) and id(s) in self.used:
            # its old value depends on the order the iterations ran in, which this replay
            # cannot reproduce: refused rather than given a wrong gradient
            raise _error(s, "a differentiated kernel cannot use the old value of an atomic "
                            "update of a local variable from a parallel loop (its value "
                            "depends on the order of the iterations); use a field",
                         self.primal.name)
        elif isinstance(s, S.AtomicOpStmt) and id(a) in snap:
            self.record(s, emit(S.LocalLoadStmt(snap[id(a)], ret_type=s.ret_type, loc=s.loc)))
        return True

    def replay(self, s):
        m = self.map
        if _is_parallel(s):
            return self.replay_parallel(s)
        if self.replay_task_local(s):
            return
        if isinstance(s, (S.GlobalStoreStmt, S.PrintStmt, S.ReturnStmt, S.BreakStmt,
                          S.ContinueStmt)):
            if isinstance(s, (S.BreakStmt, S.ContinueStmt)):
                raise _error(s, "`break`/`continue` in a loop of a differentiated kernel is not "
                                "supported yet", self.primal.name)
            return
        if isinstance(s, S.AtomicOpStmt):
            # the update itself is a side effect on primal data; its old value (rarely used)
            # is replayed as a read of the element
            if isinstance(s.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt, S.ExternalPtrStmt)):
                c = emit(S.GlobalLoadStmt(m[id(s.ptr)], ret_type=s.ret_type, loc=s.loc))
                self.record(s, c)
                return
            # an update of a local (`s += x[i]` into a kernel-level local in a parallel
            # loop): part of the primal values, replayed as is
        if isinstance(s, S.RandStmt):
            raise _error(s, "ti.random() in a kernel that is differentiated in reverse mode: "
                            "RandStmt not supported (the gradient kernel recomputes the "
                            "kernel's values and would draw other numbers); draw them in "
                            "another kernel into a field", self.primal.name)
        if isinstance(s, S.AllocaStmt) and self.replay_headers:
            # declared at the head of the scope's replay: the adjoint mirrors an `if` in a
            # block of its own, which must still see the local (a struct-for over a sparse
            # field is an `if` around its body, whose serial loop replays its locals there)
            blk, idx = self.replay_headers[-1]
            clone = S.AllocaStmt(ret_type=s.ret_type, loc=s.loc)
            clone.parent = blk
            blk.stmts.insert(idx, clone)
            self.replay_headers[-1][1] += 1
            return self.record(s, clone)
        if isinstance(s, S.IfStmt):
            new = emit(S.IfStmt(self.mapped(s.cond), loc=s.loc))
            with into(new.then_block):
                for x in s.then_block.stmts:
                    self.replay(x)
            with into(new.else_block):
                for x in s.else_block.stmts:
                    self.replay(x)
            return
        if isinstance(s, S.RangeForStmt):
            return self.replay_range_for(s)
        if isinstance(s, S.WhileStmt):
            return self.replay_while(s)
        self.record(s, emit(_clone_flat(s, self.mapped, self.map)))

    def record(self, s, clone):
        self.map[id(s)] = clone
        b = self.backup.get(id(s))
        if b is not None:
            emit(S.LocalStoreStmt(b, clone, loc=s.loc))

    def mapped(self, s):
        return self.map[id(s)]

    def load_mapped(self, alloca):
        return emit(S.LocalLoadStmt(self.mapped(alloca), ret_type=alloca.ret_type))

    # -- adjoint -----------------------------------------------------------------------------
    def open_header(self, scope_block):
        blk = builder.current().block
        self.headers[id(scope_block)] = [blk, len(blk.stmts)]

    def insert_header(self, scope_block, stmt):
        blk, idx = self.headers[id(scope_block)]
        stmt.parent = blk
        blk.stmts.insert(idx, stmt)
        self.headers[id(scope_block)][1] += 1
        return stmt

    def zero_alloca(self, scope_block, dtype, loc):
        a = self.insert_header(scope_block, S.AllocaStmt(ret_type=dtype, loc=loc))
        zero = self.insert_header(scope_block, S.ConstStmt(0.0, ret_type=dtype, loc=loc))
        self.insert_header(scope_block, S.LocalStoreStmt(a, zero, loc=loc))
        return a

    def adj_alloca(self, s):
        a = self.adj.get(id(s))
        if a is None:
            a = self.zero_alloca(scope_of(s, self.primal), s.ret_type, s.loc)
            self.adj[id(s)] = a
            self.home[id(a)] = scope_of(s, self.primal)
        return a

    def var_adj_alloca(self, alloca):
        a = self.var_adj.get(id(alloca))
        if a is None:
            a = self.zero_alloca(scope_of(alloca, self.primal), alloca.ret_type, alloca.loc)
            self.var_adj[id(alloca)] = a
            self.home[id(a)] = scope_of(alloca, self.primal)
        return a

    def accumulate(self, target_alloca, home, value):
        dt = target_alloca.ret_type
        v = E.cast(E.to_expr(value, like=dt), dt)
        if self.parallel_scope is not None and home is self.primal.body:
            # a value of the serial part receives adjoints from every iteration at once
            emit(S.AtomicOpStmt(target_alloca, v.stmt, "add", ret_type=dt))
            return
        old = Expr(emit(S.LocalLoadStmt(target_alloca, ret_type=dt)))
        emit(S.LocalStoreStmt(target_alloca, (old + v).stmt))

    def acc(self, s, value):
        """adj[s] += value, for float-valued primal statements."""
        if s.ret_type is None or not s.ret_type.is_float:
            return
        a = self.adj_alloca(s)
        self.accumulate(a, self.home[id(a)], value)

    def adjoint_of(self, s):
        a = self.adj.get(id(s))
        if a is None:
            return None
        return Expr(emit(S.LocalLoadStmt(a, ret_type=s.ret_type)))

    def primal_value(self, s):
        b = self.backup.get(id(s))
        if b is not None:
            return Expr(emit(S.LocalLoadStmt(b, ret_type=s.ret_type)))
        return Expr(self.map.get(id(s), s))

    def grad_ptr(self, ptr):
        if isinstance(ptr, S.ExternalPtrStmt):
            if ptr.arg.no_grad:
                return None
            idx = [self.primal_value(i).stmt for i in ptr.indices]
            return emit(S.ExternalPtrStmt(idx, ptr.arg, ptr.component, True,
                                          ret_type=ptr.ret_type, loc=ptr.loc))
        gp = _grad_place(ptr.place)
        if gp is None:
            return None
        idx = [self.primal_value(i).stmt for i in ptr.indices]
        return emit(S.GlobalPtrStmt(idx, gp, ret_type=gp.dtype, loc=ptr.loc))

    def adjoint_block(self, block):
        for s in reversed(block.stmts):
            self.adjoint_stmt(s)

    def adjoint_stmt(self, s):
        ctx = builder.current()
        saved = ctx.loc
        ctx.loc = s.loc
        try:
            method = getattr(self, "adj_" + type(s).__name__, None)
            if method is not None:
                method(s)
        finally:
            ctx.loc = saved

    def adj_UnaryOpStmt(self, s):
        a = self.adjoint_of(s)
        if a is None:
            return
        op = s.op
        if op == Op.CAST:
            if s.operand.ret_type.is_float:
                self.acc(s.operand, a)
            return
        if op in rules.ZERO_DERIVATIVE or op in rules.INTEGER_ONLY:
            return
        if op not in rules.UNARY:
            raise _error(s, f"no derivative rule for `{op}`", self.primal.name)
        (p,) = rules.partials(op, [self.primal_value(s.operand)], self.primal_value(s))
        self.acc(s.operand, a * p)

    def adj_BinaryOpStmt(self, s):
        a = self.adjoint_of(s)
        if a is None:
            return
        op = s.op
        if op in rules.ZERO_DERIVATIVE or op in rules.INTEGER_ONLY:
            return
        if op not in rules.BINARY:
            raise _error(s, f"no derivative rule for `{op}`", self.primal.name)
        ps = rules.partials(op, [self.primal_value(s.lhs), self.primal_value(s.rhs)],
                            self.primal_value(s))
        for operand, p in zip((s.lhs, s.rhs), ps):
            if operand.ret_type.is_float:
                self.acc(operand, a * p)

    def adj_TernaryOpStmt(self, s):
        a = self.adjoint_of(s)
        if a is None:
            return
        c = self.primal_value(s.cond)
        self.acc(s.a, E.select(c, a, 0.0))
        self.acc(s.b, E.select(c, 0.0, a))

    def adj_LocalLoadStmt(self, s):
        a = self.adjoint_of(s)
        if a is None or not s.ret_type.is_float:
            return
        va = self.var_adj_alloca(s.alloca)
        self.accumulate(va, self.home[id(va)], a)

    def adj_LocalStoreStmt(self, s):
        if not s.alloca.ret_type.is_float:
            return
        snap = self.adj_snapshots.get(id(s.alloca))
        if snap is not None:
            return self.adj_local_reduction(s, snap)
        # created here even if no load of the variable was differentiated yet: in a loop, the
        # loads that come later in the reversed body feed this store in the next reversed
        # iteration (`p, q = q, p + q`)
        va = self.var_adj_alloca(s.alloca)
        t = Expr(emit(S.LocalLoadStmt(va, ret_type=va.ret_type)))
        zero = E.const(0.0, va.ret_type)
        emit(S.LocalStoreStmt(va, zero.stmt))
        self.acc(s.value, t)

    def adj_local_reduction(self, s, snap):
        """`s = s + v` on a kernel-level local in a parallel loop: a reduction, as the passes
        compile it. Every v receives the adjoint the local had after the loop; the local's
        own adjoint stays (its value before the loop reaches the result unchanged)."""
        t = Expr(emit(S.LocalLoadStmt(snap, ret_type=snap.ret_type)))
        v = _strip_casts(s.value)

        def own(x):
            x = _strip_casts(x)
            return isinstance(x, S.LocalLoadStmt) and x.alloca is s.alloca

        # (casts between float types pass the adjoint through unchanged)
        if isinstance(v, S.BinaryOpStmt) and v.op in (Op.ADD, Op.SUB) and own(v.lhs):
            self.acc(v.rhs, t if v.op == Op.ADD else -t)
        elif isinstance(v, S.BinaryOpStmt) and v.op == Op.ADD and own(v.rhs):
            self.acc(v.lhs, t)
        else:
            self.acc(s.value, t)

    def adj_GlobalLoadStmt(self, s):
        a = self.adjoint_of(s)
        if a is None or gradients_stopped(s):
            return
        gp = self.grad_ptr(s.ptr)
        if gp is not None:
            emit(S.AtomicOpStmt(gp, E.cast(a, gp.ret_type).stmt, "add", ret_type=gp.ret_type))

    def adj_GlobalStoreStmt(self, s):
        if not s.value.ret_type.is_float:
            return
        gp = self.grad_ptr(s.ptr)
        if gp is not None:
            self.acc(s.value, Expr(emit(S.GlobalLoadStmt(gp, ret_type=gp.ret_type))))
            # the value the element held before this store did not survive it: what wrote
            # that value (an earlier statement, an earlier iteration of a loop, an earlier
            # kernel recorded by a Tape) gets no gradient from the element. Fields and arrays
            # alike, as in the original system (ti.ad.torch_function hands the grad kernel
            # copies of the gradients torch gives it, which it may consume)
            emit(S.GlobalStoreStmt(gp, E.const(0.0, gp.ret_type).stmt))

    def adj_AtomicOpStmt(self, s):
        if not s.ret_type.is_float:
            return
        if isinstance(s.ptr, S.AllocaStmt):
            # the local's adjoint reaches the added value unchanged, whichever iteration
            # added it; the local keeps its adjoint for the earlier updates
            va = self.adj_snapshots.get(id(s.ptr)) or self.var_adj.get(id(s.ptr))
            if va is None:
                return          # nothing after the update depends on the local
            if s.op not in (Op.ADD, Op.SUB):
                raise _error(s, f"atomic `{s.op}` on a local float variable has no derivative "
                                f"rule in a differentiated kernel", self.primal.name)
            g = Expr(emit(S.LocalLoadStmt(va, ret_type=va.ret_type)))
            self.acc(s.value, g if s.op == Op.ADD else -g)
            return
        gp = self.grad_ptr(s.ptr)
        if gp is None:
            return
        g = Expr(emit(S.GlobalLoadStmt(gp, ret_type=gp.ret_type)))
        if s.op == Op.ADD:
            self.acc(s.value, g)
        elif s.op in (Op.MIN, Op.MAX):
            # the update that won is the one equal to the element's final value
            idx = [self.primal_value(i).stmt for i in s.ptr.indices]
            if isinstance(s.ptr, S.ExternalPtrStmt):
                p = emit(S.ExternalPtrStmt(idx, s.ptr.arg, s.ptr.component, False,
                                           ret_type=s.ret_type))
            else:
                p = emit(S.GlobalPtrStmt(idx, s.ptr.place, ret_type=s.ret_type))
            final = Expr(emit(S.GlobalLoadStmt(p, ret_type=s.ret_type)))
            self.acc(s.value, E.select(final == self.primal_value(s.value), g, 0.0))
        else:
            raise _error(s, f"atomic `{s.op}` on floats has no derivative rule", self.primal.name)

    def adj_IfStmt(self, s):
        new = emit(S.IfStmt(E.truth(self.primal_value(s.cond)).stmt, loc=s.loc))
        with into(new.then_block):
            self.adjoint_block(s.then_block)
        with into(new.else_block):
            self.adjoint_block(s.else_block)

def run(kernel, cfg):
    for s in S.walk(kernel.body):
        if isinstance(s, S.ExternalPtrStmt) and s.grad:
            raise FluxionRuntimeError(format_location(
                s.loc, f"kernel '{kernel.name}': Cannot automatically differentiate through a "
                       f"grad tensor ('{s.arg.name}.grad'); to differentiate with respect to "
                       f"it, pass the gradient array as an argument of its own"))
    # reads of what the kernel itself just stored become that value: no gradient goes
    # through the grads of intermediate fields (see store_forward.py)
    store_forward.run(kernel)
    t = ReverseTransform(kernel, cfg)
    return t.run()
