"""What stopped Taichi's own example programs on fluxion (issue 15): each program below runs on
taichi (the oracle, where installed) and on fluxion, and their values must agree."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion as ti
from taichi_ref import check_against_taichi


def list_stores(ti):
    """`R = [a, b, c]` on a vector variable (mciso_advanced): the list's entries are stored."""
    out = ti.Vector.field(3, ti.f32, shape=4)
    m = ti.Matrix.field(2, 2, ti.f32, shape=2)

    @ti.kernel
    def k():
        for I in ti.grouped(ti.ndrange(4)):
            R = float(ti.Vector([I[0], 1, 2]))
            i = I[0]
            p = 0.5
            if i % 2 == 0:
                R = [i + p, i, 3]
            else:
                R = (i, i + p, 7)
            out[i] = R
        M = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[0] = M
        M = [[5, 6.5], [7, 8]]
        m[1] = M

    k()
    return {"vec": out, "mat": m}


def rounding_with_dtype(ti):
    """`ti.round(x, dtype=ti.i32)` (differential_evolution), also on vectors and positional."""
    out = ti.field(ti.i32, shape=12)
    outf = ti.field(ti.f64, shape=4)

    @ti.func
    def rand_int(r: ti.f32, low: ti.i32, high: ti.i32) -> ti.i32:
        return ti.round(r * (high - low) + low, dtype=ti.i32)

    @ti.kernel
    def k():
        v = ti.Vector([-1.5, 1.2, 2.7, -0.4])
        a = ti.round(v, dtype=ti.i32)
        b = ti.floor(v, dtype=ti.i32)
        c = ti.ceil(v, ti.f64)
        for i in ti.static(range(4)):
            out[i] = a[i]
            out[4 + i] = b[i]
            outf[i] = c[i]
        out[8] = rand_int(0.26, 0, 20)
        out[9] = ti.floor(-2.5, dtype=ti.i32)
        out[10] = ti.ceil(2.25, dtype=ti.i32)
        out[11] = ti.round(3.6, ti.i32)

    k()
    return {"i": out, "f": outf}


def addresses_of_snode(ti):
    """`ti.get_addr(x.snode, [i, j])` (print_offset): the field's layout in memory."""
    a = ti.field(dtype=ti.i32)
    ti.root.dense(ti.ij, (1, 2)).dense(ti.ij, 2).dense(ti.ij, 2).place(a)

    @ti.kernel
    def fill():
        for i, j in a:
            base = ti.get_addr(a.snode, [0, 0])
            a[i, j] = int(ti.get_addr(a.snode, [i, j]) - base) // 4

    fill()
    return {"a": a}


def deactivating_everything(ti):
    """`ti.deactivate_all_snodes()` (explicit_activation, taichi_bitmasked): every sparse cell
    of every tree inactive; pointers' values read 0 afterwards."""
    x = ti.field(ti.i32)
    b1 = ti.root.pointer(ti.i, 4)
    b2 = b1.bitmasked(ti.i, 4)
    b2.place(x)
    y = ti.field(ti.f32)
    ti.root.bitmasked(ti.ij, (4, 4)).place(y)
    d = ti.field(ti.i32, shape=3)

    @ti.kernel
    def count() -> ti.types.vector(3, ti.i32):
        nx, ny, sx = 0, 0, 0
        for i in x:
            nx += 1
            sx += x[i]
        for i, j in y:
            ny += 1
        return ti.Vector([nx, ny, sx])

    @ti.kernel
    def active() -> ti.types.vector(2, ti.i32):
        return ti.Vector([ti.is_active(b1, [2]), ti.is_active(b2, [9])])

    @ti.kernel
    def activate():
        x[3] = 5
        x[9] = 7
        y[1, 2] = 1.0
        d[1] = 4

    activate()
    before = count()
    ti.deactivate_all_snodes()
    after = count()
    activate()
    again = count()
    return {"before": before, "after": after, "again": again, "x9": x[9], "d": d,
            "active": active()}


