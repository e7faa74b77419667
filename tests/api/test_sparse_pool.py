"""Pooled pointer levels (lang/sparse_pool.py): a pointer node's blocks come from a pool
through a slot table. The oracle is the same program on the dense layout (the pool off), in
the same process, which the differential tests of tests/fuzz check against Taichi; values are
also checked against NumPy where the program makes them easy to state. Memory and the
pool's bookkeeping (a slot per written cell, none lost or shared when threads race to take
one) are checked directly. CPU only: CUDA keeps dense device memory."""
import mmap

import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_pool

PAGE = mmap.PAGESIZE
N = 32


@pytest.fixture
def pool_on(monkeypatch):
    monkeypatch.setattr(sparse_pool, "ENABLED", True)


def _layout(kind, x, v, offset):
    """Place scalar field `x` and vec2 field `v` in a 32x32 tree of the given shape; the
    sparse nodes, outermost first."""
    if kind == "pointer_dense":
        a = ti.root.pointer(ti.ij, 8)
        a.dense(ti.ij, 4).place(x, v, offset=offset)
        return [a]
    if kind == "pointer_pointer_dense":
        a = ti.root.pointer(ti.ij, 4)
        b = a.pointer(ti.ij, 2)
        b.dense(ti.ij, 4).place(x, v, offset=offset)
        return [a, b]
    if kind == "dense_pointer_dense":
        a = ti.root.dense(ti.i, 2).pointer(ti.ij, (4, 8))
        a.dense(ti.ij, (4, 4)).place(x, v, offset=offset)
        return [a]
    if kind == "pointer_bitmasked":
        a = ti.root.pointer(ti.ij, 8)
        b = a.bitmasked(ti.ij, 4)
        b.place(x, v, offset=offset)
        return [a, b]
    if kind == "pointer_split_axes":
        # the i axis split above and below the pointer; j whole below it
        a = ti.root.dense(ti.i, 2).pointer(ti.i, 4)
        a.dense(ti.ij, (4, 32)).place(x, v, offset=offset)
        return [a]
    raise AssertionError(kind)


