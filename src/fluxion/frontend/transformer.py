"""Python AST -> IR. The kernel body is interpreted: Python-level values (template arguments,
globals, `ti.static` expressions) are evaluated here, `ti.func` calls are inlined, and every
operation on kernel values emits IR through `Expr` (see expr.py). Vectors and matrices are
scalarized: a local 3-vector is three allocas.

The Transformer is here: its scopes, names, error locations, and the build of a function's
body with its returns. It visits statements and expressions through three mixins, by what
they hold: frontend/assignments.py, frontend/control_flow.py and frontend/expressions.py.
"""
from __future__ import annotations

import ast
import builtins as pybuiltins
import contextlib
import os

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import (FluxionCompilationError, FluxionError, FluxionIndexError,
                               FluxionNameError, FluxionSyntaxError, FluxionTypeError,
                               located_error)
from fluxion.ir.expr import Expr
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.matrix_entries import in_kernel_matrix
from fluxion.frontend.struct import Struct, StructType
from fluxion.frontend.stores import store_value, unify_types as _unify_types
from fluxion.frontend.variables import (_convert_return, _describe, FuncFrame, MatVar, StructVar,
                                        Var)
from fluxion.frontend.assignments import AssignmentVisitor
from fluxion.frontend.control_flow import ControlFlowVisitor, _entries, _LoopControl, _Return
from fluxion.frontend.expressions import ExpressionVisitor

# what lang's modules take from here (store_value: a store into a kernel value)
__all__ = ["MatVar", "StructVar", "Transformer", "Var", "store_value"]


def _has_inner_return(body):
    for i, st in enumerate(body):
        for n in ast.walk(st):
            if isinstance(n, ast.Return) and not (i == len(body) - 1 and n is st):
                return True
    return False


def _returns_a_value(body):
    """Whether a `return <value>` is among these statements (not counting nested functions)."""
    todo = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return) and n.value is not None:
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return False


# what each unsupported statement or expression is, for the message
_UNSUPPORTED = {"Raise": "`raise`", "Try": "`try`", "With": "`with`", "Global": "`global`",
                "Nonlocal": "`nonlocal`", "Delete": "`del`", "Yield": "`yield`",
                "YieldFrom": "`yield from`", "Await": "`await`", "ClassDef": "a class definition",
                "Import": "`import`", "ImportFrom": "`import`", "SetComp": "a set comprehension",
                "DictComp": "a dict comprehension", "Set": "a set display",
                "NamedExpr": "`:=`", "Match": "`match`", "AsyncFor": "`async for`",
                "AsyncWith": "`async with`", "AsyncFunctionDef": "an async function"}


