"""The control flow of a kernel or ti.func body (a mixin of frontend/transformer.py's
Transformer): `if`, `while`, `for` (unrolled, static, range, ndrange and struct loops), `break`,
`continue`, `return` and `assert`, with the block scopes they open.
"""
from __future__ import annotations

import ast
import builtins as pybuiltins
import contextlib

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir.builder import emit, into
from fluxion.ir.errors import FluxionError, FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.frontend import loops as L
from fluxion.frontend import print_format as PF
from fluxion.frontend import builtins as B
from fluxion.frontend.matrix import Matrix
from fluxion.frontend.access import ArrayValue
from fluxion.frontend.places import FieldBase, SNodeBase, StructFieldBase, sparse
from fluxion.frontend.struct import Struct
from fluxion.frontend.variables import _describe, _is_number
from fluxion.frontend import real_func
from fluxion.frontend.expressions import _unpack
from fluxion.passes import lower_struct_for


class _Return(Exception):
    """Unwinds a function body at a final `return` (the common case needs no control flow)."""


class _LoopControl(Exception):
    def __init__(self, kind):
        self.kind = kind


def _entries(value):
    return list(value.entries) if isinstance(value, Matrix) else [value]


def _is_call_to(tr, node, targets):
    if not isinstance(node, ast.Call):
        return False
    try:
        f = tr.visit(node.func)
    except FluxionError:
        return False
    return any(f is t for t in targets)


