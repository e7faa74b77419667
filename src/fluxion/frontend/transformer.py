"""Python AST -> IR. The kernel body is interpreted: Python-level values (template arguments,
globals, `ti.static` expressions) are evaluated here, `ti.func` calls are inlined, and every
operation on kernel values emits IR through `Expr` (see expr.py). Vectors and matrices are
scalarized: a local 3-vector is three allocas.
"""
from __future__ import annotations

import ast
import builtins as pybuiltins
import contextlib
import operator
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
from fluxion.frontend import loops as L
from fluxion.frontend import print_format as PF
from fluxion.frontend.print_format import _FString, _Formatted
from fluxion.frontend import builtins as B
from fluxion.frontend.builtins import (atomic_update, logical_not, max as kmax, select,
                                       static_assert, truth)
from fluxion.frontend.matrix import _flat_values, Matrix, MatrixType
from fluxion.frontend.simt import SharedArrayValue, shared_access
from fluxion.frontend.access import (ArrayValue, field_access, matrix_bounds_check,
                                     ndarray_access, struct_access)
from fluxion.frontend.places import FieldBase, SNodeBase, StructFieldBase
from fluxion.frontend.struct import Struct, StructType
from fluxion.frontend.variables import (_convert_return, _describe, _is_number, _unify_types,
                                        FuncFrame, MatVar, store_value, StructVar, Var)
from fluxion.frontend import calls, real_func


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_ATOMIC_OF = {ast.Add: "add", ast.Sub: "sub", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
              ast.BitXor: "bit_xor"}


class _Return(Exception):
    """Unwinds a function body at a final `return` (the common case needs no control flow)."""


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