class Transformer(AssignmentVisitor, ControlFlowVisitor, ExpressionVisitor):
    def __init__(self, src, global_vars, kernel_name, frame=None, call_stack=()):
        self.src = src
        self.globals = global_vars
        self.kernel_name = kernel_name
        self.scope = {}
        self.frame = frame or FuncFrame(src, True)
        self.call_stack = call_stack
        # the kernel's parameters: immutable in its body, as in the original system
        self.kernel_args = set()
        # > 0 while evaluating the arguments of ti.static(...) (or a comprehension's iterable):
        # `in` is allowed there only, as in the original system
        self.static_depth = 0
        # the names bound when each enclosing block began: a name bound since is the
        # current block's own
        self.outer_names = []
        self.shadowed = []        # per block: outer bindings a static assign hid, to restore

    # -- error locations ------------------------------------------------------------------
    def visit(self, node):
        # what `with self.at(node)` does, written out: this is the frontend's hottest call,
        # and making a generator-based context manager per node is a good part of its cost
        ctx = builder.current()
        saved = ctx.loc
        loc = self.src.loc(node)
        if loc is not None:
            ctx.loc = loc
        try:
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                kind = type(node).__name__
                raise FluxionSyntaxError(f'Unsupported node "{kind}": {_UNSUPPORTED.get(kind, kind)} '
                                         f"is not supported in kernels")
            return method(node)
        except (_Return, _LoopControl):
            raise
        except Exception as e:
            located = self._located(e, loc)
            if located is None:
                raise
            raise located from None
        finally:
            ctx.loc = saved

    @contextlib.contextmanager
    def at(self, node):
        """IR emitted inside carries `node`'s location, and errors name it, as when visiting
        `node` (for work on a node whose parts were visited separately)."""
        ctx = builder.current()
        saved = ctx.loc
        loc = self.src.loc(node)
        if loc is not None:
            ctx.loc = loc
        try:
            yield
        except (_Return, _LoopControl):
            raise
        except Exception as e:
            located = self._located(e, loc)
            if located is None:
                raise
            raise located from None
        finally:
            ctx.loc = saved

    def _located(self, e, loc):
        """The error to raise for `e`, raised while working at `loc`: a FluxionError that names
        no place yet, or a Python error while evaluating user code at compile time, located
        there; None to let `e` through as it is."""
        if isinstance(e, FluxionError):
            if getattr(e, "_located", False):
                return None
            return self._locate(type(e), str(e), loc)
        if os.environ.get("FLUXION_FULL_TRACEBACK"):
            return None
        cls = _user_error_class(e)
        return self._locate(cls, f"{type(e).__name__}: {e}", loc)

    def _locate(self, cls, message, loc):
        # the frames name the kernel (the first one) and each ti.func called on the way
        return located_error(cls, loc, message, self.call_stack)

    # -- names ---------------------------------------------------------------------------
    def lookup(self, name):
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, (Var, MatVar, StructVar)):
                return v.load()
            return v
        # (the offline cache's key skips globals of names the function also assigns: it
        # checks after the build that none was read here, see kernel_cache.py)
        builder.current().outer_reads.add((id(self.src), name))
        if name in self.globals:
            v = self.globals[name]
            # (a global vector is a kernel value; one reached through an attribute or a
            # container keeps its Python-scope entries, as in the original)
            return in_kernel_matrix(v) if isinstance(v, Matrix) else v
        if hasattr(pybuiltins, name):
            return getattr(pybuiltins, name)
        raise FluxionNameError(f'Name "{name}" is not defined')

    def bind_new(self, name, value, dtype=None):
        """First assignment to `name`: kernel values become mutable locals."""
        if isinstance(value, np.ndarray):
            if value.ndim != 0:
                raise FluxionTypeError(f"Only 0-dimensional numpy array can be used to "
                                       f"initialize a scalar expression: '{name}' is given an "
                                       f"array of shape {value.shape} (use ti.Vector/ti.Matrix)")
            value = value.item()              # a literal of its kind, as in the original system
        if isinstance(value, Struct):
            self.scope[name] = StructVar(value)
        elif isinstance(value, Matrix) and \
                any(isinstance(e, (Expr, int, float, np.generic)) for e in value.entries):
            self.scope[name] = MatVar(in_kernel_matrix(value), dtype)
        elif isinstance(value, (Expr, int, float)) or dtype is not None:
            if isinstance(value, bool) and dtype is None:
                # `found = False` is a kernel variable (u1, as in the original system) that a
                # later `found = True` under a run-time `if` must store to, not a Python name
                # that the assignment rebinds at compile time whether or not the branch runs
                t = T.u1
            else:
                if isinstance(value, bool):
                    value = int(value)
                t = dtype or (value.dtype if isinstance(value, Expr) else E.literal_type(value))
            self.scope[name] = Var(t, value)
        else:
            self.scope[name] = value

    def assign_name(self, name, value):
        cur = self.scope.get(name)
        if isinstance(cur, (Var, MatVar, StructVar)):
            cur.store(value)
        else:
            self.bind_new(name, value)

    # -- function body -------------------------------------------------------------------
    def run_body(self, body):
        for st in body:
            self.visit(st)

    def build_function(self, args_bound):
        """Visit a function's body with its parameters bound; returns its return value."""
        self.scope.update(args_bound)
        body = self.src.tree.body
        fr = self.frame
        if fr.is_kernel:
            self.kernel_args = set(args_bound)
        declared = builder.current().ir.ret_types if fr.is_kernel else fr.ret_ann is not None
        if fr.real is None and declared and not _returns_a_value(body):
            with self.at(self.src.tree):
                what = "Kernel" if fr.is_kernel else "Function"
                raise FluxionSyntaxError(f"{what} has a return type but does not have a return "
                                         f"statement")
        if fr.real is not None:
            try:
                self.run_body(body)
            except _Return:
                pass
            return None
        if not fr.is_kernel and _has_inner_return(body):
            fr.wrapped = True
            loop = emit(S.WhileStmt())
            with into(loop.body):
                try:
                    self.run_body(body)
                    emit(S.BreakStmt())
                except _Return:
                    pass
            return self._merge_returns(loop)
        try:
            self.run_body(body)
        except _Return:
            pass
        if fr.is_kernel:
            return fr.ret_value
        return self._to_return_annotation(fr.ret_value)

    def _merge_returns(self, loop):
        """The result of a body with early returns: a variable of the annotated type, or of
        the promotion of every returned value (literals adopt the others' type, as in a binary
        operation), stored at each `return` (before its break)."""
        fr = self.frame
        sites = [site for site in fr.ret_sites if site[1] is not None]
        if not sites:
            return None
        ann = fr.ret_ann
        first = sites[0][1]
        ctx = builder.current()
        saved_loc = ctx.loc
        try:
            if isinstance(first, Struct) or isinstance(ann, StructType):
                stype = ann if isinstance(ann, StructType) else first._type
                for _, v, loc in sites:
                    if not isinstance(v, Struct) or v._type is not stype:
                        ctx.loc = loc
                        raise FluxionTypeError(f"ti.func '{fr.name}' returns {_describe(v)} "
                                               f"where its other returns give a {stype.name}")
                result = _emit_before(loop, lambda: StructVar(stype()))
            else:
                shape = _ret_shape(first)
                for _, v, loc in sites:
                    if _ret_shape(v) != shape:
                        ctx.loc = loc
                        raise FluxionTypeError(
                            f"ti.func '{fr.name}' returns values of different shapes: "
                            f"{_describe_shape(_ret_shape(v))} here, {_describe_shape(shape)} "
                            f"at its first return")
                if ann is not None:
                    ctx.loc = sites[0][2]
                    types = self._annotated_types(shape)
                else:
                    columns = zip(*(_entries(v) for _, v, _ in sites))
                    types = [_unify_types(col) for col in columns]
                if shape is None:
                    result = _emit_before(loop, lambda: Var(types[0]))
                else:
                    n, m, ndim = shape
                    result = _emit_before(loop, lambda: _RetMatVar(types, n, m, ndim))
            for brk, v, loc in sites:
                ctx.loc = loc
                _emit_before(brk, lambda: result.store(v))
        finally:
            ctx.loc = saved_loc
        return result.load()

    def _annotated_types(self, shape):
        """The entry types a return annotation gives a value of `shape`."""
        ann, name = self.frame.ret_ann, self.frame.name
        if isinstance(ann, T.DataType) and shape is None:
            return [ann]
        if isinstance(ann, MatrixType) and shape is not None and \
                (ann.n, ann.m) == shape[:2]:
            return [ann.dtype] * (ann.n * ann.m)
        raise FluxionTypeError(f"ti.func '{name}' returns {_describe_shape(shape)} but its "
                               f"return annotation is {ann!r}")

    def _to_return_annotation(self, value):
        """Convert a ti.func's result to its return annotation (as the original system casts
        the returned value to the annotated type)."""
        ann = self.frame.ret_ann
        if ann is None or value is None:
            return value
        return _convert_return(value, ann, self.frame.name)


def _ret_shape(value):
    return (value.n, value.m, value.ndim) if isinstance(value, Matrix) else None


def _describe_shape(shape):
    if shape is None:
        return "a scalar"
    n, m, ndim = shape
    return f"a {n}-vector" if ndim == 1 else f"a {n}x{m} matrix"


class _RetMatVar(MatVar):
    """A matrix result variable with a type per entry."""

    def __init__(self, types, n, m, ndim):
        self.n, self.m, self.ndim = n, m, ndim
        self.vars = [Var(t) for t in types]


def _emit_before(anchor, make):
    """Run `make()` emitting into `anchor`'s block, then move what it emitted before
    `anchor`; returns what `make` returned."""
    block = anchor.parent
    start = len(block.stmts)
    with into(block):
        out = make()
    new = block.stmts[start:]
    del block.stmts[start:]
    i = block.stmts.index(anchor)
    block.stmts[i:i] = new
    return out


def _user_error_class(e):
    if isinstance(e, NameError):
        return FluxionNameError
    if isinstance(e, (TypeError, ValueError)):
        return FluxionTypeError
    if isinstance(e, IndexError):
        return FluxionIndexError
    return FluxionCompilationError
