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
