"""deactivate_all of interleaved dynamic lists in one native call (lang/sparse_list_sweep.py's
ListsPlan, runtime/list_sweep.py) does what the Python version does: two identical trees, one
made to take the Python version, go through the same rounds (sets of lists that persist, move,
are random or empty, with lengths short and up to the lists' end; lists emptied by a kernel's
ti.deactivate between calls) and must agree after each step in every value (also against
NumPy), every list's length (ti.length and the states), the struct-for's visits per list, the
peak counts and every committed page of the trees' buffers. Layouts the native call does not
cover get no plan and keep the Python version. CPU only: on CUDA trees are not reserved."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_list_sweep, sparse_memory, tree_buffer
from fluxion.lang.sparse import mask_of
from fluxion.lang.sparse_lists import list_region, list_runs

# (the grid's axes and cells per axis, the list's length, the fields of an element (dtype,
# components), chunk_size, what else the tree holds: "before" (a dense field ahead of the
# lists: they start inside a page), "second" (a second grid of lists beside them, both
# deactivated through the tree's root))
CASES = {
    "grid_2d_i32": ("ij", 16, 64, [(ti.i32, 1)], 16, ""),
    "grid_1d_rows_not_pages": ("i", 300, 32, [(ti.f32, 1)], None, ""),
    "two_fields_unit_5": ("ij", 12, 40, [(ti.f32, 1), (ti.i32, 1)], 5, ""),
    "vec3_elements": ("ij", 10, 60, [(ti.f32, 3)], 7, "before"),
    "elements_over_a_chunk": ("i", 64, 8, [(ti.f32, 20)], 2, ""),
    "long_enough_for_4_pages": ("ij", 8, 4096, [(ti.i32, 1)], 64, ""),
    "two_grids_in_one_tree": ("ij", 16, 32, [(ti.i32, 1)], 8, "second"),
}


def _pages(buf):
    """Which pages of reserved buffer `buf` hold memory of their own (pagemap, as
    tree_buffer._pages_in_use reads it)."""
    addr, n = tree_buffer._address(buf), buf.nbytes // tree_buffer.PAGE
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(addr // tree_buffer.PAGE * 8)
        e = np.frombuffer(f.read(n * 8), dtype=np.uint64)
    return ((e >> np.uint64(63)) & (e >> np.uint64(56)) & np.uint64(1)).astype(bool)


def _tree(axes, cells, n, fields, unit, extra):
    fb = ti.FieldsBuilder()
    ax = getattr(ti, axes)
    d = len(axes)
    z = ti.field(ti.f32) if extra == "before" else None
    if z is not None:
        fb.dense(ti.i, 37).place(z)
    xs = [ti.Vector.field(c, t) if c > 1 else ti.field(t) for t, c in fields]
    grid = fb.dense(ax, cells)
    lists = grid.dynamic(ti.axes(d), n, chunk_size=unit) if unit else \
        grid.dynamic(ti.axes(d), n)
    lists.place(*xs)
    y = None
    if extra == "second":
        y = ti.field(ti.i32)
        fb.dense(ax, cells).dynamic(ti.axes(d), n, chunk_size=unit).place(y)
    tree = fb.finalize()
    if z is not None:
        z.from_numpy(np.arange(37, dtype=np.float32) + 1)
    shape = (cells,) * d
    x = xs[0]
    count = ti.field(ti.i32, shape=shape)
    length = ti.field(ti.i32, shape=shape)

    second = y is not None
    comps = fields[0][1]

    @ti.kernel
    def fill(c: ti.types.ndarray(dtype=ti.i32, ndim=2), r: ti.i32):
        ti.loop_config(serialize=True)            # (each list's order: deterministic)
        for k in range(c.shape[0]):
            I = ti.Vector([c[k, a] for a in ti.static(range(d))])
            v = k % 9 + r + 1
            # (the first field appended, the others written at its index: one element)
            at = 0
            if ti.static(len(xs) > 1):
                at = xs[0][I].append(ti.cast(v, xs[0].dtype))
            elif ti.static(comps > 1):
                ti.append(lists, I, ti.Vector([v + a for a in ti.static(range(comps))],
                                              dt=xs[0].dtype))
            else:
                ti.append(lists, I, ti.cast(v, xs[0].dtype))
            for f in ti.static(xs[1:]):
                if ti.static(d == 1):
                    f[I[0], at] = ti.cast(v * 3, f.dtype)
                else:
                    f[I[0], I[1], at] = ti.cast(v * 3, f.dtype)
            if ti.static(second):
                ti.append(y.parent(), I, v * 2)

    @ti.kernel
    def drop(c: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for k in range(c.shape[0]):
            ti.deactivate(lists, ti.Vector([c[k, a] for a in ti.static(range(d))]))

    @ti.kernel
    def visit():
        for I in ti.grouped(count):
            count[I] = 0
            length[I] = ti.length(lists, I)
        for I in ti.grouped(x):
            count[I[:d]] += 1

    return dict(xs=xs, y=y, z=z, x=x, grid=grid, lists=lists, tree=tree, fill=fill,
                drop=drop, visit=visit, count=count, length=length, shape=shape, n=n,
                root=grid.parent())


def _deactivate(t, extra):
    (t["root"] if extra == "second" else t["grid"]).deactivate_all()


def _agree(nat, py, where):
    for a, b in zip(nat["xs"] + [nat["y"]], py["xs"] + [py["y"]]):
        if a is not None:
            np.testing.assert_array_equal(a.to_numpy(), b.to_numpy(), err_msg=str(where))
    np.testing.assert_array_equal(mask_of(nat["lists"]).to_numpy(),
                                  mask_of(py["lists"]).to_numpy(), err_msg=str(where))
    for t in (nat, py):
        t["visit"]()
    for k in ("count", "length"):
        np.testing.assert_array_equal(nat[k].to_numpy(), py[k].to_numpy(),
                                      err_msg=f"{where}: {k}")
    np.testing.assert_array_equal(nat["count"].to_numpy(), nat["length"].to_numpy())
    # every byte of the trees (what lies past a list's length too: read, a page not written
    # maps the shared zero page, which _pages does not count)
    buf_a, buf_b = nat["x"]._snode.tree.buffer, py["x"]._snode.tree.buffer
    assert np.array_equal(buf_a, buf_b), (where, "bytes", np.flatnonzero(buf_a != buf_b)[:8])
    a, b = _pages(buf_a), _pages(buf_b)
    assert a.any() or not nat["count"].to_numpy().any()
    assert np.array_equal(a, b), (where, "committed pages", np.flatnonzero(a != b)[:8])
    if nat["z"] is not None:
        np.testing.assert_array_equal(nat["z"].to_numpy(), py["z"].to_numpy())


def _rounds(nat, py, extra, monkeypatch, rounds=24, seed=3, drops=True):
    n, shape = nat["n"], nat["shape"]
    ncells = int(np.prod(shape))
    plan = sparse_memory._native_plan
    py_nodes = {py["lists"], py["root"], py["grid"]}
    calls = []

    def native_plan(node, *a):
        # (the first rounds of the native tree too by the Python version: the plan then
        # takes the pages it kept)
        if node in py_nodes or len(calls) < 2:
            return None
        return plan(node, *a)
    monkeypatch.setattr(sparse_memory, "_native_plan", native_plan)
    rng = np.random.default_rng(seed)
    lengths = np.zeros(ncells, np.int64)
    for r in range(rounds):
        for t in (nat, py):
            _deactivate(t, extra)
        calls.append(r)
        got = getattr(nat["lists"], "_sweep_plan", None)
        if len(calls) > 2:
            assert isinstance(got[1], sparse_list_sweep.ListsPlan), r
        assert getattr(py["lists"], "_sweep_plan", None) is None
        for f in nat["xs"]:
            assert not f.to_numpy().any(), r
        lo, hi = list_region(nat["lists"])
        assert not nat["x"]._snode.tree.buffer[lo:hi].any(), r
        assert not mask_of(nat["lists"]).to_numpy().any()
        _agree(nat, py, (r, "after deactivate_all"))
        assert nat["lists"]._num_dynamically_allocated == py["lists"]._num_dynamically_allocated
        kind = r % 6
        if kind in (0, 1) and lengths.any():          # persists, or moves (near or far)
            lengths = np.roll(lengths, kind * [1, 2, ncells // 3][r // 6 % 3])
        elif kind == 2:                               # a new random set, short lists
            lengths = np.where(rng.random(ncells) < rng.choice([0.05, 0.4]),
                               rng.integers(1, max(2, n // 4), ncells), 0)
        elif kind == 3:                               # a few lists full, or nearly
            lengths = np.where(rng.random(ncells) < 0.1, rng.integers(n - 3, n + 1, ncells), 0)
        elif kind == 4:                               # none
            lengths = np.zeros(ncells, np.int64)
        else:                                         # one list, full (its chunks' pages)
            lengths = np.zeros(ncells, np.int64)
            lengths[rng.integers(ncells)] = n
        cells = np.repeat(np.arange(ncells), lengths)
        rng.shuffle(cells)
        c = np.stack(np.unravel_index(cells, shape), axis=1).astype(np.int32) \
            if len(cells) else np.zeros((0, len(shape)), np.int32)
        dropped = None
        for t in (nat, py):
            if len(c):
                t["fill"](c, r)
            if drops and r % 3 == 1 and len(c):
                dropped = c[:2]
                t["drop"](dropped)
        # the values against NumPy: list L holds, in order, the values of its cells' entries
        expect = np.zeros(shape + (n,), np.int64)
        fill = np.zeros(ncells, np.int64)
        for k, cell in enumerate(cells.tolist()):
            expect.reshape(ncells, n)[cell, fill[cell]] = k % 9 + r + 1
            fill[cell] += 1
        if dropped is not None:
            for cell in dropped:
                expect[tuple(cell)] = 0
        got = nat["x"].to_numpy()
        got = got[..., 0] if got.ndim > len(shape) + 1 else got
        np.testing.assert_array_equal(got.astype(np.int64), expect, err_msg=str(r))
        _agree(nat, py, (r, "after the writes"))


@pytest.mark.cpu_only
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("grain", [4, 1 << 30])
def test_lists_deactivate_all_agrees_with_the_python_one(case, grain, monkeypatch):
    # (grain 4: the lists in ranges of 4 on the thread pool's threads, which mark the same
    # pages; else on the calling thread)
    monkeypatch.setattr(sparse_list_sweep, "GRAIN", grain)
    args = CASES[case]
    nat, py = _tree(*args), _tree(*args)
    _rounds(nat, py, args[-1], monkeypatch)


@pytest.mark.cpu_only
@pytest.mark.parametrize("end", ["first", "last"])
def test_lists_chunk_across_two_pages(end, monkeypatch):
    # a chunk whose bytes lie in two pages keeps both (as chunk_pages finds them): one list,
    # filled up to that chunk where the lists beside it in those pages stay empty, then none
    args = CASES["elements_over_a_chunk"]
    nat, py = _tree(*args), _tree(*args)
    lists, page = nat["lists"], tree_buffer.PAGE
    n, cells = nat["n"], nat["shape"][0]
    lo, hi = list_runs(lists, np.arange(cells)[:, None])        # (g = 1: n chunks a list)
    across = np.flatnonzero(lo // page != (hi - 1) // page)
    assert len(across)
    # (the list, how many chunks it fills: up to the one across, or from it on to its end)
    k = across[len(across) // 2]
    cell, q = divmod(int(k), n)
    fills = [q + 1, 0, 0] if end == "first" else [n, 0, 0]
    plan = sparse_memory._native_plan
    monkeypatch.setattr(sparse_memory, "_native_plan",
                        lambda node, *a: None if node is py["lists"] else plan(node, *a))
    for r, m in enumerate(fills + [0]):
        for t in (nat, py):
            t["grid"].deactivate_all()
            if m:
                t["fill"](np.full((m, 1), cell, np.int32), r)
        _agree(nat, py, (r, m))


@pytest.mark.cpu_only
def test_lists_plan_only_where_it_covers():
    # interleaved lists (short, a dense grid at the top holding only them) get a plan; long
    # lists, lists beside a field in their cell and lists under a pointer keep the Python
    # version, which empties them (the tree's root: each grid's lists by their own plan)
    a, b, c, w, e, f = (ti.field(ti.i32) for _ in range(6))
    short = ti.root.dense(ti.ij, 8)
    short.dynamic(ti.k, 64).place(a)
    long = ti.root.dense(ti.i, 8)
    long.dynamic(ti.j, 8192).place(b)
    beside = ti.root.dense(ti.i, 8)
    beside.place(w)
    beside.dynamic(ti.j, 16).place(c)
    under = ti.root.pointer(ti.i, 8)
    under.dynamic(ti.j, 16).place(e)
    fb = ti.FieldsBuilder()
    g = fb.dense(ti.i, 8)
    g.dynamic(ti.j, 64).place(f)
    h = ti.field(ti.i32)
    fb_long = fb.dense(ti.i, 8)
    fb_long.dynamic(ti.j, 8192).place(h)
    fb.finalize()

    @ti.kernel
    def fill():
        for i in range(8):
            ti.append(a.parent(), [i, 1], i + 1)
            for x in ti.static((b, c, e, f, h)):
                ti.append(x.parent(), i, i + 1)
            w[i] = 5
    fill()
    for node in (short, long, beside, under, g.parent()):
        node.deactivate_all()
    assert isinstance(short.children[0]._sweep_plan[1], sparse_list_sweep.ListsPlan)
    assert isinstance(g.children[0]._sweep_plan[1], sparse_list_sweep.ListsPlan)
    for node in (long.children[0], beside.children[1], under, fb_long.children[0]):
        assert node._sweep_plan[1] is None, node
    for x in (a, b, c, e, f, h):
        assert not x.to_numpy().any()
    assert (w.to_numpy() == 5).all()