def _run_program(kind, seed, offset):
    """A random sequence of writes, reads, sums and (de)activations on a 32x32 field: every
    value the program observes, in order (and, with the pool, its bookkeeping checked after
    each step)."""
    x = ti.field(ti.f32)
    v = ti.Vector.field(2, ti.i32)
    nodes = _layout(kind, x, v, offset)
    o = offset or (0, 0)

    @ti.kernel
    def kwrite(idx: ti.types.ndarray(dtype=ti.i32, ndim=2), val: ti.types.ndarray(ndim=1)):
        for n in range(idx.shape[0]):
            x[idx[n, 0], idx[n, 1]] = val[n]
            v[idx[n, 0], idx[n, 1]] = [n, -n]

    @ti.kernel
    def kadd(idx: ti.types.ndarray(dtype=ti.i32, ndim=2), val: ti.types.ndarray(ndim=1)):
        for n in range(idx.shape[0]):
            x[idx[n, 0], idx[n, 1]] += val[n]
            v[idx[n, 0], idx[n, 1]][1] += 1

    @ti.kernel
    def kread(idx: ti.types.ndarray(dtype=ti.i32, ndim=2), out: ti.types.ndarray(ndim=1)):
        for n in range(idx.shape[0]):
            out[n] = x[idx[n, 0], idx[n, 1]] + v[idx[n, 0], idx[n, 1]][1] * 1000

    @ti.kernel
    def ksum() -> ti.f64:
        s = 0.0
        for i, j in x:
            s += x[i, j] * (i + 2 * j + 1) + v[i, j][0]
        return s

    @ti.kernel
    def kcount() -> ti.i32:
        c = 0
        for i, j in v:
            c += 1
        return c

    @ti.kernel
    def kdeactivate(k: ti.template(), c: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        ti.deactivate(k, [c[d] for d in ti.static(range(len(k.shape)))])

    dims = len(nodes[-1].shape)

    @ti.kernel
    def kactivate(c: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        ti.activate(nodes[-1], [c[d] for d in ti.static(range(dims))])

    @ti.kernel
    def kread_then_write(i: ti.i32, j: ti.i32) -> ti.f32:
        a = x[i, j]                 # before this kernel's write: the cell may have no block
        x[i, j] = a + 7
        return x[i, j] + a          # after it

    rng = np.random.default_rng(seed)
    out = []

    def indices(n):
        return (rng.integers(0, N, (n, 2)) + np.array(o)).astype(np.int32)

    for step in range(28):
        op = rng.integers(0, 13)
        if op == 0:
            idx = np.unique(indices(int(rng.integers(1, 40))), axis=0)
            kwrite(idx, rng.integers(-9, 9, len(idx)).astype(np.float32))
        elif op == 1:
            idx = indices(int(rng.integers(1, 200)))
            kadd(idx, rng.integers(-3, 4, len(idx)).astype(np.float32))
        elif op == 2:
            for i, j in indices(3):
                x[i, j] = float(rng.integers(-50, 50))
                v[i, j] = [1, 2]
        elif op == 3:
            idx = indices(64)
            got = np.zeros(64, np.float32)
            kread(idx, got)
            out.append(got)
        elif op == 4:
            out.append([float(x[i, j]) for i, j in indices(5)] + [int(v[i, j][1])
                                                                  for i, j in indices(5)])
        elif op == 5:
            out.append((ksum(), kcount()))
        elif op == 6:
            out.append((x.to_numpy(), v.to_numpy()))
        elif op == 7:
            x.from_numpy(rng.integers(-5, 5, (N, N)).astype(np.float32))
        elif op == 8:
            node = nodes[rng.integers(0, len(nodes))]
            cell = [int(rng.integers(0, n)) for n in node.shape]
            ti.deactivate(node, cell)
        elif op == 9:
            node = nodes[rng.integers(0, len(nodes))]
            kdeactivate(node, np.array([rng.integers(0, n) for n in node.shape], np.int32))
        elif op == 10:
            nodes[rng.integers(0, len(nodes))].deactivate_all()
        elif op == 11:
            kactivate(np.array([rng.integers(0, n) for n in nodes[-1].shape], np.int32))
            i, j = indices(1)[0]
            out.append(kread_then_write(i, j))
        else:
            node = nodes[-1]
            out.append([ti.is_active(node, [int(rng.integers(0, n)) for n in node.shape])
                        for _ in range(6)])
        for node in _pooled_nodes(nodes):
            _check_bookkeeping(node, f"step {step} op {op}")
    out.append((x.to_numpy(), v.to_numpy(), ksum(), kcount()))
    return out, nodes


def _pooled_nodes(nodes):
    return [n for n in nodes if n._pool is not None]


KINDS = ["pointer_dense", "pointer_pointer_dense", "dense_pointer_dense", "pointer_bitmasked",
         "pointer_split_axes"]


@pytest.mark.cpu_only
@pytest.mark.parametrize("kind", KINDS)
def test_random_programs_agree_with_the_dense_layout(kind, monkeypatch):
    for seed in range(3):
        offset = (-4, 3) if seed == 1 else None
        monkeypatch.setattr(sparse_pool, "ENABLED", False)
        ti.reset()
        want, nodes = _run_program(kind, seed, offset)
        assert not _pooled_nodes(nodes)
        monkeypatch.setattr(sparse_pool, "ENABLED", True)
        ti.reset()
        got, nodes = _run_program(kind, seed, offset)
        # the deepest pointer is pooled, and only it
        deepest = [n for n in nodes if n.kind == "pointer"][-1]
        assert _pooled_nodes(nodes) == [deepest]
        _same(got, want, f"{kind} seed {seed}")


def _same(a, b, where):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for k, (p, q) in enumerate(zip(a, b)):
            _same(p, q, f"{where}[{k}]")
        return
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)


def _check_bookkeeping(node, where=""):
    """Every active cell holds a slot; no two cells share one; every slot handed out is in
    a cell or on the free stack."""
    pool = node._pool
    table = pool.table.to_numpy()
    flags = node._active_mask.to_numpy() if node._active_mask is not None else 0 * table
    assert (table[flags != 0] > 0).all(), where
    held = table[table != 0]
    assert len(np.unique(held)) == len(held), where
    nxt, nfree = pool.alloc.to_numpy()
    free = pool.free.to_numpy()[:max(nfree, 0)]
    assert sorted(held.tolist() + free.tolist()) == list(range(1, nxt)), where


@pytest.mark.cpu_only
def test_threads_racing_to_write_a_cell_take_one_slot(pool_on):
    ti.init(arch=ti.cpu, cpu_max_num_threads=4)
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.i, 64)
    blk.dense(ti.i, 16).place(x)

    @ti.kernel
    def scatter(k: ti.i32):
        for n in range(200000):
            x[(n * 7 + k) % 1024] += 1.0

    want = np.zeros(1024)
    for n in range(200000):
        want[(n * 7) % 1024] += 1
    for rnd in range(4):
        blk.deactivate_all()
        scatter(0)
        np.testing.assert_array_equal(x.to_numpy(), want)
        assert sparse_pool.slots_in_use(blk._pool) == 64
        assert blk._pool.alloc.to_numpy()[0] == 65        # no slot lost to a race
        _check_bookkeeping(blk)


