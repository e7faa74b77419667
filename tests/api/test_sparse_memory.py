"""Memory that follows the active cells (lang/sparse_memory.py, lang/tree_buffer.py): a tree
with pointer or dynamic levels commits the pages its active cells write and gives them back
on deactivation. Values are checked against NumPy computed in the test and, where the
original's behaviour is the point, against Taichi; memory against `ti.sparse.memory_in_use`
and the process's resident size (/proc/self/statm). The CUDA backend keeps dense device
memory (documented), so these run on the CPU only."""
import mmap

import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_memory, tree_buffer
from fluxion.lang import sparse_pool
from taichi_ref import check_against_taichi

PAGE = mmap.PAGESIZE


@pytest.fixture(autouse=True)
def _dense_layout(monkeypatch):
    # these tests state what the dense layout in reserved memory does (pages committed as
    # written, given back at once); a pool of blocks keeps them for the next round
    # (tests/api/test_sparse_pool.py)
    monkeypatch.setattr(sparse_pool, "ENABLED", False)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def value(i, j, k):
    return (i * 3 + j * 5 + k * 7) % 101


def _grid_1024():
    """A 1024^3 f32 grid (4 GiB dense) in pointer cells of 16^3 (16 KiB blocks)."""
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ijk, 64)
    blk.dense(ti.ijk, 16).place(x)

    @ti.kernel
    def write_blocks(b: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for n in range(b.shape[0]):
            for e in range(4096):
                i = b[n, 0] * 16 + e // 256
                j = b[n, 1] * 16 + e // 16 % 16
                k = b[n, 2] * 16 + e % 16
                x[i, j, k] = (i * 3 + j * 5 + k * 7) % 101

    @ti.kernel
    def block_sums(b: ti.types.ndarray(dtype=ti.i32, ndim=2),
                   out: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for n in range(b.shape[0]):
            s = 0.0
            for e in range(4096):
                s += x[b[n, 0] * 16 + e // 256, b[n, 1] * 16 + e // 16 % 16,
                       b[n, 2] * 16 + e % 16]
            out[n] = s

    @ti.kernel
    def count() -> ti.i32:
        c = 0
        for i, j, k in x:
            c += 1
        return c

    @ti.kernel
    def count_blocks() -> ti.i32:
        c = 0
        for i, j, k in blk:
            c += 1
        return c
    return x, blk, write_blocks, block_sums, count, count_blocks


def _expected_sums(blocks):
    e = np.arange(4096)
    out = []
    for b in blocks:
        i, j, k = b[0] * 16 + e // 256, b[1] * 16 + e // 16 % 16, b[2] * 16 + e % 16
        out.append(value(i, j, k).sum())
    return np.array(out, dtype=np.float64)


@pytest.mark.cpu_only
def test_pointer_grid_with_1_percent_active_costs_1_percent():
    x, blk, write_blocks, block_sums, count, count_blocks = _grid_1024()
    rng = np.random.default_rng(7)
    n = 64 ** 3 // 100                                   # 1% of the blocks
    flat = rng.choice(64 ** 3, n, replace=False)
    blocks = np.stack([flat // 4096, flat // 64 % 64, flat % 64], axis=1).astype(np.int32)
    write_blocks(np.zeros((0, 3), np.int32))             # compiled outside the measurement
    before, base = rss(), ti.sparse.memory_in_use(x)
    write_blocks(blocks)
    grown, used = rss() - before, ti.sparse.memory_in_use(x) - base
    data = n * 16 ** 3 * 4                               # the active blocks' bytes: 1%
    dense = 1024 ** 3 * 4
    assert data <= used <= data + 64 * PAGE
    assert grown < 1.2 * data + (8 << 20), (grown, data)  # (+ Python's own small change)
    assert used < 0.011 * dense
    # values: the active blocks hold what was written, the rest reads 0 and is not visited
    sums = np.zeros(n, np.float32)
    block_sums(blocks, sums)
    np.testing.assert_array_equal(sums, _expected_sums(blocks))
    assert count() == n * 4096
    assert count_blocks() == n
    # deactivate_all gives the pages back; the cells read 0
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) - base <= 64 * PAGE
    block_sums(blocks[:50], sums[:50])
    assert not sums[:50].any()
    assert count() == 0


@pytest.mark.cpu_only
def test_deactivate_and_activate_cycles_do_not_grow_the_process():
    x, blk, write_blocks, block_sums, count, count_blocks = _grid_1024()
    rng = np.random.default_rng(1)
    sums = np.zeros(600, np.float32)
    peaks = []
    for cycle in range(12):
        flat = rng.choice(64 ** 3, 600, replace=False)   # a different active set each time
        blocks = np.stack([flat // 4096, flat // 64 % 64, flat % 64], axis=1).astype(np.int32)
        write_blocks(blocks)
        block_sums(blocks, sums)
        np.testing.assert_array_equal(sums, _expected_sums(blocks))
        peaks.append(rss())
        blk.deactivate_all()
        assert ti.sparse.memory_in_use(x) <= 64 * PAGE + 64 ** 3   # (its state field)
    # 600 blocks take 9.4 MiB: twelve cycles of different blocks stay at one cycle's size.
    # (From the third cycle on: the C library keeps the first cycles' large NumPy
    # temporaries in its heap once it raised its mmap threshold on freeing them, 12 MiB in a
    # process that runs this test first, so the process settles only then.)
    assert max(peaks[3:]) - peaks[2] < (4 << 20), [p - peaks[2] for p in peaks]


@pytest.mark.cpu_only
def test_python_deactivation_keeps_the_neighbours_of_a_shared_page():
    # blocks of 16x16 f32 (1 KiB): four share a page; deactivating one zeroes it only
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 32)
    blk.dense(ti.ij, 16).place(x)
    ref = np.zeros((512, 512), np.float32)
    for bi, bj in [(0, 0), (0, 1), (0, 2), (5, 7)]:
        for i, j in [(1, 2), (15, 15), (7, 0)]:
            x[bi * 16 + i, bj * 16 + j] = ref[bi * 16 + i, bj * 16 + j] = 1 + bi + bj + i
    ti.deactivate(blk, [0, 1])
    ref[0:16, 16:32] = 0
    np.testing.assert_array_equal(x.to_numpy(), ref)
    assert not ti.is_active(blk, [0, 1]) and ti.is_active(blk, [0, 2])
    x[3, 20] = 5.0                                       # activates it again
    ref[3, 20] = 5.0
    np.testing.assert_array_equal(x.to_numpy(), ref)


@pytest.mark.cpu_only
def test_python_deactivation_of_a_large_block_gives_its_pages_back():
    x = ti.field(ti.f64)
    blk = ti.root.pointer(ti.i, 16)
    blk.dense(ti.i, 1 << 16).place(x)                    # 512 KiB blocks

    @ti.kernel
    def fill(b: ti.i32):
        for i in range(1 << 16):
            x[b * (1 << 16) + i] = i + 0.5

    base = ti.sparse.memory_in_use(x)
    for b in (2, 3, 9):
        fill(b)
    # (+ the 16 bytes of the blocks' state field, made by the first write)
    assert 0 <= ti.sparse.memory_in_use(x) - base - 3 * (512 << 10) <= 64
    ti.deactivate(blk, [3])
    assert 0 <= ti.sparse.memory_in_use(x) - base - 2 * (512 << 10) <= 64
    a = x.to_numpy()
    expect = np.zeros(1 << 20)
    for b in (2, 9):
        expect[b << 16:(b + 1) << 16] = np.arange(1 << 16) + 0.5
    np.testing.assert_array_equal(a, expect)


@pytest.mark.cpu_only
def test_lists_take_the_pages_of_their_elements():
    x = ti.field(ti.i32)
    lst = ti.root.dense(ti.i, 64).dynamic(ti.j, 1 << 20, chunk_size=1024)   # 4 MiB a list
    lst.place(x)

    @ti.kernel
    def grow(n: ti.i32):
        for i in range(64):
            for k in range(n * (i % 4)):
                ti.append(x.parent(), i, k + i)

    @ti.kernel
    def total() -> ti.i64:
        s = ti.i64(0)
        for i, j in x:
            s += x[i, j]
        return s

    @ti.kernel
    def clear(i: ti.i32):
        ti.deactivate(x.parent(), i)

    base = ti.sparse.memory_in_use(x)
    grow(5000)
    lengths = np.array([5000 * (i % 4) for i in range(64)])
    expect = sum(int(np.sum(np.arange(n) + i)) for i, n in enumerate(lengths))
    assert total() == expect
    pages = sum(-(-n * 4 // PAGE) for n in lengths)
    used = ti.sparse.memory_in_use(x) - base
    assert pages * PAGE <= used <= (pages + 64) * PAGE
    assert lst._num_dynamically_allocated == sum(-(-n // 1024) for n in lengths)
    # in a kernel, a list's deactivation zeroes its elements (its pages stay, for its next
    # use); deactivate_all gives them back
    clear(3)
    assert total() == expect - int(np.sum(np.arange(lengths[3]) + 3))
    assert ti.sparse.memory_in_use(x) - base <= used
    lst.deactivate_all()
    assert total() == 0
    assert ti.sparse.memory_in_use(x) - base <= 64 * PAGE


@pytest.mark.cpu_only
def test_a_list_of_a_terabyte_is_address_space_only():
    # the layout of Taichi's particle-list test: 1 TiB of lists, a few of them used
    pid = ti.field(ti.i32)
    grid = ti.root.pointer(ti.ij, 32)
    block = grid.pointer(ti.ij, 16)
    block.dynamic(ti.k, 1 << 20, chunk_size=4096).place(pid)

    @ti.kernel
    def build(n: ti.i32):
        for p in range(n):
            ti.append(pid.parent(), [p % 40, p // 40 % 40], p)

    @ti.kernel
    def total() -> ti.i64:
        s = ti.i64(0)
        for i, j, k in pid:
            s += pid[i, j, k]
        return s

    before = rss()
    for _ in range(5):
        grid.deactivate_all()
        build(16000)
        assert total() == 16000 * 15999 // 2
    used = ti.sparse.memory_in_use(pid)
    assert used < (16 << 20)
    assert rss() - before < (64 << 20)
    # the 1600 lists keep their page, zeroed, for one round of deactivate_all (a list
    # refilled at once takes no page fault); unused through a round, they give it back
    grid.deactivate_all()
    assert total() == 0
    states = (32 * 16) ** 2 * (4 + 1) + 32 * 32      # list lengths, block and grid states
    assert used - states >= 1600 * PAGE
    assert ti.sparse.memory_in_use(pid) - states >= 1600 * PAGE
    grid.deactivate_all()
    assert ti.sparse.memory_in_use(pid) - states < 64 * PAGE


def _blocks_of_16k():
    """A pointer of 64 blocks of 16 KiB (4,096 f32), a kernel that fills block b with
    1..4096 and one that deactivates block b."""
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.i, 64)
    blk.dense(ti.i, 4096).place(x)

    @ti.kernel
    def fill(b: ti.i32):
        for i in range(4096):
            x[b * 4096 + i] = i + 1.0

    @ti.kernel
    def drop(b: ti.i32):
        ti.deactivate(blk, b)

    return x, blk, fill, drop


@pytest.mark.cpu_only
def test_deactivate_all_gives_back_the_pages_that_in_kernel_deactivation_kept():
    # ti.deactivate in a kernel zeroes a block in place (its pages stay committed); the next
    # deactivate_all of the pointer gives them back, even though the block is inactive then
    x, blk, fill, drop = _blocks_of_16k()

    base = ti.sparse.memory_in_use(x)
    for b in (1, 7, 40):
        fill(b)
    drop(7)
    expect = np.zeros(64 * 4096, np.float32)
    for b in (1, 40):
        expect[b * 4096:(b + 1) * 4096] = np.arange(4096) + 1.0
    np.testing.assert_array_equal(x.to_numpy(), expect)
    assert ti.sparse.memory_in_use(x) - base >= 3 * 4 * PAGE      # block 7's pages kept
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) - base <= 64
    assert not x.to_numpy().any()
    fill(7)
    expect[:] = 0
    expect[7 * 4096:8 * 4096] = np.arange(4096) + 1.0
    np.testing.assert_array_equal(x.to_numpy(), expect)


@pytest.mark.cpu_only
def test_blocks_deactivated_by_a_kernel_between_deactivate_alls_go_back_within_a_sweep():
    # after its first deactivate_all, a pointer's next ones give back only the blocks that
    # changed (active now and not kept, or kept and not active now); a block activated and
    # deactivated by a kernel in one round escapes that, and the next sweep (every
    # sparse_memory._SWEEP_EVERY-th call) gives its pages back
    x, blk, fill, drop = _blocks_of_16k()

    base = ti.sparse.memory_in_use(x)
    for r in range(3):
        blk.deactivate_all()
        fill(r)
    blk.deactivate_all()
    fill(2)                                  # (kept: active in two rounds in a row)
    fill(9)
    drop(9)                                  # its pages stay committed, zeroed
    expect = np.zeros(64 * 4096, np.float32)
    expect[2 * 4096:3 * 4096] = np.arange(4096) + 1.0
    np.testing.assert_array_equal(x.to_numpy(), expect)
    assert ti.sparse.memory_in_use(x) - base >= 2 * 4 * PAGE
    seen = []
    for r in range(sparse_memory._SWEEP_EVERY):
        blk.deactivate_all()
        seen.append(ti.sparse.memory_in_use(x) - base)
    assert min(seen) <= 64, seen
    assert not x.to_numpy().any()
    fill(9)
    expect[:] = 0
    expect[9 * 4096:10 * 4096] = np.arange(4096) + 1.0
    np.testing.assert_array_equal(x.to_numpy(), expect)


@pytest.mark.cpu_only
def test_moving_blocks_smaller_than_a_page_give_their_pages_back():
    # 1 KiB blocks in rows of 128: a blob of 7 x 7 blocks that jumps each round shares the
    # pages at its edges with blocks never written; deactivate_all gives back only the blocks
    # that changed, widened to their pages, so no page is left behind at the edges
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 128)
    blk.dense(ti.ij, 16).place(x)

    @ti.kernel
    def blob(at: ti.i32):
        for i, j in ti.ndrange(97, 101):
            x[at + i, at + j] = 1.0

    base = ti.sparse.memory_in_use(x)
    used = []
    for r in range(2 * sparse_memory._SWEEP_EVERY):
        blk.deactivate_all()
        blob(r * 120 % 1900 + 3)
        assert x.to_numpy().sum() == 97 * 101
        used.append(ti.sparse.memory_in_use(x) - base)
    assert max(used) <= min(used) + 4 * 8 * PAGE, used


@pytest.mark.cpu_only
def test_deactivate_all_under_many_dense_cells_keeps_what_lies_beside_them():
    # a pointer under 256 dense cells, each also holding a value of its own: the pointer's
    # cells are 256 runs of bytes between those values, which keep theirs
    a, x = ti.field(ti.f64), ti.field(ti.f32)
    cell = ti.root.dense(ti.i, 256)
    cell.place(a)
    blk = cell.pointer(ti.j, 4)
    blk.dense(ti.j, 512).place(x)                        # 2 KiB blocks, beside an f64

    @ti.kernel
    def fill(step: ti.i32):
        for i, j in ti.ndrange(256, 2048):
            if (i * 7 + j // 512 + step) % 5 == 0:
                x[i, j] = i + j * 0.5 + step
        for i in range(256):
            a[i] = i * 2.0 + 1.0

    @ti.kernel
    def count() -> ti.i32:
        c = 0
        for i, j in x:
            c += 1
        return c

    base = ti.sparse.memory_in_use(x)
    for step in range(3):
        fill(step)
        i, j = np.meshgrid(np.arange(256), np.arange(2048), indexing="ij")
        on = (i * 7 + j // 512 + step) % 5 == 0
        np.testing.assert_array_equal(x.to_numpy(), np.where(on, i + j * 0.5 + step, 0)
                                      .astype(np.float32))
        assert count() == on.sum()
        blk.deactivate_all()
        assert count() == 0
        assert not x.to_numpy().any()
        np.testing.assert_array_equal(a.to_numpy(), np.arange(256) * 2.0 + 1.0)
    # (the pages that hold the f64 values stay: each holds parts of two blocks as well)
    assert ti.sparse.memory_in_use(x) - base <= 258 * PAGE


@pytest.mark.cpu_only
def test_lists_refilled_after_deactivate_all_read_as_numpy_says():
    # rounds of appends into the lists of a 2-D grid, each after deactivate_all: the lists
    # hold exactly the round's values (elements past a length read 0), and lists left empty
    # for a round give their pages back
    x = ti.field(ti.i32)
    cells = ti.root.dense(ti.ij, (24, 20))
    cells.dynamic(ti.k, 2048, chunk_size=64).place(x)    # 8 KiB a list

    @ti.kernel
    def fill(c: ti.types.ndarray(dtype=ti.i32, ndim=2), v: ti.types.ndarray(dtype=ti.i32,
                                                                           ndim=1)):
        for p in range(v.shape[0]):
            ti.append(x.parent(), [c[p, 0], c[p, 1]], v[p])

    @ti.kernel
    def lengths(out: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for i, j in out:
            out[i, j] = ti.length(x.parent(), [i, j])

    rng = np.random.default_rng(5)
    base = ti.sparse.memory_in_use(x)
    for r in range(4):
        n = 3000 if r < 3 else 0
        c = np.stack([rng.integers(0, 24 if r != 1 else 6, n),
                      rng.integers(0, 20, n)], axis=1).astype(np.int32)
        v = np.arange(n, dtype=np.int32) * 3 + r
        cells.deactivate_all()
        fill(c, v)
        got = np.zeros((24, 20), np.int32)
        lengths(got)
        count = np.zeros((24, 20), np.int64)
        np.add.at(count, (c[:, 0], c[:, 1]), 1)
        np.testing.assert_array_equal(got, count)
        a = x.to_numpy()
        for i in range(24):
            for j in range(20):
                k = count[i, j]
                # (the order of parallel appends is free: compare as sets)
                want = np.sort(v[(c[:, 0] == i) & (c[:, 1] == j)])
                np.testing.assert_array_equal(np.sort(a[i, j, :k]), want)
                assert not a[i, j, k:].any()
    cells.deactivate_all()                               # (round 3 left every list empty)
    assert ti.sparse.memory_in_use(x) - base <= 64 * PAGE


@pytest.mark.cpu_only
def test_blocks_active_two_rounds_in_a_row_are_kept_zeroed():
    # a band of blocks that moves one block a round: the blocks active in two rounds in a
    # row keep their pages (zeroed) through deactivate_all, the others go back, values and
    # struct-fors stay exact, and memory stays within the active set and its last move
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, (32, 8))
    blk.dense(ti.ij, (32, 32)).place(x)                   # 4 KiB blocks: a page each

    @ti.kernel
    def band(r0: ti.i32):
        for i, j in ti.ndrange((r0 * 32, r0 * 32 + 4 * 32), 256):
            x[i, j] = i * 0.5 + j + r0

    @ti.kernel
    def count() -> ti.i32:
        c = 0
        for i, j in x:
            c += 1
        return c

    block = 32 * 32 * 4
    base = ti.sparse.memory_in_use(x)
    i, j = np.meshgrid(np.arange(1024), np.arange(256), indexing="ij")
    for r in range(6):
        blk.deactivate_all()
        assert count() == 0
        assert not x.to_numpy().any()
        # kept: the blocks of the last round that were active the round before (3 rows)
        held = ti.sparse.memory_in_use(x) - base
        assert held <= (3 * 8 if r >= 2 else 0) * block + 64 * PAGE, (r, held)
        assert held >= (3 * 8 if r >= 2 else 0) * block, (r, held)
        band(r)
        on = (i >= r * 32) & (i < r * 32 + 128)
        np.testing.assert_array_equal(x.to_numpy(), np.where(on, i * 0.5 + j + r, 0)
                                      .astype(np.float32))
        assert count() == on.sum()
        assert ti.sparse.memory_in_use(x) - base <= 5 * 8 * block + 64 * PAGE
    # a round with nothing active: the kept blocks go back at the next deactivate_all
    blk.deactivate_all()
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) - base <= 64 * PAGE


@pytest.mark.parametrize("layout", ["same_axes", "other_axes"])
def test_deactivate_all_clears_bitmask_states_with_the_blocks(layout):
    # a bitmasked level's states lie in the blocks of the pointer above it
    # (lang/sparse_block_states.py), whether the two levels split the same axes or not
    # (other_axes: the pointer splits i, the bitmask j), so deactivate_all clears them with
    # the blocks: every round sees exactly the cells it wrote, against a NumPy set of them
    from fluxion.lang import sparse_block_states
    x = ti.field(ti.f32)
    if layout == "same_axes":
        blk = ti.root.pointer(ti.ij, (8, 4))
        bm = blk.bitmasked(ti.ij, (4, 8))
    else:
        blk = ti.root.pointer(ti.i, 32)
        bm = blk.bitmasked(ti.j, 32)
    bm.place(x)

    @ti.kernel
    def write(c: ti.types.ndarray(dtype=ti.i32, ndim=2), r: ti.i32):
        for n in range(c.shape[0]):
            x[c[n, 0], c[n, 1]] = c[n, 0] * 32 + c[n, 1] + r

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for i, j in bm:
            k += 1
        return k

    rng = np.random.default_rng(5)
    i, j = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    for r in range(5):
        blk.deactivate_all()
        assert count() == 0
        cells = np.unique(rng.integers(0, 32, (40 if r % 2 else 150, 2)), axis=0)
        write(cells.astype(np.int32), r)
        on = np.zeros((32, 32), bool)
        on[cells[:, 0], cells[:, 1]] = True
        assert count() == on.sum()
        np.testing.assert_array_equal(x.to_numpy(), np.where(on, i * 32 + j + r, 0)
                                      .astype(np.float32))
        assert all(ti.is_active(bm, [a, b]) == on[a, b] for a, b in [(0, 0), (31, 31),
                                                                        *cells[:3].tolist()])
    assert sparse_block_states.in_blocks(bm) is blk


@pytest.mark.cpu_only
def test_a_view_outlives_reset_without_crashing():
    x = ti.field(ti.f32)
    ti.root.pointer(ti.i, 8).dense(ti.i, 1024).place(x)
    x[5000] = 3.0
    buf = x._snode.tree.buffer         # the reserved memory, as a numpy array
    ti.reset()
    ti.init(arch=ti.cpu)
    # the mapping lives as long as an array over it does: no read of freed memory
    assert float(buf.view(np.float32).max()) == 3.0


def struct_fors_by_block(ti):
    """Struct-fors that visit a pointer's blocks and test the bitmasked cells below one by
    one (with an offset), and that run each list to its length (lists of a grid's cells, a
    long list split in chunks, a list under a pointer)."""
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 8)
    blk.bitmasked(ti.ij, 8).place(x, offset=(-20, 3))
    pid = ti.field(ti.i32)
    ti.root.pointer(ti.i, 4).dense(ti.i, 4).dynamic(ti.j, 256, chunk_size=32).place(pid)
    big = ti.field(ti.f32)
    ti.root.dynamic(ti.i, 1 << 16).place(big)

    @ti.kernel
    def fill():
        for i in range(64):
            x[(i * 7) % 64 - 20, (i * 11) % 64 + 3] = i * 0.5
        for p in range(300):
            ti.append(pid.parent(), (p * 5) % 13, p)
        for k in range(5000):
            big[k] = k % 97

    @ti.kernel
    def sums() -> ti.types.vector(4, ti.f64):
        a, b, c, d = 0.0, 0, 0, 0.0
        for i, j in x:
            a += x[i, j] * (i + 2 * j)
            b += 1
        for i, j in pid:
            c += pid[i, j] * (i + 1) + 1000     # (not by j: append's order is the threads')
        for k in big:
            d += big[k]
        return ti.Vector([a, b, c, d])

    @ti.kernel
    def blocks() -> ti.i32:
        n = 0
        for i, j in blk:
            n += i * 8 + j
        return n

    @ti.kernel
    def kill():
        ti.deactivate(blk, [1, 2])
        ti.deactivate(pid.parent(), 4)

    fill()
    out = {"sums": sums().to_numpy(), "blocks": blocks()}
    kill()
    out["after"] = sums().to_numpy()
    return out


def test_struct_fors_by_block_agree_with_taichi():
    check_against_taichi(struct_fors_by_block)


@pytest.mark.cpu_only
@pytest.mark.parametrize("vector", [False, True])
def test_short_lists_share_pages_chunk_by_chunk(vector):
    # particles binned into the short lists of a 64x64 grid (2 KiB or 6 KiB a list): a list
    # that holds a few elements takes about a cache line, not a page, and the lists read,
    # grow, shrink and empty exactly as NumPy says
    G, N, cap = 64, 20000, 512
    x = ti.Vector.field(3, ti.f32) if vector else ti.field(ti.i32)
    cells = ti.root.dense(ti.ij, G)
    cells.dynamic(ti.k, cap, chunk_size=32).place(x)

    @ti.kernel
    def fill(c: ti.types.ndarray(dtype=ti.i32, ndim=2)):
        for p in range(c.shape[0]):
            v = p * 3 + 1
            if ti.static(vector):
                ti.append(x.parent(), [c[p, 0], c[p, 1]], ti.Vector([v, -v, 0.5 * v]))
            else:
                ti.append(x.parent(), [c[p, 0], c[p, 1]], v)

    @ti.kernel
    def total() -> ti.f64:
        s = ti.f64(0.0)
        for i, j, k in x:
            if ti.static(vector):
                s += x[i, j, k][0] - 2.0 * x[i, j, k][2]
            else:
                s += x[i, j, k]
        return s

    @ti.kernel
    def length(i: ti.i32, j: ti.i32) -> ti.i32:
        return ti.length(x.parent(), [i, j])

    @ti.kernel
    def drop(i: ti.i32, j: ti.i32):
        ti.deactivate(x.parent(), [i, j])

    def first(a):
        return a[..., 0] if vector else a

    rng = np.random.default_rng(11)
    base = ti.sparse.memory_in_use(x)
    pool = 0
    for n in (N, N // 3):
        p = rng.random((n, 2))
        p = 0.5 + (p - 0.5) * np.sqrt(p[:, :1])             # denser near the middle
        c = np.minimum((p * G).astype(np.int32), G - 1)
        cells.deactivate_all()
        fill(c)
        count = np.zeros((G, G), np.int64)
        np.add.at(count, (c[:, 0], c[:, 1]), 1)
        v = np.arange(n) * 3 + 1
        assert total() == (v.sum() if not vector else 0.0)
        a = first(x.to_numpy())
        for i in range(0, G, 5):
            for j in range(G):
                k = count[i, j]
                want = np.sort(v[(c[:, 0] == i) & (c[:, 1] == j)])
                np.testing.assert_array_equal(np.sort(a[i, j, :k]), want)
                assert not a[i, j, k:].any()
        used = ti.sparse.memory_in_use(x) - base
        lists = int(np.count_nonzero(count))
        elem = 12 if vector else 4
        # the original's pool: chunks of chunk_size elements per list (what deactivate_all
        # keeps covers this round's lists and the last round's)
        pool = max(pool, int(np.sum(-(-count // 32))) * 32 * elem)
        assert used < lists * PAGE // 8                       # (a page a list before)
        assert used <= pool + 16 * PAGE
    # one list emptied in a kernel, another from Python scope: the rest stay
    i, j = G // 2, G // 2
    k1 = int(count[i, j])
    k2 = int(count[i, j + 1])
    assert k1 and k2
    a_before = a.astype(np.int64)
    drop(i, j)
    ti.deactivate(x.parent(), [i, j + 1])
    a = first(x.to_numpy())
    assert not a[i, j].any() and not a[i, j + 1].any()
    assert length(i, j) == 0 and length(i, j + 2) == count[i, j + 2]
    assert total() == (0.0 if vector else v.sum() - a_before[i, j, :k1].sum()
                       - a_before[i, j + 1, :k2].sum())
    # a Python-scope write past a list's end grows it to hold the element
    x[3, 4, 40] = [7, 7, 7] if vector else 7
    assert length(3, 4) == 41 and first(x.to_numpy())[3, 4, 40] == 7
    cells.deactivate_all()
    cells.deactivate_all()
    assert total() == 0 and not x.to_numpy().any()
    assert ti.sparse.memory_in_use(x) - base <= 4 * PAGE


def interleaved_lists(ti):
    # short lists of a dense level at a tree's top (fluxion interleaves them by chunks):
    # two fields of different sizes in one list, writes past a list's end, appends, an
    # in-kernel deactivation, Python-scope reads and a whole-field write (not with a field
    # offset: Taichi 1.7.4 crashes in a struct-for over such lists)
    ti.init(arch=ti.cpu)
    a = ti.field(ti.i32)
    b = ti.field(ti.f64)
    ti.root.dense(ti.ij, (6, 10)).dynamic(ti.k, 128, chunk_size=16).place(a, b)
    c = ti.field(ti.f32)
    ti.root.dense(ti.ij, (6, 10)).dynamic(ti.k, 96).place(c)

    cnt = ti.field(ti.i32, shape=(6, 10))

    @ti.kernel
    def fill():
        ti.loop_config(serialize=True)
        for p in range(2000):
            i, j = (p * 7) % 6, (p * 13) % 10          # (30 of the lists, 67 each)
            n = cnt[i, j]
            cnt[i, j] += 1
            a[i, j, n] = p % 1000                  # (a write past the end grows the list)
            b[i, j, n] = p * 0.25
        for p in range(900):
            i, j = (p * 5) % 6, (p * 3) % 10
            ti.append(c.parent(), [i, j], p * 0.5)

    @ti.kernel
    def sums() -> ti.types.vector(4, ti.f64):
        s, t, u, m = ti.f64(0.0), ti.f64(0.0), ti.f64(0.0), ti.f64(0.0)
        for i, j, k in a:
            s += a[i, j, k] * (i * 10 + j + 1)
            t += b[i, j, k]
        for i, j, k in c:
            u += c[i, j, k] * (i + 2 * j)
            m = ti.max(m, k)
        return ti.Vector([s, t, u, m])

    @ti.kernel
    def lengths() -> ti.i32:
        n = 0
        for i, j in ti.ndrange(6, 10):
            n += ti.length(a.parent(), [i, j]) * (i * 10 + j + 1)
            n += ti.length(c.parent(), [i, j]) * 7
        return n

    @ti.kernel
    def kill():
        ti.deactivate(a.parent(), [2, 0])
        ti.deactivate(c.parent(), [2, 0])

    fill()
    out = {"sums": sums().to_numpy(), "lengths": lengths()}
    kill()
    out["after"] = sums().to_numpy()
    out["after_lengths"] = lengths()
    cn = c.to_numpy()
    out["c_sorted"] = np.sort(cn.reshape(-1))[-50:]
    out["c_count"] = int(np.count_nonzero(cn))
    c.from_numpy(np.full((6, 10, 96), 2.0, np.float32))   # (active elements only)
    out["refilled"] = sums().to_numpy()
    a.parent().deactivate_all()
    out["empty"] = [sums().to_numpy(), lengths()]
    return out


def test_interleaved_lists_agree_with_taichi():
    check_against_taichi(interleaved_lists)


@pytest.mark.cpu_only
def test_interleaved_lists_beside_a_pointer_in_one_tree():
    # a FieldsBuilder tree with short lists and a pointer level: deactivate_all of every
    # tree takes the general path over both, and each round's values are NumPy's
    fb = ti.FieldsBuilder()
    x = ti.field(ti.i32)
    y = ti.field(ti.f32)
    fb.dense(ti.ij, (16, 16)).dynamic(ti.k, 256).place(x)
    fb.pointer(ti.i, 64).dense(ti.i, 1024).place(y)
    fb.finalize()

    @ti.kernel
    def fill(r: ti.i32):
        for p in range(3000):
            if (p + r) % 4 != 0:
                ti.append(x.parent(), [(p * 7 + r) % 16, (p * 3 + r * 5) % 16], p + r)
        for q in range(100):
            y[(q * 97 + r * 1000) % 65536] = q + 1

    @ti.kernel
    def total() -> ti.f64:
        s = ti.f64(0.0)
        for i, j, k in x:
            s += x[i, j, k]
        for i in y:
            s += y[i] * 1000000
        return s

    base = ti.sparse.memory_in_use(x)
    p = np.arange(3000)
    for r in range(3):
        ti.deactivate_all_snodes()
        fill(r)
        keep = (p + r) % 4 != 0
        assert total() == np.sum(p[keep] + r) + 1000000 * np.sum(np.arange(1, 101))
        a = x.to_numpy()
        ci, cj = (p * 7 + r) % 16, (p * 3 + r * 5) % 16
        for i in range(16):
            for j in range(16):
                want = np.sort(p[keep & (ci == i) & (cj == j)] + r)
                np.testing.assert_array_equal(np.sort(a[i, j, :len(want)]), want)
                assert not a[i, j, len(want):].any()
    ti.deactivate_all_snodes()
    ti.deactivate_all_snodes()
    assert total() == 0 and not x.to_numpy().any() and not y.to_numpy().any()
    assert ti.sparse.memory_in_use(x) - base <= PAGE


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype,shape,cap,top", [(ti.i32, (128, 128), 1024, 60),
                                                 (ti.f32, (16, 16), 64, 67),
                                                 (ti.f64, (7, 9), 96, 99)])
def test_pages_of_interleaved_lists_are_those_of_their_chunks(dtype, shape, cap, top):
    # deactivate_all keeps the pages that this round's list chunks lie in, found per page of
    # the first row of chunks where a row is whole pages ((7, 9): not, so chunk by chunk):
    # they are the pages of the bytes of every chunk that a list's length reaches, by the
    # addresses the kernels use (ti.get_addr); lengths past the capacity count as full
    from fluxion.lang import sparse_lists

    x = ti.field(dtype)
    d = ti.root.dense(ti.ij, shape).dynamic(ti.k, cap)
    d.place(x)
    x[0, 0, 0] = 1
    g = sparse_lists.list_chunk(d)
    assert g is not None
    e = x.to_numpy().itemsize
    width = min(cap, -(-top // g) * g)

    @ti.kernel
    def addresses(n: ti.types.ndarray(dtype=ti.i32, ndim=2),
                  out: ti.types.ndarray(dtype=ti.u64, ndim=3)):
        for i, j in n:
            chunks = (ti.min(n[i, j], cap) + g - 1) // g
            for k in range(chunks * g):
                out[i, j, k] = ti.get_addr(x, [i, j, k])

    base = d.tree.buffer.__array_interface__["data"][0]
    rng = np.random.default_rng(cap)
    for _ in range(3):
        length = (rng.integers(0, top, size=shape) * (rng.random(shape) < 0.5)).astype(np.int32)
        out = np.zeros(shape + (width,), np.uint64)
        addresses(length, out)
        at = out[out != 0].astype(np.int64) - base
        want = np.unique(np.concatenate([at // PAGE, (at + e - 1) // PAGE]))
        got = np.unique(np.concatenate(sparse_lists.chunk_pages(d, length)))
        np.testing.assert_array_equal(got, want)


def test_intersect_runs_agrees_with_a_byte_mask():
    rng = np.random.default_rng(5)
    for _ in range(200):
        sets = []
        for _ in range(2):
            edges = np.sort(rng.choice(200, 2 * rng.integers(0, 6), replace=False))
            sets.append((edges[0::2], edges[1::2]))
        lo, hi = tree_buffer.intersect_runs(*sets[0], *sets[1])
        want = np.ones(200, bool)
        for a, b in sets:
            m = np.zeros(200, bool)
            for x, y in zip(a, b):
                m[x:y] = True
            want &= m
        got = np.zeros(200, bool)
        for x, y in zip(lo, hi):
            assert y > x
            got[x:y] = True
        np.testing.assert_array_equal(got, want)
        assert (np.diff(lo) > 0).all()