class Transformer:
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
        with self.at(node):
            method = getattr(self, "visit_" + type(node).__name__, None)
            if method is None:
                kind = type(node).__name__
                raise FluxionSyntaxError(f'Unsupported node "{kind}": {_UNSUPPORTED.get(kind, kind)} '
                                         f"is not supported in kernels")
            return method(node)

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
        except FluxionError as e:
            if not getattr(e, "_located", False):
                raise self._locate(type(e), str(e), loc) from None
            raise
        except Exception as e:  # a Python error while evaluating user code at compile time
            if os.environ.get("FLUXION_FULL_TRACEBACK"):
                raise
            cls = _user_error_class(e)
            raise self._locate(cls, f"{type(e).__name__}: {e}", loc) from None
        finally:
            ctx.loc = saved

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
            return self.globals[name]
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
        elif isinstance(value, Matrix) and any(isinstance(e, (Expr, int, float)) for e in value.entries):
            self.scope[name] = MatVar(value, dtype)
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

    # -- statements ----------------------------------------------------------------------
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_FunctionDef(self, node):
        where = "ti.kernel" if self.frame.is_kernel else "ti.func"
        raise FluxionSyntaxError(f"Function definition is not allowed in '{where}': define "
                                 f"'{node.name}' outside it (as a @ti.func)")

    def visit_Assign(self, node):
        value = self.visit(node.value)
        if _is_call_to(self, node.value, {B.static}):
            # `x = ti.static(v)` (or `x, y = ti.static(a, b)`): the names are the compile-time
            # values themselves, not variables
            for t in node.targets:
                self._static_assign(t, value)
            return
        for t in node.targets:
            self.assign_target(t, value)

    def visit_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise FluxionSyntaxError("an annotated assignment needs a plain name")
        self._check_not_kernel_arg(node.target.id)
        ann = self.visit(node.annotation)
        value = self.visit(node.value) if node.value is not None else None
        if isinstance(ann, StructType):
            self.scope[node.target.id] = StructVar(value if value is not None else ann())
            return
        if isinstance(ann, MatrixType):
            if value is None:
                value = Matrix._make([0] * (ann.n * ann.m), ann.n, ann.m, ann.ndim)
            self.scope[node.target.id] = MatVar(value, ann.dtype)
            return
        dtype = T.normalize(ann)
        cur = self.scope.get(node.target.id)
        if isinstance(cur, Var):
            # a declared variable keeps its type: `d: ti.f32 = ...` after `d: ti.i32 = ...`
            # would make a second variable under the same name
            if cur.dtype is not dtype:
                raise FluxionSyntaxError(
                    f"variable '{node.target.id}' is already declared as {cur.dtype}; it cannot "
                    f"be annotated as {dtype} (Static assign cannot have type overloading)")
            if value is not None:
                cur.store(value)
            return
        self.scope[node.target.id] = Var(dtype, 0 if value is None else value)

    def _static_assign(self, t, value):
        if isinstance(t, (ast.Tuple, ast.List)):
            for sub, v in zip(t.elts, _unpack(value, len(t.elts))):
                self._static_assign(sub, v)
            return
        if not isinstance(t, ast.Name):
            raise FluxionSyntaxError("Static assign cannot be used on elements in arrays: "
                                     "`x = ti.static(...)` needs plain names")
        self._check_not_kernel_arg(t.id)
        if t.id in self.scope and not (self.outer_names and t.id in self.outer_names[-1]):
            # one name, one variable per block, as in the original system (an inner block
            # may shadow an outer name)
            raise FluxionSyntaxError(f"Recreating variables is not allowed: '{t.id}' is already "
                                     f"defined in this block; `x = ti.static(...)` defines a "
                                     f"new name")
        if t.id in self.scope:
            self.shadowed[-1].setdefault(t.id, self.scope[t.id])
        self.scope[t.id] = value

    def _check_not_kernel_arg(self, name):
        if name in self.kernel_args:
            raise FluxionSyntaxError(
                f'Kernel argument "{name}" is immutable in the kernel. If you want to change its '
                f"value, please create a new variable (e.g. `{name}_ = {name}`).")

    def assign_target(self, t, value):
        if isinstance(t, ast.Name):
            self._check_not_kernel_arg(t.id)
            self.assign_name(t.id, value)
        elif isinstance(t, (ast.Tuple, ast.List)):
            items = _unpack(value, len(t.elts))
            for sub, v in zip(t.elts, items):
                self.assign_target(sub, v)
        elif isinstance(t, ast.Subscript):
            # the container and the index are evaluated once: an index may have side effects
            # (`s[ti.atomic_add(n[None], 1)] = i`)
            container, index = self.visit(t.value), self.visit(t.slice)
            if not self._dynamic_matrix_store(container, index, value):
                with self.at(t):
                    target = self._subscript(t, container, index)
                self.store_to(target, value)
        elif isinstance(t, ast.Attribute):
            target = self.visit(t)
            self.store_to(target, value)
        elif isinstance(t, ast.Starred):
            raise FluxionSyntaxError("starred assignment is not supported in kernels")
        else:
            raise FluxionSyntaxError(f"cannot assign to {type(t).__name__}")

    def store_to(self, target, value):
        store_value(target, value)

    def _dynamic_matrix_store(self, container, index, value, op=None):
        """`v[i] = x` (or `v[i] op= x`, `m[i, :] = row`) with a kernel-value index on a local
        vector or matrix: a select per entry. False (nothing emitted) for any other
        subscript."""
        if not (isinstance(index, Expr) or (isinstance(index, tuple)
                                            and any(isinstance(k, Expr) for k in index))):
            return False
        if not isinstance(container, Matrix):
            return False
        _check_matrix_index(container, index)
        key = index if isinstance(index, tuple) else (index,)
        matrix_bounds_check(container, key)
        if container.ndim == 2 and len(key) == 1:
            key = (key[0], slice(None))       # one index into a matrix: a whole row
        sliced = container._slice_keys(key)
        if sliced is not None:
            keys, _ = sliced
            pairs = list(zip(keys, _flat_values(value, len(keys))))
        else:
            pairs = [(key, value)]
        # the flat entry each (row, column) or entry index selects
        pairs = [(k[0] if len(k) == 1 else k[0] * container.m + k[1], v)
                 for k, v in ((k if isinstance(k, tuple) else (k,), v) for k, v in pairs)]
        for k, entry in enumerate(container.entries):
            if not isinstance(entry, Expr) or entry.lvalue is None:
                raise FluxionSyntaxError("this matrix cannot be assigned to")
        # entries other iterations of a parallel loop also write (a kernel-level local, a field
        # or array element): only the selected entry may be stored, or each iteration wrote
        # back stale values of the others (`for i in range(n): v[i] = i` kept one entry)
        visible = any(builder.shared_by_iterations(e.lvalue) or
                      not isinstance(e.lvalue, S.AllocaStmt) for e in container.entries)
        shared = op in _ATOMIC_OF and visible
        for k, entry in enumerate(container.entries):
            if visible and not shared:
                for flat, v in pairs:
                    st = emit(S.IfStmt(E.truth(flat == k).stmt))
                    with into(st.then_block):
                        self.store_to(entry, v if op is None else _BINOPS[op](entry, v))
            elif shared:
                # a kernel-level vector updated from a parallel loop: an atomic per entry, of
                # the operation's identity where the index does not select the entry
                ident = -1 if op is ast.BitAnd else 0
                for flat, v in pairs:
                    self._augment(entry, op, E.select(flat == k, v, ident))
            else:
                # one store per entry, of all the selections at once: the entries are the
                # values loaded before this statement, so a store per selection would put
                # back the old values of the entries the others selected
                new = entry
                for flat, v in pairs:
                    upd = v if op is None else _BINOPS[op](entry, v)
                    new = E.select(flat == k, upd, new)
                self.store_to(entry, new)
        return True

    def visit_AugAssign(self, node):
        op = type(node.op)
        if isinstance(node.target, ast.Name):
            self._check_not_kernel_arg(node.target.id)
            cur = self.scope.get(node.target.id)
            if not isinstance(cur, (Var, MatVar)):
                # augmenting a compile-time value rebinds it, as in Python
                value = self.visit(node.value)
                self.assign_name(node.target.id, _BINOPS[op](self.lookup(node.target.id), value))
                return
        if isinstance(node.target, ast.Subscript):
            # container and index evaluated once (an index may have side effects)
            container, index = self.visit(node.target.value), self.visit(node.target.slice)
            with self.at(node.target):
                target = self._subscript(node.target, container, index)
            value = self.visit(node.value)
            if (isinstance(target, Expr) and target.lvalue is None) or \
                    (isinstance(target, Matrix) and isinstance(container, Matrix)):
                # `v[i] += x` (`m[i, 1:3] += row`) with a run-time index into a local vector
                # or matrix: a store per entry
                if self._dynamic_matrix_store(container, index, value, op):
                    return
        else:
            target = self.visit(node.target)
            value = self.visit(node.value)
        self._augment(target, op, value)

    def _augment(self, target, op, value):
        hook = getattr(type(target), "_kernel_augment", None)
        if hook is not None:
            hook(target, op, value)
            return
        if isinstance(target, Matrix) and isinstance(value, (list, tuple)):
            value = Matrix(list(value), ndim=target.ndim)
        if isinstance(target, Matrix):
            vals = value.entries if isinstance(value, Matrix) else [value] * len(target.entries)
            for t, v in zip(target.entries, vals):
                self._augment(t, op, v)
            return
        if not isinstance(target, Expr) or target.lvalue is None:
            raise FluxionSyntaxError("this expression cannot be assigned to")
        if op in _ATOMIC_OF and (
                isinstance(target.lvalue, (S.GlobalPtrStmt, S.QuantPtrStmt, S.ExternalPtrStmt,
                                           S.SharedPtrStmt))
                or builder.shared_by_iterations(target.lvalue)):
            atomic_update(_ATOMIC_OF[op], target, value)
            return
        if op in _ATOMIC_OF and isinstance(value, Expr) and value.dtype != target.dtype:
            # as the original system does (`+=` is an atomic there, on locals too): the value
            # takes the target's type first, so `acc_f32 += expr_f64` adds in f32 and stays
            # a reduction LLVM can vectorize
            value = E.cast(value, target.dtype)
        self.store_to(target, _BINOPS[op](target, value))

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Matrix):
            raise FluxionTypeError("the condition of an `if` must be a scalar")
        if not isinstance(cond, Expr):
            # a branch is a scope even when the condition is known now (a ti.static one too),
            # as in the original system: what it defines is not seen after the `if`
            if _is_call_to(self, node.test, {B.static}):
                with self.block_scope():
                    self.run_body(node.body if cond else node.orelse)
                return
            # a plain `if True:` is not ti.static: a `for` in it is not an outermost loop, so
            # it runs serially (and may `break`), as in the original
            ctx = builder.current()
            ctx.nested_scopes += 1
            try:
                with self.block_scope():
                    self.run_body(node.body if cond else node.orelse)
            finally:
                ctx.nested_scopes -= 1
            return
        st = emit(S.IfStmt(E.truth(cond).stmt))
        with into(st.then_block):
            self._run_guarded(node.body)
        with into(st.else_block):
            self._run_guarded(node.orelse)

    def _run_guarded(self, body):
        """A branch body: a `return` inside it ends only this branch's statements."""
        with self.block_scope():
            try:
                self.run_body(body)
            except _Return:
                pass

    @contextlib.contextmanager
    def block_scope(self):
        """Names first assigned inside a branch or loop body are local to it, as in the
        original system (their storage may live in another task of the kernel)."""
        before = set(self.scope)
        self.outer_names.append(before)
        self.shadowed.append({})
        try:
            yield
        finally:
            self.outer_names.pop()
            self.scope.update(self.shadowed.pop())
            for name in [k for k in self.scope if k not in before]:
                del self.scope[name]

    def visit_While(self, node):
        if node.orelse:
            raise FluxionSyntaxError("`while ... else` is not supported in kernels")
        loop = emit(S.WhileStmt())
        self.frame.loop_depth += 1
        builder.current().loop_depth += 1
        try:
            with into(loop.body), self.block_scope():
                cond = self.visit(node.test)
                if isinstance(cond, Expr):
                    st = emit(S.IfStmt(E.unary("logic_not", E.truth(cond)).stmt))
                    with into(st.then_block):
                        emit(S.BreakStmt())
                elif not cond:
                    emit(S.BreakStmt())
                self._run_loop_body(node.body)
        finally:
            self.frame.loop_depth -= 1
            builder.current().loop_depth -= 1

    def _run_loop_body(self, body):
        """The body of a loop run at run time: a `return` in it (only a real function's may
        be there) ends this iteration's statements, not the code after the loop."""
        try:
            self.run_body(body)
        except _Return:
            pass

    def visit_Break(self, node):
        ctx = builder.current()
        if ctx.loop_depth == 0:
            if ctx.in_parallel_loop:
                raise FluxionSyntaxError("Cannot break in the outermost loop: `break` is not "
                                         "allowed in a parallel loop (a top-level for of a "
                                         "kernel); use ti.loop_config(serialize=True)")
            self._static_control("break")
        emit(S.BreakStmt())

    def visit_Continue(self, node):
        ctx = builder.current()
        if ctx.loop_depth == 0 and not ctx.in_parallel_loop:
            self._static_control("continue")
        emit(S.ContinueStmt())

    def _static_control(self, kind):
        ctx = builder.current()
        if not ctx.static_loop_blocks:
            raise FluxionSyntaxError(f"`{kind}` outside of a loop")
        if ctx.static_loop_blocks[-1] != len(ctx.blocks):
            raise FluxionSyntaxError(f"You are trying to `{kind}` a static `for` loop, but the "
                                     f"`{kind}` statement is inside a non-static `if` (a condition "
                                     f"evaluated at run time): unrolling cannot stop there")
        raise _LoopControl(kind)

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        fr = self.frame
        if fr.real is not None:
            real_func.emit_return(fr, value)
            raise _Return()
        if fr.is_kernel:
            self._kernel_return(value)
            raise _Return()
        if not fr.wrapped:
            fr.ret_value = value
            raise _Return()
        if fr.loop_depth > 0:
            raise FluxionSyntaxError("Return inside non-static if/for is not supported: a ti.func "
                                     "cannot return from inside a loop")
        if value is not None and not isinstance(value, Struct) and \
                not all(_is_number(e) for e in _entries(value)):
            raise FluxionTypeError(f"ti.func '{fr.name}' has several returns, so it can return "
                                   f"only scalars, vectors, matrices or structs, not "
                                   f"{_describe(value)}")
        brk = emit(S.BreakStmt())
        # the value is stored before `brk` once every return's type is known
        fr.ret_sites.append((brk, value, builder.current().loc))
        raise _Return()

    def _kernel_return(self, value):
        ctx = builder.current()
        rts = ctx.ir.ret_types
        if not rts:
            if value is None:
                return
            raise FluxionSyntaxError("the kernel returns a value but has no return annotation "
                                     "(e.g. `-> ti.f32`)")
        if ctx.in_parallel_loop or ctx.loop_depth:
            raise FluxionSyntaxError("Return inside non-static if/for is not supported: a kernel "
                                     "can return only outside of loops")
        spec = getattr(ctx.ir, "ret_spec", None)
        if spec is not None:
            # structs and tuples of vectors and structs (lang/kernel.py ReturnSpec)
            if value is None:
                raise FluxionSyntaxError("the kernel returns nothing but has a return "
                                         "annotation")
            if spec.is_tuple and len(spec.items) == 1 and isinstance(value, (tuple, list)):
                value = value[0]
            for i, st in enumerate(real_func.return_scalars(value, spec.items, "the kernel")):
                emit(S.ReturnStmt(st, i))
            return
        vals = value.entries if isinstance(value, Matrix) else (
            list(value) if isinstance(value, (tuple, list)) else [value])
        if len(vals) != len(rts):
            raise FluxionTypeError(f"the kernel returns {len(vals)} values but its annotation "
                                   f"says {len(rts)}")
        for i, (v, t) in enumerate(zip(vals, rts)):
            emit(S.ReturnStmt(E.cast(E.to_expr(v, like=t), t).stmt, i))

    def visit_Assert(self, node):
        # the condition is evaluated in any case, as in the original system: what it calls
        # happens (`assert foo(15) == 0` calls foo); only the check needs debug mode
        cond = self.visit(node.test)
        if builder.current().cfg.debug:
            PF.emit_assert(cond, node, self.visit)

    # -- for loops ------------------------------------------------------------------------
    def visit_For(self, node):
        if node.orelse:
            raise FluxionSyntaxError("`for ... else` is not supported in kernels")
        it_node = node.iter
        if _is_call_to(self, it_node, {pybuiltins.range}):
            args = [self.visit(a) for a in it_node.args]
            if len(args) == 1:
                bounds = [(0, args[0])]
            elif len(args) == 2:
                bounds = [(args[0], args[1])]
            else:
                # (the original system's exact words: its tests compare the whole message)
                raise FluxionSyntaxError(f"Range should have 1 or 2 arguments, found {len(args)}")
            self._check_loop_targets(node)
            return self._range_loop(node, bounds, grouped=False)
        if _is_call_to(self, it_node, {B.static}):
            if len(it_node.args) == 1 and _is_call_to(self, it_node.args[0], {B.static}):
                raise FluxionSyntaxError("'ti.static' cannot be nested: write "
                                         "`ti.static(...)` once")
            # ti.static(...): unrolled at compile time, whatever the iterable
            return self._unrolled(node, self.visit(it_node))
        it = self.visit(it_node)
        if isinstance(it, L.ndrange):
            return self._range_loop(node, it.bounds, grouped=False)
        if isinstance(it, L.GroupedNdrange):
            return self._range_loop(node, it.inner.bounds, grouped=True)
        if isinstance(it, (L.GroupedField, FieldBase, ArrayValue, StructFieldBase, SNodeBase)):
            # a struct-for, as a range-for, introduces its indices: they may not reuse the name
            # of a variable of the function
            self._check_loop_targets(node)
        grouped = isinstance(it, L.GroupedField)
        inner = it.field if grouped else it
        if isinstance(inner, ArrayValue):
            return self._range_loop(node, inner.bounds(), grouped=grouped)
        if isinstance(inner, (FieldBase, StructFieldBase, SNodeBase)):
            # a struct-for: over the field's (or node's) index space, only active cells
            return self._range_loop(node, L.field_bounds(inner), grouped=grouped,
                                    active=L.active_filter(inner))
        if isinstance(it, Expr):
            raise FluxionSyntaxError("cannot iterate over a kernel value")
        # any other Python iterable (ti.static(...), a tuple, a list): unroll at compile time
        return self._unrolled(node, it)

    def _check_loop_targets(self, node):
        for n in ast.walk(node.target):
            if isinstance(n, ast.Name) and n.id in self.scope:
                raise FluxionSyntaxError(
                    f"Variable '{n.id}' is already declared in the outer scope and cannot be used "
                    f"as loop variable")

    def _unrolled(self, node, iterable):
        if isinstance(iterable, Matrix):
            iterable = list(iterable)
        ctx = builder.current()
        saved = ctx.loop_depth, ctx.in_parallel_loop
        # `break` in an unrolled loop stops the unrolling, so it must not sit under a runtime
        # condition: remember how deep the blocks are here to check that.
        ctx.static_loop_blocks.append(len(ctx.blocks))
        ctx.loop_depth, ctx.in_parallel_loop = 0, False
        targets = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
        try:
            for value in iterable:
                # each unrolled iteration has its own scope, as in the original system: names
                # first bound in the body are new per iteration (their type and shape may
                # differ) and gone after the loop; the loop target shadows an outer name
                shadowed = {n: self.scope[n] for n in targets if n in self.scope}
                try:
                    with self.block_scope():
                        self.assign_static_target(node.target, value)
                        self.run_body(node.body)
                except _LoopControl as lc:
                    if lc.kind == "break":
                        break
                finally:
                    self.scope.update(shadowed)
        finally:
            ctx.static_loop_blocks.pop()
            ctx.loop_depth, ctx.in_parallel_loop = saved

    def assign_static_target(self, t, value):
        if isinstance(t, ast.Name):
            self.scope[t.id] = value
        elif isinstance(t, (ast.Tuple, ast.List)):
            for sub, v in zip(t.elts, _unpack(value, len(t.elts))):
                self.assign_static_target(sub, v)
        else:
            raise FluxionSyntaxError("loop target must be a name or a tuple of names")

    def _range_loop(self, node, bounds, grouped, active=None):
        ctx = builder.current()
        cfg = ctx.pending_loop_config
        ctx.pending_loop_config = {}
        ip = ctx.cfg.default_ip
        top_level = ctx.block is ctx.ir.body and not ctx.in_parallel_loop and not ctx.nested_scopes
        parallel = top_level and not cfg.get("serialize", False)
        names = []
        if grouped:
            if not isinstance(node.target, ast.Name):
                raise FluxionSyntaxError("`for I in ti.grouped(...)` needs a single name")
        else:
            names = ([node.target] if isinstance(node.target, ast.Name)
                     else list(getattr(node.target, "elts", [])))
            if len(names) != len(bounds) or not all(isinstance(n, ast.Name) for n in names):
                raise FluxionSyntaxError(
                    f"the loop iterates over {len(bounds)} dimensions but has {len(names)} "
                    f"index variables (Ndrange for loop with number of the loop variables not "
                    f"equal to the dimension of the ndrange is not supported)")
        bounds = [(E.cast(E.to_expr(b, like=ip), ip) if isinstance(b, Expr) else b,
                   E.cast(E.to_expr(e, like=ip), ip) if isinstance(e, Expr) else e)
                  for b, e in bounds]
        if not bounds:
            # a 0-D iteration space has exactly one point
            begin, end, exts = 0, 1, []
        elif len(bounds) == 1:
            begin, end = bounds[0]
            exts = None
        else:
            begin = 0
            # an empty dimension (end <= begin) empties the whole space: without the clamp
            # two negative extents multiplied into a positive trip count
            exts = [_extent(b, e) for b, e in bounds]
            end = exts[0]
            for x in exts[1:]:
                end = end * x
        # a parallel struct-for under a pointer/bitmasked node whose cells hold blocks of
        # elements visits the cells, tests each once, and runs the block's elements in an
        # inner loop: its cost follows the active blocks, not the dense extent (not when
        # serial: a `break` there must leave the whole loop)
        blocks = getattr(active, "blocks", None) if parallel else None
        if blocks is not None:
            begin, end = 0, 1
            for n in blocks[0]:
                end *= n
        begin_e = E.cast(E.to_expr(begin, like=ip), ip)
        end_e = E.cast(E.to_expr(end, like=ip), ip)
        loop = emit(S.RangeForStmt(begin_e.stmt, end_e.stmt, parallel, cfg.get("block_dim")))
        saved_parallel, saved_depth = ctx.in_parallel_loop, ctx.loop_depth
        saved_loop = ctx.parallel_loop
        if parallel:
            ctx.in_parallel_loop, ctx.loop_depth = True, 0
            ctx.parallel_loop = loop
        else:
            ctx.loop_depth += 1
        self.frame.loop_depth += 1
        # an ndrange loop's indices may shadow a variable: it is seen again after the loop
        # (it was left naming the loop index, outside its loop)
        shadowed = {n: self.scope[n] for n in (
            [node.target.id] if grouped else [t.id for t in names]) if n in self.scope}
        try:
            with contextlib.ExitStack() as nest:
                nest.enter_context(into(loop.body))
                nest.enter_context(self.block_scope())
                idx = Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
                if blocks is not None:
                    indices = L.enter_block(nest, idx, blocks, bounds, active, ip)
                    active = None
                elif exts is None:
                    indices = [idx]
                else:
                    indices = [v + b if not _is_zero(b) else v
                               for v, (b, _) in zip(L.unflatten(idx, exts), bounds)]
                if grouped:
                    self.scope[node.target.id] = Matrix._make(indices, len(indices), 1, 1)
                else:
                    for n, v in zip(names, indices):
                        self.scope[n.id] = v
                cond = active(indices) if active is not None else None
                if cond is None:
                    self._run_loop_body(node.body)
                else:
                    # under sparse SNodes: the body runs for the elements of active cells
                    with into(emit(S.IfStmt(E.truth(cond).stmt)).then_block):
                        self._run_loop_body(node.body)
        finally:
            self.scope.update(shadowed)
            ctx.in_parallel_loop, ctx.loop_depth = saved_parallel, saved_depth
            ctx.parallel_loop = saved_loop
            self.frame.loop_depth -= 1

    # -- expressions ----------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node.id)

    def visit_Tuple(self, node):
        return tuple(self._elts(node.elts))

    def visit_List(self, node):
        return list(self._elts(node.elts))

    def _elts(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(_unpack(self.visit(e.value), None))
            else:
                out.append(self.visit(e))
        return out

    def visit_Dict(self, node):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:                  # `{**other}`: the other dict's items
                out.update(self.visit(v))
            else:
                out[self.visit(k)] = self.visit(v)
        return out

    def visit_BinOp(self, node):
        a, b = self.visit(node.left), self.visit(node.right)
        return _BINOPS[type(node.op)](a, b)

    def visit_UnaryOp(self, node):
        v = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            return ~v
        if isinstance(node.op, ast.Not):
            if isinstance(v, (Expr, Matrix)):
                return logical_not(v)
            return not v
        raise FluxionSyntaxError(f"unsupported unary operator {type(node.op).__name__}")

    def visit_BoolOp(self, node):
        # Python's value semantics, as Taichi gives them: on scalars `a and b` is `b` when
        # `a` is true and `a` otherwise (`2 and 3` is 3, not 1); `or` is the mirror. Both
        # operands of a kernel value are evaluated (no short circuit); a compile-time operand
        # that decides the result skips the rest, as in Python. On matrices both are
        # element-wise truth values 0/1.
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        if not builder.current().cfg.short_circuit_operators:
            # ti.init(short_circuit_operators=False): bitwise, as in the original system
            op = B.bit_and if is_and else B.bit_or
            for vnode in node.values[1:]:
                result = op(result, self.visit(vnode))
            return result
        for vnode in node.values[1:]:
            if not isinstance(result, (Expr, Matrix)):
                if bool(result) != is_and:
                    return result
                result = self.visit(vnode)
                continue
            result = _bool_value(result, self.visit(vnode), is_and)
        return result

    def visit_Compare(self, node):
        left = self.visit(node.left)
        result = None
        for op, rnode in zip(node.ops, node.comparators):
            right = self.visit(rnode)
            if isinstance(op, (ast.Is, ast.IsNot)):
                # rejected even in ti.static(...), as in the original system
                name = "is" if isinstance(op, ast.Is) else "is not"
                raise FluxionSyntaxError(f'Operator "{name}" in Taichi scope is not supported: '
                                         f"compare the objects in Python, before the kernel")
            if isinstance(op, (ast.In, ast.NotIn)):
                if not self.static_depth:
                    raise FluxionSyntaxError(
                        f'"{type(op).__name__}" is only supported inside `ti.static`: write '
                        f"`ti.static(a {'in' if isinstance(op, ast.In) else 'not in'} b)`")
                if isinstance(left, Expr) or isinstance(right, Expr):
                    raise FluxionSyntaxError("`in` needs compile-time values")
                r = (left in right) if isinstance(op, ast.In) else (left not in right)
            else:
                r = _CMPOPS[type(op)](left, right)
            if result is None:
                result = r
            elif isinstance(result, Matrix) or isinstance(r, Matrix):
                # `0 < v < 1` on a vector: entry by entry (Python's `and` of two vectors
                # gave the second comparison alone)
                result = _matrix_and(result, r)
            elif isinstance(result, Expr) or isinstance(r, Expr):
                result = E.truth(result) & E.truth(r)
            else:
                result = result and r
            left = right
        return result

    def visit_NamedExpr(self, node):
        """`(y := expr)`: assigns y, as `y = expr` would, and is its value."""
        self.assign_name(node.target.id, self.visit(node.value))
        return self.lookup(node.target.id)

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Matrix):
            raise FluxionSyntaxError(
                "Using conditional expression for element-wise select operation on vectors/"
                'matrices is not supported. Please use "ti.select" instead.')
        if not isinstance(cond, Expr):
            return self.visit(node.body if cond else node.orelse)
        return select(cond, self.visit(node.body), self.visit(node.orelse))

    def visit_Attribute(self, node):
        value = self.visit(node.value)
        try:
            out = getattr(value, node.attr)
        except AttributeError:
            raise FluxionSyntaxError(f"{_describe(value)} has no attribute '{node.attr}'") from None
        return out

    def visit_Subscript(self, node):
        value = self.visit(node.value)
        return self._subscript(node, value, self.visit(node.slice))

    def _subscript(self, node, value, index):
        """`value[index]`, both already evaluated; `node` names them in messages."""
        if isinstance(value, FieldBase):
            # messages name the field as this access writes it
            return field_access(value, index, label=ast.unparse(node.value))
        if isinstance(value, ArrayValue):
            return ndarray_access(value, index)
        if isinstance(value, StructFieldBase):
            return struct_access(value, index, ast.unparse(node.value))
        if isinstance(value, SharedArrayValue):
            return shared_access(value, index)
        if isinstance(value, Matrix):
            _check_matrix_index(value, index)
            matrix_bounds_check(value, index)
            return value[index]
        # library objects that kernels index (a sparse matrix builder): they emit their own IR
        hook = getattr(type(value), "_kernel_subscript", None)
        if hook is not None:
            return hook(value, index)
        if isinstance(index, Expr) or (isinstance(index, tuple) and any(isinstance(k, Expr) for k in index)):
            raise FluxionTypeError(f"cannot index {_describe(value)} with a kernel value")
        return value[index]

    def visit_Slice(self, node):
        lo = self.visit(node.lower) if node.lower else None
        hi = self.visit(node.upper) if node.upper else None
        st = self.visit(node.step) if node.step else None
        return slice(lo, hi, st)

    def visit_JoinedStr(self, node):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
            else:
                val = self.visit(v.value)
                spec = None
                if v.format_spec is not None:
                    spec = "".join(str(self.visit(x)) if not isinstance(x, ast.Constant) else x.value
                                   for x in v.format_spec.values)
                parts.append(_Formatted(val, spec))
        if all(isinstance(p, str) or not _has_kernel_value(p.value) for p in parts):
            try:
                return "".join(p if isinstance(p, str) else format(p.value, p.spec or "")
                               for p in parts)
            except ValueError:
                pass    # a printf spec Python lacks (`{3:.10d}`): print formats it
        return _FString(parts)

    def visit_Lambda(self, node):
        raise FluxionSyntaxError("lambda is not supported inside kernels; use a ti.func")

    def visit_ListComp(self, node):
        return self._comprehension(node, list)

    def visit_GeneratorExp(self, node):
        return self._comprehension(node, list)

    def visit_SetComp(self, node):
        return self._comprehension(node, set)

    def visit_DictComp(self, node):
        return self._comprehension(node, dict)

    def _comprehension(self, node, kind):
        """A comprehension, unrolled at compile time: any number of `for`s, each with any
        number of `if`s (conditions known at compile time); its targets are its own names."""
        targets = {n.id for g in node.generators for n in ast.walk(g.target)
                   if isinstance(n, ast.Name)}
        saved = {n: self.scope[n] for n in targets if n in self.scope}
        out = []

        def run(k):
            if k == len(node.generators):
                if kind is dict:
                    out.append((self.visit(node.key), self.visit(node.value)))
                else:
                    out.append(self.visit(node.elt))
                return
            g = node.generators[k]
            self.static_depth += 1          # the iterable is evaluated at compile time
            try:
                iterable = self.visit(g.iter)
            finally:
                self.static_depth -= 1
            for value in iterable:
                self.assign_static_target(g.target, value)
                keep = True
                for cond in g.ifs:
                    c = self.visit(cond)
                    if isinstance(c, Expr):
                        raise FluxionSyntaxError(
                            "a comprehension's `if` must be known at compile time (it decides "
                            "which elements the unrolled result has)")
                    if not c:
                        keep = False
                        break
                if keep:
                    run(k + 1)
        try:
            run(0)
        finally:
            for n in targets:
                self.scope.pop(n, None)
            self.scope.update(saved)
        return kind(out)

    def visit_Call(self, node):
        func = self.visit(node.func)
        static = func is B.static or func is static_assert
        self.static_depth += static
        try:
            args = self._elts(node.args)
            kwargs = {}
            for kw in node.keywords:
                if kw.arg is None:
                    kwargs.update(self.visit(kw.value))
                else:
                    kwargs[kw.arg] = self.visit(kw.value)
        finally:
            self.static_depth -= static
        return calls.call(self, func, args, kwargs, node)