@pytest.mark.cpu_only
def test_python_scope_deactivation_frees_slots_that_kernels_take_again(pool_on):
    x = ti.field(ti.i32)
    top = ti.root.pointer(ti.i, 4)
    blk = top.pointer(ti.i, 4)
    blk.dense(ti.i, 8).place(x)

    @ti.kernel
    def write(lo: ti.i32, hi: ti.i32):
        for i in range(lo, hi):
            x[i] = i + 1

    write(0, 128)
    assert blk._pool.alloc.to_numpy()[0] == 17
    ti.deactivate(blk, [3])              # one block
    ti.deactivate(top, [1])              # four blocks under one cell of the level above
    _check_bookkeeping(blk)
    assert blk._pool.alloc.to_numpy()[1] == 5
    want = np.arange(1, 129)
    want[24:32] = 0
    want[32:64] = 0
    np.testing.assert_array_equal(x.to_numpy(), want)
    write(24, 64)                        # the freed slots, not new ones
    assert blk._pool.alloc.to_numpy().tolist() == [17, 0]
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1, 129))
    _check_bookkeeping(blk)


def _block_total(blocks, r):
    e = np.arange(512)
    i = blocks[:, None] // 1024 * 8 + e // 64
    j = blocks[:, None] // 32 % 32 * 8 + e // 8 % 8
    k = blocks[:, None] % 32 * 8 + e % 8
    return ((i + j + k + r) % 13 + 1).sum()


def _statm_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


@pytest.mark.cpu_only
def test_memory_is_the_blocks_in_use_and_cycles_reuse_it(pool_on):
    # 2 KiB blocks (half a page): laid out densely, each active block commits a page of its
    # own; from the pool, blocks lie side by side
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ijk, 32)
    blk.dense(ti.ijk, 8).place(x)
    nb = 32 ** 3

    @ti.kernel
    def write(b: ti.types.ndarray(dtype=ti.i32, ndim=1), r: ti.i32):
        for n in range(b.shape[0]):
            for e in range(512):
                i = b[n] // 1024 * 8 + e // 64
                j = b[n] // 32 % 32 * 8 + e // 8 % 8
                k = b[n] % 32 * 8 + e % 8
                x[i, j, k] = (i + j + k + r) % 13 + 1

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for i, j, k in x:
            s += x[i, j, k]
        return s

    write(np.zeros(0, np.int32), 0)
    base = ti.sparse.memory_in_use(x)
    rng = np.random.default_rng(3)
    rss = []
    rounds = [set(), set(), set()]
    for r in range(8):
        blk.deactivate_all()
        blocks = rng.choice(nb, nb // 50, replace=False).astype(np.int32)    # 2%
        write(blocks, r)
        assert total() == _block_total(blocks, r)
        used = ti.sparse.memory_in_use(x) - base
        # the blocks of this round, and those active at the last two deactivate_alls, which
        # keep their slots (zeroed) for this one; at most, with the slots that the previous
        # deactivate_all kept and this one freed (free slots below the highest one held)
        kept, freed = rounds[-1] & rounds[-2], rounds[-2] & rounds[-3]
        data = len(set(blocks.tolist()) | kept) * 2048
        assert data <= used <= data + len(freed) * 2048 + 2 * PAGE, (used, data)
        rounds.append(set(blocks.tolist()))
        rss.append(_statm_rss())
    # each cycle reuses the blocks of the one before: the process does not grow
    assert max(rss[2:]) - rss[1] < (2 << 20), [p - rss[1] for p in rss]
    # deactivate_all keeps the last round's blocks for the next; a second gives them back
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) - base <= data + len(freed) * 2048 + 2 * PAGE
    blk.deactivate_all()
    assert ti.sparse.memory_in_use(x) - base <= PAGE
    assert total() == 0


@pytest.mark.cpu_only
def test_the_pool_applies_only_where_its_addressing_holds(pool_on):
    # must not fire: a pointer with a pointer below it (the lower one is pooled), a pointer
    # holding lists or quantized data, trees without pointers; nor anywhere when it is off
    a = ti.field(ti.f32)
    outer = ti.root.pointer(ti.i, 4)
    inner = outer.pointer(ti.i, 4)
    inner.dense(ti.i, 4).place(a)
    b = ti.field(ti.i32)
    holder = ti.root.pointer(ti.i, 4)
    lists = holder.dynamic(ti.j, 16)
    lists.place(b)
    q = ti.field(ti.types.quant.int(8, True))
    qp = ti.root.pointer(ti.i, 4)
    qp.quant_array(ti.i, 4, max_num_bits=32).place(q)
    c = ti.field(ti.f32)
    bm = ti.root.dense(ti.i, 4).bitmasked(ti.i, 4)
    bm.place(c)

    @ti.kernel
    def fill():
        for i in range(64):
            a[i] = i
        for i in range(4):
            ti.append(lists, [i], i)
        for i in range(16):
            q[i] = i - 8
            c[i] = i

    fill()
    assert inner._pool is not None and outer._pool is None
    assert holder._pool is None and qp._pool is None and bm._pool is None
    np.testing.assert_array_equal(a.to_numpy(), np.arange(64))
    np.testing.assert_array_equal(q.to_numpy(), np.arange(16) - 8)
    assert b[2, 0] == 2 and c[5] == 5
    sparse_pool.ENABLED = False
    d = ti.field(ti.f32)
    p = ti.root.pointer(ti.i, 4)
    p.dense(ti.i, 4).place(d)
    d[3] = 1
    assert p._pool is None and d[3] == 1


