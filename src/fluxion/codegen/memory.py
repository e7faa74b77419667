"""Memory: locals, field and array addresses, loads, stores and atomics, the scatter
privatization's per-thread copies, autodiff stacks and the Tape's overwrite log.

Mixed into FunctionLowering (codegen/lower.py). Addresses index through `index64`
(codegen/linear.py).
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen import tasks
from fluxion.codegen.linear import form_scale, form_sum
from fluxion.codegen.llvm_types import I1, I8, I8P, I32, I64, I64P, llvm_type
from fluxion.codegen.pool import PooledAddress
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.ops import Op


class MemoryLowering:
    # -- locals ----------------------------------------------------------------------------
    def lower_AllocaStmt(self, s):
        return self.alloca(llvm_type(s.ret_type))

    def lower_LocalLoadStmt(self, s):
        return self.b.load(self.v(s.alloca))

    def lower_LocalStoreStmt(self, s):
        self.b.store(self.v(s.value), self.v(s.alloca))

    # -- fields ----------------------------------------------------------------------------
    def lower_GlobalPtrStmt(self, s):
        b = self.b
        place = s.place
        if place.pool is not None:
            return PooledAddress(s)          # (computed where it is used: codegen/pool.py)
        offset = self.dense_offset(place, s.indices)
        if offset is False:
            offset = self.place_offset(place, [self.index64(i) for i in s.indices])
        base = self.ml.place_base(place)
        p = base if offset is None else b.gep(base, [offset])
        return b.bitcast(p, llvm_type(place.dtype).as_pointer())

    def dense_offset(self, place, indices):
        """The byte offset of a place whose levels are all dense and unsplit (no division or
        remainder on any axis), as one linear form over the indices' terms, or False for
        another place (place_offset). An element's neighbours (`x[i + 1, j]`) then share
        every term but the constant, which LLVM folds into the address of the load: a
        stencil's or a particle's taps cost one address, not an add chain per tap."""
        off = place.field.offset
        total = {}, 0
        forms = {}
        for t in place.terms:
            if t.divisor != 1 or not t.outermost:
                return False
            f = forms.get(t.axis)
            if f is None:
                f = forms[t.axis] = self.linear(indices[t.axis])
                if off and off[t.axis]:
                    f = forms[t.axis] = (f[0], f[1] - off[t.axis])
            total = form_sum(total, form_scale(f, t.stride), 1)
        if not total[0] and not total[1]:
            return None
        return self.emit_form(total)

    def place_offset(self, place, idx):
        """The byte offset (i64, or None for 0) of element `idx` of `place` from its first
        element (of its word, for a quantized place)."""
        b = self.b
        off = place.field.offset
        offset = None
        for t in place.terms:
            v = idx[t.axis]
            if off and off[t.axis]:
                v = b.sub(v, ir.Constant(I64, off[t.axis]))
            if t.divisor != 1:
                v = b.udiv(v, ir.Constant(I64, t.divisor))
            if not t.outermost:
                v = b.urem(v, ir.Constant(I64, t.extent))
            term = b.mul(v, ir.Constant(I64, t.stride))
            offset = term if offset is None else b.add(offset, term)
        return offset


    def lower_ExternalPtrStmt(self, s):
        b, arg = self.b, s.arg
        d = arg.desc
        base = b.inttoptr(self.ctx_value(arg.grad_slot if s.grad else arg.ptr_slot), I8P)
        es = d.elem_shape
        comp = []
        if len(es) == 1:
            comp = [s.component]
        elif len(es) == 2:
            comp = [s.component // es[1], s.component % es[1]]
        idx = [self.index64(i) for i in s.indices] + [ir.Constant(I64, c) for c in comp]
        total = d.ndim + len(es)
        if d.contiguous:
            # row-major strides from the shape: the innermost is the element size, a constant
            # that lets LLVM vectorize
            strides = [None] * total
            acc = ir.Constant(I64, d.dtype.nbytes)
            for k in range(total - 1, -1, -1):
                strides[k] = acc
                if k:
                    dim = ir.Constant(I64, es[k - d.ndim]) if k >= d.ndim else \
                        self.ctx_value(arg.shape_slot + k)
                    acc = b.mul(acc, dim)
        else:
            strides = [self.ctx_value(arg.stride_slot + k) for k in range(total)]
        offset = None
        for i, st in zip(idx, strides):
            term = b.mul(i, st)
            offset = term if offset is None else b.add(offset, term)
        p = b.gep(base, [offset]) if offset is not None else base
        return b.bitcast(p, llvm_type(d.dtype).as_pointer())

    def lower_GlobalLoadStmt(self, s):
        if isinstance(s.ptr, S.QuantPtrStmt):
            return self.quant_load(s)
        return self.b.load(self.v(s.ptr), align=s.ret_type.nbytes)

    def lower_GlobalStoreStmt(self, s):
        if isinstance(s.ptr, S.QuantPtrStmt):
            return self.quant_store(s)
        self.b.store(self.v(s.value), self.v(s.ptr), align=s.value.ret_type.nbytes)

    def lower_AtomicOpStmt(self, s):
        if isinstance(s.ptr, S.QuantPtrStmt):
            return self.quant_atomic(s)
        b, op, dt = self.b, s.op, s.ret_type
        ptr, val = self.v(s.ptr), self.v(s.value)
        acc = self.private.get(id(s.ptr))
        if acc is None:
            return self.atomic_apply(s, ptr, val)
        # a privatized reduction: update the thread's accumulator; reassociation lets the
        # loop vectorizer split it into lanes
        new = self.combine(op, dt, b.load(acc), val, fast=True)
        b.store(new, acc)
        return ir.Constant(new.type, ir.Undefined)

    def atomic_apply(self, s, ptr, val):
        b, op, dt = self.b, s.op, s.ret_type
        if dt.bits == 1 and self.parallel:
            # LLVM has no atomics on i1: a compare-and-swap loop on the u1's byte
            p8 = b.bitcast(ptr, I8.as_pointer())
            old8 = self.cas_loop(p8, lambda o: b.zext(self.combine(op, dt, b.trunc(o, I1), val),
                                                      I8))
            return b.trunc(old8, I1)
        if not self.parallel:
            # serial code: nobody else touches memory while it runs, a plain update suffices
            old = b.load(ptr)
            new = self.combine(op, dt, old, val)
            b.store(new, ptr)
            return old
        if op == Op.MUL:
            return self.cas_loop(ptr, lambda old: self.combine(op, dt, old, val))
        if dt.is_float:
            rmw = {"add": "fadd", "min": "fmin", "max": "fmax"}.get(op)
            if dt.bits == 16 or rmw is None:
                return self.cas_loop(ptr, lambda old: self.combine(op, dt, old, val))
        else:
            rmw = {"add": "add", "bit_and": "and", "bit_or": "or", "bit_xor": "xor",
                   "min": "min" if dt.is_signed else "umin",
                   "max": "max" if dt.is_signed else "umax"}[op]
        return b.atomic_rmw(rmw, ptr, val, "monotonic")

    def combine(self, op, dt, old, val, fast=False):
        b = self.b
        if dt.is_float and dt.bits == 16 and op in (Op.ADD, Op.MUL, Op.MIN, Op.MAX):
            # in f32, rounded to f16 once (see lower_BinaryOpStmt)
            f32 = ir.FloatType()
            x, y = b.fpext(old, f32), b.fpext(val, f32)
            r = self.minmax_select(op, x, y) if op in (Op.MIN, Op.MAX) else \
                self.combine(op, T.f32, x, y)
            return b.fptrunc(r, ir.HalfType())
        if op == Op.ADD:
            if dt.is_float:
                return b.fadd(old, val, flags=("reassoc", "nsz")) if fast else b.fadd(old, val)
            return b.add(old, val)
        if op == Op.MUL:
            return b.fmul(old, val) if dt.is_float else b.mul(old, val)
        if op in (Op.MIN, Op.MAX):
            if dt.is_float:
                return b.call(self.ml.intrinsic("llvm.minnum" if op == Op.MIN else "llvm.maxnum",
                                                old.type, 2), [old, val])
            cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
            return b.select(cmp("<" if op == Op.MIN else ">", old, val), old, val)
        return {"bit_and": b.and_, "bit_or": b.or_, "bit_xor": b.xor}[op](old, val)

    def minmax_select(self, op, x, y):
        """maxnum/minnum of two floats (a NaN operand gives the other one) as compares and
        selects, for f16 values widened to f32. With the llvm.maxnum/minnum intrinsics, a
        loop reducing them (an f16 atomic max of converted integers) made LLVM's loop
        vectorizer fail an assertion (its two cost models disagreed) and abort the process."""
        b = self.b
        better = b.fcmp_ordered(">" if op == Op.MAX else "<", x, y)
        y_nan = b.fcmp_unordered("uno", y, y)
        return b.select(b.or_(better, y_nan), x, y)

    def cas_loop(self, ptr, update):
        b = self.b
        ty = ptr.type.pointee
        ity = ir.IntType(ty.width if isinstance(ty, ir.IntType) else
                         {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)])
        iptr = b.bitcast(ptr, ity.as_pointer())
        start = b.block
        loop = self.fn.append_basic_block("cas")
        done = self.fn.append_basic_block("cas_done")
        init = b.load_atomic(iptr, "monotonic", align=ity.width // 8)
        b.branch(loop)
        b.position_at_end(loop)
        cur = b.phi(ity)
        cur.add_incoming(init, start)
        old = cur if ty == ity else b.bitcast(cur, ty)
        new = update(old)
        new = new if ty == ity else b.bitcast(new, ity)
        pair = b.cmpxchg(iptr, cur, new, "monotonic", "monotonic")
        seen = b.extract_value(pair, 0)
        ok = b.extract_value(pair, 1)
        cur.add_incoming(seen, b.block)
        b.cbranch(ok, done, loop)
        b.position_at_end(done)
        return old

    # -- the Tape's log of overwritten field elements (autodiff/tape_log.py) -------------
    def lower_TapeLogStmt(self, s):
        b = self.b
        lay = self.ml.layout
        was_read = b.load(self.v(s.read))
        was_written = b.load(self.v(s.written))
        b.store(ir.Constant(I8, 1), self.v(s.written))
        # stores overwrite anything a recorded kernel read or wrote; an atomic accumulation
        # only matters to those that read the old value
        seen = b.or_(was_read, was_written) if s.kind == "store" else was_read
        hit = b.icmp_unsigned("!=", seen, ir.Constant(I8, 0))
        log_bb = self.fn.append_basic_block("tape_log")
        done = self.fn.append_basic_block("tape_log_done")
        b.cbranch(hit, log_bb, done)
        b.position_at_end(log_bb)
        counter = b.inttoptr(b.load(self.ctx_slot(lay.log + 4)), I64P)
        k = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "monotonic")
        room = b.icmp_signed("<", k, b.load(self.ctx_slot(lay.log + 5)))
        write_bb = self.fn.append_basic_block("tape_log_write")
        b.cbranch(room, write_bb, done)
        b.position_at_end(write_bb)
        ptr = self.v(s.ptr)
        dt = s.ptr.ret_type
        old = b.load(ptr)
        bits64 = old if dt.is_int else b.bitcast(old, ir.IntType(dt.bits))
        bits64 = b.zext(bits64, I64) if dt.bits < 64 else bits64
        entries = [b.ptrtoint(ptr, I64), bits64,
                   ir.Constant(I64, dt.nbytes | ((1 if s.kind == "store" else 0) << 8)),
                   b.ptrtoint(self.v(s.grad), I64) if s.grad is not None else ir.Constant(I64, 0)]
        for slot, val in enumerate(entries):
            base = b.inttoptr(b.load(self.ctx_slot(lay.log + slot)), I64P)
            b.store(val, b.gep(base, [k]))
        b.branch(done)
        b.position_at_end(done)


    # -- per-thread copies of a scatter's target (passes/scatter.py) ----------------------
    def lower_PrivateAddStmt(self, s):
        b = self.b
        ptr, val = self.v(s.ptr), self.v(s.value)
        slot = self.ml.layout.private + 2 * s.copy
        scratch = self.ctx_value(slot)
        atomic = S.AtomicOpStmt(s.ptr, s.value, "add", ret_type=s.value.ret_type)
        if self.worker is None or self.private_mode is False:
            self.atomic_apply(atomic, ptr, val)
            return None
        mine = self.fn.append_basic_block("private_add")
        shared = self.fn.append_basic_block("atomic_add")
        done = self.fn.append_basic_block("added")
        if self.private_mode:
            b.branch(mine)
        else:
            b.cbranch(b.icmp_unsigned("!=", scratch, ir.Constant(I64, 0)), mine, shared)
        b.position_at_end(mine)
        arg, grad = self.ml.kernel.private_arrays[s.copy]
        base = self.ctx_value(arg.grad_slot if grad else arg.ptr_slot)
        # an i8 GEP from the copy's start (not inttoptr arithmetic), so that the loop
        # vectorizer sees the address as affine in the loop index
        offset = b.sub(b.ptrtoint(ptr, I64), base)
        copy = b.inttoptr(b.add(scratch, b.mul(self.worker, self.ctx_value(slot + 1))), I8P)
        p = b.bitcast(b.gep(copy, [offset]), ptr.type)
        align = s.value.ret_type.nbytes
        b.store(self.combine("add", s.value.ret_type, b.load(p, align=align), val), p, align=align)
        b.branch(done)
        b.position_at_end(shared)
        self.atomic_apply(atomic, ptr, val)
        b.branch(done)
        b.position_at_end(done)
        return None

    def lower_MergeCopiesStmt(self, s):
        """array[e] += the threads' copies of it; copies = 0: a parallel loop over elements."""
        b, ml = self.b, self.ml
        slot = ml.layout.private + 2 * s.copy
        scratch = self.ctx_value(slot)
        run = self.fn.append_basic_block("merge")
        skip = self.fn.append_basic_block("merged")
        b.cbranch(b.icmp_unsigned("!=", scratch, ir.Constant(I64, 0)), run, skip)
        b.position_at_end(run)
        arg, _ = ml.kernel.private_arrays[s.copy]
        n = b.udiv(self.ctx_value(slot + 1), ir.Constant(I64, arg.desc.dtype.nbytes))
        task = tasks.merge_task(ml, s.copy)
        b.call(ml.parallel_for, [task, self.ctx, ir.Constant(I64, 0), n, ir.Constant(I64, 4096)])
        b.branch(skip)
        b.position_at_end(skip)
        return None

    def lower_WorkerIndexStmt(self, s):
        if self.worker is None:
            return ir.Constant(I32, 0)
        return self.b.trunc(self.worker, I32)

    # -- autodiff stacks: per-thread arrays of a loop's carried values, one per iteration ------
    def lower_AdStackAllocaStmt(self, s):
        cap, code = s.capacity
        arrays = [self.alloca(ir.ArrayType(llvm_type(dt), cap), "ad_stack") for dt in s.dtypes]
        size = self.alloca(I64, "ad_stack_size")
        self.b.store(ir.Constant(I64, 0), size)
        self.stacks[id(s)] = (size, arrays, cap, code)

    def lower_AdStackPushStmt(self, s):
        b = self.b
        size, arrays, cap, code = self.stacks[id(s.stack)]
        n = b.load(size)
        full = self.fn.append_basic_block("ad_stack_full")
        ok = self.fn.append_basic_block("ad_stack_push")
        b.cbranch(b.icmp_unsigned(">=", n, ir.Constant(I64, cap)), full, ok)
        b.position_at_end(full)
        b.store(ir.Constant(I64, code + 1), self.ctx_out(self.ml.layout.err))
        self.ret_failed()
        b.position_at_end(ok)
        for arr, v in zip(arrays, s.values):
            b.store(self.v(v), b.gep(arr, [ir.Constant(I32, 0), n]))
        b.store(b.add(n, ir.Constant(I64, 1)), size)

    def lower_AdStackTopStmt(self, s):
        b = self.b
        size, arrays, cap, code = self.stacks[id(s.stack)]
        top = b.sub(b.load(size), ir.Constant(I64, 1))
        return b.load(b.gep(arrays[s.slot], [ir.Constant(I32, 0), top]))

    def lower_AdStackPopStmt(self, s):
        size = self.stacks[id(s.stack)][0]
        self.b.store(self.b.sub(self.b.load(size), ir.Constant(I64, 1)), size)

    def lower_AdStackSizeStmt(self, s):
        size = self.stacks[id(s.stack)][0]
        return self.b.trunc(self.b.load(size), llvm_type(s.ret_type))

