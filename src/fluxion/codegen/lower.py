"""IR -> LLVM IR (llvmlite.ir): the module and the statement lowering shared by the targets.

The kernel becomes one entry function `void entry(i64* ctx)` that runs the tasks in order;
each parallel task's loop body is outlined into `void task(i64* closure, i64 lo, i64 hi)` and
dispatched through `fluxion_parallel_for` (codegen/tasks.py). Real functions are functions of
their own (codegen/functions.py).

FunctionLowering lowers one LLVM function, one `lower_<Stmt>` method per statement kind,
gathered from the modules named by what they hold: codegen/arith.py (operations, casts,
random numbers), memory.py (addresses, loads, stores, atomics), loops.py (control flow and
loops), linear.py (indices as linear forms), quant.py (quantized fields). Here: the function's
frame, the context, constants, returns, prints, checks and calls. The CPU loop transforms are
decided by passes (passes/rows.py, jam.py, independent.py) and only lowered here. The CUDA
target subclasses both classes (codegen/nvptx.py).
"""
from __future__ import annotations

import math
import re

from llvmlite import ir

from fluxion.codegen import functions, targets, tasks
from fluxion.codegen.arith import ArithLowering
from fluxion.codegen.layout import CtxLayout
from fluxion.codegen.linear import LinearForms
from fluxion.codegen.llvm_types import F64, I8, I8P, I32, I64, I64P, TASK_TY, VOID, llvm_type
from fluxion.codegen.loops import LoopLowering
from fluxion.codegen.memory import MemoryLowering
from fluxion.codegen.pool import PooledAddress, PoolLowering, takes_slots
from fluxion.codegen.quant import QuantLowering
from fluxion.codegen.text import function_text
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionCompilationError, FluxionInternalError, format_location


class ModuleLowering:
    """A kernel's LLVM module for a target (codegen/targets.py). `lower` is the same for every
    target; how the tasks become functions is `lower_tasks`: here, the CPU's one entry function
    (nvptx.CudaModuleLowering: one GPU kernel per task)."""

    def __init__(self, kernel, target, datalayout, print_table, fast_math, prefix="",
                 symbolic_trees=False, on_task=None):
        self.kernel = kernel
        # called with each parallel task's function once its body is lowered (the CPU's
        # compile sends some to the compile worker then: runtime/cpu_build.py)
        self.on_task = on_task
        self._takes_slots = None                    # (codegen/pool.py; asked lazily)
        self.target = target
        # float widths whose denormal constants become zero: the CPU's kernels flush denormal
        # results (cpu_build.flush_to_zero), CUDA's f32 arithmetic too (targets.mark_float_modes)
        self.flushed_float_bits = target.flushed_float_bits
        # CUDA: whether libdevice was found (it picks the math table), and is called
        self.have_libdevice = False
        self.uses_libdevice = False
        # True (the CPU): a field's address is an offset from an external symbol per SNode
        # tree (`<prefix>tree<k>`, bound when the machine code is loaded), so the code does
        # not depend on where this process put the trees and can be cached on disk
        self.symbolic_trees = symbolic_trees
        self.trees = {}               # id(tree) -> (global, tree), in order of first use
        # (id(tree), address) -> the constant address of a place: llvmlite formats a constant
        # gep's text when it is made (about half of lowering the MLS-MPM substep's field
        # accesses), and the places a kernel touches are few
        self._bases = {}
        self.prefix = prefix          # function names are unique within the shared engine
        self.entry_name = prefix + "fluxion_entry"
        self.module = ir.Module(name=kernel.name)
        self.module.triple = target.triple
        self.module.data_layout = datalayout
        self.layout = CtxLayout(kernel)
        self.print_table = print_table
        self.fast_math = fast_math
        # fast-math as the original system does (on the CPU reassociation lets loops
        # vectorize their reductions; a GPU takes fewer flags: targets.py), but never
        # assumptions about NaN or infinity
        self.fm = target.fast_math_flags if fast_math else ()
        self.uses_random = False
        self.task_count = 0
        self.parallel_loops = 0       # loops marked by parallel_loop_metadata
        if not target.gpu:
            # the CPU runtime's dispatcher and print callback (cpu_jit binds them)
            self.parallel_for = ir.Function(self.module, ir.FunctionType(
                VOID, [TASK_TY.as_pointer(), I64P, I64, I64, I64]), "fluxion_parallel_for")
            self.print_fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64P]),
                                        "fluxion_print")

    def place_address(self, place):
        return place.addr

    @property
    def takes_slots(self):
        """Whether the kernel may take a pool's slot (walked only once a pooled element is
        addressed: most kernels never ask)."""
        if self._takes_slots is None:
            self._takes_slots = takes_slots(self.kernel)
        return self._takes_slots

    def place_base(self, place):
        """The address of a field's first element, as an i8* constant."""
        if not self.symbolic_trees:
            return ir.Constant(I64, self.place_address(place)).inttoptr(I8P)
        tree = place.snode.tree
        return self.buffer_ptr(tree, place.addr - tree.buffer.ctypes.data)

    def buffer_ptr(self, tree, off):
        """The address of byte `off` of a tree's buffer, as an i8* constant."""
        if not self.symbolic_trees:
            return ir.Constant(I64, tree.buffer.ctypes.data + off).inttoptr(I8P)
        base = self._bases.get((id(tree), off))
        if base is not None:
            return base
        entry = self.trees.get(id(tree))
        if entry is None:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0),
                                  f"{self.prefix}tree{len(self.trees)}")
            g.linkage = "external"
            g.align = 64            # (snode.Tree.materialize aligns every buffer so)
            entry = self.trees[id(tree)] = (g, tree)
        base = self._bases[id(tree), off] = \
            entry[0].gep([ir.Constant(I64, 0), ir.Constant(I64, off)])
        return base

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

    def part_text(self, fn):
        """The text of the module as lowered so far, with the body of `fn` (a finished
        function) as its only one: the other functions are left out, their declarations and
        the globals and metadata kept, each line as str(module) will write it (llvmlite
        keeps an instruction's text once made, so this adds no work to that)."""
        m = self.module
        lines = ['; ModuleID = "%s"' % (m.name,), 'target triple = "%s"' % (m.triple,),
                 'target datalayout = "%s"' % (m.data_layout,), '']
        lines += [it.get_declaration() for it in m.get_identified_types().values()]
        lines += [function_text(g) if g is fn else str(g) for g in m.globals.values()
                  if g is fn or not isinstance(g, ir.Function) or g.is_declaration]
        lines += m._get_metadata_lines()
        return finish_text("\n".join(lines))

    def merely_declares(self, name):
        """Whether the module declares `name` and is not to define it: a function other than
        the kernel's own (named with the prefix: the real functions are declared before the
        tasks are lowered and get their bodies after), or a global without initializer (a
        tree's symbol)."""
        g = self.module.globals.get(name)
        if isinstance(g, ir.Function):
            return g.is_declaration and not (self.prefix and name.startswith(self.prefix))
        return isinstance(g, ir.GlobalVariable) and g.initializer is None

    def lower(self):
        """The module: the real functions declared (the tasks call them), the tasks, then the
        functions' bodies."""
        functions.declare(self)
        self.lower_tasks()
        functions.lower_bodies(self, self.function_lowering)
        targets.mark_float_modes(self.module, self.target)
        return self.module

    def lower_tasks(self):
        """One entry function `void entry(i64* ctx)` running the tasks in order: a serial
        task inline, a parallel one outlined and dispatched through the thread pool."""
        entry = ir.Function(self.module, ir.FunctionType(VOID, [I64P]), self.entry_name)
        fl = FunctionLowering(self, entry, ctx=entry.args[0], parallel=False)
        for kind, payload in self.kernel.tasks:
            if kind == "serial":
                for s in payload:
                    fl.lower(s)
            else:
                fl.lower_parallel_for(payload)
        fl.finish()

    def function_lowering(self, fn):
        """The FunctionLowering of a real function's body."""
        return FunctionLowering(self, fn, ctx=fn.args[0], parallel=True)

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
    # only metadata lines start with "!": the patterns (anchored at a line's start) are
    # matched from the first of them, not tried at each of the ~100,000 characters before
    start = ("\n" + text).find("\n!")       # (the index of that "!" in `text`)
    if start < 0:
        return text
    tail = _GROUP_MD.sub(r"\1 = distinct !{}", text[start:])
    return text[:start] + _LOOP_MD.sub(r"\1 = distinct !{\1, \2}", tail)