@pytest.mark.cpu_only
def test_a_block_loop_takes_its_slot_once_and_never_outside_its_if(pool_on, capsys):
    ti.init(arch=ti.cpu, print_ir=True)
    x = ti.field(ti.f32)
    blk = ti.root.pointer(ti.ij, 16)
    blk.dense(ti.ij, 8).place(x)

    @ti.kernel
    def write(keep: ti.i32):
        for b in range(256):
            if b % 7 == keep:
                for e in range(64):
                    x[b // 16 * 8 + e // 8, b % 16 * 8 + e % 8] = e
                    if e % 2 == 0:
                        x[b // 16 * 8 + e // 8, b % 16 * 8 + e % 8] += 1

    write(3)
    lines = capsys.readouterr().out.splitlines()
    last = max(k for k, ln in enumerate(lines) if "IR of kernel 'write'" in ln)
    body = lines[last:]

    def indent(ln):
        return len(ln) - len(ln.lstrip())
    acquires = [ln for ln in body if "slot_acquire" in ln]
    inner_for = next(ln for ln in body if " : for " in ln)
    if_line = next(ln for ln in body if ln.strip().startswith("if "))
    # the first write's slot is taken once a block, before the loop over its elements and
    # inside the `if` around it; the second write's stays in its own `if`, in the loop
    assert len(acquires) == 2, acquires
    assert indent(acquires[0]) == indent(inner_for) > indent(if_line)
    assert body.index(acquires[0]) < body.index(inner_for)
    assert indent(acquires[1]) > indent(inner_for) + 2
    want = np.zeros((128, 128), np.float32)
    e = np.arange(64)
    for b in range(256):
        if b % 7 == 3:
            want[b // 16 * 8 + e // 8, b % 16 * 8 + e % 8] = e + (e % 2 == 0)
    np.testing.assert_array_equal(x.to_numpy(), want)


@pytest.mark.cpu_only
def test_by_default_only_pointers_below_pointers_are_pooled(monkeypatch):
    # the default (FLUXION_SPARSE_POOL unset): a pointer level below another pointer takes its
    # blocks from a pool; a pointer at the top of its tree, or below dense or bitmasked levels
    # only, keeps the dense layout (must not fire); values are the same either way
    monkeypatch.setattr(sparse_pool, "ENABLED", sparse_pool.NESTED)
    ti.init(arch=ti.cpu)
    a, b, c = ti.field(ti.f32), ti.field(ti.f32), ti.field(ti.f32)
    top = ti.root.pointer(ti.ijk, 4)
    mid = top.pointer(ti.ijk, 2)
    mid.dense(ti.ijk, 4).place(a)
    single = ti.root.pointer(ti.ij, 8)
    single.dense(ti.ij, 4).place(b)
    under_dense = ti.root.dense(ti.i, 4).bitmasked(ti.i, 2).pointer(ti.i, 4)
    under_dense.dense(ti.i, 2).place(c)

    @ti.kernel
    def fill():
        for i, j, k in ti.ndrange(32, 32, 32):
            if (i * 7 + j * 3 + k) % 97 == 0:
                a[i, j, k] = i + j + k
        for i in range(32):
            b[i, i] = i
        for i in range(64):
            if i % 3 == 0:
                c[i] = i

    fill()
    assert mid._pool is not None and top._pool is None
    assert single._pool is None and under_dense._pool is None
    i, j, k = np.meshgrid(*(np.arange(32),) * 3, indexing="ij")
    want = np.where((i * 7 + j * 3 + k) % 97 == 0, i + j + k, 0).astype(np.float32)
    np.testing.assert_array_equal(a.to_numpy(), want)
    np.testing.assert_array_equal(b.to_numpy(), np.diag(np.arange(32)).astype(np.float32))
    np.testing.assert_array_equal(c.to_numpy(), np.where(np.arange(64) % 3 == 0,
                                                         np.arange(64), 0))
    top.deactivate_all()
    assert a.to_numpy().sum() == 0 and not ti.is_active(mid, [0, 0, 0])