def entries_placed_one_by_one(ti):
    """`v.get_scalar_field(k)` of a field not placed yet, each entry placed in its own SNode
    (of one tree): the field and its entries share that storage."""
    temp_a = ti.field(ti.f32)
    temp_c = ti.field(ti.f32)
    v = ti.Vector.field(3, ti.i32)
    x, y, z = (v.get_scalar_field(k) for k in range(3))
    s1 = ti.root.pointer(ti.i, 4)
    s2 = s1.dense(ti.i, 2)
    s2.pointer(ti.i, 8).place(temp_a)
    s2.dense(ti.i, 16).place(x)
    s1.dense(ti.i, 2).dense(ti.i, 16).place(y)
    s8 = s1.dense(ti.i, 2)
    s8.dense(ti.i, 32).place(temp_c)
    s8.dense(ti.i, 16).place(z)

    @ti.kernel
    def run():
        for i in range(128):
            for j in ti.static(range(3)):   # (taichi indexes such a field dynamically only
                v[i][j] = i * j             # when its entries are evenly spaced)
        for i in range(100):
            y[i] += 1

    run()
    z[5] = -4
    return {"v": v, "x": x, "y": y, "z": z, "v5": list(v[5]), "shape": list(y.shape)}


def sparse_fills(ti):
    """`x.fill(v)` in Python scope of fields under pointer and bitmasked SNodes (a kernel
    since mgpcg_advanced): active cells take the value, inactive ones stay inactive."""
    out = {}
    for dt, value in ((ti.f32, 2.5), (ti.f64, -1.0 / 3), (ti.i32, -7), (ti.u8, 300),
                      (ti.i32, 3.9), (ti.u64, 12345)):
        x = ti.field(dt)
        blk = ti.root.pointer(ti.ij, 4).dense(ti.ij, 2)
        blk.place(x)
        y = ti.field(dt)
        ti.root.bitmasked(ti.i, 8).place(y)

        @ti.kernel
        def touch():
            x[1, 2] = 1
            x[6, 7] = 1
            y[3] = 1

        @ti.kernel
        def count() -> ti.i32:
            n = 0
            for i, j in x:
                n += 1
            for i in y:
                n += 1
            return n

        touch()
        x.fill(value)
        y.fill(value)
        out[f"{dt}-{value}"] = {"x": x, "y": y, "active": count(), "x67": x[6, 7]}
    return out


def test_example_blockers_match_taichi():
    check_against_taichi(list_stores, rounding_with_dtype, addresses_of_snode,
                         deactivating_everything, entries_placed_one_by_one, sparse_fills)


def local_vector_bounds(ti):
    """With bounds checks, a kernel-value index past a local vector or matrix fails (it stored
    nothing and read the nearest entry before)."""
    @ti.kernel
    def access_vec(i: ti.i32):
        x = ti.Vector([1, 0])
        x[i] = 42
        assert x[i] == 42

    @ti.kernel
    def access_mat(i: ti.i32, j: ti.i32):
        y = ti.Matrix([[1, 1, 1], [2, 2, 2], [3, 3, 3]])
        y[i, j] = 42
        assert y[i, j] == 42

    access_vec(1)
    access_mat(2, 2)
    out = {}
    for name, f, args in (("v2", access_vec, (2,)), ("v-1", access_vec, (-1,)),
                          ("m23", access_mat, (2, 3)), ("m30", access_mat, (3, 0))):
        try:
            f(*args)
            out[name] = "no error"
        except AssertionError as e:
            out[name] = "Out of bound access" in str(e)
    return out


def test_local_matrix_bounds_are_checked_in_debug_mode():
    check_against_taichi(local_vector_bounds, debug=True, check_out_of_bound=True)


