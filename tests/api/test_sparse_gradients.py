"""Reverse mode on sparse trees (issue 16): the gradient of a sparse field placed in its
primal's cells has its primal's activity. A kernel's adjoint accumulates into the gradient of
an active cell, and drops what it would accumulate into an inactive one: that cell reads as
the constant 0, whose derivative goes nowhere (lang/sparse_writes.py, `reverse`). Until
2026-11-28 the adjoint activated the cell, as Taichi 1.7.4 does: the cell's primal turned
active too, a struct-for in the same adjoint visited it (a wrong gradient that depended on the
order of the cells), and the next run of the primal read one more cell.

Expected values: central differences in float64 of the primal (with the primal's activity),
NumPy for the cells, and Taichi where the gradient has cells of its own."""
import numpy as np
import pytest

import fluxion as ti
from taichi_ref import check_against_taichi

N = 13
WRITTEN = [i for i in range(N) if i % 3 != 1]


def _node(kind):
    """A sparse tree of 16 cells (in blocks of 4 where it has blocks)."""
    if kind == "pointer_bitmasked":
        return ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4)
    if kind == "pointer_dense":
        return ti.root.pointer(ti.i, 4).dense(ti.i, 4)
    if kind == "bitmasked":
        return ti.root.bitmasked(ti.i, 16)
    return ti.root.dense(ti.i, 4).dynamic(ti.j, 4, chunk_size=2)


