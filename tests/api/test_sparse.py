"""Sparse SNodes (`pointer`, `bitmasked`, `dynamic`): cells are active or not, as in the original.
Before, they were laid out densely with no activity at all, and a struct-for over a pointer
field visited every cell: `672 == 19872` in taichi's own test. Each program runs on taichi
(the oracle) and on fluxion; some values are also checked against Python directly."""
import numpy as np
import pytest

import fluxion as ti
from taichi_ref import check_against_taichi


def sparse_struct_for(ti):
    x = ti.field(ti.i32)
    block = ti.root.pointer(ti.ij, (3, 3))
    block.dense(ti.ij, (8, 8)).place(x)

    @ti.kernel
    def activate():
        x[7, 7] = 1        # activates block (0, 0) only

    @ti.kernel
    def total() -> ti.i32:
        res = 0
        for I in ti.grouped(x):
            res += I[0] + I[1] * 2
        return res

    @ti.kernel
    def blocks() -> ti.i32:
        n = 0
        for i, j in block:
            n += 1 + i * 10 + j
        return n

    activate()
    return {"total": total(), "blocks": blocks()}


def activity_and_deactivation(ti):
    out = {}
    for kind in ("pointer", "bitmasked"):
        x = ti.field(ti.i32)
        blk = getattr(ti.root, kind)(ti.i, 4)
        blk.dense(ti.i, 2).place(x)
        x[3] = 5                     # Python scope writes activate too

        @ti.kernel
        def count() -> ti.i32:
            t = 0
            for i in x:
                t += 1
            return t

        @ti.kernel
        def deact(i: ti.i32):
            ti.deactivate(blk, [i])

        @ti.kernel
        def act(i: ti.i32):
            ti.activate(blk, [i])

        @ti.kernel
        def active(i: ti.i32) -> ti.i32:
            return ti.is_active(blk, [i])

        @ti.kernel
        def read(i: ti.i32) -> ti.i32:
            return x[i]

        @ti.kernel
        def active_up(i: ti.i32) -> ti.i32:
            # x.snode is x's own node: its parent is the dense level, the grandparent blk
            return ti.is_active(x.snode.parent(2), [i]) * 10 + ti.is_active(x.parent(2), [i])

        r = [count(), active(1), active(0), active_up(1), active_up(2)]
        deact(1)
        r += [read(3), x[3], count(), active(1)]   # a pointer's values go, a bitmask's stay
        act(2)
        r += [count(), read(3)]
        r.append(x.to_numpy())                      # inactive cells read as 0
        x.fill(9)                                   # only active cells
        r.append(x.to_numpy())
        x.from_numpy(np.arange(8, dtype=np.int32))  # does not activate
        r += [x.to_numpy(), count()]
        blk.deactivate_all()
        r += [count(), read(4), x.to_numpy()]
        out[kind] = r
    return out


def nested_and_offset(ti):
    a = ti.field(ti.f32)
    b = ti.Vector.field(2, ti.i32)
    outer = ti.root.pointer(ti.ij, 2)
    inner = outer.bitmasked(ti.ij, 2)
    inner.dense(ti.ij, 2).place(a, b, offset=(-4, 0))

    @ti.kernel
    def write():
        a[-3, 5] = 1.5
        b[-1, 0] = [1, 2]

    @ti.kernel
    def visit() -> ti.types.vector(3, ti.i32):
        n, s = 0, 0
        for i, j in a:
            n += 1
            s += i * 100 + j
        m = 0
        for I in ti.grouped(inner):
            m += 1
        return ti.Vector([n, s, m])

    write()
    v1 = visit()

    @ti.kernel
    def clear():
        for i, j in outer:
            if i == 0 and j == 1:
                ti.deactivate(outer, [i, j])

    clear()
    return {"v1": v1, "v2": visit(), "a": a.to_numpy(), "b": b.to_numpy(),
            "rescaled": [list(ti.rescale_index(a, outer, [k, 5])) for k in (0, 7)]}


