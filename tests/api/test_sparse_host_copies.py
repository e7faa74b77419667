"""`to_numpy` and `from_numpy` of a field under sparse SNodes run a struct-for over its active
cells (lang/kernel_methods.py's copy_sparse), as the original's do: inactive elements read 0
and are not written, no cell is activated; checked against a NumPy model of the active set,
for scalar, vector and matrix fields, offsets, lists, and while a Tape records (which records
none of these launches)."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import kernel_methods

TREES = {
    # (how to build the node the field is placed in, the field's shape, the elements of a
    # cell of its deepest sparse level: a write activates them all)
    "pointer_bitmasked": (lambda: ti.root.pointer(ti.ij, 4).bitmasked(ti.ij, 4), (16, 16),
                          (1, 1)),
    "pointer_dense": (lambda: ti.root.pointer(ti.ij, (4, 2)).dense(ti.ij, (2, 8)), (8, 16),
                      (2, 8)),
    "bitmasked": (lambda: ti.root.bitmasked(ti.ij, (8, 8)), (8, 8), (1, 1)),
    "pointer_pointer": (lambda: ti.root.pointer(ti.ij, 2).pointer(ti.ij, 2).dense(ti.ij, 4),
                        (16, 16), (4, 4)),
}
ELEMENTS = {"scalar": (), "vector": (3,), "matrix": (2, 2)}


def _field(elem):
    if elem == "scalar":
        return ti.field(ti.f32)
    if elem == "vector":
        return ti.Vector.field(3, ti.f32)
    return ti.Matrix.field(2, 2, ti.f32)


@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("elem", sorted(ELEMENTS))
def test_copies_see_and_write_the_active_elements_only(tree, elem):
    build, shape, cell = TREES[tree]
    offset = (-3, 5)
    x = _field(elem)
    build().place(x, offset=offset)
    es = ELEMENTS[elem]
    rng = np.random.default_rng(7)
    on = np.zeros(shape, bool)
    want = np.zeros(shape + es, np.float32)
    for i, j in rng.integers(0, shape, (20, 2)):
        v = rng.normal(size=es).astype(np.float32) if es else np.float32(rng.normal())
        x[i + offset[0], j + offset[1]] = v.tolist() if es else float(v)
        want[i, j] = v
        a, b = i // cell[0] * cell[0], j // cell[1] * cell[1]
        on[a:a + cell[0], b:b + cell[1]] = True

    @ti.kernel
    def count() -> ti.i32:
        k = 0
        for I in ti.grouped(x):
            k += 1
        return k

    got = x.to_numpy()
    assert got.shape == shape + es and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    new = rng.normal(size=shape + es).astype(np.float32)
    x.from_numpy(new)
    mask = on.reshape(shape + (1,) * len(es))
    np.testing.assert_array_equal(x.to_numpy(), np.where(mask, new, 0))
    assert count() == on.sum()            # (from_numpy activated nothing)


@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("elem", sorted(ELEMENTS))
def test_fill_writes_the_active_elements_only(tree, elem):
    build, shape, cell = TREES[tree]
    x = _field(elem)
    build().place(x, offset=(2, -1))
    es = ELEMENTS[elem]
    on = np.zeros(shape, bool)
    for i, j in np.random.default_rng(3).integers(0, shape, (12, 2)):
        x[i + 2, j - 1] = [1.0] * es[0] if len(es) == 1 else \
            [[1.0] * es[1]] * es[0] if es else 1.0
        a, b = i // cell[0] * cell[0], j // cell[1] * cell[1]
        on[a:a + cell[0], b:b + cell[1]] = True
    value = np.arange(1, int(np.prod(es)) + 1, dtype=np.float32).reshape(es) if es else 2.5
    launches = []
    real = kernel_methods._fill_elements
    kernel_methods._fill_elements = lambda *a: launches.append(a) or real(*a)
    try:
        x.fill(value.tolist() if es else value)
        if es:
            x.fill(0.25)                      # a scalar for every entry, as numpy broadcasts
            x.fill(value.tolist())
    finally:
        kernel_methods._fill_elements = real
    assert len(launches) == (3 if es else 0)  # (a scalar field has a kernel of its own)
    mask = on.reshape(shape + (1,) * len(es))
    np.testing.assert_array_equal(x.to_numpy(), np.where(mask, value, 0).astype(np.float32))


def test_fill_of_an_integer_matrix_wraps_and_truncates_as_numpy_stores():
    x = ti.Matrix.field(2, 2, ti.u8)
    ti.root.pointer(ti.i, 4).dense(ti.i, 4).place(x)
    x[5] = [[0, 0], [0, 0]]
    x.fill([[-1, 256], [3.9, 7]])
    got = x.to_numpy()
    np.testing.assert_array_equal(got[4:8], [[[255, 0], [3, 7]]] * 4)
    assert got[:4].sum() == 0 and got[8:].sum() == 0


@pytest.mark.parametrize("elem", sorted(ELEMENTS))
def test_half_fields_round_once_as_numpy_stores(elem):
    # 1 + 2^-11 + 2^-30 rounds up to the next half (1 + 2^-10) directly, but to 1.0 through
    # an f32 first (1 + 2^-11, a tie, to even): the kernel path carries halves exactly
    es = ELEMENTS[elem]
    x = ti.field(ti.f16) if not es else ti.Vector.field(3, ti.f16) if len(es) == 1 else \
        ti.Matrix.field(2, 2, ti.f16)
    ti.root.pointer(ti.i, 4).dense(ti.i, 4).place(x)
    x[6] = [0.0] * es[0] if len(es) == 1 else [[0.0] * es[1]] * es[0] if es else 0.0
    tricky = 1 + 2.0 ** -11 + 2.0 ** -30
    launches = []
    real = kernel_methods._array_to_active
    kernel_methods._array_to_active = lambda *a: launches.append(a) or real(*a)
    try:
        x.from_numpy(np.full((16,) + es, tricky))
    finally:
        kernel_methods._array_to_active = real
    assert len(launches) == 1
    got = x.to_numpy()
    assert got.dtype == np.float16
    want = np.zeros((16,) + es, np.float16)
    want[4:8] = np.float16(tricky)
    assert np.float16(tricky) == 1 + 2.0 ** -10
    np.testing.assert_array_equal(got, want)
    x.fill(tricky)
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_a_recording_tape_records_no_copy_or_fill():
    # the copies and fills are kernels too, but no_grad ones: the Tape's launches and the
    # gradient are those of the user's kernel alone
    x = ti.field(ti.f32, needs_grad=True)
    ti.root.pointer(ti.i, 4).bitmasked(ti.i, 4).place(x, x.grad)
    v = ti.Vector.field(2, ti.f32)
    ti.root.pointer(ti.i, 4).dense(ti.i, 4).place(v)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in x:
            loss[None] += x[i] ** 2

    x[3], x[9] = 1.0, 2.0
    v[5] = [1.0, 1.0]
    launches = []
    real = kernel_methods._active_to_array
    kernel_methods._active_to_array = lambda *a: launches.append(a) or real(*a)
    try:
        with ti.ad.Tape(loss=loss) as tape:
            f()
            inside = x.to_numpy()
            v.fill([2.0, 3.0])
            v.from_numpy(v.to_numpy() * 2)
        after = x.to_numpy()
    finally:
        kernel_methods._active_to_array = real
    assert len(launches) == 3             # (two inside the Tape, one after)
    assert [k.name for k, _ in tape.calls] == ["f"]
    np.testing.assert_array_equal(inside, after)
    assert after[3] == 1 and after[9] == 2 and after.sum() == 3
    np.testing.assert_allclose(x.grad.to_numpy()[[3, 9]], [2.0, 4.0])
    np.testing.assert_array_equal(v.to_numpy()[4:8], [[4.0, 6.0]] * 4)
    assert v.to_numpy().sum() == 40


def test_a_full_list_is_visited_to_its_capacity_only():
    # a list's length counts on past its capacity (appends to a full list are dropped);
    # a struct-for over it, and so to_numpy, stops at the capacity
    x = ti.field(ti.i32)
    lists = ti.root.dense(ti.i, 3).dynamic(ti.j, 4)
    lists.place(x)

    @ti.kernel
    def fill(cell: ti.i32, n: ti.i32):
        for k in range(n):
            ti.append(lists, [cell], 1)

    @ti.kernel
    def visits() -> ti.i32:
        k = 0
        for i, j in x:
            k += x[i, j]
        return k

    fill(0, 2)
    fill(2, 7)
    assert ti.length(lists, [2]) == 7
    assert visits() == 2 + 4
    assert x.to_numpy().tolist() == [[1, 1, 0, 0], [0] * 4, [1] * 4]


@pytest.mark.parametrize("tree", sorted(TREES))
def test_element_access_builds_no_table_of_offsets(tree):
    # x[i, j] on a field whose tree splits an axis over levels (or pools its blocks) finds
    # the element's offset from its address terms: the table of every element's offsets
    # (8 bytes each; a 1024^3 field's 8 GiB) is built by whole-field access only
    build, shape, _ = TREES[tree]
    x = ti.Vector.field(2, ti.i32)
    build().place(x)
    rng = np.random.default_rng(3)
    want = {}
    for i, j in rng.integers(0, shape, (30, 2)):
        x[i, j] = [int(i), int(j) * 7]
        want[int(i), int(j)] = [int(i), int(j) * 7]
    assert all(x[k].to_list() == v for k, v in want.items())
    # (views where the layout gives one: a bitmasked grid's memory is one strided array)
    assert x._view is None or all(offs is None for _, offs in x._view)
    got = x.to_numpy()
    for k, v in want.items():
        assert got[k].tolist() == v


@pytest.mark.cpu_only
def test_an_element_of_a_huge_pointer_field():
    x = ti.field(ti.f32)
    ti.root.pointer(ti.ijk, 64).dense(ti.ijk, 16).place(x)
    x[1000, 5, 777] = 2.5
    assert x[1000, 5, 777] == 2.5 and x[1000, 5, 776] == 0
    assert x._view is None
    assert ti.sparse.memory_in_use(x) < 1 << 20
