"""`@ti.real_func` and `ti.ref`: functions compiled once per signature and called, not inlined.

A `ti.func` is inlined at every call, so it cannot recurse and a big one called in many places
grows the kernel. A real function is compiled as a function of its own (per specialization:
its template arguments and array arguments), and kernels call it: it may recurse (`fib(n - 1)
+ fib(n - 2)`), return from inside loops, and its body is compiled once per kernel however
often it is called. The price, as in the original system: every parameter and the return
value need a type annotation, since a call passes values of fixed types, and real functions
cannot be differentiated.

Parameters are annotated with a scalar type (the argument is converted to it), a vector,
matrix or struct type, `ti.types.ndarray()` (the caller's array argument), `ti.template()` (a
field or any compile-time value; one specialization per value) or `ti.ref(dtype)` (the caller's
local variable itself: assignments in the function change it). The call is built by
frontend/real_func.py.
"""
from __future__ import annotations

import inspect

from fluxion.frontend import real_func as _calls
from fluxion.frontend.builtins import template
from fluxion.frontend.places import RealFuncBase
from fluxion.ir import builder
from fluxion.ir.errors import FluxionSyntaxError, format_location
from fluxion.lang.kernel import Func

# `ti.ref(dtype)` and the kinds of parameters are the frontend's, which builds the calls
RefType, ref, param_kind = _calls.RefType, _calls.ref, _calls.param_kind


class RealFunc(Func, RealFuncBase):
    """`@ti.real_func`: compiled once per signature inside each kernel that calls it."""

    def __call__(self, *args, **kwargs):
        if builder.in_kernel():
            raise RuntimeError("ti.real_func called through Python inside a kernel build")
        # Python scope: the plain Python function, like a ti.func there
        return self.func(*args, **kwargs)


def real_func(fn):
    """Decorate a function as a real function. Every parameter must be annotated (checked
    here, as the original system does at decoration); the return annotation is checked when
    a call is compiled, since only a `return` with a value needs one."""
    rf = RealFunc(fn)
    method = _defined_in_class(fn)
    for k, (name, p) in enumerate(rf.params().items()):
        if method and k == 0 and p.annotation is inspect.Parameter.empty:
            # `self` of a method (of a @ti.data_oriented class): a template, as in the
            # original system
            rf.hints()[name] = template
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            raise FluxionSyntaxError(_where(rf, f"ti.real_func '{rf.name}': parameter '{name}' "
                                                f"must be positional (no *args, **kwargs or "
                                                f"keyword-only parameters)"))
        if p.annotation is inspect.Parameter.empty:
            raise FluxionSyntaxError(_where(
                rf, f"Taichi function `{rf.name}` parameter `{name}` must be type annotated "
                    f"(a real function's parameters are typed: ti.i32, ti.f32, "
                    f"ti.types.vector(3, ti.f32), a struct type, ti.types.ndarray(), "
                    f"ti.template() or ti.ref(ti.f32))"))
        ann = rf.hints().get(name, p.annotation)
        if not isinstance(ann, str) and param_kind(ann) is None:
            raise FluxionSyntaxError(_where(
                rf, f"ti.real_func '{rf.name}': invalid type annotation {ann!r} of parameter "
                    f"'{name}'"))
    return rf


def _defined_in_class(fn):
    """Whether `fn` was defined in a class body (its qualified name says so)."""
    parts = fn.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


def _where(rf, message):
    src = rf.source()
    return format_location(src.loc(src.tree), message)
