"""IR -> LLVM IR (llvmlite.ir), one `lower_<Stmt>` method per statement kind.

The kernel becomes one entry function `void entry(i64* ctx)` that runs the tasks in order;
each parallel task's loop body is outlined into `void task(i64* closure, i64 lo, i64 hi)` and
dispatched through `fluxion_parallel_for`. What a body uses from the entry function (values,
and the addresses of locals) travels in the closure, an array of 8-byte slots. Real functions
are functions of their own (codegen/functions.py).

The CPU loop transforms here (rows of an ndrange, unroll-and-jam of a reduction's inner loop,
the parallel-access marks for LLVM) treat a call of a real function as opaque: a loop whose
body calls one is neither fused nor marked parallel (the callee may access any field or
array); splitting its index into rows stays, as it only changes how the index is computed.
"""
from __future__ import annotations

import math
import re

from llvmlite import ir

from fluxion.codegen import functions
from fluxion.codegen.quant import QuantLowering
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionInternalError

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F64 = ir.DoubleType()
VOID = ir.VoidType()
I64P = I64.as_pointer()
I8P = I8.as_pointer()
# (closure, begin, end, worker index)
TASK_TY = ir.FunctionType(VOID, [I64P, I64, I64, I64])


def llvm_type(dt):
    if dt.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dt.bits]
    return ir.IntType(dt.bits)


# Slots of the context array after the arguments and return values.
class CtxLayout:
    def __init__(self, kernel):
        self.nargs = len(kernel.arg_types)
        self.ret0 = self.nargs
        self.err = self.ret0 + len(kernel.ret_types)
        self.err_args = self.err + 1
        self.seed = self.err_args + 8
        # the Tape's overwrite log: addresses, old values, kinds/sizes, grad addresses,
        # the counter's address and the capacity
        self.log = self.seed + 1
        # per private array (passes/scatter.py): its threads' copies, and the bytes of one
        self.private = self.log + 6
        # (CPU) the index of the kernel's first `print` in the process's table: print ids in
        # the code are the kernel's own, so its machine code does not depend on the process
        self.print_base = self.private + 2 * len(getattr(kernel, "private_arrays", ()))
        self.size = self.print_base + 1

    FIELDS = ("nargs", "ret0", "err", "err_args", "seed", "log", "private", "print_base", "size")

    def to_list(self):
        return [getattr(self, k) for k in self.FIELDS]

    @classmethod
    def from_list(cls, values):
        lay = cls.__new__(cls)
        for k, v in zip(cls.FIELDS, values, strict=True):
            setattr(lay, k, int(v))
        return lay


_LIBM = {"tan", "asin", "acos", "atan", "tanh", "atan2"}
_INTRINSIC = {"sqrt": "llvm.sqrt", "sin": "llvm.sin", "cos": "llvm.cos", "exp": "llvm.exp",
              "log": "llvm.log", "floor": "llvm.floor", "ceil": "llvm.ceil", "round": "llvm.round",
              "abs": "llvm.fabs"}


class ModuleLowering:
    # float widths whose denormal constants become zero: the CPU's kernels flush denormal
    # results (cpu_jit.flush_to_zero); the CUDA lowering keeps them (no such mode there yet)
    flushed_float_bits = (32, 64)

    def __init__(self, kernel, triple, datalayout, print_table, fast_math, prefix="",
                 transform_loops=True, symbolic_trees=False):
        self.kernel = kernel
        # True (the CPU): a field's address is an offset from an external symbol per SNode
        # tree (`<prefix>tree<k>`, bound when the machine code is loaded), so the code does
        # not depend on where this process put the trees and can be cached on disk
        self.symbolic_trees = symbolic_trees
        self.trees = {}               # id(tree) -> (global, tree), in order of first use
        # False (ti.init(advanced_optimization=False)): parallel tasks are plain loops
        self.transform_loops = transform_loops
        self.prefix = prefix          # function names are unique within the shared engine
        self.entry_name = prefix + "fluxion_entry"
        self.module = ir.Module(name=kernel.name)
        self.module.triple = triple
        self.module.data_layout = datalayout
        self.layout = CtxLayout(kernel)
        self.print_table = print_table
        self.fast_math = fast_math
        # fast-math as the original system does (reassociation lets loops vectorize their
        # reductions), but never assumptions about NaN or infinity
        self.fm = ("reassoc", "nsz", "arcp", "contract", "afn") if fast_math else ()
        self.uses_random = False
        self.task_count = 0
        self.parallel_loops = 0       # loops marked by parallel_loop_metadata
        self.parallel_for = ir.Function(self.module, ir.FunctionType(
            VOID, [TASK_TY.as_pointer(), I64P, I64, I64, I64]), "fluxion_parallel_for")
        self.print_fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64P]),
                                    "fluxion_print")

    def place_address(self, place):
        return place.addr

    def place_base(self, place):
        """The address of a field's first element, as an i8* constant."""
        if not self.symbolic_trees:
            return ir.Constant(I64, self.place_address(place)).inttoptr(I8P)
        tree = place.snode.tree
        entry = self.trees.get(id(tree))
        if entry is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0),
                                  f"{self.prefix}tree{len(self.trees)}")
            g.linkage = "external"
            g.align = 64            # (snode.Tree.materialize aligns every buffer so)
            entry = self.trees[id(tree)] = (g, tree)
        off = place.addr - tree.buffer.ctypes.data
        return entry[0].gep([ir.Constant(I64, 0), ir.Constant(I64, off)])

    def tree_symbols(self):
        """[(symbol name, tree)] of the trees the code addresses (symbolic_trees)."""
        return [(g.name, tree) for g, tree in self.trees.values()]

    def declare(self, name, fnty):
        f = self.module.globals.get(name)
        if f is None:
            f = ir.Function(self.module, fnty, name)
        return f

    def intrinsic(self, name, ty, nargs=1):
        return self.module.declare_intrinsic(name, [ty], ir.FunctionType(ty, [ty] * nargs))

    def lower(self):
        functions.declare(self)
        entry = ir.Function(self.module, ir.FunctionType(VOID, [I64P]), self.entry_name)
        fl = FunctionLowering(self, entry, ctx=entry.args[0], parallel=False)
        for kind, payload in self.kernel.tasks:
            if kind == "serial":
                for s in payload:
                    fl.lower(s)
            else:
                fl.lower_parallel_for(payload)
        fl.finish()
        functions.lower_bodies(self, lambda fn: FunctionLowering(self, fn, ctx=fn.args[0],
                                                                 parallel=True))
        return self.module

    def unroll_metadata(self, count):
        """A loop id asking LLVM to unroll the loop `count` times (a remainder loop takes
        trip counts that `count` does not divide); finish_text makes it distinct."""
        m, k = self.module, self.parallel_loops
        self.parallel_loops += 1
        req = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.count"),
                              ir.Constant(ir.IntType(32), count)])
        return m.add_metadata([ir.MetaDataString(m, f"fluxion.loop.{k}"), req])

    def parallel_loop_metadata(self):
        """(access group, loop id) for one parallel loop. llvmlite writes neither distinct
        nor self-referencing nodes, so they are made here as marked plain nodes that
        `finish_text` rewrites in the module's text."""
        m, k = self.module, self.parallel_loops
        self.parallel_loops += 1
        group = m.add_metadata([ir.MetaDataString(m, f"fluxion.access_group.{k}")])
        par = m.add_metadata([ir.MetaDataString(m, "llvm.loop.parallel_accesses"), group])
        loop = m.add_metadata([ir.MetaDataString(m, f"fluxion.loop.{k}"), par])
        return group, loop


