"""The activation of a write's cells (lang/sparse_writes.py) where an element's index is
`block * m + r`: the cell is found from `block` alone when `r` provably stays inside one
cell, and from the whole index otherwise. Values and activity are checked against NumPy."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.lang import sparse_writes


def _c(v):
    return S.ConstStmt(v, ret_type=T.i32)


def _op(a, op, b):
    return S.BinaryOpStmt(a, b if isinstance(b, S.ConstStmt) or not isinstance(b, int)
                          else _c(b), op, ret_type=T.i32)


def _index(end):
    loop = S.RangeForStmt(_c(0), end if not isinstance(end, int) else _c(end), False, None)
    return S.LoopIndexStmt(loop, ret_type=T.i32)


@pytest.mark.cpu_only
def test_the_cell_of_a_block_index_is_found_where_the_offset_stays_in_one_cell():
    a = S.ArgLoadStmt(0, ret_type=T.i32)           # (the block: any value)
    e = _index(512)
    split = sparse_writes._cell_of_block
    # (a * 8 + e // 64) // 32 = a // 4, // 8 = a; (a * 64 + e % 8) // 8 = a * 8
    v = _op(_op(a, "mul", 8), "add", _op(e, "floordiv", 64))
    assert split(v, 32) == (a, "div_nonneg", 4)
    assert split(v, 8) == (a, "div_nonneg", 1)
    w = _op(_op(e, "mod", 8), "add", _op(_c(64), "mul", a))
    assert split(w, 8) == (a, "mul", 8)
    # must not fire: the offset reaches past one cell (e // 32 < 16, cells of 8)
    assert split(_op(_op(a, "mul", 8), "add", _op(e, "floordiv", 32)), 8) is None
    # ... its range is unknown (an argument; a loop whose end is an argument)
    assert split(_op(_op(a, "mul", 8), "add", S.ArgLoadStmt(1, ret_type=T.i32)), 8) is None
    f = _index(S.ArgLoadStmt(2, ret_type=T.i32))
    assert split(_op(_op(a, "mul", 8), "add", _op(f, "mod_nonneg", 8)), 8) is None
    # ... neither of the block's stride and the cell's size divides the other
    assert split(_op(_op(a, "mul", 6), "add", _op(e, "floordiv", 128)), 4) is None
    # ... no product with a constant
    assert split(_op(a, "add", _op(e, "floordiv", 128)), 4) is None


@pytest.mark.parametrize("span", [64, 32])
def test_writes_by_block_activate_exactly_their_cells(span):
    # 64: each block's 512 elements stay in its cell (its activation is found from the block);
    # 32: the i index reaches into the next block too (it is found from each element)
    x = ti.field(ti.f32)
    top = ti.root.pointer(ti.ijk, 4)
    mid = top.pointer(ti.ijk, 4)
    mid.dense(ti.ijk, 8).place(x)
    count = ti.field(ti.i32, shape=2)

    @ti.kernel
    def fill(b: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(b.shape[0]):
            for e in range(512):
                i = b[n, 0] * 8 + e // span
                j, k = b[n, 1] * 8 + e // 8 % 8, b[n, 2] * 8 + e % 8
                x[i, j, k] = i + 2 * j + 3 * k + 1

    @ti.kernel
    def cells():
        for I in ti.grouped(mid):
            count[0] += 1
        for I in ti.grouped(top):
            count[1] += 1

    rng = np.random.default_rng(span)
    blocks = rng.choice(14 * 16 * 16, 40, replace=False)
    b = np.stack(np.unravel_index(blocks, (14, 16, 16)), axis=1).astype(np.int32)
    fill(b)
    cells()
    want = np.zeros((128, 128, 128), np.float32)
    for bi, bj, bk in b:
        e = np.arange(512)
        i, j, k = bi * 8 + e // span, bj * 8 + e // 8 % 8, bk * 8 + e % 8
        want[i, j, k] = i + 2 * j + 3 * k + 1
    np.testing.assert_array_equal(x.to_numpy(), want)
    written = want.reshape(16, 8, 16, 8, 16, 8).any(axis=(1, 3, 5))
    tops = written.reshape(4, 4, 4, 4, 4, 4).any(axis=(1, 3, 5))
    assert count.to_numpy().tolist() == [int(written.sum()), int(tops.sum())]


def _stores_in(capsys, kernel_name):
    """The store lines of `kernel_name`'s final IR (printed with print_ir=True)."""
    lines = capsys.readouterr().out.splitlines()
    last = max(k for k, ln in enumerate(lines) if f"IR of kernel '{kernel_name}'" in ln)
    body = []
    for ln in lines[last + 1:]:
        if "IR of kernel" in ln:
            break
        body.append(ln)
    return [ln for ln in body if "global_store" in ln or "slot_acquire" in ln or "atomic" in ln]


