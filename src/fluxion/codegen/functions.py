"""Real functions in LLVM: each specialization (ir Function) is an internal function

    {results...} fn(i64* ctx, i64* out, i64* rng, params...)

called from the kernel's code and from other functions (itself included: recursion is a plain
call). `ctx` is the kernel's context (array arguments' pointers and shapes, the Tape's log),
`out` the slots the kernel writes for the host (the same as `ctx` on the CPU; a device buffer
on CUDA), `rng` the caller's random state, so that the calls of a loop continue its random
sequence instead of restarting one. A `ti.ref` parameter is the address of the caller's local.

A failed check inside a function (an `assert` in debug mode, an index out of range) stores its
error code, as anywhere in a kernel, and returns; each call of a function that may fail then
looks at the code and leaves its own function too, up to the task, which stops the kernel.
The bodies are lowered with the same FunctionLowering as tasks (codegen/lower.py, or the CUDA
one), marked parallel: a function called from a parallel loop runs on many threads at once,
so its atomics are real ones.
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen import lower as L
from fluxion.ir import stmts as S

# the LLVM parameters before a function's own: ctx, out, rng
FIRST_PARAM = 3


def function_type(f):
    params = [L.I64P, L.I64P, L.I64P]
    for dt, is_ref in zip(f.param_types, f.ref_params):
        params.append(L.llvm_type(dt).as_pointer() if is_ref else L.llvm_type(dt))
    return ir.FunctionType(result_type(f), params)


def result_type(f):
    if not f.ret_types:
        return L.VOID
    return ir.LiteralStructType([L.llvm_type(dt) for dt in f.ret_types])


def declare(ml):
    """An LLVM function for every Function of the kernel (bodies come later: calls in the
    kernel's tasks, and functions calling each other, need only the declarations)."""
    kernel = ml.kernel
    ml.functions = {}
    for k, f in enumerate(getattr(kernel, "functions", ())):
        fn = ir.Function(ml.module, function_type(f), f"{ml.prefix}fluxion_func{k}_{f.name}")
        fn.linkage = "internal"
        ml.functions[id(f)] = fn
    ml.may_fail = _closure(kernel, lambda s: isinstance(s, (S.AssertStmt, S.AdStackPushStmt)))
    ml.uses_rng = _closure(kernel, lambda s: isinstance(s, S.RandStmt))


def lower_bodies(ml, make):
    """Lower every function's body with the FunctionLowering that `make(fn)` returns."""
    for f in getattr(ml.kernel, "functions", ()):
        fn = ml.functions[id(f)]
        fl = make(fn)
        fl.real = f
        fl.rng = fn.args[2]
        fl.lower_block(f.body)
        fl.finish()


def _closure(kernel, direct):
    """ids of the functions that contain a statement satisfying `direct`, or call one that
    does (at any depth)."""
    funcs = list(getattr(kernel, "functions", ()))
    hit = {id(f) for f in funcs if any(direct(s) for s in S.walk(f.body))}
    calls = {id(f): S.calls_in(f.body) for f in funcs}
    changed = True
    while changed:
        changed = False
        for f in funcs:
            if id(f) not in hit and any(id(g) in hit for g in calls[id(f)]):
                hit.add(id(f))
                changed = True
    return hit


def lower_call(fl, s):
    b, ml = fl.b, fl.ml
    f = s.func
    fn = ml.functions[id(f)]
    rng = fl.rng_state() if id(f) in ml.uses_rng else ir.Constant(L.I64P, None)
    args = [fl.ctx, fl.out_base(), rng] + [fl.v(a) for a in s.args]
    result = b.call(fn, args)
    if id(f) in ml.may_fail:
        err = b.load(fl.ctx_out(ml.layout.err))
        failed = fl.fn.append_basic_block("call_failed")
        ok = fl.fn.append_basic_block("call_ok")
        b.cbranch(b.icmp_unsigned("!=", err, ir.Constant(L.I64, 0)), failed, ok)
        b.position_at_end(failed)
        fl.ret_failed()
        b.position_at_end(ok)
    return result if f.ret_types else None


def ret_values(fl, values):
    """Return `values` (LLVM values of the function's result types) from a real function."""
    b = fl.b
    ty = fl.fn.function_type.return_type
    if not values:
        b.ret_void()
        return
    agg = ir.Constant(ty, ir.Undefined)
    for k, v in enumerate(values):
        agg = b.insert_value(agg, v, k)
    b.ret(agg)


def ret_zero(fl):
    """Return zeros from a real function (a path without `return`, or a failed check)."""
    ty = fl.fn.function_type.return_type
    if isinstance(ty, ir.VoidType):
        fl.b.ret_void()
    else:
        fl.b.ret(ir.Constant(ty, None))
