"""Calls of real functions (`@ti.real_func`, lang/real_func.py) inside kernels.

A call binds the arguments to the annotated parameters, finds the specialization of the
function for them (one per template values and array arguments: `Kernel.functions`), builds
its body the first time, and emits a FuncCallStmt and one CallResultStmt per scalar result.
Vectors, matrices and structs travel as their scalars, in order, both ways.

The specialization is registered before its body is built, so a recursive call inside the
body calls it instead of building it again: recursion ends at compile time whenever the
recursive calls keep the signature (a template argument that changes with every call, with
no `ti.static` condition to stop it, would not: that is reported).
"""
from __future__ import annotations

import inspect
import typing

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir.builder import emit
from fluxion.ir.expr import Expr
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSyntaxError, FluxionTypeError
from fluxion.frontend.access import ArrayValue, NdarrayType
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.matrix_entries import scalar_of
from fluxion.frontend.builtins import is_template
from fluxion.frontend.struct import build_struct, Struct, StructType, struct_leaves
from fluxion.frontend.variables import _convert_return, _describe, FuncFrame, MatVar, StructVar, Var

# specializations being built inside one another (each is a nested Python recursion of the
# frontend; template arguments that change at every recursive call never end)
MAX_NESTING = 48


class RefType:
    """The annotation `ti.ref(dtype)`: a parameter passed by reference (a local variable of
    the caller, which the function may assign)."""

    def __init__(self, tp):
        self.tp = tp

    def __repr__(self):
        return f"ti.ref({self.tp!r})"


def ref(tp):
    return RefType(tp)


def param_kind(ann):
    """What a parameter annotation asks for: "template", "ndarray", "matrix", "struct",
    "ref" or "scalar"; None when it is none of them."""
    if is_template(ann):
        return "template"
    if isinstance(ann, NdarrayType) or ann is NdarrayType:
        return "ndarray"
    if isinstance(ann, MatrixType):
        return "matrix"
    if isinstance(ann, StructType):
        return "struct"
    if isinstance(ann, RefType):
        return "ref"
    if ann in (int, float, bool) or isinstance(ann, T.DataType):
        return "scalar"
    try:
        T.from_numpy_dtype(ann)
        return "scalar"
    except TypeError:
        return None


class _PythonScope:
    """What lang/kernel.py installs at import: the key of a template argument in a
    specialization's signature (fields by identity, data-oriented objects by their fields:
    the language's values)."""

    @staticmethod
    def template_key(value):
        raise TypeError("real functions need fluxion's language layer (import fluxion)")


_python_scope = _PythonScope()


