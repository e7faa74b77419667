"""Quantized fields as containers: ti.BitpackedFields under SNodes, quant arrays, vector and
matrix fields, Python-scope access, layouts and the mistakes that raise."""
import re
import shutil

import numpy as np
import pytest

import fluxion as ti
from quant_reference import expect_fixed, expect_float, expect_int, expect_shared


def test_vector_field_with_a_shared_exponent_under_a_2d_dense():
    qf = ti.types.quant.float(exp=6, frac=8)
    v = ti.Vector.field(3, dtype=qf)
    cat = ti.field(ti.types.quant.int(2, False))
    voxel = ti.BitpackedFields(max_num_bits=32)
    voxel.place(v, shared_exponent=True)
    voxel.place(cat)
    ti.root.dense(ti.ij, (5, 7)).place(voxel)
    assert v.shape == (5, 7) and cat.shape == (5, 7)
    rng = np.random.default_rng(0)
    vals = (rng.normal(0, 1, (5, 7, 3)) * 2.0 ** rng.integers(-6, 6, (5, 7, 1))).astype(np.float32)
    cats = rng.integers(0, 4, (5, 7))
    cat.from_numpy(cats)
    v.from_numpy(vals)       # component by component: each re-encodes the others
    cur = [np.zeros(35, np.float32) for _ in range(3)]
    for c in range(3):
        cur[c] = vals[..., c].reshape(-1)
        cur = expect_shared(cur, [(8, True)] * 3, 6)
    want = np.stack(cur, -1).reshape(5, 7, 3)
    assert np.array_equal(v.to_numpy(), want)
    assert (cat.to_numpy() == cats).all()
    out = ti.Vector.field(3, ti.f32, shape=(5, 7))
    kinds = ti.field(ti.i32, shape=(5, 7))

    @ti.kernel
    def read():
        for i, j in v:
            out[i, j] = v[i, j]
            kinds[i, j] = cat[i, j]

    read()
    assert np.array_equal(out.to_numpy(), want)
    assert (kinds.to_numpy() == cats).all()
    # element access: read, write one component through the element, write a whole vector
    assert np.array_equal(v[2, 3].to_numpy(), want[2, 3])
    v[2, 3] = [1.5, -2.0, 0.25]
    assert v[2, 3].to_numpy().tolist() == [1.5, -2.0, 0.25]
    v[2, 3][1] = 3.0
    assert v[2, 3].to_numpy().tolist() == [1.5, 3.0, 0.25]
    v.fill(0.5)
    assert (v.to_numpy() == 0.5).all() and (cat.to_numpy() == cats).all()


def test_matrix_field_with_a_type_per_entry_placed_by_components():
    qflt = ti.types.quant.float(exp=8, frac=5, signed=True)
    qfxt = ti.types.quant.fixed(bits=10, signed=True, scale=0.1)
    a = ti.Matrix.field(2, 2, dtype=[[qflt, qfxt], [qflt, qfxt]])
    for row in range(2):
        bp = ti.BitpackedFields(max_num_bits=32)
        bp.place(a.get_scalar_field(row, 0), a.get_scalar_field(row, 1))
        ti.root.dense(ti.i, 3).place(bp)        # each row in its own tree
    with pytest.raises(ti.FluxionError, match="already placed"):
        ti.BitpackedFields(max_num_bits=32).place(a.get_scalar_field(0, 0))
    b = ti.Matrix.field(2, 2, ti.f32, shape=3)

    @ti.kernel
    def run():
        for i in range(3):
            a[i] = [[1.1 * i, 3.33], [-2.7, 10.07 * i]]
            b[i] = a[i] + a[i]

    run()
    for i in range(3):
        want = np.array([[expect_float([1.1 * i], 8, 5, True)[0],
                          expect_fixed([3.33], 10, True, 0.1)[0]],
                         [expect_float([-2.7], 8, 5, True)[0],
                          expect_fixed([10.07 * i], 10, True, 0.1)[0]]])
        assert np.array_equal(a[i].to_numpy(), want.astype(np.float32))
        assert np.array_equal(b[i].to_numpy(), (2 * want).astype(np.float32))
    with pytest.raises(RuntimeError, match="same compute type"):
        ti.Vector.field(2, dtype=[ti.types.quant.int(10), qfxt])


