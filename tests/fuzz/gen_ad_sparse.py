"""Sparse trees in the random differentiable programs (gen_ad.py): an intermediate field
`y{s}` placed with its gradient and dual in a pointer, bitmasked or pointer-over-bitmasked
tree (`node.place(y, y.grad, y.dual)`), written only at the indices outside one residue class
(a branch on the loop index: smooth), read at neighbouring indices (inactive cells read 0),
and iterated by the next kernel with a struct-for over its active cells.

What it checks: the gradient of a sparse field has its primal's activity, so the adjoint of
a read of an inactive cell goes nowhere, a struct-for's adjoint visits the cells its primal
visited, and the primal run again after a backward pass reads the same cells (central
differences run it many times). Taichi 1.7.4 activates the cell instead, which changes the
program it differentiates: where its gradient differs, the check's own runs show it.

Whether a program has them (about 3 in 10) and every choice about them come from random
streams of their own (`GenAD.with_sparse`, `GenAD.rsp`), so the programs without them are the
programs of before."""
from __future__ import annotations


def declare(g, s, vec):
    """The declaration of stage field `y{s}` when it is sparse (else None): its lines."""
    rsp = g.rsp
    if rsp.random() < 0.35:
        return None
    n = g.n
    b = rsp.choice([2, 4, 8])
    # enough blocks, sometimes twice as many; powers of two, as under the taichi oracle
    # (Taichi 1.7.4 loses writes into pointer(ti.i, 3).dense(ti.i, 8): cells 6, 14, 15)
    nb = 1 << ((-(-n // b)) - 1).bit_length() + rsp.randint(0, 1)
    tree = rsp.choice([f"ti.root.pointer(ti.i, {nb}).bitmasked(ti.i, {b})",
                       f"ti.root.pointer(ti.i, {nb}).dense(ti.i, {b})",
                       f"ti.root.bitmasked(ti.i, {nb * b})",
                       f"ti.root.pointer(ti.i, {nb * b})"])
    make = "ti.Vector.field(2, ti.f64, " if vec else "ti.field(ti.f64, "
    # (skipped: i % m == r; a dense block that the last index activates reaches past n, so
    # a struct-for would visit indices of no element of x)
    g.sparse_stage[s] = (rsp.randint(2, 4), rsp.randrange(2),
                         ".dense(" not in tree or n % b == 0)
    return [f"y{s} = {make}needs_grad=True, needs_dual=True)",
            f"{tree}.place(y{s}, y{s}.grad, y{s}.dual)"]


def loop(g, s, loop_text):
    """The loop of kernel `s`: a struct-for over the previous stage's field when it is
    sparse and its active cells are indices below n, else `loop_text`."""
    if s > 0 and (s - 1) in g.sparse_stage and g.rsp.random() < 0.7 and \
            g.sparse_stage[s - 1][2]:
        return f"for i in y{s - 1}:"
    return loop_text


def write_guard(g, s):
    """The condition under which kernel `s` writes its stage field, or None."""
    if s not in g.sparse_stage:
        return None
    m, r, _ = g.sparse_stage[s]
    return f"if i % {m} != {r}:"
