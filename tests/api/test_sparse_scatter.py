"""Scatters into sparse fields (the P2G of MPM on a pointer grid): their atomic adds go to
per-thread copies merged over the active cells only (passes/scatter.py). The values and the
activity must be those of NumPy's np.add.at over the touched cells, launch after launch and
across deactivations, whatever the thread count; a loop that may deactivate a cell keeps its
atomics. CPU only (the copies are the CPU backend's)."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import runtime

N, B = 64, 8              # a 64^2 grid of 8^2 blocks


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    ti.init(arch=ti.cpu, cpu_max_num_threads=request.param)
    if runtime.on_cuda():
        ti.reset()
        pytest.skip("per-thread copies are the CPU backend's")
    yield request.param
    ti.reset()


def copies_of(kernel):
    """The hidden fields of per-thread copies that `kernel`'s compiled code merges."""
    return list(next(iter(kernel.instances.values())).compiled.private_fields)


def particles(seed, n=4000, lo=10, hi=30):
    rng = np.random.default_rng(seed)
    return rng.integers(lo, hi, (n, 2)).astype(np.int32), rng.integers(1, 9, n).astype(np.int32)


def expected(pos, w, m, shift=0):
    """(counts, weighted sums, active blocks) of a 3x3 stencil scatter at `pos`."""
    cnt = np.zeros((N, N), np.int32)
    acc = np.zeros((N, N, 2), np.float64)
    for di in range(3):
        for dj in range(3):
            i, j = pos[:, 0] + di - shift, pos[:, 1] + dj - shift
            np.add.at(cnt, (i, j), 1)
            np.add.at(acc, (i, j), np.stack([w * (di + 1), m * w], 1).astype(np.float64))
    blocks = np.zeros((N // B, N // B), bool)
    blocks[np.nonzero(cnt)[0] // B, np.nonzero(cnt)[1] // B] = True
    return cnt, acc, blocks


def _grid(kind, offset=None):
    cnt = ti.field(ti.i32)
    acc = ti.Vector.field(2, ti.f64)
    blk = getattr(ti.root, kind)(ti.ij, N // B)
    blk.dense(ti.ij, B).place(cnt, acc, offset=offset)
    return cnt, acc, blk


@pytest.mark.parametrize("kind", ["pointer", "bitmasked"])
def test_stencil_scatter_into_a_sparse_grid_matches_numpy(threads, kind):
    cnt, acc, blk = _grid(kind)
    npart = 4000
    pos = ti.Vector.field(2, ti.i32, npart)
    wt = ti.field(ti.i32, npart)

    @ti.kernel
    def p2g(m: ti.f64):
        for p in pos:
            for di, dj in ti.static(ti.ndrange(3, 3)):
                cnt[pos[p] + ti.Vector([di, dj])] += 1
                acc[pos[p] + ti.Vector([di, dj])] += ti.Vector([wt[p] * (di + 1), m * wt[p]])

    @ti.kernel
    def active_blocks(out: ti.types.ndarray()):
        for i, j in blk:
            out[i, j] = 1

    def check(want_cnt, want_acc, want_blocks):
        np.testing.assert_array_equal(cnt.to_numpy(), want_cnt)
        np.testing.assert_allclose(acc.to_numpy(), want_acc, rtol=1e-12)
        got = np.zeros((N // B, N // B), np.int32)
        active_blocks(got)
        np.testing.assert_array_equal(got.astype(bool), want_blocks)

    p, w = particles(1)
    pos.from_numpy(p)
    wt.from_numpy(w)
    c1, a1, b1 = expected(p, w, 0.5)
    p2g(0.5)
    check(c1, a1, b1)
    p2g(0.5)                # the copies were zeroed by the merge: exactly as much again
    check(2 * c1, 2 * a1, b1)
    if threads > 1:
        assert len(copies_of(p2g)) == 3        # cnt, acc's two components
    if kind == "bitmasked":
        # (a deactivated bitmasked cell keeps its bytes, as in the original: not compared)
        return
    # another set of cells, partly outside the first: nothing of the first is left over
    blk.deactivate_all()
    p, w = particles(2, lo=25, hi=55)
    pos.from_numpy(p)
    wt.from_numpy(w)
    c2, a2, b2 = expected(p, w, -1.25)
    p2g(-1.25)
    check(c2, a2, b2)


def test_scatter_into_a_sparse_field_with_an_offset(threads):
    cnt, acc, blk = _grid("pointer", offset=(-8, -16))
    p, w = particles(3)
    pos = ti.Vector.field(2, ti.i32, len(p))
    pos.from_numpy(p)

    @ti.kernel
    def p2g():
        for q in pos:
            for di, dj in ti.static(ti.ndrange(3, 3)):
                cnt[pos[q] + ti.Vector([di - 8, dj - 16])] += 1

    p2g()
    want, _, _ = expected(p, w, 0.0)
    np.testing.assert_array_equal(cnt.to_numpy(), want)
    if threads > 1:
        assert len(copies_of(p2g)) == 1


def test_a_loop_that_deactivates_cells_keeps_its_atomics(threads):
    # the merge visits the cells active after the loop: one deactivated inside it would
    # keep its partial sums in the copies, so no copies here
    cnt, _, blk = _grid("pointer")
    p, _ = particles(4)
    pos = ti.Vector.field(2, ti.i32, len(p))
    pos.from_numpy(p)

    @ti.kernel
    def add_then_drop():
        for q in pos:
            for di, dj in ti.static(ti.ndrange(3, 3)):
                cnt[pos[q] + ti.Vector([di, dj])] += 1
            if q == 0:
                ti.deactivate(blk, [0, 0])

    add_then_drop()
    want, _, _ = expected(p, np.zeros(len(p), np.int32), 0.0)
    np.testing.assert_array_equal(cnt.to_numpy(), want)      # (block 0, 0 is never touched)
    assert copies_of(add_then_drop) == []


def test_scatter_into_lists_keeps_its_atomics(threads):
    x = ti.field(ti.i32)
    ti.root.dense(ti.i, 16).dynamic(ti.j, 64, chunk_size=8).place(x)

    @ti.kernel
    def fill():
        for q in range(20_000):
            x[q % 16, q % 5] += 1

    fill()
    want = np.zeros((16, 64), np.int32)
    q = np.arange(20_000)
    np.add.at(want, (q % 16, q % 5), 1)
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert copies_of(fill) == []


def test_copies_of_a_sparse_grid_commit_the_scattered_cells_only(threads):
    # a 2048^2 f32 grid (16 MiB dense, whose copies would be as much a thread): a scatter
    # into a corner holds the pages of that corner's blocks, in the copies too; thread 0 adds
    # into the field itself, so the copies are for threads 1.. and hold at most
    # (threads - 1) times the field's pages; the values are NumPy's whichever thread ran what
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 128)
    blk.dense(ti.ij, 16).place(x)

    @ti.kernel
    def splat():
        for q in range(2_000_000):
            x[q % 97, q // 97 % 101] += 1.0

    splat()
    assert x.to_numpy()[:97, :101].sum() == 2_000_000
    assert ti.sparse.memory_in_use() < 1 << 20
    splat()
    want = np.zeros((2048, 2048), np.float32)
    np.add.at(want, (np.arange(2_000_000) % 97, np.arange(2_000_000) // 97 % 101), 2.0)
    np.testing.assert_array_equal(x.to_numpy(), want)
    if threads > 1:
        (copies,) = copies_of(splat)
        assert copies.shape == (threads - 1, 2048, 2048)
        field_bytes = ti.sparse.memory_in_use(x)
        assert 0 < ti.sparse.memory_in_use(copies) <= (threads - 1) * field_bytes


def test_copies_of_a_moving_scatter_do_not_grow(threads):
    # a blob that moves over a 2048^2 grid: the copies' pages of the cells it left go back at
    # deactivate_all, as the tree's own do, so memory follows the last rounds, not the path
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 128)
    blk.dense(ti.ij, 16).place(x)

    @ti.kernel
    def splat(at: ti.i32):
        for q in range(2_000_000):
            x[at + q % 97, at + q // 97 % 101] += 1.0

    used = []
    for r in range(8):
        blk.deactivate_all()
        splat(r * 240)
        assert x.to_numpy()[r * 240:r * 240 + 97, r * 240:r * 240 + 101].sum() == 2_000_000
        used.append(ti.sparse.memory_in_use())
    assert max(used[3:]) <= 1.25 * used[2]
