"""CPU task outlining: each parallel task's loop becomes a function `task(closure, lo, hi,
worker)` that the thread pool calls on chunks of the range; what the body uses from the entry
function travels in the closure, an array of 8-byte slots. Also the task that merges the
scatter privatization's per-thread copies back into their array (MergeCopiesStmt).

This is codegen by nature (functions, closures and a dispatch call are LLVM objects); what
the task's loop looks like (rows, unroll-and-jam, LLVM's parallel marks) is decided by the
CPU loop passes (passes/rows.py, jam.py, independent.py) and lowered by codegen/loops.py.
The CUDA target (codegen/nvptx.py) makes its own kernels instead.
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen.llvm_types import I8P, I32, I64, I64P, TASK_TY, llvm_type
from fluxion.codegen.pool import PooledAddress
from fluxion.ir import stmts as S


def lower_parallel_for(fl, loop):
    """In the entry function (`fl` lowers it): outline `loop`'s body into a task
    function, pass what it uses through a closure, and dispatch it over the thread pool."""
    b, ml = fl.b, fl.ml
    captured = _free_values(loop)
    ml.task_count += 1
    task = ir.Function(ml.module, TASK_TY, f"{ml.prefix}fluxion_task{ml.task_count}")
    task.linkage = "internal"
    # closure slot 0: the context; then each captured value in an 8-byte slot
    n = len(captured) + 1
    closure = fl.alloca(ir.ArrayType(I64, n), "closure")
    cbase = b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
    b.store(b.ptrtoint(fl.ctx, I64), cbase)
    for k, st in enumerate(captured):
        if _pooled(st):
            continue           # (its address is computed in the task: PooledAddress)
        slot = b.gep(cbase, [ir.Constant(I64, k + 1)])
        val = fl.v(st)
        if isinstance(val.type, ir.PointerType):
            b.store(b.ptrtoint(val, I64), slot)
        else:
            b.store(val, b.bitcast(slot, val.type.as_pointer()))
    begin = b.sext(fl.v(loop.begin), I64)
    end = b.sext(fl.v(loop.end), I64)
    grain = ir.Constant(I64, _grain(loop))
    b.call(ml.parallel_for, [task, cbase, begin, end, grain])
    # a failed check in a task stops the kernel before its next task
    err = b.load(fl.ctx_out(ml.layout.err))
    failed = fl.fn.append_basic_block("task_failed")
    ok = fl.fn.append_basic_block("task_ok")
    b.cbranch(b.icmp_unsigned("!=", err, ir.Constant(I64, 0)), failed, ok)
    b.position_at_end(failed)
    b.ret_void()
    b.position_at_end(ok)
    _lower_task(type(fl), ml, task, loop, captured,
                [None if _pooled(st) else fl.v(st).type for st in captured])
    if ml.on_task is not None:
        ml.on_task(ml, task)


def _lower_task(lowering, ml, task, loop, captured, types):
    """The body of task function `task`: the captured values from the closure, then the
    loop over [lo, hi) as the loop passes marked it (rows, jam, independent iterations)."""
    clo, lo, hi, worker = task.args
    fl = lowering(ml, task, ctx=None, parallel=True)
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
        if ty is None:
            fl.values[id(st)] = PooledAddress(st)
        elif isinstance(ty, ir.PointerType):
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
    # passes/independent.py: iterations independent in memory, which LLVM is told
    par = bool(loop.independent)
    # the scatter pass's adds into per-thread ndarray copies (passes/scatter.py)
    private = any(isinstance(st, S.PrivateAddStmt) for st in S.walk(loop.body))

    def body():
        if loop.rows is not None or loop.jam:
            fl.row_loop(loop, lo, hi, parallel=par)
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


def merge_task(ml, k):
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


def _free_values(loop):
    """Statements defined outside `loop` that its body uses, in first-use order."""
    inside = set()
    for s in S.walk(loop.body):
        inside.add(id(s))
    out, seen = [], set()

    def use(o):
        if id(o) not in inside and id(o) not in seen:
            seen.add(id(o))
            out.append(o)
            if _pooled(o):
                # the element's address under a pooled node is computed in the task, where
                # it is used, from its indices (its cell may get its slot in the loop)
                for i in o.operands():
                    use(i)
    for s in S.walk(loop.body):
        for o in s.operands():
            use(o)
    return out


def _pooled(st):
    return isinstance(st, S.GlobalPtrStmt) and st.place.pool is not None


def _grain(loop):
    """Iterations per chunk worth a dispatch: cheap bodies need long chunks."""
    cost = 0
    for s in S.walk(loop.body):
        cost += 16 if isinstance(s, (S.RangeForStmt, S.WhileStmt)) else 1
    return max(1, min(1 << 16, 20000 // max(cost, 1)))
