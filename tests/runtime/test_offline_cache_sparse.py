"""Kernels over sparse trees through the offline cache: their code reads and writes hidden
state fields (cell flags, list lengths, a pool's slot table and counts, the scatter's
per-thread copies laid out by cells), which a load finds again by recipe from the fields
(lang/kernel_cache.py). Each test runs one program in two sessions on one cache: the
second loads every kernel the first compiled, and both must give the values computed here
with numpy, step after step (activation, struct-fors, deactivation, lists)."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_pool

pytestmark = pytest.mark.cpu_only


def _notes(kernels):
    return {k.__name__ if hasattr(k, "__name__") else str(k):
            sorted(i.cache_note for i in k.instances.values()) for k in kernels}


def _band_program():
    """A pointer/bitmasked grid: a band written by a kernel, a stencil over its cells, a
    kernel that deactivates a cell, is_active; numpy reference alongside."""
    n = 32
    x, y = ti.field(ti.f32), ti.field(ti.f32)
    blocks = ti.root.pointer(ti.ij, n // 4)
    blocks.bitmasked(ti.ij, 4).place(x, y)

    @ti.kernel
    def write(row0: ti.i32, rows: ti.i32):
        for i, j in ti.ndrange(rows, n):
            x[row0 + i, j] = (row0 + i) * 0.5 + j

    @ti.kernel
    def stencil():
        for i, j in x:
            if 0 < i < n - 1 and 0 < j < n - 1:
                y[i, j] = x[i, j] + x[i - 1, j] + x[i + 1, j]

    @ti.kernel
    def count() -> ti.i32:
        c = 0
        for i, j in x:
            c += 1
        return c

    @ti.kernel
    def drop(bi: ti.i32, bj: ti.i32):
        ti.deactivate(blocks, [bi, bj])

    @ti.kernel
    def active(bi: ti.i32, bj: ti.i32) -> ti.i32:
        return ti.is_active(blocks, [bi, bj])

    out = []
    for step in range(3):
        blocks.deactivate_all()
        row0 = 4 + 8 * step
        write(row0, 8)
        stencil()
        xs = np.zeros((n, n), np.float32)
        xs[row0:row0 + 8] = (np.arange(row0, row0 + 8)[:, None] * 0.5 + np.arange(n)[None, :])
        ys = np.zeros((n, n), np.float32)
        inner = xs[1:-1, 1:-1] + xs[:-2, 1:-1] + xs[2:, 1:-1]
        mask = np.zeros((n, n), bool)
        mask[row0:row0 + 8] = True
        ys[1:-1, 1:-1] = np.where(mask[1:-1, 1:-1], inner, 0)
        np.testing.assert_allclose(x.to_numpy(), xs)
        np.testing.assert_allclose(y.to_numpy(), ys)
        assert count() == 8 * n
        bi = row0 // 4
        assert active(bi, 0) == 1
        drop(bi, 0)
        assert active(bi, 0) == 0
        assert count() == 8 * n - 16
        out.append(float(y.to_numpy().sum()))
    return out, [write, stencil, count, drop, active]


def _lists_program():
    """Per-cell dynamic lists filled by a kernel, their lengths, a struct-for over them."""
    pid = ti.field(ti.i32)
    cells = ti.root.dense(ti.i, 16)
    cells.dynamic(ti.j, 64, chunk_size=8).place(pid)
    total = ti.field(ti.i32, shape=16)

    @ti.kernel
    def fill(k: ti.i32):
        for p in range(500):
            ti.append(pid.parent(), (p * 7 + k) % 16, p)

    @ti.kernel
    def visit():
        for i, j in pid:
            total[i] += pid[i, j]

    @ti.kernel
    def length(i: ti.i32) -> ti.i32:
        return ti.length(pid.parent(), i)

    out = []
    for k in range(2):
        cells.deactivate_all()
        total.fill(0)
        fill(k)
        visit()
        want = np.zeros(16, np.int64)
        lens = np.zeros(16, np.int64)
        for p in range(500):
            c = (p * 7 + k) % 16
            if lens[c] < 64:
                want[c] += p
                lens[c] += 1
        np.testing.assert_array_equal(total.to_numpy(), want)
        assert [length(i) for i in range(16)] == lens.tolist()
        out.append(int(want.sum()))
    return out, [fill, visit, length]


def _scatter_program():
    """Particles scattering into a pointer grid (the scatter pass's per-thread copies, laid
    out by cells), then a struct-for over the grid's active cells."""
    m = ti.field(ti.f32)
    grid = ti.root.pointer(ti.ij, 16)
    grid.dense(ti.ij, 4).place(m)
    px = ti.field(ti.f32, shape=(20000, 2))
    rng = np.random.default_rng(4)
    pos = (0.3 + 0.2 * rng.random((20000, 2))).astype(np.float32)
    px.from_numpy(pos)

    @ti.kernel
    def p2g():
        for p in range(20000):
            i = ti.cast(px[p, 0] * 64, ti.i32)
            j = ti.cast(px[p, 1] * 64, ti.i32)
            m[i, j] += 1.0
            m[i + 1, j] += 0.5

    @ti.kernel
    def cells() -> ti.i32:
        c = 0
        for i, j in grid:
            c += 1
        return c

    want = np.zeros((64, 64))
    ii = (pos[:, 0] * 64).astype(np.int64)
    jj = (pos[:, 1] * 64).astype(np.int64)
    np.add.at(want, (ii, jj), 1.0)
    np.add.at(want, (ii + 1, jj), 0.5)
    out = []
    for _ in range(2):
        grid.deactivate_all()
        p2g()
        np.testing.assert_allclose(m.to_numpy(), want)
        blocks = np.zeros((16, 16), bool)
        blocks[ii // 4, jj // 4] = True
        blocks[(ii + 1) // 4, jj // 4] = True
        assert cells() == int(blocks.sum())
        out.append(float(m.to_numpy().sum()))
    return out, [p2g, cells]


@pytest.mark.parametrize("pool", [False, True], ids=["dense_layout", "pooled"])
@pytest.mark.parametrize("program", [_band_program, _lists_program, _scatter_program],
                         ids=["band", "lists", "scatter"])
def test_sparse_kernels_load_from_the_cache_and_agree(tmp_path, monkeypatch, program, pool):
    monkeypatch.setattr(sparse_pool, "ENABLED", pool)
    results = []
    for expect in ("compiled", "loaded"):
        ti.init(arch=ti.cpu, offline_cache_file_path=str(tmp_path / "c"),
                cpu_max_num_threads=2)
        out, kernels = program()
        results.append(out)
        for name, got in _notes(kernels).items():
            assert got and all(n == expect for n in got), (name, got)
        ti.reset()
    assert results[0] == results[1]


def test_the_pool_is_part_of_the_key(tmp_path, monkeypatch):
    # must not load: code built for the dense layout is another program on a pooled tree
    seen = []
    for pool in (False, True):
        monkeypatch.setattr(sparse_pool, "ENABLED", pool)
        ti.init(arch=ti.cpu, offline_cache_file_path=str(tmp_path / "c"))
        out, kernels = _band_program()
        seen.append(_notes(kernels))
        ti.reset()
    assert all(n == ["compiled"] for n in seen[1].values()), seen[1]