_GROUP_MD = re.compile(r'^(![0-9]+) = !\{ !"fluxion\.access_group\.[0-9]+" \}$', re.M)
_LOOP_MD = re.compile(r'^(![0-9]+) = !\{ !"fluxion\.loop\.[0-9]+", (![0-9]+) \}$', re.M)


_SMALLEST_NORMAL = {32: 2.0 ** -126, 64: 2.0 ** -1022}


class FunctionLowering(ArithLowering, MemoryLowering, PoolLowering, LoopLowering, LinearForms,
                       QuantLowering):
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
        # id(RangeForStmt) -> llvm value of the current index; ("row" | "col", id) -> the
        # row and column counters of a row loop (loops.py)
        self.loop_index = {}
        self.rng = None
        self.private = {}           # id(GlobalPtrStmt) -> accumulator alloca of a reduction
        self.stacks = {}            # id(AdStackAllocaStmt) -> (size ptr, arrays, capacity, code)
        self.ctx_cache = {}         # context slot -> its value, loaded in the entry block
        self.init_forms()
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
            got = self.values[id(stmt)]
        except KeyError:
            raise FluxionInternalError(f"codegen: ${stmt.id} ({type(stmt).__name__}) used before "
                                       f"it was lowered") from None
        if got.__class__ is PooledAddress:
            return self.pooled_address(got.stmt)
        return got

    def alloca(self, ty, name=""):
        return self.ab.alloca(ty, name=name)

    def lower_block(self, block):
        for s in block.stmts:
            if self.b.block.is_terminated:
                # code after break/continue/return: unreachable, give it a block of its own
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.lower(s)

    def lower(self, s):
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

    def ctx_value(self, slot):
        """A context slot read once, in the entry block: the context does not change during
        a launch, and byte stores to arrays would otherwise force LLVM to reload it."""
        v = self.ctx_cache.get(slot)
        if v is None:
            ab = self.ab
            v = ab.load(ab.gep(self.ctx, [ir.Constant(I64, slot)]))
            self.ctx_cache[slot] = v
        return v

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

    # -- parallel tasks (codegen/tasks.py) -----------------------------------------------------
    def lower_parallel_for(self, loop):
        tasks.lower_parallel_for(self, loop)

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


def _cuda_only(ml, s, what):
    err = FluxionCompilationError(f"in kernel '{ml.kernel.name}':\n" + format_location(
        s.loc, f"{what} needs the CUDA backend (ti.init(arch=ti.cuda))"))
    err._located = True
    return err

