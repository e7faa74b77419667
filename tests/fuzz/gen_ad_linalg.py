"""Matrices and vectors in the random differentiable programs (gen_ad.py): local 2x2 and 3x3
f64 matrices built from the kernel's values, `@`, transpose, inverse, determinant, trace,
`norm_sqr`, elements by constant index, vector `dot`, `outer_product`, `cross`, `normalized`,
a matrix local carried through a serial loop (its history on the adjoint's stack), and a
matrix field `mM` (needs_grad, needs_dual) written by the first kernel and read, at another
element, by the last.

Everything stays smooth and bounded where it is evaluated, so that central differences in
float64 resolve the derivatives: a matrix's entries are `tanh` of the kernel's values (in
(-1, 1)); what is inverted is `2 I + 0.5 A` (by Gershgorin its eigenvalues have real parts
>= 1.5 - 0.5 (d - 1) >= 0.5 for d <= 3: invertible and well conditioned); what is normalized
has a first entry >= 1; a loop-carried matrix is fed back through `tanh`. Terms are added to
the kernel's local `t` scaled by 1/4.

Whether a program has them (about 3 in 10) and every choice about them come from random
streams of their own (`GenAD.with_linalg`, `GenAD.rla`), so the programs without them are the
programs of before."""
from __future__ import annotations


def declare(g, stages):
    """The matrix field, written by kernel 0 and read by the last (when there are two)."""
    rla = g.rla
    g.la_d = rla.choice([2, 3])
    g.la_field = stages >= 1 and rla.random() < 0.7
    if g.la_field:
        d = g.la_d
        g.emit(1, f"mM = ti.Matrix.field({d}, {d}, ti.f64, shape=(n,), needs_grad=True, "
                  "needs_dual=True)")


def _matrix(g, leaves):
    d = g.la_d
    rows = ", ".join("[" + ", ".join(f"ti.tanh({g.expr(leaves, 1)})" for _ in range(d)) + "]"
                     for _ in range(d))
    return f"ti.Matrix([{rows}], dt=ti.f64)"


def _vector(g, leaves, first_at_least_one=False):
    ents = [f"ti.tanh({g.expr(leaves, 1)})" for _ in range(g.la_d)]
    if first_at_least_one:
        ents[0] = f"2.0 + {ents[0]}"
    return f"ti.Vector([{', '.join(ents)}], dt=ti.f64)"


def terms(g, t, leaves, s, stages):
    """Statements of kernel `s` (of stages + 1) that add matrix terms to local `t`."""
    rla, d = g.rla, g.la_d
    a, b, u, v = g.fresh("A"), g.fresh("B"), g.fresh("uv"), g.fresh("vv")
    g.emit(3, f"{a} = {_matrix(g, leaves + [t])}")
    if g.la_field and s == stages:
        # the first kernel's matrices, at a neighbour's element (bounded by tanh)
        g.emit(3, f"{a} = 0.5 * ({a} + ti.tanh(mM[(i + {rla.randint(0, 3)}) % n]))")
    if rla.random() < 0.4:
        j = g.fresh("j")
        g.emit(3, f"for {j} in range({rla.randint(1, 3)}):")
        g.emit(4, f"{a} = ti.tanh(0.5 * ({a} @ {a}.transpose()) + {a} * "
                  f"ti.tanh({g.expr(leaves, 1)}))")
    g.emit(3, f"{b} = 2.0 * ti.Matrix.identity(ti.f64, {d}) + 0.5 * {a}")
    g.emit(3, f"{u} = {_vector(g, leaves, True)}")
    g.emit(3, f"{v} = {_vector(g, leaves)}")
    r, c = rla.randrange(d), rla.randrange(d)
    pool = [f"({b}.inverse() @ {a}).trace()", f"{b}.determinant()", f"{a}.norm_sqr()",
            f"ti.sqrt({a}.norm_sqr() + 1.0)", f"({a} @ {u}).dot({v})",
            f"{u}.outer_product({v}).sum()", f"({a}.transpose() @ {b})[{r}, {c}]",
            f"({a} @ {a})[{r}, {c}]", f"{a}.trace()", f"{b}.inverse()[{r}, {c}]",
            f"{u}.normalized().dot({v})", f"({b}.inverse() @ {u}).norm_sqr()"]
    if d == 3:
        pool.append(f"{u}.cross({v})[{r}]")
    chosen = rla.sample(pool, rla.randint(1, 3))
    g.emit(3, f"{t} = {t} + 0.25 * ({' + '.join(chosen)})")
    if g.la_field and s == 0:
        g.emit(3, f"mM[i] = {rla.choice([f'{b} @ {a}.transpose()', f'{a} * ti.tanh({t})', b])}")