@pytest.mark.parametrize("pool", [False, True])
def test_a_write_to_the_element_a_struct_for_visits_activates_nothing(pool, capsys,
                                                                       monkeypatch):
    from fluxion.lang import sparse_pool
    monkeypatch.setattr(sparse_pool, "ENABLED", pool)
    ti.init(arch=ti.cpu, print_ir=True)
    n = 64
    x, y = ti.field(ti.f32), ti.field(ti.f32)
    blocks = ti.root.pointer(ti.ij, n // 8)
    bm = blocks.bitmasked(ti.ij, 8)
    bm.place(x, y)
    z = ti.field(ti.f32)                              # the same shape, in a tree of its own
    ti.root.pointer(ti.ij, n // 8).dense(ti.ij, 8).place(z)

    @ti.kernel
    def stencil():
        for i, j in x:
            if 0 < i < n - 1 and 0 < j < n - 1:
                y[i, j] = x[i - 1, j] + x[i + 1, j] - 2 * x[i, j]

    @ti.kernel
    def spill():
        ti.loop_config(serialize=True)
        for i, j in x:
            if j % 2 == 0:
                y[i, j + 1] = 7.0           # the next element: its cell may be inactive
            z[i, j] = x[i, j]               # another tree's cells

    rng = np.random.default_rng(2)
    a = np.where(rng.random((n, n)) < 0.05, rng.integers(1, 9, (n, n)), 0).astype(np.float32)
    for i, j in np.argwhere(a):
        x[i, j] = a[i, j]
    stencil()
    # y's value is its only store: its cells are x's, which the loop visits
    assert len(_stores_in(capsys, "stencil")) == 1
    on = a != 0
    ref = np.zeros_like(a)
    ref[1:-1, 1:-1] = a[:-2, 1:-1] + a[2:, 1:-1] - 2 * a[1:-1, 1:-1]
    np.testing.assert_array_equal(y.to_numpy(), np.where(on, ref, 0) * (
        np.arange(n)[:, None] % (n - 1) != 0) * (np.arange(n)[None, :] % (n - 1) != 0))
    # must not fire: a neighbour's cell and another tree's cell are activated
    want = y.to_numpy()
    spill()
    assert len(_stores_in(capsys, "spill")) > 2
    new = np.zeros_like(on)
    new[:, 1:] = on[:, :-1] & (np.arange(n - 1)[None, :] % 2 == 0)
    want[new] = 7
    np.testing.assert_array_equal(y.to_numpy(), want)
    np.testing.assert_array_equal(z.to_numpy(), a)
    shifted = new

    @ti.kernel
    def count_y() -> ti.i32:
        c = 0
        for i, j in y:
            c += 1
        return c
    assert count_y() == (on | shifted).sum()

    @ti.kernel
    def drop_and_write():
        for i, j in x:
            ti.deactivate(bm, [i, j])
            y[i, j] = 3.0           # must not be skipped: the body deactivated the cell

    drop_and_write()
    assert count_y() == (on | shifted).sum()
    np.testing.assert_array_equal(y.to_numpy(), np.where(on | shifted, 3, 0))
