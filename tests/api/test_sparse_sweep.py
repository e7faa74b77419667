"""deactivate_all of a pointer level in one native call (lang/sparse_sweep.py,
runtime/block_sweep.py) does what the Python version in lang/sparse_memory.py does: two
identical trees, one made to take the Python version, go through the same rounds (blocks that
persist, move, vanish, cells deactivated by a kernel between calls, empty rounds, sweeps) and
must agree in every value, every active cell and every committed page (`memory_in_use`) after
each step; the values also against NumPy. CPU only: on CUDA trees are not reserved."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_memory, sparse_pool, sparse_sweep


@pytest.fixture(autouse=True)
def _dense_layout(monkeypatch):
    monkeypatch.setattr(sparse_pool, "ENABLED", False)


# (axes, pointer cells per axis, level below, its cells per axis, components of the field;
# a dense field before the pointer in its tree: the pointer's cells start inside a page)
CASES = {
    "beside_a_dense_field": ("ij", 16, "dense", 8, 3, True),
    "blocks_of_256B": ("ij", 16, "dense", 8, 1),
    "cells_not_a_multiple_of_8": ("ij", 5, "dense", 8, 1),
    "blocks_of_768B_across_pages": ("ij", 16, "dense", 8, 3),
    "bitmasked_2d": ("ij", 8, "bitmasked", 16, 2),
    "blocks_of_8KiB": ("i", 32, "dense", 2048, 1),
    "bitmasked_3d": ("ijk", 4, "bitmasked", 4, 1),
}


def _tree(axes, cells, below, sub, comps, beside=False):
    fb = ti.FieldsBuilder()
    z = ti.field(ti.f32) if beside else None
    if beside:
        fb.dense(ti.i, 37).place(z)
    x = ti.Vector.field(comps, ti.f32) if comps > 1 else ti.field(ti.f32)
    ax = getattr(ti, axes)
    blk = fb.pointer(ax, cells)
    getattr(blk, below)(ax, sub).place(x)
    fb.finalize()
    if beside:
        z.from_numpy(np.arange(37, dtype=np.float32) + 1)
    d = len(axes)

    @ti.kernel
    def write(c: ti.types.ndarray(dtype=ti.i32, ndim=2), r: ti.i32):
        for n in range(c.shape[0]):
            I = ti.Vector([c[n, k] for k in ti.static(range(d))])
            v = ti.cast(n % 7 + r, ti.f32) + 1.0
            if ti.static(comps > 1):
                x[I] = ti.Vector([v + k for k in ti.static(range(comps))])
            else:
                x[I] = v

    @ti.kernel
    def drop(b: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(b.shape[0]):
            ti.deactivate(blk, ti.Vector([b[n, k] for k in ti.static(range(d))]))

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for I in ti.grouped(x):
            k += 1
        return k
    return x, blk, write, drop, count, z


def _expected(shape, cells, r, comps):
    out = np.zeros(shape + ((comps,) if comps > 1 else ()), np.float32)
    v = (np.arange(len(cells)) % 7 + r + 1.0).astype(np.float32)
    idx = tuple(cells.T)
    if comps > 1:
        out[idx] = v[:, None] + np.arange(comps, dtype=np.float32)
    else:
        out[idx] = v
    return out


def held(nat, py, r):
    # the same pages, but for one case: the Python version zeroes a dirty stretch of bytes
    # that crosses into a page outside the node's run whole, committing that page when only
    # the other part was written; the native call looks page by page (fewer pages, never more)
    a, b = ti.sparse.memory_in_use(nat[0]), ti.sparse.memory_in_use(py[0])
    assert a == b or (nat[5] is not None and a < b), (r, a, b)


@pytest.mark.cpu_only
@pytest.mark.parametrize("case", list(CASES))
def test_native_deactivate_all_agrees_with_the_python_one(case, monkeypatch):
    axes, cells, below, sub, comps, *beside = CASES[case]
    nat = _tree(axes, cells, below, sub, comps, *beside)
    py = _tree(axes, cells, below, sub, comps, *beside)
    plan = sparse_memory._native_plan
    monkeypatch.setattr(sparse_memory, "_native_plan",
                        lambda node, *a: None if node is py[1] else plan(node, *a))
    d = len(axes)
    shape = (cells * sub,) * d
    nblocks = cells ** d
    rng = np.random.default_rng(11)
    active = np.zeros(nblocks, bool)
    for r in range(30):
        for x, blk, *_ in (nat, py):
            blk.deactivate_all()
        assert nat[1]._sweep_plan[1] is not None        # (the native call did it)
        held(nat, py, r)
        assert nat[4]() == py[4]() == 0
        # the blocks of this round: a set that persists and moves, a new random one, none
        kind = r % 5
        if kind in (0, 1, 2):
            active = np.roll(active, 1 + r % 3) if active.any() else \
                rng.random(nblocks) < 0.3
        elif kind == 3:
            active = rng.random(nblocks) < rng.choice([0.05, 0.5])
        else:
            active = np.zeros(nblocks, bool)
        blocks = np.argwhere(active.reshape((cells,) * d))
        # a few random cells of each active block (every cell of a dense block is active)
        local = rng.integers(0, sub, (len(blocks), 3, d))
        cs = (blocks[:, None, :] * sub + local).reshape(-1, d)
        cs = np.unique(cs, axis=0).astype(np.int32) if len(cs) else np.zeros((0, d), np.int32)
        for x, blk, write, drop, count, _ in (nat, py):
            if len(cs):
                write(cs, r)
            if r % 4 == 1 and len(blocks) > 1:
                drop(blocks[:1].astype(np.int32))       # (zeroed in place, pages kept)
        expect = _expected(shape, cs, r, comps)
        keep = cs
        if r % 4 == 1 and len(blocks) > 1:
            expect[tuple(slice(b * sub, (b + 1) * sub) for b in blocks[0])] = 0
            keep = cs[(cs // sub != blocks[0]).any(axis=1)]
        for x, *_ in (nat, py):
            np.testing.assert_array_equal(x.to_numpy(), expect)
        per_cell = sub ** d if below == "dense" else 1
        want = len(keep) if below == "bitmasked" else \
            len(np.unique(keep // sub, axis=0)) * per_cell
        assert nat[4]() == py[4]() == want, r
        held(nat, py, r)
        if beside:
            for t in (nat, py):
                np.testing.assert_array_equal(t[5].to_numpy(), np.arange(37) + 1)


@pytest.mark.cpu_only
def test_native_deactivate_all_leaves_other_layouts_to_python():
    # a pointer under dense cells that hold a value beside it (its cells in several runs)
    # is not what the single level's native call covers: no plan, and the Python version
    # still works; a pointer with a pointer below it gets the other native call
    # (tests/api/test_sparse_sweep_levels.py)
    x, y, z = ti.field(ti.f32), ti.field(ti.f32), ti.field(ti.f32)
    cell = ti.root.dense(ti.i, 4)
    cell.place(z)
    under = cell.pointer(ti.j, 8)
    under.place(x)
    outer = ti.root.pointer(ti.i, 4)
    outer.pointer(ti.j, 8).place(y)

    @ti.kernel
    def fill():
        x[1, 2] = 1.0
        y[3, 5] = 2.0
        z[2] = 3.0
    fill()
    for node in (under, outer):
        node.deactivate_all()
    assert under._sweep_plan[1] is None
    assert isinstance(outer._sweep_plan[1], sparse_sweep.LevelsPlan)
    assert not x.to_numpy().any() and not y.to_numpy().any()
    np.testing.assert_array_equal(z.to_numpy(), [0, 0, 3, 0])