def dynamic_lists(ti):
    n = 6
    x = ti.field(ti.i32)
    lst = ti.root.dense(ti.i, n).dynamic(ti.j, 16, chunk_size=4)
    lst.place(x)
    v = ti.Vector.field(2, ti.f32)
    ti.root.dynamic(ti.i, 8).place(v)
    out = {}

    @ti.kernel
    def fill(mul: ti.i32):
        for i in range(n):
            for j in range(i * mul):
                ti.append(lst, i, j * 10 + i)

    @ti.kernel
    def lengths() -> ti.types.vector(n, ti.i32):
        r = ti.Vector([0] * n)
        for i in ti.static(range(n)):
            r[i] = ti.length(lst, i)
        return r

    @ti.kernel
    def visit() -> ti.types.vector(2, ti.i32):
        c, s = 0, 0
        for i, j in x:
            c += 1
            s += x[i, j] * (j + 1)
        return ti.Vector([c, s])

    @ti.kernel
    def per_cell():
        for i in range(n):
            if i % 2 == 1:
                x[i].deactivate()
            else:
                x[i].append(-1)

    @ti.kernel
    def vec_ops() -> ti.i32:
        ti.loop_config(serialize=True)     # (appends from parallel iterations: any order)
        for k in range(3):
            v.append(ti.Vector([k, k * 0.5]))
        v[6] = ti.Vector([7, 7])           # grows the list to 7
        return v.length()

    fill(1)
    out["len1"] = lengths()
    out["visit1"] = visit()
    fill(2)
    per_cell()
    out["len2"] = lengths()
    out["visit2"] = visit()
    out["x"] = x
    out["vlen"] = vec_ops()
    out["v"] = v
    x[5, 12] = 3                         # Python scope grows a list too
    out["len3"] = lengths()
    lst.deactivate_all()
    out["len4"] = lengths()
    out["x_after"] = x
    return out


def sparse_grid(ti):
    g = ti.sparse.grid({"pos": ti.math.vec2, "mass": ti.f32,
                        "idx": ti.types.vector(4, ti.i32)}, shape=(10, 10))
    g[0, 0].pos = ti.math.vec2(1, 2)
    g[3, 4].mass = 1.5
    g[3, 4].idx[2] = 123
    return {"usage": ti.sparse.usage(g), "mass": g.mass, "idx": g.idx, "shape": list(g.shape)}


def quantized_under_pointer(ti):
    """Quantized fields (a bit-packed fixed-point field, a quant_array of 7-bit ints) under a
    pointer: writes from Python and from kernels activate their blocks (they did not: the
    struct-for then skipped the written cells and kept zeros, without an error)."""
    fx = ti.field(dtype=ti.types.quant.fixed(bits=32, max_value=1024))
    pack = ti.BitpackedFields(max_num_bits=32)
    pack.place(fx)
    cells = ti.root.pointer(ti.i, 4)
    cells.dense(ti.i, 16).place(pack)
    q = ti.field(dtype=ti.types.quant.int(7))
    qcells = ti.root.pointer(ti.i, 4)
    qcells.dense(ti.i, 4).quant_array(ti.i, 4, max_num_bits=32).place(q)
    for i in range(0, 16):
        fx[i] = 0           # block 0, from Python

    @ti.kernel
    def write():
        fx[40] = 0.0        # block 2, from a kernel
        for i in range(64):
            if i // 16 % 2 == 0:
                q[i] = i % 50

    @ti.kernel
    def visit():
        for i in fx:
            fx[i] = ti.cast(i, ti.f32)
        for i in q:
            q[i] -= 1

    act = ti.field(ti.i32, shape=(2, 4))

    @ti.kernel
    def activity():
        for b in range(4):
            act[0, b] = ti.is_active(cells, [b])
            act[1, b] = ti.is_active(qcells, [b])

    @ti.kernel
    def drop_first():
        ti.deactivate(cells, [0])
        ti.deactivate(qcells, [0])

    write()
    visit()
    activity()
    out = {"fx": [fx[i] for i in range(64)], "q": [q[i] for i in range(64)],
           "fx_blocks": list(act.to_numpy()[0]), "q_blocks": list(act.to_numpy()[1])}
    # deactivation zeroes what the cells held (it crashed on bit-packed words)
    drop_first()
    out["after_drop"] = [fx[3], q[3], fx[40], q[40]]
    cells.deactivate_all()
    qcells.deactivate_all()
    out["after_all"] = [fx[40], q[40]]
    return out