class _LoopControl(Exception):
    def __init__(self, kind):
        self.kind = kind


def _has_kernel_value(v):
    return isinstance(v, Expr) or (isinstance(v, Matrix) and any(isinstance(e, Expr) for e in v.entries))


def _entries(value):
    return list(value.entries) if isinstance(value, Matrix) else [value]


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


def _is_zero(x):
    return isinstance(x, int) and x == 0


def _is_call_to(tr, node, targets):
    if not isinstance(node, ast.Call):
        return False
    try:
        f = tr.visit(node.func)
    except FluxionError:
        return False
    return any(f is t for t in targets)


def _extent(begin, end):
    """The number of indices in [begin, end), never negative."""
    if isinstance(begin, Expr) or isinstance(end, Expr):
        return kmax(end - begin, 0)
    return max(end - begin, 0)


def _matrix_and(a, b):
    """Entry-wise logical and of comparison results (vectors, or a vector and a scalar)."""
    like = a if isinstance(a, Matrix) else b
    ea = a.entries if isinstance(a, Matrix) else [a] * len(like.entries)
    eb = b.entries if isinstance(b, Matrix) else [b] * len(like.entries)
    if len(ea) != len(eb):
        raise FluxionTypeError(f"chained comparison of values of shapes {a.shape} and {b.shape}")
    out = []
    for x, y in zip(ea, eb):
        if isinstance(x, Expr) or isinstance(y, Expr):
            out.append(E.truth(x) & E.truth(y))
        else:
            out.append(truth(x) & truth(y))
    return like._like(out)


