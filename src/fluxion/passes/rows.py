"""Row splitting of flattened ndrange loops (CPU).

The frontend flattens `for i, j in ti.ndrange(n, m)` (and struct-fors over a 2-D or deeper
field) into one range `for k in range(n * m)` whose body computes `i = k // m` and
`j = k % m`. Computed per iteration, that division keeps LLVM from vectorizing the loop.
This pass makes the rows explicit: codegen then runs each chunk of the range as rows of `m`
columns with a row counter and a column counter of their own (codegen/loops.py, row_loop),
and the loop over a row's contiguous columns vectorizes.

Requires: top-level parallel loops marked (`RangeForStmt.parallel`); run after the passes
that rewrite loop bodies (privatizations), on the CPU only, with advanced_optimization.
Guarantees: a parallel loop whose body, at its top level, computes both `index % W` and
`index // W` (`mod_nonneg`/`div_nonneg` of its own index) for a W that does not change during
the loop has `loop.rows = W`, and each of those statements is replaced by a RowIndexStmt
(`kind` "col" for the remainder, "row" for the quotient) of the same type, location and
operand W, which every use now reads. W is a constant (codegen lowers a constant where it
needs it) or a statement defined before the loop. Nothing else changes: no statement is added
or removed, so what codegen counts (a task's grain) stays the same.

Must not fire:
- when W is computed inside the loop (it may differ per iteration; a constant there is fine);
- when W is a constant <= 0 (the division's own semantics must stay: no rows of width 0);
- when the body has only one of `% W` and `// W`: that is not a flattened ndrange (a 1-D loop
  taking `i % 3` for another reason would become rows of 3 columns, each a short inner loop);
- on CUDA: a grid-stride loop has no contiguous chunk per thread to split into rows;
- with ti.init(advanced_optimization=False) (the pipeline does not run it).
The choice of W is one per loop: the first W, in program order of the body, with both.
A call of a real function in the body does not stop it: rows change only how the index is
computed, not what the iterations access or in which order a thread runs them.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.ops import Op


def run(kernel, cfg=None) -> bool:
    changed = False
    for loop in kernel.body.stmts:
        if isinstance(loop, S.RangeForStmt) and loop.parallel and loop.rows is None:
            split = row_split(loop)
            if split is not None:
                _rewrite(loop, *split)
                changed = True
    return changed


def row_split(loop):
    """(W, [index % W statements], [index // W statements]) when the body of `loop` splits
    its index by one loop-invariant W, else None."""
    inside = {id(s) for s in S.walk(loop.body)}
    found = {}
    for s in loop.body.stmts:
        if (isinstance(s, S.BinaryOpStmt) and s.op in (Op.MOD_NONNEG, Op.DIV_NONNEG)
                and isinstance(s.lhs, S.LoopIndexStmt) and s.lhs.loop is loop):
            w = s.rhs
            if isinstance(w, S.ConstStmt):
                key = ("const", w.value)
            elif id(w) not in inside:
                key = ("stmt", id(w))
            else:
                continue
            entry = found.setdefault(key, (w, [], []))
            entry[1 if s.op == Op.MOD_NONNEG else 2].append(s)
    for w, mods, divs in found.values():
        if mods and divs and not (isinstance(w, S.ConstStmt) and w.value <= 0):
            return w, mods, divs
    return None


def _rewrite(loop, w, mods, divs):
    loop.rows = w
    new = {}
    for kind, olds in (("col", mods), ("row", divs)):
        for old in olds:
            st = S.RowIndexStmt(old.rhs, loop, kind, ret_type=old.ret_type, loc=old.loc)
            st.parent = loop.body
            loop.body.stmts[loop.body.stmts.index(old)] = st
            new[id(old)] = (old, st)
    for s in S.walk(loop.body):
        for o in s.operands():
            if id(o) in new and new[id(o)][0] is o:
                s.replace_operand(o, new[id(o)][1])
