"""Array and field indices as linear forms over 64-bit values, emitted in one canonical order.

Why this is codegen and not an IR pass: the atoms of these forms are LLVM values that exist
only while a task is lowered: the loops' 64-bit counters, the row and column counters of a
row loop, the column counter of each iteration that unroll-and-jam fuses (each fused column
is a copy of the body lowered again, with no statements of its own in the IR). What the forms
buy is also LLVM's: addresses computed in 64 bits with no-signed-wrap flags, affine in those
counters, so that LLVM's scalar evolution sees them and vectorizes (the IR has neither 64-bit
loop counters nor wrap flags), and terms that cancel across fused columns, so that a load
that does not depend on the column is emitted once. An IR pass could only rewrite indices
into i64 arithmetic with wrapping semantics, which tells LLVM nothing more.

Mixed into FunctionLowering (codegen/lower.py): `self.loop_index` maps a loop to its current
64-bit counter value, `self.values` holds lowered statements (and ("wide", id) the 64-bit
counter behind a RowIndexStmt's truncated value).
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen.llvm_types import I64
from fluxion.ir import stmts as S
from fluxion.ir.ops import Op


class LinearForms:
    """Linear forms ({atom: coefficient}, constant); atoms are ("v", id) for an LLVM value,
    ("s", id) for a statement widened where the form is emitted."""

    def init_forms(self):
        self.forms = {}             # id(i64 value) -> its linear form (index64)
        self.atom_order = {}        # atom key -> rank in the canonical order
        self.atom_values = {}       # atom key -> its llvm value or statement
        self.emitted_forms = {}     # ((id(value), coefficient)...) -> (terms, their sum)

    def index64(self, st):
        """An index as i64. Additions, subtractions and products by constants of loop indices
        are recomputed in 64 bits (no signed wrap) from the loops' own 64-bit counters, rather
        than sign-extended from 32-bit results: LLVM then sees addresses as affine in the loop
        counters and vectorizes loops over them (an index whose 32-bit arithmetic wraps
        addresses nothing valid either way). The index is first reduced to a linear form and
        emitted in one canonical order, so terms cancel: `(T-1) - (t - u)` with `u = t - T + 1
        + i` is just `i`, the same value in every fused column of lower_jammed."""
        return self.emit_form(self.linear(st))

    # -- index arithmetic as linear forms ({atom: coefficient}, constant) ------------------
    def _atom(self, key, value):
        if key not in self.atom_order:
            self.atom_order[key] = len(self.atom_order)
            self.atom_values[key] = value
        return {key: 1}, 0

    def form_of(self, v):
        """The linear form of 64-bit value `v` (registered by register_form, else itself)."""
        f = self.forms.get(id(v))
        return f if f is not None else self._atom(("v", id(v)), v)

    def register_form(self, v, form):
        self.forms[id(v)] = form
        self.atom_values[("keep", id(v))] = v      # ids stay unique while the value lives
        return v

    def linear(self, st, depth=0):
        if isinstance(st, S.ConstStmt) and not st.ret_type.is_float:
            return {}, int(st.value)
        if isinstance(st, S.LoopIndexStmt):
            v = self.loop_index.get(id(st.loop))
            if v is not None and v.type.width == 64:
                return self.form_of(v)
        wide = self.values.get(("wide", id(st)))   # a row/column counter (row_loop)
        if wide is not None:
            return self.form_of(wide)
        dt = st.ret_type
        if (depth < 8 and isinstance(st, S.BinaryOpStmt) and st.op in (Op.ADD, Op.SUB, Op.MUL)
                and not dt.is_float and dt.is_signed and dt.bits <= 32
                and st.lhs.ret_type == dt and st.rhs.ret_type == dt):
            x, y = self.linear(st.lhs, depth + 1), self.linear(st.rhs, depth + 1)
            if st.op == Op.ADD:
                return form_sum(x, y, 1)
            if st.op == Op.SUB:
                return form_sum(x, y, -1)
            if not x[0]:
                return form_scale(y, x[1])
            if not y[0]:
                return form_scale(x, y[1])
            v = self.b.mul(self.emit_form(x), self.emit_form(y), flags=("nsw",))
            return self._atom(("v", id(v)), v)
        # an opaque value: keyed by its statement, widened where the index is emitted (the
        # statement's value dominates every use; a widening emitted earlier might not)
        return self._atom(("s", id(st)), st)

    def emit_form(self, form):
        """The i64 value of `form`. Its terms are emitted once per basic block: a field's
        elements at (i + a, j + b) share the terms of i and j (a stencil's taps, a particle's
        3x3 neighbourhood), so every tap after the first costs one add of its constant. LLVM's
        first CSE would merge the repeats as well; emitting them costs Python, text and
        LLVM's parsing (they were half of the MLS-MPM substep's 1,700 LLVM instructions)."""
        terms, const = form
        b = self.b
        order = self.atom_order
        items = sorted(((c < 0, order[k], k, c) for k, c in terms.items() if c),
                       key=lambda t: t[:2])
        # the terms as the LLVM values they stand for now (a statement's value differs
        # between the fused columns of unroll-and-jam, which lower the body again)
        values = []
        for _, _, k, c in items:
            v = self.atom_values[k]
            values.append((self.v(v) if k[0] == "s" else v, c))
        acc = None
        if values:
            key = tuple((id(v), c) for v, c in values)
            got = self.emitted_forms.get(key)
            # (reused only where it dominates: in the block the builder appends to; the entry
            # holds its values, so an id is never another value's)
            if got is not None and got[1].parent is b.block and \
                    b._anchor == len(b.block.instructions):
                acc = got[1]
            else:
                acc = self._emit_terms(items, values)
                if isinstance(acc, ir.Instruction):
                    self.emitted_forms[key] = (values, acc)
        if acc is None:
            return ir.Constant(I64, const)
        return b.add(acc, ir.Constant(I64, const), flags=("nsw",)) if const else acc

    def _emit_terms(self, items, values):
        b = self.b
        acc = None
        for (_, _, k, _), (v, c) in zip(items, values):
            if k[0] == "s" and v.type.width < 64:
                dt = self.atom_values[k].ret_type
                v = b.sext(v, I64) if dt.is_signed else b.zext(v, I64)
            if abs(c) != 1:
                v = b.mul(v, ir.Constant(I64, abs(c)), flags=("nsw",))
            if acc is None:
                acc = v if c > 0 else b.sub(ir.Constant(I64, 0), v, flags=("nsw",))
            else:
                acc = (b.add if c > 0 else b.sub)(acc, v, flags=("nsw",))
        return acc


def form_sum(x, y, sign):
    """x + sign * y, for linear forms ({atom: coefficient}, constant)."""
    terms = dict(x[0])
    for k, c in y[0].items():
        terms[k] = terms.get(k, 0) + sign * c
    return {k: c for k, c in terms.items() if c}, x[1] + sign * y[1]


def form_scale(x, f):
    return ({k: c * f for k, c in x[0].items()} if f else {}), x[1] * f