def call(tr, func, args, kwargs, node):
    ctx = builder.current()
    try:
        ba = func.signature().bind(*args, **kwargs)
    except TypeError as e:
        raise FluxionTypeError(f"ti.real_func '{func.name}': {e}") from None
    ba.apply_defaults()
    hints, params = func.hints(), func.params()
    items, key, operands = [], [], []
    for name, value in ba.arguments.items():
        ann = hints.get(name, params[name].annotation)
        kind = param_kind(ann)
        if kind is None:
            raise FluxionSyntaxError(f"ti.real_func '{func.name}': invalid type annotation "
                                     f"{ann!r} of parameter '{name}'")
        what = f"ti.real_func '{func.name}'"
        where = f"{what}, argument '{name}'"
        if kind == "template":
            if _has_kernel_value(value):
                raise FluxionTypeError(
                    f"{where}: a ti.template() parameter of a real function takes a field or a "
                    f"compile-time value, not a kernel value; annotate it with its type (or "
                    f"ti.ref(...) to assign the caller's variable)")
            key.append(("t", _python_scope.template_key(value)))
        elif kind == "ndarray":
            check_ndarray_arg(ann, value, what, name)
            key.append(("a", id(value.arg), value.is_grad))
        elif kind == "ref":
            dt = T.normalize(ann.tp)
            if not (isinstance(value, Expr) and isinstance(value.lvalue, S.AllocaStmt)):
                raise FluxionTypeError(f"{where}: a ti.ref({dt}) parameter takes a local "
                                       f"variable of the caller, not {_describe(value)}")
            if value.dtype != dt:
                raise FluxionTypeError(f"{where}: a ti.ref({dt}) parameter takes a {dt} "
                                       f"variable, not a {value.dtype} one")
            operands.append(value.lvalue)
            # a local every iteration of the enclosing parallel loop shares: updates of it in
            # the function are atomic (a specialization of their own)
            key.append(("r", dt, builder.shared_by_iterations(value.lvalue)))
        else:
            types = param_types(kind, ann)
            for v, dt in zip(scalars_of(kind, ann, value, what, name), types):
                operands.append(E.cast(E.to_expr(v, like=dt), dt).stmt)
            key.append((kind, tuple(types)))
        items.append((name, kind, ann, value))
    ret_spec = return_spec(func)
    table = ctx.__dict__.setdefault("real_functions", {})
    fkey = (func, tuple(key))
    fn = table.get(fkey)
    if fn is None:
        fn = _build(tr, func, items, ret_spec, node, table, fkey)
    call_stmt = emit(S.FuncCallStmt(operands, fn))
    results = iter([Expr(emit(S.CallResultStmt(call_stmt, k, ret_type=t)))
                    for k, t in enumerate(fn.ret_types)])
    values = [rebuild(ann, results) for ann in ret_spec]
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _build(tr, func, items, ret_spec, node, table, fkey):
    """The IR of one specialization of `func`: a Function in the kernel's list, its body
    built by a Transformer of its own with the parameters bound."""
    ctx = builder.current()
    if len(tr.call_stack) > MAX_NESTING:
        raise FluxionSyntaxError(
            f"ti.real_func '{func.name}': more than {MAX_NESTING} specializations built inside "
            f"one another; a template argument that changes at every recursive call needs a "
            f"ti.static condition that ends the recursion")
    src = func.source()
    ptypes, refs = [], []
    for _, kind, ann, _ in items:
        if kind == "ref":
            ptypes.append(T.normalize(ann.tp))
            refs.append(True)
        elif kind not in ("template", "ndarray"):
            for dt in param_types(kind, ann):
                ptypes.append(dt)
                refs.append(False)
    ret_types = [dt for ann in ret_spec for dt in leaf_types(ann)]
    fn = S.Function(func.name, ptypes, refs, ret_types, loc=src.loc(src.tree))
    table[fkey] = fn
    ctx.ir.functions.append(fn)
    with builder.function_body(fn.body):
        ctx.loc = src.loc(src.tree)
        bound = {}
        slot = 0

        def arg(dt):
            nonlocal slot
            slot += 1
            return Expr(emit(S.FuncArgStmt(slot - 1, ret_type=dt)))

        for k, (name, kind, ann, value) in enumerate(items):
            if kind == "template":
                bound[name] = value
            elif kind == "ndarray":
                # an ArrayValue of its own: the statements it caches (the shape) belong to
                # the block where they were first used, here the function's body
                bound[name] = ArrayValue(value.arg, value.is_grad)
            elif kind == "ref":
                v = Var.__new__(Var)
                v.dtype = T.normalize(ann.tp)
                slot += 1
                shared = fkey[1][k][2]          # ("r", dtype, shared) in the key
                v.alloca = emit(S.FuncRefArgStmt(slot - 1, shared, ret_type=v.dtype))
                bound[name] = v
            elif kind == "scalar":
                dt = T.normalize(ann)
                bound[name] = Var(dt, arg(dt))
            elif kind == "matrix":
                dt = ann.dtype
                entries = [arg(dt) for _ in range(ann.n * ann.m)]
                bound[name] = MatVar(Matrix._make(entries, ann.n, ann.m, ann.ndim), dt)
            else:
                values = [arg(dt) for dt in leaf_types(ann)]
                bound[name] = StructVar(build_struct(ann, iter(values)))
        frame = FuncFrame(src, False, name=func.name)
        frame.real = fn
        frame.ret_spec = ret_spec
        sub = type(tr)(src, func.globals(), tr.kernel_name, frame,
                          tr.call_stack + (tr.src.loc(node),))
        sub.build_function(bound)
    return fn


