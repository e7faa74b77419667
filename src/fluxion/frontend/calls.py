"""Calls inside kernels: ti.func inlining, Python builtins with kernel semantics, print, and
plain Python functions evaluated at compile time."""
from __future__ import annotations

import builtins as pybuiltins
import inspect
import typing

import numpy as np

from fluxion.frontend import print_format as PF
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir.builder import emit
from fluxion.ir.expr import Expr
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSignatureError, FluxionSyntaxError, FluxionTypeError
from fluxion.frontend.access import ArrayValue, NdarrayType
from fluxion.frontend import builtins as B
from fluxion.frontend.builtins import cast
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.places import FieldBase, FuncBase, KernelBase, RealFuncBase
from fluxion.frontend.struct import _BoundMethod, Struct, StructType
from fluxion.frontend.variables import FuncFrame, MatVar, StructVar, Var
from fluxion.frontend import real_func


def call(tr, func, args, kwargs, node):
    if isinstance(func, RealFuncBase):
        return real_func.call(tr, func, args, kwargs, node)
    if isinstance(func, FuncBase):
        return inline(tr, func, args, kwargs, node)
    if isinstance(func, _BoundMethod):
        if isinstance(func.func, RealFuncBase):
            return real_func.call(tr, func.func, [func.obj] + list(args), kwargs, node)
        if isinstance(func.func, FuncBase):
            return inline(tr, func.func, [func.obj] + list(args), kwargs, node)
        return func(*args, **kwargs)
    if isinstance(func, KernelBase):
        raise FluxionSyntaxError(f"kernel '{func.name}' cannot be called from inside a kernel; "
                                 f"make it a @ti.func (Kernels cannot call other kernels)")
    if isinstance(func, T.DataType):
        return _primitive_call(func, args, kwargs)
    if type(getattr(func, "__self__", None)) is str and func.__name__ == "format":
        return PF.str_format(func.__self__, args, kwargs)
    if hasattr(func, "__self__"):
        # a method with a kernel-scope meaning (x.fill(v)): its ti.func, inlined
        fn = getattr(func, "__func__", None)
        alt = _KERNEL_METHODS.get(fn) if _hashable(fn) else None
        if alt is not None and isinstance(func.__self__, alt[0]):
            return inline(tr, alt[1], [func.__self__] + list(args), kwargs, node)
    special = _PY_BUILTINS.get(func) if _hashable(func) else None
    if special is not None:
        return special(tr, args, kwargs)
    if func is B.static:
        return B.static(*args, **kwargs)
    return func(*args, **kwargs)


def _primitive_call(dtype, args, kwargs):
    """`ti.f32(x)` in a kernel: a cast of a kernel value; of a Python number, a constant of
    that type, which must be of its kind and in its range (the original system's rules)."""
    if len(args) != 1 or kwargs:
        raise FluxionSyntaxError(f"A primitive type can only decorate a single expression: "
                                 f"{dtype}(...) takes one value (use ti.Vector(..., dt={dtype}) "
                                 f"for several)")
    (x,) = args
    if isinstance(x, (Matrix, Struct, list, tuple, dict)):
        raise FluxionSyntaxError(f"A primitive type cannot decorate an expression with a "
                                 f"compound type: use ti.cast(x, {dtype}) for a vector or matrix")
    if isinstance(x, (bool, np.bool_)) or isinstance(x, Expr):
        return cast(x, dtype)
    if isinstance(x, (float, np.floating)):
        if not dtype.is_float:
            raise FluxionTypeError(f"Floating-point literals must be annotated with a "
                                   f"floating-point type. For type casting, use `ti.cast`: "
                                   f"{dtype}({x!r})")
        return E.const(float(x), dtype)
    if isinstance(x, (int, np.integer)):
        if dtype.is_float:
            raise FluxionTypeError(f"Integer literals must be annotated with a integer type. "
                                   f"For type casting, use `ti.cast`: {dtype}({x!r}), or write "
                                   f"{dtype}({float(x)!r})")
        x = int(x)
        if not E.fits(x, dtype):
            raise FluxionTypeError(f"Integer literal {x} exceeded the range of specified dtype: "
                                   f"{dtype}")
        return E.const(x, dtype)
    return cast(x, dtype)


def _hashable(f):
    try:
        hash(f)
        return True
    except TypeError:
        return False