def blockwise_struct_fors(ti):
    """Struct-fors that visit active blocks and loop over their elements (pointer and
    bitmasked blocks, two sparse levels, offsets, ti.grouped, continue), and a serial one."""
    x = ti.field(ti.i32)
    outer = ti.root.pointer(ti.ij, (3, 2))
    outer.bitmasked(ti.ij, (2, 4)).dense(ti.ij, (4, 2)).place(x, offset=(-5, 3))
    y = ti.field(ti.f32)
    ti.root.pointer(ti.i, 6).dense(ti.i, 5).place(y)
    out = ti.field(ti.i32, shape=6)

    @ti.kernel
    def fill():
        for i, j in ti.ndrange((-5, 19), (3, 19)):
            if (i * 7 + j * 3) % 11 == 0:
                x[i, j] = i * 100 + j
        for i in range(30):
            if i % 7 == 2:
                y[i] = i * 0.5

    @ti.kernel
    def visit():
        for i, j in x:
            if j % 3 == 0:
                continue
            out[0] += x[i, j] + i - j
            ti.atomic_max(out[1], i * 64 + j)
        for I in ti.grouped(x):
            out[2] += I[0] * 3 + I[1]
        for i in y:
            out[3] += ti.cast(y[i] * 2, ti.i32) + 1
        ti.loop_config(serialize=True)
        for i in y:
            out[4] = out[4] * 3 % 1000 + i
        for i, j in x:
            out[5] += 1

    fill()
    visit()
    return {"out": out}


def test_struct_lists_against_python():
    got = struct_lists(ti)
    assert got["counts"] == [5, 3]
    # after the second build the list holds k = 0, 1, 2
    np.testing.assert_allclose(got["out"].to_numpy(), [sum(3 * k for k in range(3)),
                                                       sum(k * 0.5 for k in range(3)), 0, 0])


def test_a_struct_member_named_like_a_list_method_is_the_member():
    Spring = ti.types.struct(length=ti.f32, a=ti.i32)
    springs = Spring.field(shape=3)

    @ti.kernel
    def fill():
        for i in springs:
            springs.length[i] = i * 1.5

    fill()
    np.testing.assert_allclose(springs.length.to_numpy(), [0.0, 1.5, 3.0])


def test_a_serial_struct_for_breaks_out_of_the_whole_loop():
    """Where the original refuses `break` in a top-level struct-for, fluxion runs a serialized
    one in order and `break` leaves it all: the block-wise form (an inner loop per block)
    must not be used there, or the break would only end the block."""
    y = ti.field(ti.f32)
    ti.root.pointer(ti.i, 6).dense(ti.i, 5).place(y)
    out = ti.field(ti.i32, shape=2)
    for i in (2, 3, 9, 11, 26):
        y[i] = 1.0

    @ti.kernel
    def run():
        ti.loop_config(serialize=True)
        for i in y:
            if i > 9:
                break
            out[0] += 1
            out[1] = i

    run()
    # blocks 0 (elements 0..4) and 1 (5..9) are active, and 2 and 5; the loop stops at 10
    assert list(out.to_numpy()) == [10, 9]


def struct_lists(ti):
    """A struct field placed in a dynamic node is a list: `edges.deactivate()`, `append` of a
    struct value and `length()` in kernels (they raised 'no attribute deactivate'; and a
    deactivation before any other use of the list's fields crashed the compile)."""
    Edge = ti.types.struct(a=ti.math.vec2, w=ti.f32)
    edges = Edge.field()
    ti.root.dynamic(ti.i, 64, chunk_size=8).place(edges)
    out = ti.field(ti.f32, shape=4)

    @ti.kernel
    def build(n: ti.i32) -> ti.i32:
        edges.deactivate()
        for k in range(n):
            edges.append(Edge(ti.Vector([k, 2 * k]), k * 0.5))
        return edges.length()

    @ti.kernel
    def total():
        for k in range(edges.length()):
            out[0] += edges[k].a[0] + edges[k].a[1]
            out[1] += edges[k].w

    counts = [build(5), build(3)]
    total()
    return {"counts": counts, "out": out}


def bitmasked_deactivate_all(ti):
    """deactivate_all of a bitmasked node under a pointer: its cells inactive, their values
    and the pointer's cells kept (it raised ValueError from the pointer's memory, of which
    the bitmasked node had none to give back)."""
    x = ti.field(ti.f32)
    a = ti.root.pointer(ti.i, 4)
    b = a.bitmasked(ti.i, 4)
    b.place(x)
    out = ti.field(ti.i32, shape=3)

    @ti.kernel
    def look():
        out[0] = ti.is_active(b, [5]) * 10 + ti.is_active(a, [1])
        for i in x:
            out[1] += 1

    x[5] = 1
    x[14] = 2
    b.deactivate_all()
    look()
    return {"x5": x[5], "out": out}


def test_sparse_programs_match_taichi():
    check_against_taichi(sparse_struct_for, activity_and_deactivation, nested_and_offset,
                         dynamic_lists, sparse_grid, quantized_under_pointer,
                         blockwise_struct_fors, struct_lists, bitmasked_deactivate_all)