def return_scalars(value, spec, what):
    """The statements of the scalars that `value` returns for annotation items `spec`,
    converted to their types (a tuple value for several items)."""
    values = list(value) if len(spec) > 1 and isinstance(value, (tuple, list)) else [value]
    if len(values) != len(spec):
        raise FluxionTypeError(f"{what} returns {len(values)} values but its return "
                               f"annotation has {len(spec)}")
    out = []
    for v, ann in zip(values, spec):
        v = _convert_return(v, ann, None, what)
        for x, dt in zip(_leaves(v, ann), leaf_types(ann)):
            out.append(E.cast(E.to_expr(x, like=dt), dt).stmt)
    return out


def emit_return(fr, value):
    """`return value` in a real function's body: the value converted to the return
    annotation, as scalars, and the end of the function."""
    spec = fr.ret_spec
    if value is None:
        if spec:
            raise FluxionTypeError(f"ti.real_func '{fr.name}' returns nothing here but its "
                                   f"return annotation says it returns a value")
        emit(S.FuncReturnStmt([]))
        return
    if not spec:
        raise FluxionSyntaxError(
            f"ti.real_func '{fr.name}' returns a value, so its return value must be annotated "
            f"with a type, e.g. `def {fr.name}(...) -> ti.f32`")
    emit(S.FuncReturnStmt(return_scalars(value, spec, f"ti.real_func '{fr.name}'")))


# -- types -----------------------------------------------------------------------------------
def return_spec(func):
    """The return annotation as a list of DataType / MatrixType / StructType (several for a
    tuple annotation, none without one)."""
    ann = func.hints().get("return", func.signature().return_annotation)
    if ann is inspect.Signature.empty or ann is None:
        return []
    return parse_return(ann, f"ti.real_func '{func.name}'")[0]


def parse_return(ann, what):
    """(items, is_tuple) of a return annotation: a type, or a tuple of types written
    `(a, b)`, `tuple[a, b]` or `typing.Tuple[a, b]`."""
    is_tuple = isinstance(ann, (tuple, list)) or typing.get_origin(ann) is tuple
    if typing.get_origin(ann) is tuple:
        ann = typing.get_args(ann)
    items = list(ann) if is_tuple else [ann]
    out = []
    for a in items:
        if isinstance(a, (MatrixType, StructType)):
            out.append(a)
            continue
        try:
            out.append(T.normalize(a))
        except TypeError:
            raise FluxionTypeError(f"{what}: unsupported return annotation {a!r}") from None
    return out, is_tuple


def leaf_types(ann):
    """The scalar types a value of annotation `ann` travels as."""
    if isinstance(ann, MatrixType):
        return [ann.dtype] * (ann.n * ann.m)
    if isinstance(ann, StructType):
        return [dt for _, dt in struct_leaves(ann)]
    return [ann]


def param_types(kind, ann):
    if kind == "scalar":
        return [T.normalize(ann)]
    return leaf_types(ann)


def _leaves(value, ann):
    if isinstance(ann, MatrixType):
        return list(value.entries)
    if isinstance(ann, StructType):
        out = []
        for k in ann.members:
            t = ann.member_type(k)
            v = getattr(value, k) if isinstance(value, Struct) else value[k]
            if isinstance(t, (MatrixType, StructType)):
                if isinstance(t, MatrixType) and not isinstance(v, Matrix):
                    v = t(v)
                out.extend(_leaves(v, t))
            else:
                out.append(v)
        return out
    return [value]