def test_get_addr_rejects_what_is_not_a_field():
    import pytest
    a = ti.field(ti.i32)
    node = ti.root.dense(ti.i, 4)
    node.place(a)

    @ti.kernel
    def k() -> ti.u64:
        return ti.get_addr(node, [0])

    with pytest.raises(ti.FluxionSyntaxError, match="field or a field's `.snode`"):
        k()


_ONE_PAST_THE_END = """
import gc
import fluxion as ti
# bounds checks off, as the original system runs (with them on, the store is an error)
ti.init(arch=ti.cpu, check_out_of_bound=False)
fields = [ti.field(ti.f32, shape=(4, 40)) for _ in range(40)]
for n, f in enumerate(fields):
    f.fill(n)

@ti.kernel
def past(x: ti.template(), v: ti.f32):
    for j in range(40):
        x[4, j] = v              # one row past the end, as a buggy program writes

for n, f in enumerate(fields):
    past(f, -1.0)
bad = [n for n, f in enumerate(fields) if not (f.to_numpy() == n).all()]
junk = [bytearray(160) for _ in range(2000)]
del fields, junk
gc.collect()
more = [ti.field(ti.f32, shape=(4, 40)) for _ in range(40)]
for f in more:
    f.fill(1.0)
print("CLEAN" if not bad else f"CHANGED {bad}")
"""


def test_writing_one_row_past_a_fields_end_corrupts_nothing(tmp_path):
    # differential_evolution writes best_fit[n] and all_pop[n, ...] of fields of n rows. The
    # original system's memory pool absorbs that; fluxion's tree buffers keep a free row after
    # them for it (lang/tree_buffer.py) instead of overwriting the allocator's data, which
    # aborted the process ("malloc(): unaligned tcache chunk detected").
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(os.path.dirname(ti.__file__), ".."), os.environ.get("PYTHONPATH", "")]))
    env.pop("FLUXION_ARCH", None)
    prog = tmp_path / "past_the_end.py"        # kernels need a source file
    prog.write_text(textwrap.dedent(_ONE_PAST_THE_END))
    r = subprocess.run([sys.executable, str(prog)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "CLEAN" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])


@pytest.mark.cpu_only      # (the CUDA backend's device buffers have the free row after only)
def test_reading_one_row_before_a_fields_start_reads_the_free_row():
    # Taichi's eulerfluid2d reads cf[i - 1, j] at i = 0 (and cf[i + 1, j] at the last row).
    # Below the tree's buffer lay other memory (the process crashed there); the tree keeps a
    # zeroed free row before its start too (lang/tree_buffer.py), so the stencil reads 0
    # with bounds checks off, the default (with them on, the read is an error).
    ti.init(arch=ti.cpu, check_out_of_bound=False)
    n = 64
    c = ti.field(ti.f32, shape=(n, n))
    out = ti.field(ti.f32, shape=(n, n))
    c.fill(1.0)

    @ti.kernel
    def stencil():
        for i, j in c:
            out[i, j] = c[i - 1, j] + c[i + 1, j]

    stencil()
    got = out.to_numpy()
    np.testing.assert_array_equal(got[1:-1], 2.0)
    np.testing.assert_array_equal(got[0], 1.0)      # c[-1, j]: the free row before, zeros
    buf = c._snode.tree.buffer
    raw = buf.base
    start = buf.ctypes.data - raw.ctypes.data
    assert start >= n * 4 and not raw[:start].any()  # the row below the start: kept free
    ti.init(arch=ti.cpu, check_out_of_bound=True)    # checks on: the read is an error
    c = ti.field(ti.f32, shape=(n, n))
    out = ti.field(ti.f32, shape=(n, n))

    @ti.kernel
    def stencil2():
        for i, j in c:
            out[i, j] = c[i - 1, j] + c[i + 1, j]

    with pytest.raises(ti.FluxionOutOfBoundsError, match=r"stencil2[\s\S]*out of bounds for field 'c'"):
        stencil2()