def _bool_value(a, b, is_and):
    """`a and b` / `a or b` where `a` is a kernel value or a matrix."""
    if isinstance(a, Matrix) or isinstance(b, Matrix):
        fn = (lambda x, y: truth(x) & truth(y)) if is_and else (lambda x, y: truth(x) | truth(y))
        return a._zip(b, fn) if isinstance(a, Matrix) else b._rzip(a, fn)
    if _is_float_operand(a) or _is_float_operand(b):
        # as in the original system, `and`/`or` on kernel values take integers (truth values)
        def name(v):
            return str(v.dtype) if isinstance(v, Expr) else type(v).__name__
        op = "&&" if is_and else "||"
        raise FluxionTypeError(f"unsupported operand type(s) for '{op}': '{name(a)}' and "
                               f"'{name(b)}': `{'and' if is_and else 'or'}` takes integers or "
                               f"comparisons; compare a float first (e.g. `x != 0`)")
    return E.select(E.truth(a), b, a) if is_and else E.select(E.truth(a), a, b)


def _check_matrix_index(mat, index):
    """In a kernel a vector takes one index and a matrix two, as in the original system (one
    index into a matrix is not its row there)."""
    if isinstance(index, Matrix):
        n = len(index.entries)
    elif isinstance(index, tuple):
        n = len(index)
    elif isinstance(index, slice):
        return
    else:
        n = 1
    if n != mat.ndim:
        what = "a vector" if mat.ndim == 1 else "a matrix"
        raise FluxionIndexError(f"Expected {mat.ndim} indices, got {n}: {what} of shape "
                                f"{mat.shape} is indexed with {n} "
                                f"{'index' if n == 1 else 'indices'}")


def _is_float_operand(v):
    return (isinstance(v, Expr) and v.dtype.is_float) or isinstance(v, (float, np.floating))


def _unpack(value, n):
    if isinstance(value, Matrix):
        items = list(value.entries) if value.ndim == 1 else [value._row(r) for r in range(value.n)]
    elif isinstance(value, (tuple, list)):
        items = list(value)
    elif isinstance(value, Expr):
        raise FluxionTypeError("cannot unpack a scalar kernel value")
    else:
        items = list(value)
    if n is not None and len(items) != n:
        raise FluxionTypeError(f"cannot unpack {len(items)} values into {n} targets")
    return items


def _user_error_class(e):
    if isinstance(e, NameError):
        return FluxionNameError
    if isinstance(e, (TypeError, ValueError)):
        return FluxionTypeError
    if isinstance(e, IndexError):
        return FluxionIndexError
    return FluxionCompilationError
