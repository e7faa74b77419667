"""Serial loops in reverse mode: how `reverse.ReverseTransform` replays a serial loop (range or
while) and runs it backwards in the adjoint.

A loop's body is replayed once in the forward replay of its scope, and again inside the reversed
loop, iteration by iteration, right before that iteration's adjoint. Between the two, the code
after the loop has been replayed too, so the locals of the enclosing scope no longer hold what
the loop saw:
- locals the loop assigns and reads back (carried from one iteration to the next) are pushed on
  a bounded per-thread stack at each iteration's start and restored, last first;
- locals the loop only reads are copied before the loop (a snapshot), and the reversed loop's
  replay reads the copies: the code after the loop may assign them again.
"""
from __future__ import annotations

import contextlib

from fluxion.autodiff.primal import _carried, _condition_end, _IndexAlias, _invariant_reads
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir.builder import emit, into
from fluxion.ir.expr import Expr


class SerialLoops:
    """Mixin of ReverseTransform (which holds map, stacks, invariants, replay_headers)."""

    def snapshot_invariants(self, loop):
        """Before a serial loop's replay: copies of the locals it only reads, in allocas at
        the top of the scope's replay (so that a mirrored `if` of the adjoint reaches them)."""
        snaps = []
        for a in _invariant_reads(loop):
            if self.parallel_scope is not None and self.kernel_level(a) and \
                    self.roles.get(id(self.parallel_scope.parent_stmt), {}).get(id(a)) != "scratch":
                continue    # read from the parallel loop's own snapshot (replay_task_local)
            if id(a) not in self.map:
                continue
            sa = S.AllocaStmt(ret_type=a.ret_type, loc=loop.loc)
            hdr = self.replay_headers[-1]
            sa.parent = hdr[0]
            hdr[0].stmts.insert(hdr[1], sa)
            hdr[1] += 1
            emit(S.LocalStoreStmt(sa, self.load_mapped(a), loc=loop.loc))
            snaps.append((a, sa))
        self.invariants[id(loop)] = snaps

    @contextlib.contextmanager
    def reading_invariants(self, loop):
        """The loop's replay inside its adjoint reads the snapshots of the locals it only reads,
        and the backups of the values it uses that its scope computed inside an `if` (whose
        replay the adjoint's mirrored `if` does not see: `(i + 4) % n` computed before the
        loop, in the `if` of a struct-for over a sparse field)."""
        snaps = self.invariants.get(id(loop), [])
        inside = {id(x) for x in S.walk(loop.body)}
        outer = {}
        for x in S.walk(loop.body):
            for o in x.operands():
                if id(o) not in inside and id(o) in self.backup:
                    outer[id(o)] = o
        saved = [(a, self.map.get(id(a))) for a, _ in snaps] + \
            [(o, self.map.get(id(o))) for o in outer.values()]
        for a, sa in snaps:
            self.map[id(a)] = sa
        for o in outer.values():
            self.map[id(o)] = emit(S.LocalLoadStmt(self.backup[id(o)], ret_type=o.ret_type,
                                                   loc=loop.loc))
        try:
            yield
        finally:
            for a, m in saved:
                self.map[id(a)] = m

    def replay_range_for(self, s):
        self.snapshot_invariants(s)
        carried = _carried(s)
        # a range loop knows its trip count: it needs a stack only for carried values
        stack = self.new_stack(s, carried) if carried else None
        self.stacks[id(s)] = (stack, carried)
        new = emit(S.RangeForStmt(self.mapped(s.begin), self.mapped(s.end), False, s.block_dim,
                                  None, loc=s.loc))
        self.map[id(s)] = new
        with into(new.body):
            if stack is not None:
                emit(S.AdStackPushStmt(stack, [self.load_mapped(a) for a in carried], loc=s.loc))
            self.replay_scope(s.body, s.body.stmts)

    def replay_while(self, s):
        self.snapshot_invariants(s)
        carried = _carried(s)
        stack = self.new_stack(s, carried)
        cut = _condition_end(s)
        new = emit(S.WhileStmt(loc=s.loc))
        with into(new.body):
            for x in s.body.stmts[:cut]:
                if x is s.body.stmts[cut - 1]:
                    # the loop's exit test: kept as is, before the iteration is recorded
                    brk = emit(S.IfStmt(self.mapped(x.cond), loc=x.loc))
                    with into(brk.then_block):
                        emit(S.BreakStmt(loc=x.loc))
                else:
                    self.replay(x)
            emit(S.AdStackPushStmt(stack, [self.load_mapped(a) for a in carried], loc=s.loc))
            self.replay_scope(s.body, s.body.stmts[cut:])

    def new_stack(self, loop, carried):
        code = len(self.new.errors)
        self.new.errors.append((
            f"autodiff: this loop ran more iterations than the autodiff stack holds "
            f"(ad_stack_size={self.cfg.ad_stack_size}); raise it with ti.init(ad_stack_size=...)",
            loop.loc, None))
        # declared at the top of the scope's replay, so the mirrored adjoint of a loop inside
        # an `if` can still reach it
        st = S.AdStackAllocaStmt(tuple(a.ret_type for a in carried),
                                 (self.cfg.ad_stack_size, code), loc=loop.loc)
        hdr = self.replay_headers[-1]
        st.parent = hdr[0]
        hdr[0].stmts.insert(hdr[1], st)
        hdr[1] += 1
        self.stacks[id(loop)] = (st, carried)
        return st

    def adj_RangeForStmt(self, s):
        stack, carried = self.stacks[id(s)]
        begin, end = self.primal_value(s.begin), self.primal_value(s.end)
        n = end - begin
        rev = emit(S.RangeForStmt(E.const(0, n.dtype).stmt, n.stmt, False, s.block_dim, None,
                                  loc=s.loc))
        with into(rev.body):
            j = Expr(emit(S.LoopIndexStmt(rev, ret_type=s.begin.ret_type)))
            i = end - 1 - j
            self.restore(stack, carried)
            # the replayed body reads the original loop's index as i, counting down
            self.map[id(s)] = _IndexAlias(i.stmt)
            with self.reading_invariants(s):
                self.replay_scope(s.body, s.body.stmts)
            self.open_header(s.body)
            self.adjoint_block(s.body)

    def adj_WhileStmt(self, s):
        stack, carried = self.stacks[id(s)]
        cut = _condition_end(s)
        rev = emit(S.WhileStmt(loc=s.loc))
        with into(rev.body):
            size = Expr(emit(S.AdStackSizeStmt(stack, ret_type=self.cfg.default_ip)))
            done = emit(S.IfStmt((size == 0).stmt))
            with into(done.then_block):
                emit(S.BreakStmt())
            self.restore(stack, carried)
            with self.reading_invariants(s):
                for x in s.body.stmts[:max(cut - 1, 0)]:
                    self.replay(x)
                self.replay_scope(s.body, s.body.stmts[cut:])
            self.open_header(s.body)
            for x in reversed(s.body.stmts[cut:]):
                self.adjoint_stmt(x)

    def restore(self, stack, carried):
        if stack is None:
            return
        for k, a in enumerate(carried):
            top = emit(S.AdStackTopStmt(stack, k, ret_type=a.ret_type))
            emit(S.LocalStoreStmt(self.mapped(a), top))
        emit(S.AdStackPopStmt(stack))