@pytest.mark.parametrize("levels", ["root", "nested", "offset"])
def test_quant_arrays_pack_neighbours_into_one_word(levels):
    q = ti.types.quant.int(7)                    # 4 per u32 word
    x = ti.field(q)
    n = 64
    if levels == "root":
        ti.root.quant_array(ti.i, 4, max_num_bits=32).place(x)
        n = 4
    elif levels == "nested":
        ti.root.dense(ti.i, 4).dense(ti.i, 4).quant_array(ti.i, 4, max_num_bits=32).place(x)
    else:
        ti.root.dense(ti.i, 16).quant_array(ti.i, 4, max_num_bits=32).place(x, offset=-10)
    lo = -10 if levels == "offset" else 0
    assert x.shape == (n,)
    values = np.arange(n) * 37 % 128 - 64
    seen = ti.field(ti.i32, shape=n)

    @ti.kernel
    def store():
        for i in range(lo, lo + n):
            x[i] = (i - lo) * 37 % 128 - 64

    @ti.kernel
    def visit():
        for i in x:                            # a struct-for over the packed field
            seen[i - lo] = x[i] + 1000

    store()
    assert x.snode.tree.buffer.nbytes == n // 4 * 4
    assert x.to_numpy().tolist() == values.tolist()
    visit()
    assert (seen.to_numpy() == values + 1000).all()
    # Python scope: one element leaves its word's neighbours alone
    k = 5 if n > 4 else 1
    x[lo + k] = -3
    values[k] = -3
    assert x.to_numpy().tolist() == values.tolist()
    assert x[lo + k - 1] == values[k - 1] and x[lo + k + 1] == values[k + 1]
    x.from_numpy(values[::-1].copy())
    assert x.to_numpy().tolist() == values[::-1].tolist()
    x.fill(200)                                  # wraps to 200 - 256
    assert (x.to_numpy() == 200 - 256).all()


def test_2d_quant_arrays_of_bits_and_of_fixed_point():
    bit = ti.types.quant.int(1, False)
    x = ti.field(bit)
    ti.root.dense(ti.ij, (8, 2)).quant_array(ti.j, 32, max_num_bits=32).place(x)
    y = ti.field(ti.types.quant.fixed(bits=8, max_value=2))
    ti.root.quant_array(ti.ij, (2, 4), max_num_bits=64).place(y)
    assert x.shape == (8, 64) and y.shape == (2, 4)

    @ti.kernel
    def fill():
        for i, j in x:
            x[i, j] = (i * 7 + j * 3) % 5 == 0
        for i, j in y:
            y[i, j] = i - j * 0.3

    fill()
    ii, jj = np.indices((8, 64))
    assert (x.to_numpy() == ((ii * 7 + jj * 3) % 5 == 0)).all()
    ii, jj = np.indices((2, 4))
    want = expect_fixed((ii - jj * np.float32(0.3)).reshape(-1), 8, True, 2 / 128)
    assert np.array_equal(y.to_numpy(), want.reshape(2, 4))


def test_bitpacked_words_sit_in_cells_beside_other_members():
    x = ti.field(ti.types.quant.int(16, False))
    y = ti.field(ti.types.quant.fixed(16, False))
    z = ti.field(ti.f32)
    n1 = ti.root.dense(ti.i, 32)
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(x)
    n1.place(bp)
    n2 = ti.root.dense(ti.i, 4)
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(y)
    n2.place(bp)
    n2.place(z)
    w = ti.field(ti.types.quant.int(4))
    n3 = ti.root.dense(ti.i, 4)
    n3.place(ti.field(ti.u8))
    bp = ti.BitpackedFields(max_num_bits=16)
    bp.place(w)
    n3.place(bp)
    assert (n1._cell_size_bytes, n2._cell_size_bytes, n3._cell_size_bytes) == (4, 8, 4)
    assert n3.children[1] is not None and n3._offset_bytes_in_parent_cell == 0
    y.from_numpy(np.linspace(0, 0.9, 4))
    z.from_numpy(np.arange(4) + 0.5)
    assert z.to_numpy().tolist() == [0.5, 1.5, 2.5, 3.5]
    assert np.array_equal(y.to_numpy(), expect_fixed(np.linspace(0, 0.9, 4), 16, False,
                                                     2.0 ** -16))


def test_quant_fields_as_template_arguments_and_in_prints(capfd):
    qa = ti.types.quant.int(6)
    a, b = ti.field(qa), ti.field(qa)
    for f in (a, b):
        bp = ti.BitpackedFields(max_num_bits=8)
        bp.place(f)
        ti.root.dense(ti.i, 3).place(bp)

    @ti.kernel
    def bump(f: ti.template(), by: ti.i32):
        for i in f:
            f[i] += by
            print(f[i])

    bump(a, 5)
    bump(b, 40)          # 40 wraps to -24
    bump(a, 1)
    ti.sync()
    assert a.to_numpy().tolist() == [6] * 3 and b.to_numpy().tolist() == [-24] * 3
    assert sorted(capfd.readouterr().out.split()) == sorted(["5"] * 3 + ["-24"] * 3 + ["6"] * 3)
    assert len(bump.instances) == 2