def rebuild(ann, results):
    """The value of annotation `ann` made of the next scalars of iterator `results`."""
    if isinstance(ann, MatrixType):
        # (a kernel's result in Python scope: NumPy scalars of its type; kernel values stay)
        dt = ann.dtype
        return Matrix._make([scalar_of(next(results), dt) for _ in range(ann.n * ann.m)],
                            ann.n, ann.m, ann.ndim)
    if isinstance(ann, StructType):
        return build_struct(ann, results)
    return next(results)


def scalars_of(kind, ann, value, what, name):
    """The scalars that argument `value` passes for a scalar, matrix or struct parameter."""
    where = f"{what}, argument '{name}'"
    if kind == "scalar":
        if isinstance(value, (Matrix, Struct, tuple, list)) or not _is_number(value):
            raise FluxionTypeError(f"{where}: expected a scalar of type {T.normalize(ann)}, got "
                                   f"{_describe(value)}")
        return [value]
    if kind == "matrix":
        check_matrix_arg(ann, value, what, name)
        return list(value.entries)
    if not isinstance(value, Struct) or value._type is not ann:
        raise FluxionTypeError(f"{where}: expected a struct of type {ann!r}, got "
                               f"{_describe(value)}")
    return _leaves(value, ann)


def check_matrix_arg(ann, value, what, name):
    """A vector/matrix argument has the annotation's shape (the messages are the original
    system's, naming argument `name` of function `what`)."""
    where = f"Argument {name} of {what}"
    if not isinstance(value, Matrix):
        raise FluxionSyntaxError(f"{where} of type {ann!r} is expected to be a Matrix, but got "
                                 f"{_describe(value)}")
    if value.ndim != ann.ndim:
        raise FluxionSyntaxError(f"{where} of type {ann!r} is expected to be a Matrix with ndim "
                                 f"{ann.ndim}, but got {value.ndim}")
    if value.n != ann.n:
        raise FluxionSyntaxError(f"{where} of type {ann!r} is expected to be a Matrix with n "
                                 f"{ann.n}, but got {value.n}")
    if ann.ndim == 2 and value.m != ann.m:
        raise FluxionSyntaxError(f"{where} of type {ann!r} is expected to be a Matrix with m "
                                 f"{ann.m}, but got {value.m}")


def check_ndarray_arg(ann, value, what, name):
    """An array argument matches its `ti.types.ndarray(...)` annotation (the messages are the
    original system's, naming argument `name` of function `what`)."""
    where = f"{name} of {what}"
    if not isinstance(value, ArrayValue):
        # (the original's message: an array reaches a function only as a kernel's argument)
        raise FluxionTypeError(f"Expected ndarray in the kernel argument for argument {where}, "
                               f"got {_describe(value)}")
    if not isinstance(ann, NdarrayType):
        return
    d = value.arg.desc
    if ann.element is not None:
        want = ann.element_shape()
        if tuple(d.elem_shape) != tuple(want):
            raise FluxionTypeError(f"Invalid value for argument {where} - required "
                                   f"element_shape={want}, array with element shape of "
                                   f"{tuple(d.elem_shape)} is provided")
    dt = ann.scalar_dtype()
    if dt is not None and dt != d.dtype:
        raise FluxionTypeError(f"Invalid value for argument {where} - required array has "
                               f"dtype={dt}, array with dtype={d.dtype} is provided")
    if ann.ndim is not None and ann.ndim != d.ndim:
        raise FluxionTypeError(f"Invalid value for argument {where} - required array has "
                               f"ndim={ann.ndim}, array with {d.ndim} dimensions is provided")


def _is_number(x):
    return isinstance(x, (Expr, int, float, np.number, np.bool_))


def _has_kernel_value(v):
    if isinstance(v, Expr):
        return True
    if isinstance(v, Matrix):
        return any(isinstance(e, Expr) for e in v.entries)
    if isinstance(v, Struct):
        return any(_has_kernel_value(x) for x in v._members.values())
    if isinstance(v, (tuple, list)):
        return any(_has_kernel_value(x) for x in v)
    if isinstance(v, dict):
        return any(_has_kernel_value(x) for x in v.values())
    return False
