"""Forward-mode autodiff: primal kernel IR -> its dual instance, which computes every value
together with its tangent in one pass (`t_out = sum(p_i * t_i)`, from the same per-op rules
as reverse mode). Fields carry tangents in their `.dual`; locals in a shadow local each.

The structure of the kernel is kept as is (loops stay loops, parallel stays parallel), so
dual instances need no stacks; applied to a grad kernel, this gives forward-over-reverse
(Hessian-vector products).
"""
from __future__ import annotations

from fluxion.autodiff import rules
from fluxion.autodiff.primal import _clone_flat, _error, gradients_stopped
from fluxion.ir import expr as E
from fluxion.ir.builder import BuildContext, building, emit, into
from fluxion.ir.expr import Expr
from fluxion.ir import stmts as S
from fluxion.ir.ops import Op


def _dual_place(place):
    return place.dual_place()


class ForwardTransform:
    def __init__(self, primal, cfg):
        self.primal = primal
        self.cfg = cfg
        self.new = S.Kernel(primal.name + ".dual", list(primal.arg_types), primal.ret_types)
        self.new.errors = list(primal.errors)
        self.ctx = BuildContext(self.new, cfg)
        self.map = {}       # id(primal stmt) -> new stmt
        self.tan = {}       # id(primal value) -> tangent stmt (absent: zero)
        self.shadow = {}    # id(primal alloca) -> alloca of its tangent
        self.in_parallel = False
        self.needs_fixup = False     # a parallel atomic min/max waits for its winner
        self.replaying = False

    def run(self):
        with building(self.ctx):
            self.block(self.primal.body.stmts)
        return self.new

    def block(self, stmts):
        for s in stmts:
            self.stmt(s)

    def mapped(self, s):
        return self.map[id(s)]

    def stmt(self, s):
        ctx = self.ctx
        ctx.loc = s.loc
        if isinstance(s, S.IfStmt):
            new = emit(S.IfStmt(self.mapped(s.cond), loc=s.loc))
            with into(new.then_block):
                self.block(s.then_block.stmts)
            with into(new.else_block):
                self.block(s.else_block.stmts)
            return
        if isinstance(s, S.RangeForStmt):
            top = s.parent is self.primal.body
            saved = self.in_parallel
            self.in_parallel = saved or s.parallel
            new = emit(S.RangeForStmt(self.mapped(s.begin), self.mapped(s.end), s.parallel,
                                      s.block_dim, None, loc=s.loc))
            self.map[id(s)] = new
            with into(new.body):
                self.block(s.body.stmts)
            if top and self.needs_fixup:
                self.fixup_loop(s)
            self.in_parallel = saved
            return
        if isinstance(s, S.WhileStmt):
            new = emit(S.WhileStmt(loc=s.loc))
            with into(new.body):
                self.block(s.body.stmts)
            return
        if self.replaying and isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt, S.PrintStmt,
                                             S.ReturnStmt)):
            return self.replay_effect(s)
        new = emit(_clone_flat(s, self.mapped, self.map))
        self.map[id(s)] = new
        method = getattr(self, "dual_" + type(s).__name__, None)
        if method is not None:
            t = method(s)
            if t is not None:
                self.tan[id(s)] = E.cast(E.to_expr(t, like=s.ret_type), s.ret_type).stmt

    # -- tangent rules -------------------------------------------------------------------------
    def t(self, s):
        st = self.tan.get(id(s))
        return Expr(st) if st is not None else None

    def p(self, s):
        return Expr(self.map[id(s)])

    def dual_UnaryOpStmt(self, s):
        if not s.ret_type.is_float:
            return None
        tx = self.t(s.operand)
        if tx is None:
            return None
        op = s.op
        if op == Op.CAST:
            return tx
        if op in rules.ZERO_DERIVATIVE or op in rules.INTEGER_ONLY:
            return None
        if op not in rules.UNARY:
            raise _error(s, f"no derivative rule for `{op}`", self.primal.name)
        (d,) = rules.partials(op, [self.p(s.operand)], self.p(s))
        return tx * d

    def dual_BinaryOpStmt(self, s):
        if not s.ret_type.is_float:
            return None
        tl, tr = self.t(s.lhs), self.t(s.rhs)
        if tl is None and tr is None:
            return None
        op = s.op
        if op in rules.ZERO_DERIVATIVE or op in rules.INTEGER_ONLY:
            return None
        if op not in rules.BINARY:
            raise _error(s, f"no derivative rule for `{op}`", self.primal.name)
        ps = rules.partials(op, [self.p(s.lhs), self.p(s.rhs)], self.p(s))
        out = None
        for tv, d in zip((tl, tr), ps):
            if tv is not None:
                term = tv * d
                out = term if out is None else out + term
        return out

    def dual_TernaryOpStmt(self, s):
        if not s.ret_type.is_float:
            return None
        ta, tb = self.t(s.a), self.t(s.b)
        if ta is None and tb is None:
            return None
        return E.select(self.p(s.cond), ta if ta is not None else 0.0,
                        tb if tb is not None else 0.0)

    def dual_AllocaStmt(self, s):
        if s.ret_type.is_float:
            a = emit(S.AllocaStmt(ret_type=s.ret_type, loc=s.loc))
            emit(S.LocalStoreStmt(a, E.const(0.0, s.ret_type).stmt))
            self.shadow[id(s)] = a
        return None

    def dual_LocalLoadStmt(self, s):
        a = self.shadow.get(id(s.alloca))
        if a is None:
            return None
        return Expr(emit(S.LocalLoadStmt(a, ret_type=s.ret_type)))

    def dual_LocalStoreStmt(self, s):
        a = self.shadow.get(id(s.alloca))
        if a is not None:
            t = self.t(s.value)
            emit(S.LocalStoreStmt(a, (t if t is not None else E.const(0.0, a.ret_type)).stmt))

    def dual_ptr(self, ptr):
        if not isinstance(ptr, S.GlobalPtrStmt):
            return None
        dp = _dual_place(ptr.place)
        if dp is None:
            return None
        idx = [self.mapped(i) for i in ptr.indices]
        return emit(S.GlobalPtrStmt(idx, dp, ret_type=dp.dtype, loc=ptr.loc))

    def dual_GlobalLoadStmt(self, s):
        if not s.ret_type.is_float or gradients_stopped(s):
            return None
        dp = self.dual_ptr(s.ptr)
        if dp is None:
            return None
        return Expr(emit(S.GlobalLoadStmt(dp, ret_type=s.ret_type)))

    def dual_GlobalStoreStmt(self, s):
        if not s.value.ret_type.is_float:
            return
        dp = self.dual_ptr(s.ptr)
        if dp is not None:
            t = self.t(s.value)
            emit(S.GlobalStoreStmt(dp, (t if t is not None else E.const(0.0, dp.ret_type)).stmt))

    def dual_AtomicOpStmt(self, s):
        if not s.ret_type.is_float:
            return None
        if isinstance(s.ptr, S.AllocaStmt):
            # an adjoint accumulated from a parallel loop (in a grad kernel)
            dp = self.shadow.get(id(s.ptr))
        else:
            dp = self.dual_ptr(s.ptr)
        t = self.t(s.value)
        if dp is None or t is None:
            return None
        if s.op in (Op.MIN, Op.MAX):
            if isinstance(s.ptr, S.AllocaStmt):
                raise _error(s, f"forward mode does not support atomic `{s.op}` on a local "
                                f"float variable", self.primal.name)
            if self.in_parallel:
                # which update wins is known only when the loop is over: a second pass
                self.needs_fixup = True
                return None
            old = self.p(s)
            better = (self.p(s.value) < old) if s.op == Op.MIN else (self.p(s.value) > old)
            cond = emit(S.IfStmt(E.truth(better).stmt))
            with into(cond.then_block):
                emit(S.GlobalStoreStmt(dp, t.stmt))
            return None
        if s.op not in (Op.ADD, Op.SUB):
            raise _error(s, f"forward mode does not support atomic `{s.op}` on floats",
                         self.primal.name)
        emit(S.AtomicOpStmt(dp, (t if s.op == Op.ADD else -t).stmt, "add", ret_type=dp.ret_type))
        return None

    def fixup_loop(self, loop):
        """Replay `loop` without side effects; where a min/max update won (its value is the
        element's final value), store its tangent."""
        self.needs_fixup = False
        fix = emit(S.RangeForStmt(self.mapped(loop.begin), self.mapped(loop.end), loop.parallel,
                                  loop.block_dim, None, loc=loop.loc))
        self.map[id(loop)] = fix
        self.replaying = True
        try:
            with into(fix.body):
                self.block(loop.body.stmts)
        finally:
            self.replaying = False

    def replay_effect(self, s):
        if isinstance(s, S.AtomicOpStmt) and isinstance(s.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)):
            final = emit(S.GlobalLoadStmt(self.mapped(s.ptr), ret_type=s.ret_type))
            self.map[id(s)] = final     # the replayed "old value": approximate, no tangent
            if s.op in (Op.MIN, Op.MAX) and s.ret_type.is_float:
                dp = self.dual_ptr(s.ptr)
                t = self.t(s.value)
                if dp is not None:
                    won = Expr(final) == self.p(s.value)
                    cond = emit(S.IfStmt(E.truth(won).stmt))
                    with into(cond.then_block):
                        zero = E.const(0.0, dp.ret_type)
                        emit(S.GlobalStoreStmt(dp, (t if t is not None else zero).stmt))


def run(kernel, cfg):
    return ForwardTransform(kernel, cfg).run()
