"""The kernel's local variables and stores, shared by the transformer and the calls it
makes (ti.func inlining: frontend/calls.py; real functions: frontend/real_func.py): a
scalar, vector or struct local, the frame of a function being built, a store through a
value's lvalues, and a returned value against its annotation.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit
from fluxion.ir.errors import FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.struct import Struct, StructType


class Var:
    """A mutable scalar local: an alloca and its type."""
    __slots__ = ("alloca", "dtype")

    def __init__(self, dtype, init=None):
        self.dtype = dtype
        self.alloca = emit(S.AllocaStmt(ret_type=dtype))
        if init is not None:
            self.store(init)

    def load(self):
        # the value last stored, where the frontend knows it (ir/builder.py's known_value)
        known = builder.known_value(self.alloca, self.dtype)
        if known is not None:
            return Expr(known, lvalue=self.alloca)
        return Expr(emit(S.LocalLoadStmt(self.alloca, ret_type=self.dtype)), lvalue=self.alloca)

    def store(self, value):
        if isinstance(value, Matrix):
            raise FluxionTypeError(f"cannot assign a {value.shape} matrix to a scalar variable")
        emit(S.LocalStoreStmt(self.alloca, E.cast(E.to_expr(value, like=self.dtype), self.dtype).stmt))


class StructVar:
    """A mutable local struct: one variable per member."""

    def __init__(self, value):
        self.stype = value._type
        self.vars = {}
        for k, v in value._members.items():
            if isinstance(v, Struct):
                self.vars[k] = StructVar(v)
            elif isinstance(v, Matrix):
                self.vars[k] = MatVar(v)
            else:
                t = self.stype.member_type(k)
                self.vars[k] = Var(t, v)

    def load(self):
        return Struct(self.stype, {k: v.load() for k, v in self.vars.items()})

    def store(self, value):
        for k, v in self.vars.items():
            v.store(getattr(value, k))


class MatVar:
    """A mutable local vector or matrix: one Var per entry."""

    def __init__(self, template, dtype=None):
        self.n, self.m, self.ndim = template.n, template.m, template.ndim
        self.vars = []
        for e in template.entries:
            t = dtype or (e.dtype if isinstance(e, Expr) else E.literal_type(e))
            self.vars.append(Var(t, e))

    def load(self):
        return Matrix._make([v.load() for v in self.vars], self.n, self.m, self.ndim)

    def store(self, value):
        if isinstance(value, (list, tuple)):
            # `v = [a, b, c]` on a vector variable stores the list's entries, as the
            # original system does (a list is a vector or, nested, a matrix value)
            value = Matrix(value)
        if not isinstance(value, Matrix):
            value = Matrix._make([value] * len(self.vars), self.n, self.m, self.ndim)
        if len(value.entries) != len(self.vars):
            raise FluxionTypeError(f"cannot assign a {value.shape} value to a "
                                   f"{(self.n, self.m) if self.ndim == 2 else (self.n,)} variable")
        for v, e in zip(self.vars, value.entries):
            v.store(e)

class FuncFrame:
    """State of one function being inlined (or the kernel itself)."""

    def __init__(self, src, is_kernel, name=None, ret_ann=None):
        self.src = src
        self.is_kernel = is_kernel
        self.name = name
        self.ret_ann = ret_ann       # a ti.func's return annotation (see calls._ret_annotation)
        self.loop_depth = 0          # loops inside this function
        self.ret_value = None
        self.wrapped = False         # body runs inside a one-trip while so `return` can break
        # early returns of a wrapped body: (break, value, location); the result variable is
        # made once all are seen, so that no single `return` fixes its type
        self.ret_sites = []
        # a real function (frontend/real_func.py): its Function IR and return annotation (a
        # list of types); a `return` there ends the function wherever it is
        self.real = None
        self.ret_spec = ()

def _is_number(x):
    return isinstance(x, (Expr, int, float, np.number, np.bool_))

def _same_struct_type(a, b):
    """Struct types with the same members of the same types (the original compares the
    types' structure, not their identity)."""
    if a is b:
        return True
    if list(a.members) != list(b.members):
        return False
    for k in a.members:
        ta, tb = a.member_type(k), b.member_type(k)
        if isinstance(ta, StructType) and isinstance(tb, StructType):
            if not _same_struct_type(ta, tb):
                return False
        elif isinstance(ta, MatrixType) and isinstance(tb, MatrixType):
            if (ta.n, ta.m, ta.ndim, ta.dtype) != (tb.n, tb.m, tb.ndim, tb.dtype):
                return False
        elif isinstance(ta, (StructType, MatrixType)) or isinstance(tb, (StructType, MatrixType)):
            return False
        elif ta is not tb:
            return False
    return True


def _convert_return(value, ann, fname, what=None):
    """`what`: how messages name the function (a ti.func `fname` by default)."""
    what = what or f"ti.func '{fname}'"

    def fail():
        return FluxionTypeError(f"{what} returns {_describe(value)} but its return "
                                f"annotation is {ann!r}")

    if isinstance(ann, T.DataType):
        if isinstance(value, Matrix):
            # as the original: a scalar annotation casts each entry of a returned vector
            return value._like([E.cast(E.to_expr(e, like=ann), ann) for e in value.entries])
        if not _is_number(value):
            raise fail()
        return E.cast(E.to_expr(value, like=ann), ann)
    if isinstance(ann, MatrixType):
        if not isinstance(value, Matrix) or (value.n, value.m) != (ann.n, ann.m):
            raise fail()
        dt = ann.dtype
        return Matrix._make([E.cast(E.to_expr(e, like=dt), dt) for e in value.entries],
                            ann.n, ann.m, ann.ndim)
    if isinstance(ann, StructType):
        if not isinstance(value, Struct) or not _same_struct_type(value._type, ann):
            raise fail()
        return value
    if isinstance(ann, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(ann):
            raise fail()
        return tuple(_convert_return(v, a, fname, what) for v, a in zip(value, ann))
    return value

def _describe(v):
    if isinstance(v, Expr):
        return f"a kernel value of type {v.dtype}"
    return f"{type(v).__name__} {v!r}"[:80]
