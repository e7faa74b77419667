"""A bitmasked level's states below a pointer lie in the pointer's blocks
(lang/sparse_block_states.py): their memory follows the active blocks, they read inactive
when their block is, and every way of activating and deactivating cells, at either level,
in a kernel or from Python, gives what a set model of the active cells says, in the dense
layout and with the pointer's blocks pooled."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import runtime, sparse_block_states, sparse_pool

PAGE = 4096


def test_the_states_are_a_hidden_level_of_the_pointers_cells():
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 8)
    bm = blk.bitmasked(ti.ij, 16)
    bm.place(x)
    x[3, 5] = 1.0
    assert sparse_block_states.in_blocks(bm) is blk
    # 256 f32 and 256 one-byte states a block; the reflection API does not list the states
    assert blk._cell_size_bytes == 256 * 4 + 256
    assert blk._get_children() == [bm]
    assert bm.shape == (128, 128) and x.shape == (128, 128)


def test_a_bitmasked_node_under_dense_nodes_only_keeps_its_own_states():
    x = ti.field(ti.f32)
    bm = ti.root.dense(ti.i, 4).bitmasked(ti.i, 8)
    bm.place(x)
    x[9] = 2.0
    assert sparse_block_states.in_blocks(bm) is None
    assert ti.is_active(bm, [9]) and not ti.is_active(bm, [8])


@pytest.mark.cpu_only
def test_a_band_holds_the_memory_of_its_blocks_and_their_states():
    # the band benchmark's tree: 2048^2 cells in 16^2 blocks; a band of 64 rows is 512
    # blocks of 1 KiB of data and 256 B of states (before, the states alone took a byte a
    # cell of the whole grid wherever a block had ever been active: 4 MiB)
    n = 2048
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, n // 16)
    blk.bitmasked(ti.ij, 16).place(x)

    @ti.kernel
    def band(row0: ti.i32):
        for i, j in ti.ndrange(64, n):
            x[row0 + i, j] = 1.0

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for i, j in x:
            k += 1
        return k

    blocks = 512 * (1024 + 256)
    for row0 in range(0, n - 64, 256):
        blk.deactivate_all()
        band(row0)
        assert count() == 64 * n
        assert ti.sparse.memory_in_use(x) <= blocks + 64 * PAGE
    blk.deactivate_all()
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) <= 64 * PAGE


@pytest.mark.cpu_only
def test_deactivate_all_of_the_bitmasked_level_writes_no_inactive_block():
    # it clears the states under the pointer's active blocks only: the pointer's cells stay
    # active (as in the original), and the memory does not grow by the inactive blocks
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 64)
    bm = blk.bitmasked(ti.ij, 32)
    bm.place(x)
    for c in [(0, 0), (40, 700), (2047, 2047)]:
        x[c] = 1.0
    before = ti.sparse.memory_in_use(x)
    bm.deactivate_all()
    assert ti.sparse.memory_in_use(x) == before
    assert not any(ti.is_active(bm, c) for c in [(0, 0), (40, 700), (2047, 2047)])
    assert ti.is_active(blk, [1, 21]) and not ti.is_active(blk, [1, 22])

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for i, j in bm:
            k += 1
        return k
    assert count() == 0
    x[41, 701] = 2.0
    assert count() == 1
    np.testing.assert_array_equal(np.argwhere(x.to_numpy() != 0), [[41, 701]])


LAYOUTS = {
    # (pointer axes and cells, (kind, axes, cells) of the levels below it, with the field
    # placed in the last; whether the pointer is below another pointer, hence pooled)
    "same_axes": ("ij", (4, 4), [("bitmasked", "ij", (4, 4))], False),
    "other_axes": ("i", (16,), [("bitmasked", "j", (16,))], False),
    "dense_between": ("ij", (4, 2), [("dense", "j", (2,)), ("bitmasked", "ij", (4, 4))], False),
    "two_bitmasks": ("ij", (2, 2), [("bitmasked", "ij", (2, 4)), ("bitmasked", "ij", (4, 2))],
                     False),
    "pooled": ("ij", (2, 2), [("bitmasked", "ij", (8, 8))], True),
}


def _build(layout):
    axes, cells, below, nested = LAYOUTS[layout]
    x = ti.field(ti.i32)
    top = ti.root
    if nested:
        top = top.pointer(ti.ij, 2)
    node = p = getattr(top, "pointer")(getattr(ti, axes), cells)
    nodes = []
    for kind, ax, ext in below:
        node = getattr(node, kind)(getattr(ti, ax), ext)
        nodes.append(node)
    node.place(x)
    return x, p, [n for n in nodes if n.kind == "bitmasked"]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_random_activity_against_a_set_model(layout):
    # (the field is placed in the last bitmasked level: a cell of it is an element)
    x, p, bms = _build(layout)
    leaf = bms[-1]
    shape = x.shape
    assert leaf.shape == shape
    assert x[0, 0] == 0                      # (the tree laid out: the states placed)
    assert all(sparse_block_states.in_blocks(b) is p for b in bms)
    if LAYOUTS[layout][3] and sparse_pool.ENABLED and not runtime.on_cuda():
        assert p._pool is not None

    @ti.kernel
    def write(c: ti.types.ndarray(dtype=ti.i32, ndim=2), v: ti.i32):
        for k in range(c.shape[0]):
            x[c[k, 0], c[k, 1]] = v + k

    @ti.kernel
    def kill(c: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for k in range(c.shape[0]):
            if ti.static(len(p.shape) == 1):
                ti.deactivate(p, [c[k, 0]])
            else:
                ti.deactivate(p, [c[k, 0], c[k, 1]])

    @ti.kernel
    def kill_leaf(c: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for k in range(c.shape[0]):
            ti.deactivate(leaf, [c[k, 0], c[k, 1]])

    @ti.kernel
    def visits(out: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for i, j in x:
            out[i, j] += 1

    rng = np.random.default_rng(len(layout) * 7 + 3)
    val = np.zeros(shape, np.int64)         # the model: values, and which elements are active
    on = np.zeros(shape, bool)
    elems = np.indices(shape).reshape(2, -1).T
    p_cells = np.indices(p.shape).reshape(len(p.shape), -1).T
    per = [n // m for n, m in zip(shape, p.shape)]

    def block(c):
        return tuple(slice(a * n, a * n + n) for a, n in zip(c, per))

    for r in range(40):
        op = rng.integers(0, 8)
        if op <= 2:                                  # a kernel writes some elements
            e = np.unique(elems[rng.integers(0, len(elems), rng.integers(1, 12))], axis=0)
            write(e.astype(np.int32), 100 * r)
            val[tuple(e.T)] = 100 * r + np.arange(len(e))
            on[tuple(e.T)] = True
        elif op == 3:                                # Python writes one
            e = tuple(elems[rng.integers(0, len(elems))])
            x[e] = 7 + r
            val[e], on[e] = 7 + r, True
        elif op == 4:                                # blocks deactivated by a kernel
            pc = p_cells[rng.integers(0, len(p_cells), 2)]
            kill(np.pad(pc, ((0, 0), (0, 2 - pc.shape[1]))).astype(np.int32))
            for c in pc:
                on[block(c)], val[block(c)] = False, 0
        elif op == 5:                                # cells deactivated, on both sides
            lc = elems[rng.integers(0, len(elems), 3)]
            kill_leaf(lc[:2].astype(np.int32))
            ti.deactivate(leaf, lc[2].tolist())
            on[tuple(lc.T)] = False                  # (a bitmasked cell keeps its value)
        elif op == 6:                                # a block deactivated from Python
            c = p_cells[rng.integers(0, len(p_cells))]
            ti.deactivate(p, c.tolist())
            on[block(c)], val[block(c)] = False, 0
        else:                                        # deactivate_all of either level
            node = [p, leaf][rng.integers(0, 2)]
            node.deactivate_all()
            if node is p:
                val[:] = 0
            on[:] = False
        got = np.zeros(shape, np.int32)
        visits(got)
        np.testing.assert_array_equal(got, on.astype(np.int32), err_msg=f"round {r}")
        np.testing.assert_array_equal(x.to_numpy(), np.where(on, val, 0), err_msg=f"round {r}")
        for c in elems[rng.integers(0, len(elems), 4)]:
            assert ti.is_active(leaf, c.tolist()) == on[tuple(c)]