class ControlFlowVisitor:
    """`visit_<Stmt>` for the statements that make or leave blocks; `self` is the Transformer."""

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
            return self._range_loop(node, bounds)
        if _is_call_to(self, it_node, {B.static}):
            if len(it_node.args) == 1 and _is_call_to(self, it_node.args[0], {B.static}):
                raise FluxionSyntaxError("'ti.static' cannot be nested: write "
                                         "`ti.static(...)` once")
            # ti.static(...): unrolled at compile time, whatever the iterable
            return self._unrolled(node, self.visit(it_node))
        it = self.visit(it_node)
        if isinstance(it, L.ndrange):
            return self._ndrange_loop(node, it.bounds, grouped=False)
        if isinstance(it, L.GroupedNdrange):
            return self._ndrange_loop(node, it.inner.bounds, grouped=True)
        if isinstance(it, (L.GroupedField, FieldBase, ArrayValue, StructFieldBase, SNodeBase)):
            # a struct-for, as a range-for, introduces its indices: they may not reuse the name
            # of a variable of the function
            self._check_loop_targets(node)
        grouped = isinstance(it, L.GroupedField)
        inner = it.field if grouped else it
        if isinstance(inner, ArrayValue):
            return self._ndrange_loop(node, inner.bounds(), grouped=grouped)
        if isinstance(inner, (FieldBase, StructFieldBase, SNodeBase)):
            return self._struct_loop(node, inner, grouped)
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

    def _loop_header(self, node, n_dims, grouped):
        """The loop configuration that `ti.loop_config` left for this loop, whether the loop
        runs in parallel, and its index variables (checked against the `n_dims` dimensions
        of its space)."""
        ctx = builder.current()
        cfg = ctx.pending_loop_config
        ctx.pending_loop_config = {}
        top_level = ctx.block is ctx.ir.body and not ctx.in_parallel_loop and not ctx.nested_scopes
        parallel = top_level and not cfg.get("serialize", False)
        names = []
        if grouped:
            if not isinstance(node.target, ast.Name):
                raise FluxionSyntaxError("`for I in ti.grouped(...)` needs a single name")
        else:
            names = ([node.target] if isinstance(node.target, ast.Name)
                     else list(getattr(node.target, "elts", [])))
            if len(names) != n_dims or not all(isinstance(n, ast.Name) for n in names):
                raise FluxionSyntaxError(
                    f"the loop iterates over {n_dims} dimensions but has {len(names)} "
                    f"index variables (Ndrange for loop with number of the loop variables not "
                    f"equal to the dimension of the ndrange is not supported)")
        return cfg, parallel, names

    @contextlib.contextmanager
    def _loop_scope(self, node, loop, parallel, grouped, names):
        """Within: the body of `loop` (a parallel loop's or a serial one's), as a block scope
        whose index names are seen again after the loop. Yields the ExitStack of the body."""
        ctx = builder.current()
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
                yield nest
        finally:
            self.scope.update(shadowed)
            ctx.in_parallel_loop, ctx.loop_depth = saved_parallel, saved_depth
            ctx.parallel_loop = saved_loop
            self.frame.loop_depth -= 1

    def _bind_indices(self, node, grouped, names, indices):
        if grouped:
            self.scope[node.target.id] = Matrix._make(indices, len(indices), 1, 1)
        else:
            for n, v in zip(names, indices):
                self.scope[n.id] = v

    def _struct_loop(self, node, over, grouped):
        """A struct-for over the index space of field, struct field or SNode `over`: a
        StructForStmt, which passes/lower_struct_for.py makes a range-for of (visiting only
        the elements of active cells under sparse SNodes)."""
        bounds = [(int(b), int(e)) for b, e in L.field_bounds(over)]
        if not isinstance(over, SNodeBase):
            sparse.node_of(over)        # (a field destroyed since is an error at its loop)
        ctx = builder.current()
        cfg, parallel, names = self._loop_header(node, len(bounds), grouped)
        ip = ctx.cfg.default_ip
        loop = emit(S.StructForStmt(over, bounds, grouped, parallel, cfg.get("block_dim"),
                                    ret_type=ip, errors_at=len(ctx.ir.errors)))
        with self._loop_scope(node, loop, parallel, grouped, names):
            indices = [Expr(emit(S.StructIndexStmt(loop, k, ret_type=ip)))
                       for k in range(len(bounds))]
            self._bind_indices(node, grouped, names, indices)
            self._run_loop_body(node.body)

    def _range_loop(self, node, bounds):
        """`for i in range(...)`: a range-for over [begin, end)."""
        ctx = builder.current()
        cfg, parallel, names = self._loop_header(node, 1, False)
        ip = ctx.cfg.default_ip
        # (the kernel values first, then the constants: the order the statements always had)
        pair = [E.cast(E.to_expr(v, like=ip), ip) if isinstance(v, Expr) else v
                for v in bounds[0]]
        begin_e, end_e = (E.cast(E.to_expr(v, like=ip), ip) for v in pair)
        loop = emit(S.RangeForStmt(begin_e.stmt, end_e.stmt, parallel, cfg.get("block_dim")))
        with self._loop_scope(node, loop, parallel, False, names):
            idx = Expr(emit(S.LoopIndexStmt(loop, ret_type=ip)))
            self._bind_indices(node, False, names, [idx])
            self._run_loop_body(node.body)

    def _ndrange_loop(self, node, bounds, grouped):
        """A loop over the product of the ranges `bounds` ([(begin, end)], ints or kernel
        values): an NdRangeForStmt, which passes/lower_struct_for.py makes a range-for of."""
        ctx = builder.current()
        cfg, parallel, names = self._loop_header(node, len(bounds), grouped)
        ip = ctx.cfg.default_ip
        bounds = [(E.cast(E.to_expr(b, like=ip), ip) if isinstance(b, Expr) else b,
                   E.cast(E.to_expr(e, like=ip), ip) if isinstance(e, Expr) else e)
                  for b, e in bounds]
        with into(S.Block()):
            # the lowering's arithmetic, thrown away: an error of it (a bound or trip count
            # that does not fit the index type) is the loop's, raised here with its location
            _, _, exts = lower_struct_for.flat_space(bounds, ip)
            lower_struct_for.flat_indices(Expr(S.LoopIndexStmt(None, ret_type=ip)), exts, bounds)
        loop = emit(S.NdRangeForStmt([v.stmt if isinstance(v, Expr) else v for v, _ in bounds],
                                     [v.stmt if isinstance(v, Expr) else v for _, v in bounds],
                                     grouped, parallel, cfg.get("block_dim"), ret_type=ip))
        with self._loop_scope(node, loop, parallel, grouped, names):
            indices = [Expr(emit(S.StructIndexStmt(loop, k, ret_type=ip)))
                       for k in range(len(bounds))]
            self._bind_indices(node, grouped, names, indices)
            self._run_loop_body(node.body)
