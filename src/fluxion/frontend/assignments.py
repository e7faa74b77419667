"""Assignments in a kernel or ti.func body (a mixin of frontend/transformer.py's Transformer):
plain, annotated, augmented (atomic on globals and shared locals) and static assignments,
unpacking, and stores through subscripts of vectors and matrices.
"""
from __future__ import annotations

import ast

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import FluxionSyntaxError
from fluxion.ir.expr import Expr
from fluxion.frontend import builtins as B
from fluxion.frontend import overflow
from fluxion.frontend.builtins import atomic_update
from fluxion.frontend.matrix import _flat_values, Matrix, MatrixType
from fluxion.frontend.access import matrix_bounds_check
from fluxion.frontend.struct import StructType
from fluxion.frontend.stores import store_value
from fluxion.frontend.variables import MatVar, StructVar, Var
from fluxion.frontend.control_flow import _is_call_to
from fluxion.frontend.expressions import _BINOPS, _WRAPPING, _check_matrix_index, _unpack


_ATOMIC_OF = {ast.Add: "add", ast.Sub: "sub", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
              ast.BitXor: "bit_xor"}


class AssignmentVisitor:
    """`visit_<Stmt>` for expression statements and assignments; `self` is the Transformer."""

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
        out = _BINOPS[op](target, value)
        if op in _WRAPPING and builder.current().cfg.debug:
            overflow.check(out)
        self.store_to(target, out)
