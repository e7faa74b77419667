"""Loops: control flow, counted loops, the row loops and unroll-and-jam that the CPU's loop
passes ask for (passes/rows.py, passes/jam.py), LLVM's parallel-loop marks (passes/
independent.py), and the per-thread accumulators of privatized reductions
(passes/reduction.py).

The passes decide; this lowers what they decided. What stays here is LLVM-level by nature:
the row and column counters, and the fused columns of unroll-and-jam, are LLVM values (each
fused column is the body lowered again with its own values; the IR keeps one body).

Mixed into FunctionLowering (codegen/lower.py).
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen.linear import form_sum
from fluxion.codegen.llvm_types import I32, I64, llvm_type
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionInternalError
from fluxion.ir.ops import Op


class LoopLowering:
    # -- control flow ----------------------------------------------------------------------
    def lower_IfStmt(self, s):
        b = self.b
        cond = b.icmp_unsigned("!=", self.v(s.cond), ir.Constant(I32, 0))
        then_bb = self.fn.append_basic_block("then")
        else_bb = self.fn.append_basic_block("else")
        merge = self.fn.append_basic_block("endif")
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        self.lower_block(s.then_block)
        if not b.block.is_terminated:
            b.branch(merge)
        b.position_at_end(else_bb)
        self.lower_block(s.else_block)
        if not b.block.is_terminated:
            b.branch(merge)
        b.position_at_end(merge)

    def lower_WhileStmt(self, s):
        b = self.b
        head = self.fn.append_basic_block("while")
        exit_ = self.fn.append_basic_block("endwhile")
        b.branch(head)
        b.position_at_end(head)
        self.loops.append((head, exit_))
        self.lower_block(s.body)
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(head)
        b.position_at_end(exit_)

    def lower_BreakStmt(self, s):
        self.b.branch(self.loops[-1][1])

    def lower_ContinueStmt(self, s):
        self.b.branch(self.loops[-1][0])

    def lower_RangeForStmt(self, s):
        begin = self.b.sext(self.v(s.begin), I64)
        end = self.b.sext(self.v(s.end), I64)
        self.counted_loop(s, begin, end)

    def counted_loop(self, s, begin, end, stride=None, parallel=False, unroll=None):
        """for i in [begin, end) step `stride` (1 unless given), the body indexing with i.
        `parallel`: the iterations of a parallel loop (see mark_parallel). `unroll`: ask LLVM
        to unroll it that many times (with `stride`: i + stride must not wrap, which holds
        for any array: i < end <= 2**63 - 1 and the stride is a grid's thread count)."""
        b = self.b
        counter = self.alloca(I64, "i")
        b.store(begin, counter)
        head = self.fn.append_basic_block("for")
        body = self.fn.append_basic_block("for_body")
        step = self.fn.append_basic_block("for_step")
        exit_ = self.fn.append_basic_block("endfor")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        b.cbranch(b.icmp_signed("<", i, end), body, exit_)
        b.position_at_end(body)
        self.loop_index[id(s)] = i
        nested = self.loop_body(s, step, exit_)
        b.store(b.add(b.load(counter), stride or ir.Constant(I64, 1),
                      flags=("nsw",) if unroll else ()), counter)
        latch = b.branch(head)
        if parallel:
            self.mark_parallel([head, body, step] + nested, latch)
        elif unroll:
            latch.set_metadata("llvm.loop", self.ml.unroll_metadata(unroll))
        b.position_at_end(exit_)

    def loop_body(self, s, step, exit_):
        """Lower the body of loop `s` where `break` goes to `exit_` and `continue` (and the end
        of the body) to `step`; the builder is left at `step`. Returns the blocks the body
        made (a parallel loop marks their accesses)."""
        b = self.b
        self.loops.append((step, exit_))
        first = len(self.fn.blocks)
        self.lower_block(s.body)
        nested = self.fn.blocks[first:]
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(step)
        b.position_at_end(step)
        return nested

    def mark_parallel(self, blocks, latch):
        """Tell LLVM that the iterations of this loop touch memory independently: they do, by
        the language's rule for a parallel for (iterations run in any order, on any thread).
        Without this a loop that gathers through computed indices (the seed's padding reads a
        tile at indices computed per pixel) is not vectorized, because LLVM cannot bound the
        gathered range to check it against the stores at run time. Accesses to the
        function's own stack (counters, accumulators that carry a value from one iteration to
        the next) are left out; LLVM turns them into registers anyway."""
        group, loop_id = self.ml.parallel_loop_metadata()
        for block in blocks:
            for ins in block.instructions:
                if isinstance(ins, ir.LoadInstr):
                    ptr = ins.operands[0]
                elif isinstance(ins, ir.StoreInstr):
                    ptr = ins.operands[1]
                else:
                    continue
                while isinstance(ptr, (ir.GEPInstr, ir.CastInstr)):
                    ptr = ptr.operands[0]
                if not isinstance(ptr, ir.AllocaInstr):
                    ins.set_metadata("llvm.access.group", group)
        latch.set_metadata("llvm.loop", loop_id)

    def row_loop(self, s, lo, hi, parallel=False):
        """The chunk [lo, hi) of a parallel loop with rows (`s.rows` is W, passes/rows.py) or
        unroll-and-jam (`s.jam`, passes/jam.py), as rows of W columns with a row and a column
        counter: the body's RowIndexStmts read them, with no division per iteration, and the
        inner loop runs over contiguous columns, which LLVM vectorizes. Without rows (a 1-D
        loop with jam), one row of hi - lo columns. With jam, groups of `s.jam` columns are
        lowered together (lower_jammed) while they fit in the row, the rest one by one."""
        b = self.b
        extent = s.rows
        if extent is None:
            origin, w = lo, b.sub(hi, lo)
            lo, hi = ir.Constant(I64, 0), w
        else:
            origin = None
            # a constant is lowered here (it may be defined inside the body, after this point)
            w = self.v(extent) if not isinstance(extent, S.ConstStmt) \
                else self.lower_ConstStmt(extent)
            w = b.sext(w, I64) if w.type.width < 64 else w
        r0 = b.udiv(lo, w)
        row, col = self.alloca(I64, "row"), self.alloca(I64, "col")
        b.store(r0, row)
        b.store(b.sub(lo, b.mul(r0, w)), col)
        head = self.fn.append_basic_block("rows")
        row_start = self.fn.append_basic_block("row_start")
        inner_head = self.fn.append_basic_block("cols")
        body = self.fn.append_basic_block("cols_body")
        step = self.fn.append_basic_block("cols_step")
        row_end = self.fn.append_basic_block("row_end")
        exit_ = self.fn.append_basic_block("endrows")
        b.branch(head)
        b.position_at_end(head)
        r = b.load(row)
        base = b.mul(r, w)
        b.cbranch(b.icmp_signed("<", base, hi), row_start, exit_)
        b.position_at_end(row_start)
        rest = b.sub(hi, base)
        cend = b.select(b.icmp_signed("<", rest, w), rest, w)
        if origin is not None:
            base = b.add(base, origin)

        def enter(c):
            """Set the loop index and the row/column counters for column `c`."""
            self.loop_index[id(s)] = self.register_form(
                b.add(base, c), form_sum(self.form_of(base), self.form_of(c), 1))
            self.loop_index[("col", id(s))] = c
            self.loop_index[("row", id(s))] = r

        if s.jam:
            width = s.jam
            jam_head = self.fn.append_basic_block("jam")
            jam_body = self.fn.append_basic_block("jam_body")
            b.branch(jam_head)
            b.position_at_end(jam_head)
            c = b.load(col)
            fits = b.icmp_signed("<=", b.add(c, ir.Constant(I64, width)), cend)
            b.cbranch(fits, jam_body, inner_head)
            b.position_at_end(jam_body)
            self.lower_jammed(s, c, enter, width)
            b.store(b.add(c, ir.Constant(I64, width)), col)
            b.branch(jam_head)
        else:
            b.branch(inner_head)
        b.position_at_end(inner_head)
        c = b.load(col)
        b.cbranch(b.icmp_signed("<", c, cend), body, row_end)
        b.position_at_end(body)
        enter(c)
        nested = self.loop_body(s, step, exit_)
        b.store(b.add(b.load(col), ir.Constant(I64, 1)), col)
        latch = b.branch(inner_head)
        if parallel:
            self.mark_parallel([inner_head, body, step] + nested, latch)
        b.position_at_end(row_end)
        b.store(b.add(b.load(row), ir.Constant(I64, 1)), row)
        b.store(ir.Constant(I64, 0), col)
        b.branch(head)
        b.position_at_end(exit_)

    def lower_RowIndexStmt(self, s):
        """The row or column counter of the current iteration (row_loop), in the statement's
        type; linear forms (codegen/linear.py) use the 64-bit counter itself."""
        v = self.loop_index[(s.kind, id(s.loop))]
        self.values[("wide", id(s))] = v
        ty = llvm_type(s.ret_type)
        return v if v.type == ty else self.b.trunc(v, ty)

    def lower_jammed(self, s, c, enter, width):
        """Columns c .. c+width-1 of a parallel loop whose body is `pre; for ...: reduce; post`
        (passes/jam.py), with the serial loop of every column fused into one (unroll and
        jam): a load that does not depend on the column (a filter tap, another body's
        position) is made once for all of them, and each loaded value feeds `width`
        accumulators. Parallel iterations may interleave in any order, so this is legal
        whenever the fused loops have the same trip count; when they do not (checked at run
        time), they run one after another."""
        pre, inner, post = jam_parts(s)
        b = self.b
        outer_values, outer_index = self.values, self.loop_index
        copies = []
        for k in range(width):
            self.values, self.loop_index = dict(outer_values), dict(outer_index)
            ck = b.add(c, ir.Constant(I64, k))
            enter(self.register_form(ck, form_sum(self.form_of(c), ({}, k), 1)))
            for st in pre:
                self.lower(st)
            # linear forms in the column counter (index64): `u - t` of different columns is
            # then the same value, and a load that uses it is made once for all of them
            bform = self.linear(inner.begin)
            begin, end = self.emit_form(bform), self.index64(inner.end)
            copies.append((self.values, self.loop_index, begin, end, bform))

        def use(k):
            values, index = copies[k][:2]
            self.values, self.loop_index = dict(values), dict(index)

        trip = [b.sub(cp[3], cp[2]) for cp in copies]
        same = b.icmp_signed("==", trip[0], trip[1])
        for t in trip[2:]:
            same = b.and_(same, b.icmp_signed("==", trip[0], t))
        fused = self.fn.append_basic_block("jam_fused")
        apart = self.fn.append_basic_block("jam_apart")
        after = self.fn.append_basic_block("jam_post")
        b.cbranch(same, fused, apart)
        b.position_at_end(fused)
        counter = self.alloca(I64, "jam_i")
        b.store(ir.Constant(I64, 0), counter)
        head = self.fn.append_basic_block("jam_for")
        body = self.fn.append_basic_block("jam_for_body")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        b.cbranch(b.icmp_signed("<", i, trip[0]), body, after)
        b.position_at_end(body)
        for k in range(width):
            use(k)
            self.loop_index[id(inner)] = self.register_form(
                b.add(copies[k][2], i, flags=("nsw",)),
                form_sum(copies[k][4], self.form_of(i), 1))
            self.lower_block(inner.body)
        b.store(b.add(b.load(counter), ir.Constant(I64, 1)), counter)
        b.branch(head)
        b.position_at_end(apart)
        for k in range(width):
            use(k)
            self.counted_loop(inner, copies[k][2], copies[k][3])
        b.branch(after)
        b.position_at_end(after)
        for k in range(width):
            use(k)
            for st in post:
                self.lower(st)
        self.values, self.loop_index = outer_values, outer_index

    def lower_LoopIndexStmt(self, s):
        v = self.loop_index[id(s.loop)]
        ty = llvm_type(s.ret_type)
        return v if v.type == ty else self.b.trunc(v, ty)

    # -- privatized reductions of a parallel loop (see passes/reduction.py) ----------------
    def open_reductions(self, loop):
        """A per-thread accumulator, at the operation's identity, for each reduction."""
        accs = []
        for ptr, op in loop.reductions or ():
            if ptr.ret_type.is_float and ptr.ret_type.bits == 16:
                # f16 updates stay atomic: each one rounds the shared value, so every order
                # of the threads gives the serial loop's result, as in the original system
                # (per-thread partial sums would round differently: 1057, not 1029, for
                # 1000 additions of 1.12)
                continue
            ty = llvm_type(ptr.ret_type)
            acc = self.alloca(ty, "acc")
            self.b.store(_identity(op, ptr.ret_type, ty), acc)
            self.private[id(ptr)] = acc
            accs.append((ptr, op, acc))
        return accs

    def close_reductions(self, accs, apply=None):
        """One atomic update of each reduced element with this thread's accumulator."""
        for ptr, op, acc in accs:
            del self.private[id(ptr)]
            red = S.AtomicOpStmt(ptr, None, op, ret_type=ptr.ret_type)
            (apply or self.atomic_apply)(red, self.v(ptr), self.b.load(acc))


def _identity(op, dt, ty):
    if op in (Op.ADD, Op.BIT_OR, Op.BIT_XOR):
        return ir.Constant(ty, 0)
    if op == Op.BIT_AND:
        return ir.Constant(ty, -1)
    if dt.is_float:
        return ir.Constant(ty, float("inf") if op == Op.MIN else float("-inf"))
    if dt.is_signed:
        big = (1 << (dt.bits - 1)) - 1
        return ir.Constant(ty, big if op == Op.MIN else -big - 1)
    return ir.Constant(ty, (1 << dt.bits) - 1 if op == Op.MIN else 0)


def jam_parts(loop):
    """(statements before, the inner loop, statements after) of a loop that passes/jam.py
    marked: its body has exactly one RangeForStmt at its top level."""
    stmts = loop.body.stmts
    at = [k for k, st in enumerate(stmts) if isinstance(st, (S.RangeForStmt, S.WhileStmt))]
    if len(at) != 1 or not isinstance(stmts[at[0]], S.RangeForStmt):
        raise FluxionInternalError(f"codegen: loop ${loop.id} is marked for unroll-and-jam but "
                                   f"its body is not straight-line code around one range loop")
    return stmts[:at[0]], stmts[at[0]], stmts[at[0] + 1:]