def test_quantized_fields_under_a_pointer_activate_on_write():
    got = quantized_under_pointer(ti)
    assert got["fx_blocks"] == [1, 0, 1, 0] and got["q_blocks"] == [1, 0, 1, 0]
    active = [i // 16 in (0, 2) for i in range(64)]
    np.testing.assert_allclose(got["fx"], [i if a else 0 for i, a in enumerate(active)],
                               atol=1e-3)
    assert got["q"] == [i % 50 - 1 if a else 0 for i, a in enumerate(active)]
    assert got["after_drop"] == [0, 0, 40, 39] and got["after_all"] == [0, 0]


def test_struct_for_over_pointer_visits_active_cells_only():
    got = sparse_struct_for(ti)
    # block (0, 0) holds cells 0..7 x 0..7; the others were never written
    assert got["total"] == sum(i + 2 * j for i in range(8) for j in range(8))
    assert got["blocks"] == 1


def test_axes_are_compressed_like_the_original():
    x = ti.field(ti.i32)
    ti.root.dense(ti.k, 10).place(x)
    y = ti.field(ti.i32)
    ti.root.dense(ti.k, 4).dense(ti.i, 3).place(y)
    assert x.shape == (10,) and y.shape == (3, 4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i * 3
        for i, k in y:
            y[i, k] = i * 10 + k

    fill()
    assert x.to_numpy().tolist() == [i * 3 for i in range(10)]
    assert y.to_numpy().tolist() == [[i * 10 + k for k in range(4)] for i in range(3)]


@pytest.mark.parametrize("what", ["activate", "deactivate"])
def test_a_cell_index_outside_the_snode_is_an_error_not_a_write_past_it(what):
    # ti.activate and ti.deactivate store into the node's cell states: an index past the
    # node wrote past them, without a word (with any checks), and could corrupt the process
    x = ti.field(ti.f32)
    p = ti.root.pointer(ti.i, 4)
    p.dense(ti.i, 4).place(x)
    op = getattr(ti, what)

    @ti.kernel
    def k(i: ti.i32):
        op(p, [i])

    k(2)
    for bad in (4, -1, 1 << 20):
        with pytest.raises(ti.FluxionOutOfBoundsError, match=f"ti.{what} on an SNode of shape"):
            k(bad)
    assert x.to_numpy().sum() == 0


@pytest.mark.parametrize("debug", [False, True])
def test_appending_to_a_full_list(debug):
    # by default a full list keeps its values and its length counts on (the original's lists
    # grow past their extent instead); with debug=True appending to it is an error naming
    # the cell
    ti.init(arch=ti.cpu, debug=debug)
    x = ti.field(ti.i32)
    lists = ti.root.dense(ti.i, 3).dynamic(ti.j, 4)
    lists.place(x)

    @ti.kernel
    def fill(cell: ti.i32, n: ti.i32):
        for k in range(n):
            ti.append(lists, [cell], 10 + k)

    fill(1, 4)
    # (a parallel loop: the positions the values took vary)
    assert sorted(x.to_numpy()[1].tolist()) == [10, 11, 12, 13]
    if debug:
        with pytest.raises(ti.FluxionOutOfBoundsError,
                           match=r"the list in cell \(2,\) of a dynamic SNode of capacity 4 is full"):
            fill(2, 6)
    else:
        fill(2, 6)
        assert ti.length(lists, [2]) == 6
        got = x.to_numpy()
        assert got[0].tolist() == [0] * 4 and sorted(got[1].tolist()) == [10, 11, 12, 13]
        assert len(set(got[2].tolist())) == 4 and set(got[2].tolist()) <= set(range(10, 16))


def test_activate_below_an_inactive_pointer_activates_the_pointer_cell():
    # as a write does (decided 2026-11-30; Taichi 1.7.4 sets the child's state alone, and its
    # struct-for then visits nothing there)
    x = ti.field(ti.f32)
    ptr = ti.root.pointer(ti.ij, 8)
    blk = ptr.bitmasked(ti.ij, 4)
    blk.place(x)

    @ti.kernel
    def act():
        ti.activate(blk, [9, 9])

    @ti.kernel
    def visited() -> ti.i32:
        s = 0
        for i, j in x:
            s += i * 100 + j + 1
        return s

    @ti.kernel
    def states() -> ti.i32:
        return ti.is_active(ptr, [2, 2]) * 10 + ti.is_active(blk, [9, 9])

    assert (visited(), states()) == (0, 0)
    act()
    assert (visited(), states()) == (910, 11)
    x[1, 2] = 3.0                 # another block: the first keeps its state
    assert (visited(), states()) == (910 + 103, 11)