class Program:
    """Kernel `write` stores sin(x_i) x_(i+1) into y_i for i not 1 mod 3; kernel `reduce`, a
    struct-for over y's active cells, adds y_i^2 and y_(i+2), which is inactive for some i."""

    def __init__(self, kind, grad_node=None):
        self.kind = kind
        self.x = x = ti.field(ti.f64, shape=N, needs_grad=True)
        self.y = y = ti.field(ti.f64, needs_grad=True)
        node = _node(kind)
        if grad_node is None:
            node.place(y, y.grad)
        else:
            node.place(y)
            grad_node.place(y.grad)
        self.loss = loss = ti.field(ti.f64, shape=(), needs_grad=True)
        self.node = node
        if kind == "dynamic":
            @ti.kernel
            def write():
                for i in range(N):
                    if i % 3 != 1:
                        y[i // 4, i % 4] = ti.sin(x[i]) * x[(i + 1) % N]

            @ti.kernel
            def reduce():
                for i, j in y:
                    k = i * 4 + j
                    loss[None] += y[i, j] ** 2 + y[(k + 2) % 16 // 4, (k + 2) % 4]
        else:
            @ti.kernel
            def write():
                for i in range(N):
                    if i % 3 != 1:
                        y[i] = ti.sin(x[i]) * x[(i + 1) % N]

            @ti.kernel
            def reduce():
                for i in y:
                    loss[None] += y[i] ** 2 + y[(i + 2) % 16]
        self.write, self.reduce = write, reduce
        self.seen = seen = ti.field(ti.i32, shape=16)
        if kind == "dynamic":
            @ti.kernel
            def mark():
                for i, j in y:
                    seen[i * 4 + j] = 1
        else:
            @ti.kernel
            def mark():
                for i in y:
                    seen[i] = 1
        self.mark = mark

    def cells(self):
        """The cells a struct-for over y visits (in a kernel: Taichi has no ti.is_active in
        Python scope)."""
        self.seen.fill(0)
        self.mark()
        return [int(k) for k in np.flatnonzero(self.seen.to_numpy())]

    def primal(self, xs):
        self.x.from_numpy(xs)
        self.loss[None] = 0.0
        self.write()
        self.reduce()
        return self.loss[None]

    def tape(self, xs):
        self.x.from_numpy(xs)
        with ti.ad.Tape(loss=self.loss):
            self.write()
            self.reduce()


@pytest.mark.parametrize("kind", ["pointer_bitmasked", "pointer_dense", "bitmasked", "dynamic"])
def test_an_adjoint_keeps_its_primals_activity_and_matches_central_differences(kind):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    p = Program(kind)
    xs = np.linspace(-1.0, 1.0, N)
    h = 1e-6
    fd = np.array([(p.primal(xs + h * e) - p.primal(xs - h * e)) / (2 * h) for e in np.eye(N)])
    cells = p.cells()
    # (a dense level under a pointer: a written element activates its whole block; a list
    # grows to hold the element)
    if kind == "pointer_dense":
        expected = sorted({k // 4 * 4 + j for k in WRITTEN for j in range(4)})
    elif kind == "dynamic":
        expected = sorted({k // 4 * 4 + j for k in WRITTEN for j in range(k % 4 + 1)})
    else:
        expected = WRITTEN
    assert cells == expected
    p.tape(xs)
    assert p.cells() == cells, "the adjoint changed which cells are active"
    np.testing.assert_allclose(p.x.grad.to_numpy(), fd, rtol=1e-7, atol=1e-8)
    # y's gradient after the struct-for's adjoint (the write's adjoint consumes it):
    # 2 y_i + (1 where i - 2 was visited), on the active cells only
    p.y.grad.fill(0.0)
    p.loss.grad[None] = 1.0
    p.reduce.grad()
    assert p.cells() == cells
    ys = np.zeros(16)
    ys[WRITTEN] = np.sin(xs[WRITTEN]) * xs[(np.array(WRITTEN) + 1) % N]
    g = np.zeros(16)
    for i in cells:
        g[i] += 2 * ys[i]
        if (i + 2) % 16 in cells:
            g[(i + 2) % 16] += 1.0
    got = p.y.grad.to_numpy().reshape(-1)
    np.testing.assert_allclose(got, g, rtol=1e-12, atol=1e-15)
    # the next run of the primal reads the same cells as the first
    assert p.primal(xs) == pytest.approx(ys[cells] @ ys[cells] + ys[[(i + 2) % 16 for i in cells]].sum(),
                                         rel=1e-12)


def separate_gradient_tree(ti):
    # y's gradient in a tree of its own: the adjoint's accumulation activates its cells
    n = 13
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, needs_grad=True)
    ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4).place(y)
    ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4).place(y.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    seen = ti.field(ti.i32, shape=(2, 16))

    @ti.kernel
    def write():
        for i in range(n):
            if i % 3 != 1:
                y[i] = ti.sin(x[i]) * x[(i + 1) % n]

    @ti.kernel
    def reduce():
        for i in y:
            loss[None] += y[i] ** 2 + y[(i + 2) % 16]

    @ti.kernel
    def mark(k: ti.i32):
        for i in y:
            seen[k, i] = 1
        for i in y.grad:
            seen[1, i] = 1

    x.from_numpy(np.linspace(-1.0, 1.0, n))
    write()
    reduce()
    loss.grad[None] = 1.0
    reduce.grad()
    write.grad()
    mark(0)
    return {"cells": seen.to_numpy(), "ygrad": y.grad.to_numpy(), "xgrad": x.grad.to_numpy()}


def test_a_gradient_with_cells_of_its_own_is_activated_by_its_adjoint_as_on_taichi():
    # must not fire: y.grad in another tree has an activity of its own, which the adjoint's
    # accumulation sets (Taichi's semantics); y itself stays as the primal left it
    check_against_taichi(separate_gradient_tree)
    ti.init(arch=ti.cpu)
    got = separate_gradient_tree(ti)
    assert list(np.flatnonzero(got["cells"][0])) == WRITTEN
    # the gradient's cells: y's, and those its struct-for's adjoint reached at i + 2
    assert list(np.flatnonzero(got["cells"][1])) == \
        sorted(set(WRITTEN) | {(i + 2) % 16 for i in WRITTEN})


@pytest.mark.parametrize("kind", ["pointer_bitmasked", "pointer", "bitmasked"])
def test_a_serial_loop_in_a_struct_for_over_a_sparse_field_differentiates(kind):
    # a struct-for over a sparse field is an `if` around its body: the adjoint, which mirrors
    # it in an `if` of its own, could not see the locals the replay declared in the first
    # one, nor the values computed there before the loop (`(i + 4) % n`): the kernel failed
    # to compile (an invalid LLVM module; fuzz seed 23233)
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 16
    y = ti.field(ti.f64, needs_grad=True)
    node = {"pointer_bitmasked": lambda: ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4),
            "pointer": lambda: ti.root.pointer(ti.i, n),
            "bitmasked": lambda: ti.root.bitmasked(ti.i, n)}[kind]()
    node.place(y, y.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in y:
            t = ti.tanh(y[(i + 4) % n]) + y[i]
            for _ in range(3):
                t = ti.tanh(y[(i + 4) % n] * t)
            loss[None] += t + 0.25 * y[(i + 4) % n] * t

    cells = list(range(0, n, 2))
    ys = np.linspace(-0.9, 0.8, len(cells))

    def primal(v):
        for c, val in zip(cells, v):
            y[c] = val
        loss[None] = 0.0
        k()
        return loss[None]
    h = 1e-6
    fd = np.array([(primal(ys + h * e) - primal(ys - h * e)) / (2 * h) for e in np.eye(len(ys))])
    primal(ys)
    y.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad()
    g = y.grad.to_numpy()
    np.testing.assert_allclose(g[cells], fd, rtol=1e-7, atol=1e-9)
    assert not g[1::2].any()       # inactive cells: their reads are the constant 0