def inline(tr, func, args, kwargs, node):
    """Inline a ti.func: bind parameters (copies, or aliases for ti.template()), visit its body."""
    src = func.source()
    params = func.params()
    hints = func.hints()
    bound = {}
    arguments = func.bind(args, kwargs, lambda: f"ti.func '{func.name}'")
    for name, value in arguments.items():
        ann = hints.get(name, params[name].annotation)
        _check_func_argument(func, name, ann, value)
        if B.is_template(ann):
            bound[name] = _template_alias(value)
        elif isinstance(value, Matrix) and isinstance(ann, MatrixType):
            bound[name] = MatVar(value, ann.dtype)
        elif isinstance(value, ArrayValue) and isinstance(ann, NdarrayType):
            bound[name] = value
        elif isinstance(value, Matrix) and all(
                isinstance(e, (Expr, int, float, np.number, np.bool_)) for e in value.entries):
            # a copy, also of a vector of Python numbers, which the function may assign
            bound[name] = MatVar(value)
        elif isinstance(value, Struct):
            # by value, as every non-template argument: the function's assignments to its
            # members go to a copy (they went to the caller's variables, or, passed a
            # temporary such as `Ray(o, d, c)`, could not be made at all)
            bound[name] = StructVar(value)
        elif isinstance(value, Expr):
            dtype = _ann_dtype(ann)
            bound[name] = Var(dtype or value.dtype, value)
        elif isinstance(value, (int, float, np.number, np.bool_)) and _ann_dtype(ann):
            # a typed parameter converts a Python number too (7.9 -> 7 for an i32)
            bound[name] = Var(_ann_dtype(ann), value)
        else:
            bound[name] = value
    depth = len(tr.call_stack)
    if depth > 64:
        raise FluxionSyntaxError(f"ti.func '{func.name}' recurses too deeply; recursion is not "
                                 f"supported")
    frame = FuncFrame(src, False, name=func.name,
                      ret_ann=_ret_annotation(hints.get("return", inspect.Signature.empty)))
    sub = type(tr)(src, func.globals(), tr.kernel_name, frame,
                      tr.call_stack + (tr.src.loc(node),))
    return sub.build_function(bound)


def _check_func_argument(func, name, ann, value):
    """A ti.func argument against its vector/matrix or ndarray annotation (the original
    system's checks; other annotations convert the value)."""
    if isinstance(ann, MatrixType) and isinstance(value, Matrix):
        if (value.n, value.m) != (ann.n, ann.m):
            got = value.n if ann.ndim == 1 and value.ndim == 1 else value.shape
            want = ann.n if ann.ndim == 1 else (ann.n, ann.m)
            what = "n" if ann.ndim == 1 else "shape"
            raise FluxionSignatureError(
                f"ti.func '{func.name}': argument '{name}' is expected to be a Matrix with "
                f"{what} {want}, but got {got}")
    if isinstance(ann, NdarrayType) and isinstance(value, ArrayValue):
        d = value.arg.desc
        es = ann.element_shape()
        if es and tuple(d.elem_shape) != es or (ann.ndim is not None and ann.ndim != d.ndim):
            raise FluxionTypeError(
                f"Invalid value for argument {name}: ti.func '{func.name}' expects an ndarray "
                f"of {ann.ndim if ann.ndim is not None else 'any number of'} dimensions with "
                f"elements of shape {es}, got {d.ndim} dimensions with elements of shape "
                f"{tuple(d.elem_shape)}")
        want = ann.scalar_dtype()
        if want is not None and want is not d.dtype:
            raise FluxionTypeError(f"Invalid value for argument {name}: ti.func '{func.name}' "
                                   f"expects elements of type {want}, got {d.dtype}")


def _template_alias(value):
    """A ti.template() parameter is the caller's object itself: passed a local variable, the
    parameter is that variable, so `x = 1` or `x += 1` in the function assigns the caller's
    (it bound a new local and the caller's kept its value)."""

    def local(e):
        return isinstance(e, Expr) and isinstance(e.lvalue, S.AllocaStmt)

    def var_of(e):
        v = Var.__new__(Var)
        v.alloca, v.dtype = e.lvalue, e.dtype
        return v
    if local(value):
        return var_of(value)
    if isinstance(value, Matrix) and value.entries and all(local(e) for e in value.entries):
        mv = MatVar.__new__(MatVar)
        mv.n, mv.m, mv.ndim = value.n, value.m, value.ndim
        mv.vars = [var_of(e) for e in value.entries]
        return mv
    if isinstance(value, Struct):
        members = {k: _template_alias(v) for k, v in value._members.items()}
        if all(isinstance(v, (Var, MatVar, StructVar)) for v in members.values()):
            sv = StructVar.__new__(StructVar)
            sv.stype, sv.vars = value._type, members
            return sv
    return value


def _ret_annotation(ann):
    """A ti.func's return annotation as a DataType, MatrixType, StructType or tuple of those;
    None when it has none (or one that converts nothing)."""
    if isinstance(ann, (MatrixType, StructType)):
        return ann
    if typing.get_origin(ann) in (tuple, typing.Tuple):
        ann = typing.get_args(ann)       # `-> tuple[ti.f32, S]`, `-> typing.Tuple[...]`
    if isinstance(ann, (tuple, list)):
        items = tuple(_ret_annotation(a) for a in ann)
        return items if all(a is not None for a in items) else None
    return _ann_dtype(ann)


def _ann_dtype(ann):
    if ann is inspect.Parameter.empty or ann is None or isinstance(ann, str):
        return None
    try:
        return T.normalize(ann)
    except TypeError:
        return None


