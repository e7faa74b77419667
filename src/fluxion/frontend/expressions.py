"""The expressions of a kernel or ti.func body (frontend/transformer.py's Transformer visits
them through this mixin): names, literals and displays, operators, comparisons and boolean
operators (short-circuited on kernel values), subscripts, f-strings, comprehensions and
calls.
"""
from __future__ import annotations

import ast
import operator

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir.errors import FluxionIndexError, FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.frontend.print_format import _FString, _Formatted
from fluxion.frontend import builtins as B
from fluxion.frontend.builtins import logical_not, select, static_assert, truth
from fluxion.frontend.matrix import Matrix
from fluxion.frontend.simt import SharedArrayValue, shared_access
from fluxion.frontend.access import (ArrayValue, field_access, matrix_bounds_check,
                                     ndarray_access, struct_access)
from fluxion.frontend.places import FieldBase, StructFieldBase
from fluxion.frontend.variables import _describe
from fluxion.frontend import calls, overflow


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}


# the operators whose integer results debug mode checks for wraparound (frontend/overflow.py)
_WRAPPING = (ast.Add, ast.Sub, ast.Mult, ast.LShift)

_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _has_kernel_value(v):
    return isinstance(v, Expr) or (isinstance(v, Matrix) and any(isinstance(e, Expr) for e in v.entries))


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


def _is_float_operand(v):
    return (isinstance(v, Expr) and v.dtype.is_float) or isinstance(v, (float, np.floating))


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


def _reject_negative_index(index):
    """A constant negative index into an ndarray or a shared array is an error, as in the
    original system: it cannot count from the end (the size is known at run time only) and
    would read outside the array. Fields take them (their offsets may make them valid); local
    vectors and matrices count from the end, as Python does, which their constant shapes
    allow (tests/api/test_compat_values.py)."""
    if isinstance(index, Matrix):
        index = tuple(index.entries)
    for b in (index if isinstance(index, tuple) else (index,)):
        if isinstance(b, (int, float, np.integer, np.floating)) and b < 0:
            raise FluxionSyntaxError("Negative indices are not supported in Taichi kernels.")


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


class ExpressionVisitor:
    """`visit_<Expr>` for each Python expression a kernel may contain; `self` is the Transformer."""

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
        out = _BINOPS[type(node.op)](a, b)
        if type(node.op) in _WRAPPING and builder.current().cfg.debug:
            overflow.check(out)
        return out

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
            _reject_negative_index(index)
            return ndarray_access(value, index)
        if isinstance(value, StructFieldBase):
            return struct_access(value, index, ast.unparse(node.value))
        if isinstance(value, SharedArrayValue):
            _reject_negative_index(index)
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