def finish_text(text):
    """The module's text with the marked metadata of parallel_loop_metadata made real: an
    access group is a distinct node without operands, a loop id a distinct node that refers
    to itself first."""
    text = _GROUP_MD.sub(r"\1 = distinct !{}", text)
    return _LOOP_MD.sub(r"\1 = distinct !{\1, \2}", text)


_GROUP_MD = re.compile(r'^(![0-9]+) = !\{ !"fluxion\.access_group\.[0-9]+" \}$', re.M)
_LOOP_MD = re.compile(r'^(![0-9]+) = !\{ !"fluxion\.loop\.[0-9]+", (![0-9]+) \}$', re.M)


_SMALLEST_NORMAL = {32: 2.0 ** -126, 64: 2.0 ** -1022}


class FunctionLowering(QuantLowering):
    def __init__(self, ml, fn, ctx, parallel, closure_values=None):
        self.ml = ml
        self.fn = fn
        self.parallel = parallel
        self.alloca_block = fn.append_basic_block("allocas")
        self.b = ir.IRBuilder(fn.append_basic_block("body"))
        self.ab = ir.IRBuilder(self.alloca_block)
        self.ctx = ctx
        self.values = dict(closure_values or {})
        self.loops = []             # (continue block, break block, loop index value holder)
        self.loop_index = {}        # id(RangeForStmt) -> llvm value of the current index
        self.rng = None
        self.private = {}           # id(GlobalPtrStmt) -> accumulator alloca of a reduction
        self.stacks = {}            # id(AdStackAllocaStmt) -> (size ptr, arrays, capacity, code)
        self.ctx_cache = {}         # context slot -> its value, loaded in the entry block
        self.preset = {}            # id(stmt) -> value computed by the enclosing loop nest
        self.forms = {}             # id(i64 value) -> its linear form (index64)
        self.atom_order = {}        # atom key -> rank in the canonical order
        self.atom_values = {}       # atom key -> its llvm value or statement
        self.worker = None          # in a parallel task: the index of the running thread
        self.private_mode = None    # PrivateAddStmt: True copies, False atomics, None a test
        self.real = None            # lowering a real function's body: its ir Function

    def finish(self):
        if not self.b.block.is_terminated:
            # a real function that ends without `return` gives zeros (a path the program
            # does not take, or one the original system leaves undefined)
            functions.ret_zero(self) if self.real is not None else self.b.ret_void()
        self.ab.branch(self.fn.blocks[1])

    def ret_failed(self):
        """Leave the function after a failed check (its error code is in the context): a
        task or the entry returns, a real function returns to its caller, which checks."""
        if self.real is not None:
            functions.ret_zero(self)
        else:
            self.b.ret_void()

    def out_base(self):
        """The slots the kernel writes for the host (see ctx_out), passed on to calls."""
        return self.ctx

    def v(self, stmt):
        try:
            return self.values[id(stmt)]
        except KeyError:
            raise FluxionInternalError(f"codegen: ${stmt.id} ({type(stmt).__name__}) used before "
                                       f"it was lowered") from None

    def alloca(self, ty, name=""):
        return self.ab.alloca(ty, name=name)

    def lower_block(self, block):
        for s in block.stmts:
            if self.b.block.is_terminated:
                # code after break/continue/return: unreachable, give it a block of its own
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.lower(s)

    def lower(self, s):
        pre = self.preset.get(id(s))
        if pre is not None:
            self.values[id(s)] = pre
            if isinstance(pre, ir.CastInstr) and pre.opname == "trunc":
                self.values[("wide", id(s))] = pre.operands[0]
            return
        method = getattr(self, "lower_" + type(s).__name__, None)
        if method is None:
            raise FluxionInternalError(f"codegen: no lowering for {type(s).__name__}")
        r = method(s)
        if r is not None:
            self.values[id(s)] = r

    # -- context ---------------------------------------------------------------------------
    def ctx_slot(self, index, ty=I64):
        p = self.b.gep(self.ctx, [ir.Constant(I64, index)])
        return p if ty is I64 else self.b.bitcast(p, ty.as_pointer())

    def ctx_out(self, index, ty=I64):
        """A slot the kernel writes for the host (returns, the error code and its arguments).
        The same context on the CPU; a device buffer of its own on CUDA, where the context
        arrives as a kernel parameter."""
        return self.ctx_slot(index, ty)

    def lower_ConstStmt(self, s):
        v, dt = s.value, s.ret_type
        if dt.is_float and dt.bits in self.ml.flushed_float_bits and v and \
                abs(v) < _SMALLEST_NORMAL[dt.bits]:
            # a denormal constant is flushed to zero, as kernels' results are (cpu_jit's
            # flush_to_zero; the original system converts the literal on its FTZ thread)
            v = math.copysign(0.0, v)
        return ir.Constant(llvm_type(dt), v)

    def lower_ArgLoadStmt(self, s):
        dt = s.ret_type
        v = self.ctx_value(s.index)
        if dt.is_float:
            v = self.b.bitcast(v, F64)
            return v if dt.bits == 64 else self.cast(v, T.f64, dt)
        return v if dt.bits == 64 else self.b.trunc(v, llvm_type(dt))

    # -- arithmetic ------------------------------------------------------------------------
    def lower_UnaryOpStmt(self, s):
        b, x, op, dt = self.b, self.v(s.operand), s.op, s.ret_type
        src = s.operand.ret_type
        ty = llvm_type(dt)
        if op == "cast":
            return self.cast(x, src, dt)
        if op == "bit_cast":
            return b.bitcast(x, ty)
        if op == "stop_grad":
            return x
        if op == "neg":
            return b.fneg(x) if dt.is_float else b.neg(x)
        if op == "bit_not":
            return b.not_(x)
        if op == "logic_not":
            z = b.fcmp_ordered("==", x, ir.Constant(x.type, 0)) if src.is_float else \
                b.icmp_unsigned("==", x, ir.Constant(x.type, 0))
            return b.zext(z, I32)
        if op == "sgn":
            zero = ir.Constant(ty, 0)
            if dt.is_float:
                pos = b.uitofp(b.fcmp_ordered(">", x, zero), ty)
                neg = b.uitofp(b.fcmp_ordered("<", x, zero), ty)
                return b.fsub(pos, neg)
            pos = b.zext(b.icmp_signed(">", x, zero), ty)
            neg = b.zext(b.icmp_signed("<", x, zero), ty)
            return b.sub(pos, neg)
        if op == "abs" and not dt.is_float:
            if not dt.is_signed:
                return x
            return b.select(b.icmp_signed("<", x, ir.Constant(ty, 0)), b.neg(x), x)
        if op == "rsqrt":
            return b.fdiv(ir.Constant(ty, 1.0), b.call(self.ml.intrinsic("llvm.sqrt", ty), [x]))
        if op in _INTRINSIC:
            return b.call(self.ml.intrinsic(_INTRINSIC[op], ty), [x])
        if op in _LIBM:
            return self.libm(op, dt, [x])
        raise FluxionInternalError(f"codegen: unknown unary op {op}")

    def libm(self, name, dt, args):
        b = self.b
        if dt.bits == 16:
            args = [b.fpext(a, ir.FloatType()) for a in args]
            return b.fptrunc(self.libm(name, T.f32, args), ir.HalfType())
        ty = llvm_type(dt)
        fname = name + ("f" if dt.bits == 32 else "")
        f = self.ml.declare(fname, ir.FunctionType(ty, [ty] * len(args)))
        return b.call(f, args)

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
            f32 = ir.FloatType()
            x, y = b.fpext(x, f32), b.fpext(y, f32)
            if op in ("min", "max"):
                r = self.minmax_select(op, x, y)
            else:
                r = self.binop(op, x, y, T.f32, fm=())
            return b.fptrunc(r, ir.HalfType())
        return self.binop(op, x, y, dt)

    def binop(self, op, x, y, dt, fm=None):
        """`x op y` for values of type `dt` (not a comparison)."""
        b, fl = self.b, dt.is_float
        fm = self.ml.fm if fm is None else fm
        if op == "add":
            return b.fadd(x, y, flags=fm) if fl else b.add(x, y)
        if op == "sub":
            return b.fsub(x, y, flags=fm) if fl else b.sub(x, y)
        if op == "mul":
            return b.fmul(x, y, flags=fm) if fl else b.mul(x, y)
        if op == "truediv":
            return b.fdiv(x, y, flags=fm)
        if op in ("div_nonneg", "mod_nonneg"):
            return b.udiv(x, y) if op == "div_nonneg" else b.urem(x, y)
        if op == "floordiv":
            if fl:
                return b.call(self.ml.intrinsic("llvm.floor", x.type), [b.fdiv(x, y)])
            return self.int_divmod(x, y, dt, want_mod=False)
        if op == "mod":
            if fl:
                q = b.call(self.ml.intrinsic("llvm.floor", x.type), [b.fdiv(x, y)])
                return b.fsub(x, b.fmul(y, q))
            return self.int_divmod(x, y, dt, want_mod=True)
        if op in ("min", "max"):
            if fl:
                return b.call(self.ml.intrinsic("llvm.minnum" if op == "min" else "llvm.maxnum",
                                                x.type, 2), [x, y])
            cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
            c = cmp("<" if op == "min" else ">", x, y)
            return b.select(c, x, y)
        if op == "pow":
            if fl:
                return b.call(self.ml.intrinsic("llvm.pow", x.type, 2), [x, y])
            return b.call(self.int_pow_fn(dt), [x, y])
        if op == "atan2":
            return self.libm("atan2", dt, [x, y])
        if op == "bit_and":
            return b.and_(x, y)
        if op == "bit_or":
            return b.or_(x, y)
        if op == "bit_xor":
            return b.xor(x, y)
        if op in ("shl", "shr"):
            # shifting by the width or more is undefined in LLVM; mask like the hardware does
            y = b.and_(y, ir.Constant(y.type, dt.bits - 1))
            if op == "shl":
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
        offset = self.place_offset(place, [self.index64(i) for i in s.indices])
        base = self.ml.place_base(place)
        p = base if offset is None else b.gep(base, [offset])
        return b.bitcast(p, llvm_type(place.dtype).as_pointer())

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

    def index64(self, st):
        """An index as i64. Additions, subtractions and products by constants of loop indices
        are recomputed in 64 bits (no signed wrap) from the loops' own 64-bit counters, rather
        than sign-extended from 32-bit results: LLVM then sees addresses as affine in the loop
        counters and vectorizes loops over them (an index whose 32-bit arithmetic wraps
        addresses nothing valid either way). The index is first reduced to a linear form and
        emitted in one canonical order, so terms cancel: `(T-1) - (t - u)` with `u = t - T + 1
        + i` is just `i`, the same value in every fused column of lower_jammed."""
        return self.emit_form(self.linear(st))

    # -- index arithmetic as linear forms ({atom: coefficient}, constant) ------------------
    def _atom(self, key, value):
        if key not in self.atom_order:
            self.atom_order[key] = len(self.atom_order)
            self.atom_values[key] = value
        return {key: 1}, 0

    def form_of(self, v):
        """The linear form of 64-bit value `v` (registered by register_form, else itself)."""
        f = self.forms.get(id(v))
        return f if f is not None else self._atom(("v", id(v)), v)

    def register_form(self, v, form):
        self.forms[id(v)] = form
        self.atom_values[("keep", id(v))] = v      # ids stay unique while the value lives
        return v

    def linear(self, st, depth=0):
        if isinstance(st, S.ConstStmt) and not st.ret_type.is_float:
            return {}, int(st.value)
        if isinstance(st, S.LoopIndexStmt):
            v = self.loop_index.get(id(st.loop))
            if v is not None and v.type.width == 64:
                return self.form_of(v)
        wide = self.values.get(("wide", id(st)))   # a row/column counter (row_loop)
        if wide is not None:
            return self.form_of(wide)
        dt = st.ret_type
        if (depth < 8 and isinstance(st, S.BinaryOpStmt) and st.op in ("add", "sub", "mul")
                and not dt.is_float and dt.is_signed and dt.bits <= 32
                and st.lhs.ret_type == dt and st.rhs.ret_type == dt):
            x, y = self.linear(st.lhs, depth + 1), self.linear(st.rhs, depth + 1)
            if st.op == "add":
                return _form_sum(x, y, 1)
            if st.op == "sub":
                return _form_sum(x, y, -1)
            if not x[0]:
                return _form_scale(y, x[1])
            if not y[0]:
                return _form_scale(x, y[1])
            v = self.b.mul(self.emit_form(x), self.emit_form(y), flags=("nsw",))
            return self._atom(("v", id(v)), v)
        # an opaque value: keyed by its statement, widened where the index is emitted (the
        # statement's value dominates every use; a widening emitted earlier might not)
        return self._atom(("s", id(st)), st)

    def emit_form(self, form):
        terms, const = form
        b = self.b
        order = self.atom_order
        items = sorted(((c < 0, order[k], k, c) for k, c in terms.items() if c),
                       key=lambda t: t[:2])
        acc = None
        for _, _, k, c in items:
            v = self.atom_values[k]
            if k[0] == "s":
                v = self.v(v)
                if v.type.width < 64:
                    dt = self.atom_values[k].ret_type
                    v = b.sext(v, I64) if dt.is_signed else b.zext(v, I64)
            if abs(c) != 1:
                v = b.mul(v, ir.Constant(I64, abs(c)), flags=("nsw",))
            if acc is None:
                acc = v if c > 0 else b.sub(ir.Constant(I64, 0), v, flags=("nsw",))
            else:
                acc = (b.add if c > 0 else b.sub)(acc, v, flags=("nsw",))
        if acc is None:
            return ir.Constant(I64, const)
        return b.add(acc, ir.Constant(I64, const), flags=("nsw",)) if const else acc

    def ctx_value(self, slot):
        """A context slot read once, in the entry block: the context does not change during
        a launch, and byte stores to arrays would otherwise force LLVM to reload it."""
        v = self.ctx_cache.get(slot)
        if v is None:
            ab = self.ab
            v = ab.load(ab.gep(self.ctx, [ir.Constant(I64, slot)]))
            self.ctx_cache[slot] = v
        return v

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
        if op == "mul":
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
        if dt.is_float and dt.bits == 16 and op in ("add", "mul", "min", "max"):
            # in f32, rounded to f16 once (see lower_BinaryOpStmt)
            f32 = ir.FloatType()
            x, y = b.fpext(old, f32), b.fpext(val, f32)
            r = self.minmax_select(op, x, y) if op in ("min", "max") else \
                self.combine(op, T.f32, x, y)
            return b.fptrunc(r, ir.HalfType())
        if op == "add":
            if dt.is_float:
                return b.fadd(old, val, flags=("reassoc", "nsz")) if fast else b.fadd(old, val)
            return b.add(old, val)
        if op == "mul":
            return b.fmul(old, val) if dt.is_float else b.mul(old, val)
        if op in ("min", "max"):
            if dt.is_float:
                return b.call(self.ml.intrinsic("llvm.minnum" if op == "min" else "llvm.maxnum",
                                                old.type, 2), [old, val])
            cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
            return b.select(cmp("<" if op == "min" else ">", old, val), old, val)
        return {"bit_and": b.and_, "bit_or": b.or_, "bit_xor": b.xor}[op](old, val)

    def minmax_select(self, op, x, y):
        """maxnum/minnum of two floats (a NaN operand gives the other one) as compares and
        selects, for f16 values widened to f32. With the llvm.maxnum/minnum intrinsics, a
        loop reducing them (an f16 atomic max of converted integers) made LLVM's loop
        vectorizer fail an assertion (its two cost models disagreed) and abort the process."""
        b = self.b
        better = b.fcmp_ordered(">" if op == "max" else "<", x, y)
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
        self.loops.append((step, exit_))
        first = len(self.fn.blocks)
        self.lower_block(s.body)
        nested = self.fn.blocks[first:]
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(step)
        b.position_at_end(step)
        b.store(b.add(b.load(counter), stride or ir.Constant(I64, 1),
                      flags=("nsw",) if unroll else ()), counter)
        latch = b.branch(head)
        if parallel:
            self.mark_parallel([head, body, step] + nested, latch)
        elif unroll:
            latch.set_metadata("llvm.loop", self.ml.unroll_metadata(unroll))
        b.position_at_end(exit_)

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

    def row_loop(self, s, lo, hi, extent, mods, divs, jam=None, parallel=False):
        """The chunk [lo, hi) of a flattened ndrange, as rows of its innermost extent W: the
        body's `index % W` and `index // W` become the two counters. Without the per-iteration
        division the inner loop runs over contiguous columns, which LLVM vectorizes.
        extent None: a 1-D loop, one row of hi - lo columns. `jam`: see lower_jammed."""
        b = self.b
        if extent is None:
            origin, w = lo, b.sub(hi, lo)
            lo, hi = ir.Constant(I64, 0), w
        else:
            origin = None
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
                b.add(base, c), _form_sum(self.form_of(base), self.form_of(c), 1))
            for st in mods:
                self.preset[id(st)] = b.trunc(c, llvm_type(st.ret_type))
            for st in divs:
                self.preset[id(st)] = b.trunc(r, llvm_type(st.ret_type))

        if jam is not None:
            # groups of `width` columns while they fit, then the rest one by one
            width = jam[3]
            jam_head = self.fn.append_basic_block("jam")
            jam_body = self.fn.append_basic_block("jam_body")
            b.branch(jam_head)
            b.position_at_end(jam_head)
            c = b.load(col)
            fits = b.icmp_signed("<=", b.add(c, ir.Constant(I64, width)), cend)
            b.cbranch(fits, jam_body, inner_head)
            b.position_at_end(jam_body)
            self.lower_jammed(s, c, enter, *jam)
            b.store(b.add(c, ir.Constant(I64, width)), col)
            b.branch(jam_head)
        else:
            b.branch(inner_head)
        b.position_at_end(inner_head)
        c = b.load(col)
        b.cbranch(b.icmp_signed("<", c, cend), body, row_end)
        b.position_at_end(body)
        enter(c)
        self.loops.append((step, exit_))
        first = len(self.fn.blocks)
        self.lower_block(s.body)
        nested = self.fn.blocks[first:]
        self.loops.pop()
        if not b.block.is_terminated:
            b.branch(step)
        b.position_at_end(step)
        b.store(b.add(b.load(col), ir.Constant(I64, 1)), col)
        latch = b.branch(inner_head)
        if parallel:
            self.mark_parallel([inner_head, body, step] + nested, latch)
        b.position_at_end(row_end)
        b.store(b.add(b.load(row), ir.Constant(I64, 1)), row)
        b.store(ir.Constant(I64, 0), col)
        b.branch(head)
        b.position_at_end(exit_)
        for st in mods + divs:
            self.preset.pop(id(st), None)

    def lower_jammed(self, s, c, enter, pre, inner, post, width):
        """Columns c .. c+width-1 of a parallel loop whose body is `pre; for ...: reduce; post`,
        with the serial loop of every column fused into one (unroll and jam): a load that
        does not depend on the column (a filter tap, another body's position) is made once
        for all of them, and each loaded value feeds `width` accumulators. Parallel iterations
        may interleave in any order, so this is legal whenever the fused loops have the same
        trip count; when they do not (checked at run time), they run one after another."""
        b = self.b
        outer_values, outer_index = self.values, self.loop_index
        copies = []
        for k in range(width):
            self.values, self.loop_index = dict(outer_values), dict(outer_index)
            ck = b.add(c, ir.Constant(I64, k))
            enter(self.register_form(ck, _form_sum(self.form_of(c), ({}, k), 1)))
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
                _form_sum(copies[k][4], self.form_of(i), 1))
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

    def lower_ReturnStmt(self, s):
        b, dt = self.b, s.value.ret_type
        v = self.v(s.value)
        slot = self.ml.layout.ret0 + s.index
        if dt.is_float:
            if dt.bits != 64:
                v = b.fpext(v, F64)
            b.store(v, self.ctx_out(slot, F64))
        else:
            if dt.bits != 64:
                v = b.sext(v, I64) if dt.is_signed else b.zext(v, I64)
            b.store(v, self.ctx_out(slot))

    def lower_PrintStmt(self, s):
        b = self.b
        n = max(len(s.values), 1)
        buf = self.alloca(ir.ArrayType(I64, n), "print_buf")
        kinds = []
        for k, val in enumerate(s.values):
            dt = val.ret_type
            v = self.v(val)
            p = b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, k)])
            if dt.is_float:
                if dt.bits != 64:
                    v = b.fpext(v, F64)
                b.store(v, b.bitcast(p, F64.as_pointer()))
            else:
                if dt.bits != 64:
                    v = b.sext(v, I64) if dt.is_signed else b.zext(v, I64)
                b.store(v, p)
            kinds.append(dt)
        pid = len(self.ml.print_table)
        self.ml.print_table.append((s.fmt, kinds))
        # the kernel's print id, offset by where its prints start in the process's table
        pid = b.add(self.ctx_value(self.ml.layout.print_base), ir.Constant(I64, pid))
        b.call(self.ml.print_fn, [pid, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, 0)])])

    def lower_AssertStmt(self, s):
        b = self.b
        ok = b.icmp_unsigned("!=", self.v(s.cond), ir.Constant(I32, 0))
        fail = self.fn.append_basic_block("assert_fail")
        cont = self.fn.append_basic_block("assert_ok")
        b.cbranch(ok, cont, fail)
        b.position_at_end(fail)
        lay = self.ml.layout
        b.store(ir.Constant(I64, s.code + 1), self.ctx_out(lay.err))
        for k, a in enumerate(s.args[:8]):
            v = self.v(a)
            if v.type.width < 64:
                v = b.sext(v, I64)
            b.store(v, self.ctx_out(lay.err_args + k))
        self.ret_failed()
        b.position_at_end(cont)

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

    # -- real functions (codegen/functions.py) ---------------------------------------------
    def lower_FuncCallStmt(self, s):
        return functions.lower_call(self, s)

    def lower_CallResultStmt(self, s):
        return self.b.extract_value(self.v(s.call), s.index)

    def lower_FuncArgStmt(self, s):
        return self.fn.args[functions.FIRST_PARAM + s.index]

    def lower_FuncRefArgStmt(self, s):
        return self.fn.args[functions.FIRST_PARAM + s.index]

    def lower_FuncReturnStmt(self, s):
        functions.ret_values(self, [self.v(v) for v in s.values])

    # -- block-level programming is a GPU feature ----------------------------------------------
    def lower_SharedArrayStmt(self, s):
        raise _cuda_only(self.ml, s, "ti.simt.block.SharedArray")

    def lower_BlockSyncStmt(self, s):
        raise _cuda_only(self.ml, s, "ti.simt.block.sync()")

    def lower_ThreadIndexStmt(self, s):
        raise _cuda_only(self.ml, s, "ti.simt.block thread indices")

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
        task = _merge_task(ml, s.copy)
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

    # -- parallel tasks ----------------------------------------------------------------------
    def lower_parallel_for(self, loop):
        b, ml = self.b, self.ml
        captured = _free_values(loop)
        ml.task_count += 1
        task = ir.Function(ml.module, TASK_TY, f"{ml.prefix}fluxion_task{ml.task_count}")
        task.linkage = "internal"
        # closure slot 0: the context; then each captured value in an 8-byte slot
        n = len(captured) + 1
        closure = self.alloca(ir.ArrayType(I64, n), "closure")
        cbase = b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
        b.store(b.ptrtoint(self.ctx, I64), cbase)
        for k, st in enumerate(captured):
            slot = b.gep(cbase, [ir.Constant(I64, k + 1)])
            val = self.v(st)
            if isinstance(val.type, ir.PointerType):
                b.store(b.ptrtoint(val, I64), slot)
            else:
                b.store(val, b.bitcast(slot, val.type.as_pointer()))
        begin = b.sext(self.v(loop.begin), I64)
        end = b.sext(self.v(loop.end), I64)
        grain = ir.Constant(I64, _grain(loop))
        b.call(ml.parallel_for, [task, cbase, begin, end, grain])
        # a failed check in a task stops the kernel before its next task
        err = b.load(self.ctx_out(ml.layout.err))
        failed = self.fn.append_basic_block("task_failed")
        ok = self.fn.append_basic_block("task_ok")
        b.cbranch(b.icmp_unsigned("!=", err, ir.Constant(I64, 0)), failed, ok)
        b.position_at_end(failed)
        b.ret_void()
        b.position_at_end(ok)
        _lower_task(ml, task, loop, captured, [self.v(st).type for st in captured])


