"""deactivate_all of a pointer with pointer levels below it in one native call
(lang/sparse_sweep.py's LevelsPlan, runtime/levels_sweep.py) does what the Python version in
lang/sparse_memory.py does: two identical trees, one made to take the Python version, go
through the same rounds (sets of blocks that persist, move, are random or empty; cells
activated without a write; leaf and top cells deactivated by a kernel between calls) and must
agree after each step in every value (also against NumPy), every state of every level, the
struct-for's count, the peak counts of the pointers and every committed page. CPU only: on
CUDA trees are not reserved."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_memory, sparse_pool, sparse_sweep, tree_buffer
from fluxion.lang.sparse import mask_of


@pytest.fixture(autouse=True)
def _dense_layout(monkeypatch):
    monkeypatch.setattr(sparse_pool, "ENABLED", False)


# (axes, the levels from the top: (kind, cells per axis), components of the field, what else
# the tree holds: "before" (a dense field ahead of the top pointer: its cells start inside a
# page), "in_cell" (a field in each top cell beside the pointer below), "under_dense" (the top
# pointer under 3 dense cells that hold a field beside it: its cells in 3 runs))
CASES = {
    "pointer_pointer_dense_3d": ("ijk", [("pointer", 4), ("pointer", 2), ("dense", 4)], 1, ""),
    "pointer_pointer_dense_before": ("ij", [("pointer", 8), ("pointer", 4), ("dense", 8)], 3,
                                     "before"),
    "pointer_pointer_bitmasked": ("ij", [("pointer", 8), ("pointer", 2), ("bitmasked", 8)], 1,
                                  ""),
    "three_pointers": ("ij", [("pointer", 4), ("pointer", 2), ("pointer", 4), ("dense", 4)], 2,
                       ""),
    "blocks_of_8KiB": ("i", [("pointer", 8), ("pointer", 4), ("dense", 2048)], 1, ""),
    "field_in_the_top_cell": ("ij", [("pointer", 8), ("pointer", 4), ("dense", 4)], 1,
                              "in_cell"),
    "under_dense_cells": ("j", [("pointer", 8), ("pointer", 4), ("dense", 64)], 1,
                          "under_dense"),
}


def _tree(axes, levels, comps, extra):
    fb = ti.FieldsBuilder()
    ax = getattr(ti, axes)
    d = len(axes)
    z = ti.field(ti.f32) if extra else None
    if extra == "before":
        fb.dense(ti.i, 37).place(z)
    x = ti.Vector.field(comps, ti.f32) if comps > 1 else ti.field(ti.f32)
    node = fb
    if extra == "under_dense":
        node = fb.dense(ti.i, 3)
        node.place(z)
        axes, d = "ij", 2
    nodes = []
    for kind, n in levels:
        node = getattr(node, kind)(ax, n)
        nodes.append(node)
        if extra == "in_cell" and len(nodes) == 1:
            node.place(z)
    node.place(x)
    fb.finalize()
    if extra in ("before", "under_dense"):
        z.from_numpy(np.arange(z.shape[0], dtype=np.float32) + 1)
    top, leaf = nodes[0], nodes[-2]

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
    def activate(c: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(c.shape[0]):
            ti.activate(leaf, ti.Vector([c[n, k] for k in ti.static(range(d))]))

    @ti.kernel
    def drop_leaf(b: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(b.shape[0]):
            ti.deactivate(leaf, ti.Vector([b[n, k] for k in ti.static(range(d))]))

    @ti.kernel
    def drop_top(b: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(b.shape[0]):
            ti.deactivate(top, ti.Vector([b[n, k] for k in ti.static(range(d))]))

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for I in ti.grouped(x):
            k += 1
        return k
    return dict(x=x, z=z, top=top, nodes=nodes, write=write, activate=activate,
                drop_leaf=drop_leaf, drop_top=drop_top, count=count, shape=x.shape)


def _agree(nat, py, where, peaks=False):
    a, b = ti.sparse.memory_in_use(nat["x"]), ti.sparse.memory_in_use(py["x"])
    assert a == b, (where, "committed bytes", a, b)
    for s, t in zip(nat["nodes"], py["nodes"]):
        if s.kind == "dense":
            continue
        np.testing.assert_array_equal(mask_of(s).to_numpy(), mask_of(t).to_numpy(),
                                      err_msg=f"{where}: states of {s.kind}")
        if peaks:
            # (only after deactivate_all: the count samples the states when asked, which
            # after the writes would note the peak itself)
            assert s._num_dynamically_allocated == t._num_dynamically_allocated, where
    assert nat["count"]() == py["count"](), where
    if nat["z"] is not None:
        np.testing.assert_array_equal(nat["z"].to_numpy(), py["z"].to_numpy())


@pytest.mark.cpu_only
@pytest.mark.parametrize("case", list(CASES))
def test_levels_deactivate_all_agrees_with_the_python_one(case, monkeypatch):
    axes, levels, comps, extra = CASES[case]
    # (runs of 3 pages or more go back in chunks of 3 pages on the thread pool, as the
    # benchmark's 512 MiB run goes in chunks of 32 MiB; shorter ones in one madvise)
    monkeypatch.setattr(sparse_sweep, "MADVISE_CHUNK", 3 * tree_buffer.PAGE)
    nat, py = _tree(axes, levels, comps, extra), _tree(axes, levels, comps, extra)
    plan = sparse_memory._native_plan
    monkeypatch.setattr(sparse_memory, "_native_plan",
                        lambda node, *a: None if node is py["top"] else plan(node, *a))
    shape = nat["shape"]
    d = len(shape)
    # the leaf blocks (cells of the lowest pointer) and the cells of a top block, per axis
    leaf = [n for n in nat["nodes"] if n.kind == "pointer"][-1]
    grid = leaf.shape
    sub = [a // b for a, b in zip(shape, grid)]
    top_cells = [a // b for a, b in zip(shape, nat["top"].shape)]
    rng = np.random.default_rng(5)
    nblocks = int(np.prod(grid))
    active = np.zeros(nblocks, bool)
    for r in range(24):
        for t in (nat, py):
            t["top"].deactivate_all()
        assert isinstance(nat["top"]._sweep_plan[1], sparse_sweep.LevelsPlan)
        assert getattr(py["top"], "_sweep_plan", None) is None
        assert not nat["x"].to_numpy().any()
        _agree(nat, py, (r, "after deactivate_all"), peaks=True)
        assert nat["count"]() == 0
        kind = r % 5
        if kind in (0, 1, 2):                   # a set that persists and moves
            active = np.roll(active, 1 + r % 3) if active.any() else \
                rng.random(nblocks) < 0.3
        elif kind == 3:                         # a new random one, sparse or dense
            active = rng.random(nblocks) < rng.choice([0.05, 0.5])
        else:                                   # none
            active = np.zeros(nblocks, bool)
        blocks = np.argwhere(active.reshape(grid))
        local = rng.integers(0, min(sub), (len(blocks), 3, d))
        cs = (blocks[:, None, :] * np.array(sub) + local).reshape(-1, d)
        cs = np.unique(cs, axis=0).astype(np.int32) if len(cs) else np.zeros((0, d), np.int32)
        # blocks activated without a write (their pages stay clean)
        bare = np.argwhere(rng.random(grid) < 0.05)
        expect = np.zeros(shape + ((comps,) if comps > 1 else ()), np.float32)
        v = (np.arange(len(cs)) % 7 + r + 1.0).astype(np.float32)
        expect[tuple(cs.T)] = v[:, None] + np.arange(comps) if comps > 1 else v
        # (a kernel's ti.deactivate takes the node's cells)
        drop_leaf = blocks[:1] if r % 4 == 1 and len(blocks) > 1 else None
        drop_top = cs[-1:] // np.array(top_cells) if r % 6 == 2 and len(cs) > 2 else None
        for t in (nat, py):
            if len(bare):
                t["activate"](bare.astype(np.int32))
            if len(cs):
                t["write"](cs, r)
            if drop_leaf is not None:           # (zeroed in place, pages kept)
                t["drop_leaf"](drop_leaf.astype(np.int32))
            if drop_top is not None:
                t["drop_top"](drop_top.astype(np.int32))
        for drop, cells in ((drop_leaf, sub), (drop_top, top_cells)):
            if drop is not None:
                expect[tuple(slice(a * b, (a + 1) * b) for a, b in zip(drop[0], cells))] = 0
        for t in (nat, py):
            np.testing.assert_array_equal(t["x"].to_numpy(), expect, err_msg=str(r))
        _agree(nat, py, (r, "after the writes"))


@pytest.mark.cpu_only
def test_levels_plan_only_where_it_covers():
    # the native call takes a top pointer with pointers below it, no lists or pools, its cells
    # in at most sparse_memory._WHOLE_RUNS runs; others keep the Python version, which works
    x, y, z, w = (ti.field(ti.f32) for _ in range(4))
    covered = ti.root.pointer(ti.i, 4)
    covered.pointer(ti.j, 4).place(x)
    lists = ti.root.pointer(ti.i, 4)
    lists.pointer(ti.j, 2).dynamic(ti.k, 8).place(y)
    cell = ti.root.dense(ti.i, sparse_memory._WHOLE_RUNS + 1)
    cell.place(w)
    runs = cell.pointer(ti.j, 2)
    runs.pointer(ti.k, 2).place(z)

    @ti.kernel
    def fill():
        x[1, 2] = 1.0
        y[3, 1, 0] = 2.0
        z[5, 1, 1] = 3.0
        w[2] = 4.0
    fill()
    for node in (covered, lists, runs):
        node.deactivate_all()
    assert isinstance(covered._sweep_plan[1], sparse_sweep.LevelsPlan)
    assert lists._sweep_plan[1] is None and runs._sweep_plan[1] is None
    assert not x.to_numpy().any() and not y.to_numpy().any() and not z.to_numpy().any()
    assert w.to_numpy()[2] == 4.0


@pytest.mark.cpu_only
def test_levels_plan_not_for_a_pooled_level(monkeypatch):
    monkeypatch.setattr(sparse_pool, "ENABLED", True)
    x = ti.field(ti.f32)
    top = ti.root.pointer(ti.i, 4)
    top.pointer(ti.j, 4).dense(ti.j, 4).place(x)
    x[1, 5] = 1.0
    top.deactivate_all()
    assert top._sweep_plan[1] is None and not x.to_numpy().any()