def _print(tr, args, kwargs):
    """`print(...)` in a kernel: text and values formatted as the original system formats
    them (frontend/print_format.py); the values are read when the kernel runs."""
    sep = kwargs.get("sep", " ")
    end = kwargs.get("end", "\n")
    pieces, values = [], []

    def add_value(v, spec=None, in_text=False):
        # in_text: a field of an f-string or str.format, where a Python value without a
        # spec is Python's text (`{True}` is `True`); a print argument is a constant
        if isinstance(v, Expr):
            pieces.append((len(values), PF.resolve(spec, v.dtype)))
            values.append(v.stmt)
        elif isinstance(v, Matrix):
            if v.ndim == 2:
                pieces.append("[")
                for r in range(v.n):
                    if r:
                        pieces.append(", ")
                    add_value(v._row(r), spec, in_text)
                pieces.append("]")
                return
            pieces.append("[")
            for k, e in enumerate(v.entries):
                if k:
                    pieces.append(", ")
                add_value(e, spec, in_text)
            pieces.append("]")
        elif isinstance(v, PF._FString):
            for p in v.parts:
                if isinstance(p, str):
                    pieces.append(p)
                else:
                    add_value(p.value, p.spec, True)
        elif isinstance(v, PF._Formatted):
            add_value(v.value, v.spec, True)
        elif PF.is_number(v) and (spec or not in_text):
            pieces.append(PF.constant_text(v, spec))
        elif isinstance(v, (list, tuple)) and not in_text:
            pieces.append("[")
            for k, e in enumerate(v):
                if k:
                    pieces.append(", ")
                add_value(e, spec)
            pieces.append("]")
        else:
            pieces.append(format(v, spec) if spec else str(v))

    for k, a in enumerate(args):
        if k:
            pieces.append(sep)
        add_value(a)
    pieces.append(end)
    emit(S.PrintStmt(values, tuple(pieces)))


def _loop_config(tr, args, kwargs):
    builder.current().pending_loop_config = dict(kwargs)


def _cast_builtin(dtype_of):
    def f(tr, args, kwargs):
        (x,) = args
        if isinstance(x, (Expr, Matrix)):
            return cast(x, dtype_of())
        return dtype_of.py(x)
    return f


def _int_type():
    return builder.current().cfg.default_ip


def _float_type():
    return builder.current().cfg.default_fp


_int_type.py = int
_float_type.py = float


def _minmax(name):
    def f(tr, args, kwargs):
        flat = args
        if len(args) == 1 and isinstance(args[0], (Matrix, list, tuple)):
            flat = args[0].entries if isinstance(args[0], Matrix) else args[0]
        if any(isinstance(a, (Expr, Matrix)) for a in flat):
            return (B.min if name == "min" else B.max)(*flat)
        return getattr(pybuiltins, name)(*args, **kwargs)
    return f


def _abs(tr, args, kwargs):
    return abs(args[0])


def _len(tr, args, kwargs):
    (x,) = args
    if isinstance(x, FieldBase):
        return x.shape[0]
    return len(x)


def _bool(tr, args, kwargs):
    (x,) = args
    if isinstance(x, Expr):
        return E.truth(x)
    return bool(x)


def _anyall(name):
    # Python's any/all iterate: over a matrix that is its rows, each a truthy object, so
    # `any(m)` was always 1. On kernel values they reduce the entries' truth values.
    def f(tr, args, kwargs):
        if len(args) == 1 and not kwargs:
            (x,) = args
            if isinstance(x, Matrix):
                return x.any() if name == "any" else x.all()
            if isinstance(x, (list, tuple)) and any(isinstance(v, (Expr, Matrix)) for v in x):
                return getattr(Matrix(list(x), ndim=1), name)()
        return getattr(pybuiltins, name)(*args, **kwargs)
    return f


def _range_outside_for(tr, args, kwargs):
    if any(isinstance(a, Expr) for a in args):
        raise FluxionSyntaxError("range() with kernel values can only be used as a for-loop "
                                 "iterator")
    return range(*args)


_PY_BUILTINS = {
    print: _print,
    int: _cast_builtin(_int_type),
    float: _cast_builtin(_float_type),
    min: _minmax("min"),
    max: _minmax("max"),
    abs: _abs,
    any: _anyall("any"),
    all: _anyall("all"),
    len: _len,
    bool: _bool,
    range: _range_outside_for,
    B.loop_config: _loop_config,
    B.static: lambda tr, args, kwargs: B.static(*args, **kwargs),
}


def register(func, handler):
    _PY_BUILTINS[func] = handler


# Python-scope methods with a kernel-scope meaning, by their function: (class of the receiver,
# the ti.func that a call in a kernel inlines instead, receiver first); lang/kernel_methods.py
# registers them
_KERNEL_METHODS = {}


def register_method(cls, function, kernel_func):
    _KERNEL_METHODS[function] = (cls, kernel_func)