def _lower_task(ml, task, loop, captured, types):
    clo, lo, hi, worker = task.args
    fl = FunctionLowering(ml, task, ctx=None, parallel=True)
    fl.worker = worker
    b = fl.b
    # in the entry block, so code placed there (the random state's seeding) can use it
    fl.ctx = fl.ab.inttoptr(fl.ab.load(clo), I64P)
    # allocas used inside the loop other than by plain loads (stores, the adjoint's atomic
    # accumulation into a kernel variable)
    stored = {id(o) for x in S.walk(loop.body) if not isinstance(x, S.LocalLoadStmt)
              for o in x.operands()}
    for k, (st, ty) in enumerate(zip(captured, types)):
        slot = b.gep(clo, [ir.Constant(I64, k + 1)])
        if isinstance(ty, ir.PointerType):
            p = b.inttoptr(b.load(slot), ty)
            if isinstance(st, S.AllocaStmt) and id(st) not in stored:
                # a variable of the kernel that the loop only reads (a scalar argument):
                # a copy of its value local to the task, which LLVM keeps in a register,
                # so what is computed from it (`ti.cos(t)`) is hoisted out of the loop
                # instead of reloaded after every store through a field pointer
                local = fl.alloca(ty.pointee)
                b.store(b.load(p), local)
                p = local
            fl.values[id(st)] = p
        else:
            fl.values[id(st)] = b.load(b.bitcast(slot, ty.as_pointer()))
    accs = fl.open_reductions(loop)
    # without advanced optimization: one plain counted loop, not marked parallel for LLVM
    plain = not ml.transform_loops
    split = None if plain else _row_split(loop)
    jam = None if plain else _jam_pattern(loop)

    # iterations independent in memory (mark_parallel), unless the scatter pass turned
    # atomics into plain adds into per-thread copies (several iterations of a thread may add
    # to one element of its copy): ndarray copies (PrivateAddStmt) or copy fields indexed by
    # the worker
    private = any(isinstance(st, S.PrivateAddStmt) for st in S.walk(loop.body))
    # nor when the body calls a real function: what the callee accesses is not marked (an
    # unmarked call would keep LLVM from taking the loop as parallel anyway)
    par = not plain and not private and not any(
        isinstance(st, (S.WorkerIndexStmt, S.FuncCallStmt)) for st in S.walk(loop.body))

    def body():
        if split is not None:
            fl.row_loop(loop, lo, hi, *split, jam=jam, parallel=par)
        elif jam is not None:
            fl.row_loop(loop, lo, hi, None, [], [], jam=jam, parallel=par)
        else:
            fl.counted_loop(loop, lo, hi, parallel=par)

    if private:
        # the launch gives every private array copies or none: two versions of the loop,
        # one with plain adds into the copies (which vectorizes), one with atomics
        b = fl.b
        on = fl.fn.append_basic_block("with_copies")
        off = fl.fn.append_basic_block("without_copies")
        end = fl.fn.append_basic_block("task_end")
        scratch = fl.ctx_value(ml.layout.private)
        b.cbranch(b.icmp_unsigned("!=", scratch, ir.Constant(I64, 0)), on, off)
        outer = dict(fl.values)
        for block, mode in ((on, True), (off, False)):
            b.position_at_end(block)
            fl.values = dict(outer)
            fl.private_mode = mode
            body()
            b.branch(end)
        b.position_at_end(end)
        fl.values = outer
    else:
        body()
    fl.close_reductions(accs)
    fl.finish()