def test_out_of_bounds_quant_indices_are_reported_in_debug_mode():
    ti.init(arch=ti.cpu, debug=True)
    x = ti.field(ti.types.quant.int(4))
    ti.root.dense(ti.i, 2).quant_array(ti.i, 8, max_num_bits=32).place(x)

    @ti.kernel
    def poke(i: ti.i32):
        x[i] = 1

    poke(15)
    assert x[15] == 1
    with pytest.raises(IndexError, match=r"index \(16,\) out of bounds"):
        poke(16)
    with pytest.raises(IndexError):
        x[16] = 0


def test_reading_quantized_fields_in_a_differentiated_kernel():
    q = ti.field(ti.types.quant.fixed(bits=12, max_value=4.0))
    bp = ti.BitpackedFields(max_num_bits=16)
    bp.place(q)
    ti.root.dense(ti.i, 8).place(bp)
    calls = ti.field(ti.types.quant.int(8))
    bp = ti.BitpackedFields(max_num_bits=8)
    bp.place(calls)
    ti.root.dense(ti.i, 8).place(bp)
    w = ti.field(ti.f32, shape=8, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in w:
            calls[i] += 1               # the gradient kernel must not update it again
            loss[None] += q[i] * w[i] ** 2

    q.from_numpy(np.linspace(-3, 3, 8))
    w.from_numpy(np.arange(8, dtype=np.float32))
    with ti.ad.Tape(loss=loss):
        energy()
    assert np.allclose(w.grad.to_numpy(), 2 * q.to_numpy() * w.to_numpy())
    assert (calls.to_numpy() == 1).all()


def test_mistakes_with_quantized_fields_raise():
    qi = ti.types.quant.int(5)
    qf = ti.types.quant.float(exp=5, frac=10)
    with pytest.raises(ti.FluxionError, match="BitpackedFields"):
        ti.field(qi, shape=4)
    x = ti.field(qi)
    with pytest.raises(ti.FluxionError, match="BitpackedFields"):
        ti.root.dense(ti.i, 4).place(x)
    with pytest.raises(ti.TaichiCompilationError, match="At least 2 fields"):
        ti.BitpackedFields(max_num_bits=32).place(ti.field(qf), shared_exponent=True)
    with pytest.raises(TypeError, match="quant.float"):
        ti.BitpackedFields(max_num_bits=32).place(ti.field(qf), ti.field(qi), shared_exponent=True)
    with pytest.raises(ti.FluxionError, match="overflows: 36 bits used out of 32"):
        bp = ti.BitpackedFields(max_num_bits=32)
        bp.place(ti.field(ti.types.quant.int(20)))
        bp.place(ti.field(ti.types.quant.int(16)))
    with pytest.raises(TypeError, match="quantized types"):
        ti.BitpackedFields(max_num_bits=32).place(ti.field(ti.f32))
    with pytest.raises(ValueError, match="max_num_bits"):
        ti.BitpackedFields(max_num_bits=24)
    with pytest.raises(TypeError, match="quant.int or quant.fixed"):
        ti.root.quant_array(ti.i, 2, max_num_bits=32).place(ti.field(qf))
    with pytest.raises(ti.FluxionError, match="more than max_num_bits=32"):
        ti.root.quant_array(ti.i, 8, max_num_bits=32).place(ti.field(qi))
    qa = ti.root.quant_array(ti.i, 2, max_num_bits=32)
    qa.place(ti.field(qi))
    with pytest.raises(ti.FluxionError, match="only one field"):
        qa.place(ti.field(qi))
    with pytest.raises(ti.FluxionRuntimeError, match="quantized"):
        ti.field(ti.types.quant.fixed(10), needs_grad=True)
    with pytest.raises(ValueError, match="frac"):
        ti.types.quant.float(exp=8, frac=24, signed=False)
    with pytest.raises(TypeError, match="f32"):
        ti.types.quant.float(exp=8, frac=10, compute=ti.f64)
    with pytest.raises(TypeError, match="at least 20 bits"):
        ti.types.quant.int(20, compute=ti.i16)
    v = ti.Vector.field(2, qi)
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(v.get_scalar_field(0))
    ti.root.dense(ti.i, 2).place(bp)
    with pytest.raises(ti.FluxionError, match="component 1 .* has not been placed"):
        v.to_numpy()


def test_quant_type_names_and_defaults():
    assert repr(ti.types.quant.int(5)) == "qi5"
    assert repr(ti.types.quant.int(7, False)) == "qu7"
    assert ti.types.quant.int(7, False).compute is ti.u32
    assert ti.types.quant.fixed(8, max_value=2).scale == 2 / 128
    assert ti.types.quant.fixed(8, False, max_value=2).scale == 2 / 256
    assert ti.types.quant.float(exp=5, frac=10).compute is ti.f32
    assert ti.types.quant.int(5) == ti.types.quant.int(5, True)
    ti.init(arch=ti.cpu, default_ip=ti.i64, default_fp=ti.f64)
    assert ti.types.quant.int(5).compute is ti.i64
    assert ti.types.quant.int(5, False).compute is ti.u64
    assert ti.types.quant.fixed(5).compute is ti.f64
    assert expect_int([40], 6, True) == [-24]


@pytest.mark.cpu_only
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_quantized_accesses_assemble_for_cuda():
    from fluxion.runtime.cuda_jit import assemble_ptx
    pairs = []
    for word in (8, 16, 32, 64):
        a = ti.field(ti.types.quant.int(3))
        b = ti.field(ti.types.quant.fixed(4, max_value=2))
        bp = ti.BitpackedFields(max_num_bits=word)
        bp.place(a, b)
        ti.root.dense(ti.i, 16).place(bp)
        pairs.append((a, b))
    p = ti.field(ti.types.quant.float(exp=5, frac=10))
    q = ti.field(ti.types.quant.float(exp=5, frac=13, signed=False))
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(p, q, shared_exponent=True)
    ti.root.dense(ti.i, 16).place(bp)
    x = ti.field(ti.types.quant.int(7))
    ti.root.dense(ti.i, 4).quant_array(ti.i, 4, max_num_bits=32).place(x)
    out = ti.field(ti.f32, shape=16)

    @ti.kernel
    def k(v: ti.f32):
        for i in range(16):
            for a, b in ti.static(pairs):
                a[i] += 1
                b[i] = b[i] * v
            p[i] += v
            q[i] = v * i
            ti.atomic_max(x[i], 3)
            out[i] = p[i] + q[i] + x[i]
        p[0] = 1.0

    ptx = k.ptx(1.5, sm=90)
    assert re.search(r"atom\.[a-z.]*cas\.b32", ptx)      # the stores' compare-exchange
    assert not assemble_ptx(ptx)


def test_a_tape_refuses_to_lose_a_quantized_value_an_earlier_kernel_read():
    q = ti.field(ti.types.quant.fixed(bits=12, max_value=4.0))
    bp = ti.BitpackedFields(max_num_bits=16)
    bp.place(q)
    ti.root.dense(ti.i, 4).place(bp)
    w = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in w:
            loss[None] += q[i] * w[i]

    @ti.kernel
    def shift(by: ti.f32):
        for i in q:
            q[i] += by

    q.fill(1.0)
    w.fill(2.0)
    with ti.ad.Tape(loss=loss):
        shift(0.5)          # before any read: its old values are not needed
        energy()
    assert (w.grad.to_numpy() == 1.5).all()
    with pytest.raises(ti.FluxionAssertionError, match="cannot restore quantized values"):
        with ti.ad.Tape(loss=loss):
            energy()
            shift(0.5)      # energy's gradient needs the values it read


def test_forward_mode_replays_no_quantized_update():
    ti.init(arch=ti.cpu, debug=True)        # debug: the IR is verified after each pass
    c = ti.field(ti.types.quant.int(5))
    bp = ti.BitpackedFields(max_num_bits=8)
    bp.place(c)
    ti.root.dense(ti.i, 4).place(bp)
    w = ti.field(ti.f32, shape=4, needs_dual=True)
    m = ti.field(ti.f32, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        for i in w:
            ti.atomic_max(m[None], w[i])     # its tangent needs a second pass over the loop
            old = ti.atomic_add(c[i], 1)
            w[i] += 0.0 * old               # the replay needs the old value

    w.from_numpy(np.array([1.0, 2.0, 0.1, 3.0], np.float32))
    with ti.ad.FwdMode(loss=m, param=w, seed=[0, 0, 0, 1.0]):
        k()
    assert m.dual[None] == 1.0 and (c.to_numpy() == 1).all()
