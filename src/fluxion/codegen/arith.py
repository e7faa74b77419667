"""Arithmetic: unary and binary operations, casts, selects and random numbers.

Mixed into FunctionLowering (codegen/lower.py): `self.b` is the builder, `self.ml` the
module's lowering, `self.v(stmt)` a lowered operand.
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen import targets
from fluxion.codegen.llvm_types import F64, I1, I32, I64, llvm_type
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionInternalError
from fluxion.ir.ops import Op


class ArithLowering:
    def lower_UnaryOpStmt(self, s):
        b, x, op, dt = self.b, self.v(s.operand), s.op, s.ret_type
        src = s.operand.ret_type
        ty = llvm_type(dt)
        if op == Op.CAST:
            return self.cast(x, src, dt)
        if op == Op.BIT_CAST:
            return b.bitcast(x, ty)
        if op == Op.STOP_GRAD:
            return x
        if op == Op.NEG:
            return b.fneg(x) if dt.is_float else b.neg(x)
        if op == Op.BIT_NOT:
            return b.not_(x)
        if op == Op.LOGIC_NOT:
            z = b.fcmp_ordered("==", x, ir.Constant(x.type, 0)) if src.is_float else \
                b.icmp_unsigned("==", x, ir.Constant(x.type, 0))
            return b.zext(z, I32)
        if op == Op.SGN:
            zero = ir.Constant(ty, 0)
            if dt.is_float:
                pos = b.uitofp(b.fcmp_ordered(">", x, zero), ty)
                neg = b.uitofp(b.fcmp_ordered("<", x, zero), ty)
                return b.fsub(pos, neg)
            pos = b.zext(b.icmp_signed(">", x, zero), ty)
            neg = b.zext(b.icmp_signed("<", x, zero), ty)
            return b.sub(pos, neg)
        if op == Op.ABS and not dt.is_float:
            if not dt.is_signed:
                return x
            return b.select(b.icmp_signed("<", x, ir.Constant(ty, 0)), b.neg(x), x)
        if op in targets.MATH_OPS:
            # an intrinsic, libm, libdevice or an approximation: the target's math table
            return targets.emit_math(self, op, dt, [x], s)
        raise FluxionInternalError(f"codegen: unknown unary op {op}")

    def cast(self, x, src, dt):
        b, ty = self.b, llvm_type(dt)
        if dt.bits == 1 and src.bits != 1:
            # to u1: a truth test, as Python's bool() (a NaN is true)
            if src.is_float:
                return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0))
            return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
        if dt.is_float and dt.bits == 16 and src.bits != 16 and not (src.is_float and
                                                                     src.bits == 32):
            # f64 and integers become f16 through f32, as the original system converts them.
            # (Directly, LLVM would call compiler-rt's __truncdfhf2 on x86, which the JIT
            # does not have: the call jumped to address 0.)
            return b.fptrunc(self.cast(x, src, T.f32), ty)
        if src.is_float and dt.is_float:
            if src.bits == dt.bits:
                return x
            return b.fpext(x, ty) if dt.bits > src.bits else b.fptrunc(x, ty)
        if src.is_float:
            if dt.bits < 32 or (dt.bits == 32 and not dt.is_signed):
                # through a wider signed integer, then wrapped: a float outside the narrow
                # type's range converts as the original system's code does on the CPU
                # (u8(-1.0) is 255, i8(200.0) is -56). A direct fptoui/fptosi makes such a
                # value poison, which LLVM may fold to anything once it sees the constant
                # (`ti.math.sign(a)` returned as a u8 gave 0 for a < 0, the fuzzer's seed 11953)
                wide = ir.IntType(32 if dt.bits < 32 else 64)
                return b.trunc(b.fptosi(x, wide), ty)
            return b.fptosi(x, ty) if dt.is_signed else b.fptoui(x, ty)
        if dt.is_float:
            return b.sitofp(x, ty) if src.is_signed else b.uitofp(x, ty)
        if dt.bits == src.bits:
            return x
        if dt.bits < src.bits:
            return b.trunc(x, ty)
        return b.sext(x, ty) if src.is_signed else b.zext(x, ty)

    def lower_BinaryOpStmt(self, s):
        b, op = self.b, s.op
        x, y = self.v(s.lhs), self.v(s.rhs)
        dt = s.lhs.ret_type
        fl = dt.is_float
        if op.startswith("cmp_"):
            sym = {"cmp_lt": "<", "cmp_le": "<=", "cmp_gt": ">", "cmp_ge": ">=", "cmp_eq": "==",
                   "cmp_ne": "!="}[op]
            if fl:
                c = b.fcmp_unordered(sym, x, y) if sym == "!=" else b.fcmp_ordered(sym, x, y)
            elif dt.is_signed:
                c = b.icmp_signed(sym, x, y)
            else:
                c = b.icmp_unsigned(sym, x, y)
            return b.zext(c, I32)
        if fl and dt.bits == 16:
            # f16 arithmetic runs in f32 and is rounded to f16 after every operation, as in
            # the original system, and without fast-math flags: LLVM narrows such an f32
            # operation back to a half one, and with `reassoc` it then regrouped chains of
            # them (a serial sum of 1000 f16 adds came out as if summed in f32).
            f32, half = ir.FloatType(), ir.HalfType()
            x, y = b.fpext(x, f32), b.fpext(y, f32)
            if op in (Op.MIN, Op.MAX):
                r = self.minmax_select(op, x, y)
            elif op in (Op.FLOORDIV, Op.MOD):
                # the original computes these as operations of their own, each rounded to
                # f16: the quotient before its floor (65504 // 31 is 2114, not 2112), and the
                # product `y * q` before the difference
                def rounded(v):
                    return b.fpext(b.fptrunc(v, half), f32)
                q = b.call(self.ml.intrinsic("llvm.floor", f32), [rounded(b.fdiv(x, y))])
                r = q if op == Op.FLOORDIV else b.fsub(x, rounded(b.fmul(y, q)))
            else:
                r = self.binop(op, x, y, T.f32, fm=(), stmt=s)
            return b.fptrunc(r, half)
        return self.binop(op, x, y, dt, stmt=s)

    def binop(self, op, x, y, dt, fm=None, stmt=None):
        """`x op y` for values of type `dt` (not a comparison); `stmt` locates an error."""
        b, fl = self.b, dt.is_float
        fm = self.ml.fm if fm is None else fm
        if op == Op.ADD:
            return b.fadd(x, y, flags=fm) if fl else b.add(x, y)
        if op == Op.SUB:
            return b.fsub(x, y, flags=fm) if fl else b.sub(x, y)
        if op == Op.MUL:
            return b.fmul(x, y, flags=fm) if fl else b.mul(x, y)
        if op == Op.TRUEDIV:
            return b.fdiv(x, y, flags=fm)
        if op in (Op.DIV_NONNEG, Op.MOD_NONNEG):
            return b.udiv(x, y) if op == Op.DIV_NONNEG else b.urem(x, y)
        if op == Op.FLOORDIV:
            if fl:
                return b.call(self.ml.intrinsic("llvm.floor", x.type), [b.fdiv(x, y)])
            return self.int_divmod(x, y, dt, want_mod=False)
        if op == Op.MOD:
            if fl:
                q = b.call(self.ml.intrinsic("llvm.floor", x.type), [b.fdiv(x, y)])
                return b.fsub(x, b.fmul(y, q))
            return self.int_divmod(x, y, dt, want_mod=True)
        if op in (Op.MIN, Op.MAX):
            if fl:
                return b.call(self.ml.intrinsic("llvm.minnum" if op == Op.MIN else "llvm.maxnum",
                                                x.type, 2), [x, y])
            cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
            c = cmp("<" if op == Op.MIN else ">", x, y)
            return b.select(c, x, y)
        if op == Op.POW:
            if fl:
                return targets.emit_math(self, "pow", dt, [x, y], stmt)
            return b.call(self.int_pow_fn(dt), [x, y])
        if op == Op.ATAN2:
            return targets.emit_math(self, "atan2", dt, [x, y], stmt)
        if op == Op.BIT_AND:
            return b.and_(x, y)
        if op == Op.BIT_OR:
            return b.or_(x, y)
        if op == Op.BIT_XOR:
            return b.xor(x, y)
        if op in (Op.SHL, Op.SHR):
            # shifting by the width or more is undefined in LLVM; mask like the hardware does
            y = b.and_(y, ir.Constant(y.type, dt.bits - 1))
            if op == Op.SHL:
                return b.shl(x, y)
            return b.ashr(x, y) if dt.is_signed else b.lshr(x, y)
        raise FluxionInternalError(f"codegen: unknown binary op {op}")

    def int_divmod(self, x, y, dt, want_mod):
        """Python's floor division and modulo; division by zero gives 0 instead of a trap."""
        b, ty = self.b, x.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        is_zero = b.icmp_unsigned("==", y, zero)
        if not dt.is_signed:
            safe = b.select(is_zero, one, y)
            r = b.urem(x, safe) if want_mod else b.udiv(x, safe)
            return b.select(is_zero, zero, r)
        minus1 = ir.Constant(ty, -1)
        is_m1 = b.icmp_signed("==", y, minus1)
        safe = b.select(b.or_(is_zero, is_m1), one, y)
        if want_mod:
            r = b.srem(x, safe)
            fix = b.and_(b.icmp_signed("!=", r, zero),
                         b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
            r = b.select(fix, b.add(r, safe), r)
            return b.select(b.or_(is_zero, is_m1), zero, r)
        q = b.sdiv(x, safe)
        r = b.srem(x, safe)
        fix = b.and_(b.icmp_signed("!=", r, zero),
                     b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
        q = b.select(fix, b.sub(q, one), q)
        q = b.select(is_m1, b.neg(x), q)
        return b.select(is_zero, zero, q)

    def int_pow_fn(self, dt):
        name = f"{self.ml.prefix}fluxion_ipow_{dt.name}"
        f = self.ml.module.globals.get(name)
        if f is not None:
            return f
        ty = llvm_type(dt)
        f = ir.Function(self.ml.module, ir.FunctionType(ty, [ty, ty]), name)
        f.linkage = "internal"
        base, exp = f.args
        entry, loop, body, done = (f.append_basic_block(n) for n in ("e", "l", "b", "d"))
        b = ir.IRBuilder(entry)
        b.branch(loop)
        b.position_at_end(loop)
        acc = b.phi(ty)
        bb = b.phi(ty)
        ee = b.phi(ty)
        acc.add_incoming(ir.Constant(ty, 1), entry)
        bb.add_incoming(base, entry)
        ee.add_incoming(exp, entry)
        cont = b.icmp_signed(">", ee, ir.Constant(ty, 0)) if dt.is_signed else \
            b.icmp_unsigned("!=", ee, ir.Constant(ty, 0))
        b.cbranch(cont, body, done)
        b.position_at_end(body)
        odd = b.trunc(b.and_(ee, ir.Constant(ty, 1)), I1)
        acc2 = b.select(odd, b.mul(acc, bb), acc)
        bb2 = b.mul(bb, bb)
        ee2 = b.lshr(ee, ir.Constant(ty, 1))
        acc.add_incoming(acc2, body)
        bb.add_incoming(bb2, body)
        ee.add_incoming(ee2, body)
        b.branch(loop)
        b.position_at_end(done)
        b.ret(acc)
        return f

    def lower_TernaryOpStmt(self, s):
        c = self.b.icmp_unsigned("!=", self.v(s.cond), ir.Constant(I32, 0))
        return self.b.select(c, self.v(s.a), self.v(s.b))

    # -- random numbers: a per-function 64-bit LCG state, output through a mixing hash -----
    def rng_state(self):
        """The address of the random state: a real function is given its caller's (so that
        calls continue one sequence instead of each restarting it)."""
        self.ml.uses_random = True
        if self.rng is None:
            # seeded in the entry block, from the launch seed and the task's range start
            ab = self.ab
            self.rng = ab.alloca(I64, name="rng")
            seed = ab.load(ab.gep(self.ctx, [ir.Constant(I64, self.ml.layout.seed)]))
            lo = self.rng_stream()
            ab.store(self.mix(ab.xor(seed, ab.mul(lo, ir.Constant(I64, 0x9E3779B97F4A7C15))), ab),
                     self.rng)
        return self.rng

    def lower_RandStmt(self, s):
        b = self.b
        rng = self.rng_state()
        st = b.add(b.mul(b.load(rng), ir.Constant(I64, 6364136223846793005)),
                   ir.Constant(I64, 1442695040888963407))
        b.store(st, rng)
        out = self.mix(st)
        dt = s.ret_type
        if dt.is_float:
            if dt.bits == 64:
                v = b.uitofp(b.lshr(out, ir.Constant(I64, 11)), F64)
                return b.fmul(v, ir.Constant(F64, 2.0 ** -53))
            v = b.uitofp(b.lshr(out, ir.Constant(I64, 40)), ir.FloatType())
            r = b.fmul(v, ir.Constant(ir.FloatType(), 2.0 ** -24))
            return r if dt.bits == 32 else b.fptrunc(r, ir.HalfType())
        return b.trunc(out, llvm_type(dt)) if dt.bits < 64 else out

    def rng_stream(self):
        """What makes this thread's random sequence differ from the others'."""
        return self.fn.args[1] if self.parallel else ir.Constant(I64, 0)

    def mix(self, x, b=None):
        b = b or self.b
        x = b.mul(b.xor(x, b.lshr(x, ir.Constant(I64, 30))), ir.Constant(I64, 0xBF58476D1CE4E5B9))
        x = b.mul(b.xor(x, b.lshr(x, ir.Constant(I64, 27))), ir.Constant(I64, 0x94D049BB133111EB))
        return b.xor(x, b.lshr(x, ir.Constant(I64, 31)))