def _vector_registers():
    """SIMD registers of the host: 32 with AVX-512, else 16 (AVX2, NEON...)."""
    global _VREGS
    if _VREGS is None:
        import llvmlite.binding as llvm
        try:
            _VREGS = 32 if llvm.get_host_cpu_features().get("avx512f") else 16
        except RuntimeError:
            _VREGS = 16
    return _VREGS


_VREGS = None


def _jam_width(inner):
    """Columns to fuse: each keeps its accumulators (the locals the serial loop updates) in
    vector registers, and each column more shares every column-independent load once more
    (on the seed's RWKV kernel, 8 columns run 1.25x faster than 4 on AVX-512). Four when
    eight columns' accumulators would take more than three quarters of the registers."""
    accs = {id(st.alloca) for st in S.walk(inner.body) if isinstance(st, S.LocalStoreStmt)}
    inside = {id(st) for st in S.walk(inner.body) if isinstance(st, S.AllocaStmt)}
    n = max(1, len(accs - inside))
    return 8 if 8 * n <= 3 * _vector_registers() // 4 else 4


def _form_sum(x, y, sign):
    """x + sign * y, for linear forms ({atom: coefficient}, constant)."""
    terms = dict(x[0])
    for k, c in y[0].items():
        terms[k] = terms.get(k, 0) + sign * c
    return {k: c for k, c in terms.items() if c}, x[1] + sign * y[1]


def _form_scale(x, f):
    return ({k: c * f for k, c in x[0].items()} if f else {}), x[1] * f


def _jam_pattern(loop):
    """(pre, inner loop, post) when the body of a parallel loop is straight-line code around
    one serial range loop that loads memory and stores none (a reduction: a convolution tap
    loop, an n-body force sum), else None."""
    stmts = loop.body.stmts
    at = [k for k, st in enumerate(stmts) if isinstance(st, (S.RangeForStmt, S.WhileStmt))]
    if len(at) != 1 or not isinstance(stmts[at[0]], S.RangeForStmt):
        return None
    inner = stmts[at[0]]
    for st in S.walk(loop.body):
        if isinstance(st, _NO_JAM) or (isinstance(st, S.RangeForStmt) and st is not inner):
            return None
    loads = stores = False
    for st in S.walk(inner.body):
        loads |= isinstance(st, S.GlobalLoadStmt)
        stores |= isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt))
    if not loads or stores:
        return None
    return stmts[:at[0]], inner, stmts[at[0] + 1:], _jam_width(inner)


# a call of a real function may store anywhere (the fused loops' order of memory accesses
# would change) and its result is not a load the fused columns could share
_NO_JAM = (S.WhileStmt, S.BreakStmt, S.ContinueStmt, S.ReturnStmt, S.PrintStmt, S.RandStmt,
           S.AdStackAllocaStmt, S.TapeLogStmt, S.SharedArrayStmt, S.BlockSyncStmt,
           S.FuncCallStmt)


def _merge_task(ml, k):
    """The task of MergeCopiesStmt `k`: for e in [lo, hi): a[e] += sum of copies; copies = 0."""
    ml.task_count += 1
    fn = ir.Function(ml.module, TASK_TY, f"{ml.prefix}fluxion_merge{ml.task_count}")
    fn.linkage = "internal"
    ctx, lo, hi, _ = fn.args
    arg, grad = ml.kernel.private_arrays[k]
    dt = arg.desc.dtype
    ty = llvm_type(dt)
    slot = ml.layout.private + 2 * k
    entry = fn.append_basic_block("entry")
    loop = fn.append_basic_block("loop")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)

    def ctx_load(i):
        return b.load(b.gep(ctx, [ir.Constant(I64, i)]))

    scratch, stride = ctx_load(slot), ctx_load(slot + 1)
    base = ctx_load(arg.grad_slot if grad else arg.ptr_slot)
    copies = [b.bitcast(b.gep(b.inttoptr(scratch, I8P), [b.mul(ir.Constant(I64, t), stride)]),
                        ty.as_pointer()) for t in range(ml.kernel.private_threads)]
    array = b.inttoptr(base, ty.as_pointer())
    b.cbranch(b.icmp_signed("<", lo, hi), loop, done)
    b.position_at_end(loop)
    e = b.phi(I64)
    e.add_incoming(lo, entry)
    total = None
    zero = ir.Constant(ty, 0.0 if dt.is_float else 0)
    for c in copies:
        p = b.gep(c, [e])
        v = b.load(p, align=dt.nbytes)
        b.store(zero, p, align=dt.nbytes)
        total = v if total is None else (b.fadd(total, v) if dt.is_float else b.add(total, v))
    q = b.gep(array, [e])
    old = b.load(q, align=dt.nbytes)
    b.store(b.fadd(old, total) if dt.is_float else b.add(old, total), q, align=dt.nbytes)
    e1 = b.add(e, ir.Constant(I64, 1))
    e.add_incoming(e1, loop)
    b.cbranch(b.icmp_signed("<", e1, hi), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _row_split(loop):
    """(W, [index % W statements], [index // W statements]) when the body of a parallel loop
    splits its index by a loop-invariant W (a flattened ndrange), else None."""
    inside = {id(s) for s in S.walk(loop.body)}
    found = {}
    for s in loop.body.stmts:
        if (isinstance(s, S.BinaryOpStmt) and s.op in ("mod_nonneg", "div_nonneg")
                and isinstance(s.lhs, S.LoopIndexStmt) and s.lhs.loop is loop):
            w = s.rhs
            if isinstance(w, S.ConstStmt):
                key = ("const", w.value)
            elif id(w) not in inside:
                key = ("stmt", id(w))
            else:
                continue
            entry = found.setdefault(key, (w, [], []))
            entry[1 if s.op == "mod_nonneg" else 2].append(s)
    for w, mods, divs in found.values():
        if mods and divs and not (isinstance(w, S.ConstStmt) and w.value <= 0):
            return w, mods, divs
    return None


def _identity(op, dt, ty):
    if op in ("add", "bit_or", "bit_xor"):
        return ir.Constant(ty, 0)
    if op == "bit_and":
        return ir.Constant(ty, -1)
    if dt.is_float:
        return ir.Constant(ty, float("inf") if op == "min" else float("-inf"))
    if dt.is_signed:
        big = (1 << (dt.bits - 1)) - 1
        return ir.Constant(ty, big if op == "min" else -big - 1)
    return ir.Constant(ty, (1 << dt.bits) - 1 if op == "min" else 0)


def _free_values(loop):
    """Statements defined outside `loop` that its body uses, in first-use order."""
    inside = set()
    for s in S.walk(loop.body):
        inside.add(id(s))
    out, seen = [], set()
    for s in S.walk(loop.body):
        for o in s.operands():
            if id(o) not in inside and id(o) not in seen:
                seen.add(id(o))
                out.append(o)
    return out


def _grain(loop):
    """Iterations per chunk worth a dispatch: cheap bodies need long chunks."""
    cost = 0
    for s in S.walk(loop.body):
        cost += 16 if isinstance(s, (S.RangeForStmt, S.WhileStmt)) else 1
    return max(1, min(1 << 16, 20000 // max(cost, 1)))


def _cuda_only(ml, s, what):
    from fluxion.ir.errors import FluxionCompilationError, format_location
    err = FluxionCompilationError(f"in kernel '{ml.kernel.name}':\n" + format_location(
        s.loc, f"{what} needs the CUDA backend (ti.init(arch=ti.cuda))"))
    err._located = True
    return err
