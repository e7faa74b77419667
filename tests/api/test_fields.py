"""Fields and layouts: shapes, dtypes, placement (AoS, nested dense), offsets, Python-scope
access, numpy round trips, and kernels reading/writing every layout against a numpy reference.

Every expected value is computed here (numpy or arithmetic), never copied from fluxion.
"""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    # tests/conftest.py did not exist when this file was written; a second ti.init is harmless
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


ALL_DTYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64, ti.f16, ti.f32, ti.f64]
NP_OF = {ti.i8: np.int8, ti.i16: np.int16, ti.i32: np.int32, ti.i64: np.int64,
         ti.u8: np.uint8, ti.u16: np.uint16, ti.u32: np.uint32, ti.u64: np.uint64,
         ti.f16: np.float16, ti.f32: np.float32, ti.f64: np.float64}


@ti.kernel
def scale_add_index(a: ti.template()):
    """a[I] = a[I] * 2 + (sum of the indices), for any scalar field of any rank."""
    for I in ti.grouped(a):
        s = 0
        for d in ti.static(range(I.n)):
            s += I[d]
        a[I] = a[I] * 2 + s


def index_sum(shape):
    """numpy reference of `sum of the indices` over a shape."""
    if not shape:
        return np.zeros((), np.int64)
    return np.sum(np.indices(shape), axis=0)


# -- shapes and dimensions ------------------------------------------------------------------
@pytest.mark.parametrize("ndim", range(0, 9))
def test_field_shape_for_every_rank(ndim):
    shape = tuple(2 + (d % 2) for d in range(ndim))   # 2,3,2,3,... keeps 8-D at 1296 cells
    x = ti.field(ti.i32, shape=shape)
    assert x.shape == shape
    assert x.dtype == ti.i32
    a = x.to_numpy()
    assert a.shape == shape and a.dtype == np.int32
    assert not a.any()                                 # fields start zeroed


@pytest.mark.parametrize("ndim", [1, 2, 3, 5, 8])
def test_kernel_on_every_rank_agrees_with_numpy(ndim):
    shape = tuple(2 + (d % 2) for d in range(ndim))
    x = ti.field(ti.i32, shape=shape)
    rng = np.random.default_rng(ndim)
    init = rng.integers(-100, 100, size=shape).astype(np.int32)
    x.from_numpy(init)
    scale_add_index(x)
    np.testing.assert_array_equal(x.to_numpy(), init * 2 + index_sum(shape))


def test_zero_dim_field_uses_none_index():
    x = ti.field(ti.f32, shape=())
    assert x.shape == ()
    x[None] = 2.5
    assert x[None] == 2.5

    @ti.kernel
    def bump():
        x[None] = x[None] * 4 + 1

    bump()
    assert x[None] == 2.5 * 4 + 1
    assert x.to_numpy().shape == ()
    assert float(x.to_numpy()) == 11.0


def test_integer_shape_means_one_dimension():
    assert ti.field(ti.f32, shape=7).shape == (7,)
    assert ti.field(ti.f32, shape=np.int64(5)).shape == (5,)


def test_more_than_eight_dimensions_is_rejected():
    with pytest.raises(ValueError):
        ti.field(ti.i32, shape=(1,) * 9)


# -- dtypes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_every_dtype_round_trip_and_kernel(dt):
    x = ti.field(dt, shape=6)
    assert x.dtype == dt
    vals = np.arange(6).astype(NP_OF[dt]) * 3
    x.from_numpy(vals)
    out = x.to_numpy()
    assert out.dtype == NP_OF[dt]
    np.testing.assert_array_equal(out, vals)
    scale_add_index(x)
    expected = (vals.astype(np.float64) * 2 + np.arange(6)).astype(NP_OF[dt])
    np.testing.assert_array_equal(x.to_numpy(), expected)
    # Python-scope scalar access returns a Python number of the right kind
    assert x[4] == expected[4]
    assert isinstance(x[4], float if np.issubdtype(NP_OF[dt], np.floating) else int)


@pytest.mark.parametrize("dt", [ti.i8, ti.u8, ti.i16, ti.u16, ti.u32, ti.i64, ti.u64], ids=str)
def test_integer_dtype_extremes(dt):
    info = np.iinfo(NP_OF[dt])
    x = ti.field(dt, shape=2)
    x[0] = int(info.min)
    x[1] = int(info.max)
    assert x[0] == int(info.min) and x[1] == int(info.max)

    @ti.kernel
    def copy(src: ti.template(), dst: ti.template()):
        for i in src:
            dst[i] = src[i]

    y = ti.field(dt, shape=2)
    copy(x, y)
    np.testing.assert_array_equal(y.to_numpy(), np.array([info.min, info.max], NP_OF[dt]))


def test_python_type_and_numpy_dtype_annotations():
    assert ti.field(float, shape=1).dtype == ti.f32
    assert ti.field(int, shape=1).dtype == ti.i32
    assert ti.field(np.float64, shape=1).dtype == ti.f64
    assert ti.field(np.uint16, shape=1).dtype == ti.u16
    assert ti.field(ti.float32, shape=1).dtype == ti.f32
    ti.init(arch=ti.cpu, default_fp=ti.f64, default_ip=ti.i64)
    assert ti.field(float, shape=1).dtype == ti.f64
    assert ti.field(int, shape=1).dtype == ti.i64


def test_unknown_dtype_raises_type_error():
    with pytest.raises(TypeError):
        ti.field(np.complex64, shape=3)
    with pytest.raises(TypeError):
        ti.field(str, shape=3)


# -- Python-scope access --------------------------------------------------------------------
def test_python_scope_get_set_fill_2d():
    x = ti.field(ti.f32, shape=(3, 4))
    x.fill(1.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((3, 4), 1.5, np.float32))
    x[2, 3] = -7
    x[0, 1] = 0.25
    ref = np.full((3, 4), 1.5, np.float32)
    ref[2, 3] = -7
    ref[0, 1] = 0.25
    np.testing.assert_array_equal(x.to_numpy(), ref)
    assert x[2, 3] == -7.0 and x[0, 1] == 0.25 and x[1, 1] == 1.5


def test_to_numpy_is_a_copy_and_from_numpy_copies_in():
    x = ti.field(ti.i32, shape=4)
    src = np.array([1, 2, 3, 4], np.int32)
    x.from_numpy(src)
    src[0] = 100                       # later changes to the source are not seen
    a = x.to_numpy()
    a[1] = 200                         # changing the copy does not write the field
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 4])


def test_to_numpy_dtype_argument():
    x = ti.field(ti.i32, shape=3)
    x.from_numpy(np.array([1, 2, 3]))
    a = x.to_numpy(dtype=np.float64)
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])


def test_from_numpy_shape_mismatch_names_both_shapes():
    x = ti.field(ti.f32, shape=(4, 5))
    with pytest.raises(ValueError) as ei:
        x.from_numpy(np.zeros((5, 4), np.float32))
    msg = str(ei.value)
    assert "(4, 5)" in msg and "(5, 4)" in msg
    with pytest.raises(ValueError) as ei:
        x.from_numpy(np.zeros(20, np.float32))
    assert "(4, 5)" in str(ei.value) and "(20,)" in str(ei.value)
    np.testing.assert_array_equal(x.to_numpy(), np.zeros((4, 5)))   # nothing was written


def test_python_scope_index_errors():
    x = ti.field(ti.i32, shape=(3, 4))
    with pytest.raises(IndexError):
        x[3, 0]
    with pytest.raises(IndexError):
        x[0, -1]
    with pytest.raises(ti.FluxionIndexError):
        x[1]                            # one index for a 2-D field
    with pytest.raises(IndexError):
        x[0, 4] = 1
    np.testing.assert_array_equal(x.to_numpy(), np.zeros((3, 4)))


def test_shape_and_dtype_properties():
    x = ti.field(ti.f64, shape=(2, 7))
    assert x.shape == (2, 7) and x.dtype == ti.f64
    v = ti.Vector.field(3, ti.i16, shape=(5,))
    assert v.shape == (5,) and v.dtype == ti.i16 and v.n == 3
    m = ti.Matrix.field(2, 3, ti.f32, shape=(4, 4))
    assert m.shape == (4, 4) and m.dtype == ti.f32 and (m.n, m.m) == (2, 3)


def test_name_is_used_in_messages():
    x = ti.field(ti.f32, shape=3, name="temperature")
    with pytest.raises(IndexError, match="temperature"):
        x[3]


# -- vector and matrix fields ---------------------------------------------------------------
def test_vector_field_python_scope():
    v = ti.Vector.field(3, ti.f32, shape=(2, 3))
    assert v.to_numpy().shape == (2, 3, 3)
    v[1, 2] = [1, 2, 3]
    e = v[1, 2]
    assert list(e.to_numpy()) == [1.0, 2.0, 3.0]
    ref = np.zeros((2, 3, 3), np.float32)
    ref[1, 2] = [1, 2, 3]
    np.testing.assert_array_equal(v.to_numpy(), ref)
    v.fill(4)
    np.testing.assert_array_equal(v.to_numpy(), np.full((2, 3, 3), 4, np.float32))


def test_vector_field_element_is_a_vector():
    v = ti.Vector.field(3, ti.f32, shape=2)
    v[0] = [1, 2, 3]
    e = v[0]
    assert isinstance(e, ti.Vector)
    assert e.n == 3 and e.ndim == 1
    m = ti.Matrix.field(2, 2, ti.f32, shape=2)
    assert not isinstance(m[0], ti.Vector) and m[0].ndim == 2 and m[0].n == 2 and m[0].m == 2


def test_matrix_field_round_trip_and_fill():
    m = ti.Matrix.field(2, 3, ti.f64, shape=(4,))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 2, 3))
    m.from_numpy(a)
    np.testing.assert_array_equal(m.to_numpy(), a)
    assert m.to_numpy().shape == (4, 2, 3)
    np.testing.assert_array_equal(m[2].to_numpy(), a[2])
    fill = np.arange(6.0).reshape(2, 3)
    m.fill(ti.Matrix(fill.tolist()))
    np.testing.assert_array_equal(m.to_numpy(), np.broadcast_to(fill, (4, 2, 3)))
    m[1] = [[9, 8, 7], [6, 5, 4]]
    ref = np.broadcast_to(fill, (4, 2, 3)).copy()
    ref[1] = [[9, 8, 7], [6, 5, 4]]
    np.testing.assert_array_equal(m.to_numpy(), ref)


def test_matrix_field_from_numpy_shape_mismatch():
    m = ti.Matrix.field(2, 2, ti.f32, shape=3)
    with pytest.raises(ValueError) as ei:
        m.from_numpy(np.zeros((3, 4), np.float32))
    assert "(3, 2, 2)" in str(ei.value) and "(3, 4)" in str(ei.value)


def test_vector_and_matrix_fields_in_kernels():
    n = 16
    v = ti.Vector.field(3, ti.f32, shape=n)
    m = ti.Matrix.field(3, 3, ti.f32, shape=n)
    out = ti.Vector.field(3, ti.f32, shape=n)
    rng = np.random.default_rng(2)
    va = rng.standard_normal((n, 3)).astype(np.float32)
    ma = rng.standard_normal((n, 3, 3)).astype(np.float32)
    v.from_numpy(va)
    m.from_numpy(ma)

    @ti.kernel
    def matvec():
        for i in v:
            out[i] = m[i] @ v[i] + 1.0

    matvec()
    ref = np.einsum("nij,nj->ni", ma.astype(np.float64), va.astype(np.float64)) + 1.0
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-5)


def test_zero_dim_vector_field():
    v = ti.Vector.field(2, ti.i32, shape=())

    @ti.kernel
    def setv():
        v[None] = ti.Vector([3, 4])
        v[None][1] += 10

    setv()
    np.testing.assert_array_equal(v.to_numpy(), [3, 14])


# -- placement: AoS, nested dense, partial levels -------------------------------------------
def test_dense_place_several_fields_aos():
    a = ti.field(ti.f32)
    b = ti.field(ti.i32)
    c = ti.field(ti.f64)
    ti.root.dense(ti.ij, (5, 6)).place(a, b, c)
    assert a.shape == b.shape == c.shape == (5, 6)

    @ti.kernel
    def fill_all():
        for i, j in a:
            a[i, j] = i * 10 + j + 0.5
            b[i, j] = i - j
            c[i, j] = a[i, j] * 2

    fill_all()
    ii, jj = np.indices((5, 6))
    np.testing.assert_array_equal(a.to_numpy(), (ii * 10 + jj + 0.5).astype(np.float32))
    np.testing.assert_array_equal(b.to_numpy(), ii - jj)
    np.testing.assert_array_equal(c.to_numpy(), (ii * 10 + jj + 0.5) * 2)
    # Python-scope writes to one field leave its neighbours in the cell alone
    a.fill(0)
    np.testing.assert_array_equal(b.to_numpy(), ii - jj)
    np.testing.assert_array_equal(c.to_numpy(), (ii * 10 + jj + 0.5) * 2)


def test_aos_fields_share_a_cell():
    # fields placed together are interleaved: a[k] and b[k] are neighbours in memory
    a = ti.field(ti.f32)
    b = ti.field(ti.f32)
    ti.root.dense(ti.i, 8).place(a, b)
    a.fill(0)   # materialize
    pa, pb = a.places[0], b.places[0]
    assert pb.addr - pa.addr == 4
    assert [t.stride for t in pa.terms] == [8] and [t.stride for t in pb.terms] == [8]


@pytest.mark.parametrize("axes,shape", [(ti.i, (7,)), (ti.ij, (3, 5)), (ti.ijk, (2, 3, 4))])
def test_dense_axes_place_kernel_and_numpy_agree(axes, shape):
    x = ti.field(ti.i64)
    v = ti.Vector.field(2, ti.f32)
    ti.root.dense(axes, shape).place(x, v)
    assert x.shape == shape and v.shape == shape
    init = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) * 7
    x.from_numpy(init)

    @ti.kernel
    def k():
        for I in ti.grouped(x):
            v[I] = ti.Vector([x[I] * 0.5, I.sum()])
            x[I] = x[I] + 1

    k()
    np.testing.assert_array_equal(x.to_numpy(), init + 1)
    ref = np.stack([init * 0.5, index_sum(shape)], axis=-1).astype(np.float32)
    np.testing.assert_array_equal(v.to_numpy(), ref)


def test_nested_dense_two_axes():
    x = ti.field(ti.i32)
    y = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).dense(ti.j, 8).place(x, y)
    assert x.shape == (4, 8) and y.shape == (4, 8)

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = i * 100 + j
            y[i, j] = j - i * 0.5

    k()
    ii, jj = np.indices((4, 8))
    np.testing.assert_array_equal(x.to_numpy(), ii * 100 + jj)
    np.testing.assert_array_equal(y.to_numpy(), (jj - ii * 0.5).astype(np.float32))
    assert x[3, 7] == 307 and x[1, 0] == 100


def test_nested_dense_same_axis_multiplies_extents():
    x = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).dense(ti.i, 8).place(x)
    assert x.shape == (32,)
    vals = np.arange(32, dtype=np.float32) * 1.5
    x.from_numpy(vals)
    np.testing.assert_array_equal(x.to_numpy(), vals)
    assert x[9] == vals[9] and x[31] == vals[31]
    scale_add_index(x)
    expected = vals * 2 + np.arange(32)
    np.testing.assert_array_equal(x.to_numpy(), expected)
    x[17] = -1
    expected[17] = -1
    np.testing.assert_array_equal(x.to_numpy(), expected)
    x.fill(3)
    np.testing.assert_array_equal(x.to_numpy(), np.full(32, 3, np.float32))


def test_nested_dense_blocked_2d():
    # 2x3 blocks of 4x5 cells: element (i, j) lives in block (i // 4, j // 5)
    x = ti.field(ti.i32)
    ti.root.dense(ti.ij, (2, 3)).dense(ti.ij, (4, 5)).place(x)
    assert x.shape == (8, 15)
    init = np.arange(8 * 15, dtype=np.int32).reshape(8, 15)
    x.from_numpy(init)
    np.testing.assert_array_equal(x.to_numpy(), init)
    assert x[5, 11] == init[5, 11]

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = x[i, j] * 3 - i

    k()
    np.testing.assert_array_equal(x.to_numpy(), init * 3 - np.indices((8, 15))[0])


def test_fields_at_different_levels_of_one_tree():
    a = ti.field(ti.i32)
    b = ti.field(ti.i32)
    blk = ti.root.dense(ti.i, 4)
    blk.place(a)
    blk.dense(ti.j, 3).place(b)
    assert a.shape == (4,) and b.shape == (4, 3)

    @ti.kernel
    def k():
        for i in a:
            a[i] = i + 1
        for i, j in b:
            b[i, j] = a[i] * 10 + j

    k()
    np.testing.assert_array_equal(a.to_numpy(), [1, 2, 3, 4])
    ii, jj = np.indices((4, 3))
    np.testing.assert_array_equal(b.to_numpy(), (ii + 1) * 10 + jj)


def test_placing_into_a_used_tree_is_rejected():
    blk = ti.root.dense(ti.i, 4)
    a = ti.field(ti.i32)
    blk.place(a)
    a.fill(1)                                   # the tree is now materialized
    with pytest.raises(ti.FluxionError):
        blk.place(ti.field(ti.i32))


def test_placing_a_field_twice_is_rejected():
    a = ti.field(ti.i32)
    ti.root.dense(ti.i, 4).place(a)
    with pytest.raises(ti.FluxionError):
        ti.root.dense(ti.i, 4).place(a)


def test_unplaced_field_has_no_shape():
    a = ti.field(ti.i32)
    with pytest.raises(ti.FluxionError):
        a.shape


# -- fields created after kernels ran -------------------------------------------------------
def test_fields_created_after_kernels_ran():
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def set_to(f: ti.template(), v: ti.i32):
        for i in f:
            f[i] = v + i

    set_to(x, 5)
    y = ti.field(ti.i32, shape=3)               # a new tree after a launch
    z = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).place(z)
    set_to(y, 100)
    set_to(z, -1)
    np.testing.assert_array_equal(x.to_numpy(), 5 + np.arange(8))
    np.testing.assert_array_equal(y.to_numpy(), 100 + np.arange(3))
    np.testing.assert_array_equal(z.to_numpy(), -1 + np.arange(4, dtype=np.float32))
    set_to(x, 0)                                 # the old field is still usable
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8))
    np.testing.assert_array_equal(y.to_numpy(), 100 + np.arange(3))


# -- offsets --------------------------------------------------------------------------------
def test_field_offset_1d():
    x = ti.field(ti.i32, shape=5, offset=(-2,))
    assert x.shape == (5,)

    @ti.kernel
    def k():
        for i in x:
            x[i] = i * 10

    k()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(-2, 3) * 10)
    assert x[-2] == -20 and x[2] == 20
    x[0] = 7
    assert x.to_numpy()[2] == 7
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[-3]


def test_field_offset_2d_and_kernel_indexing():
    x = ti.field(ti.f32, shape=(3, 4), offset=(1, -5))
    y = ti.field(ti.f32, shape=(3, 4))

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = i * 100 + j
        for i, j in y:
            y[i, j] = x[i + 1, j - 5]

    k()
    ii, jj = np.indices((3, 4))
    ref = ((ii + 1) * 100 + (jj - 5)).astype(np.float32)
    np.testing.assert_array_equal(x.to_numpy(), ref)
    np.testing.assert_array_equal(y.to_numpy(), ref)
    assert x[1, -5] == 95 and x[3, -2] == 298


def test_gather_of_neighbours_from_data_dependent_cells_matches_numpy():
    # a particle-to-grid gather (MLS-MPM's): each particle reads the 3x3 cells around a cell
    # computed from its data, of a vector field with an offset; a parallel loop whose count
    # is not a multiple of the SIMD width, so both its vectorized and its remainder
    # iterations run (the taps' addresses share one base and differ by constants)
    n, g = 1003, 16
    rng = np.random.default_rng(7)
    pos = rng.uniform(1.0, g - 2.0, size=(n, 2)).astype(np.float32)
    cells = rng.standard_normal((g, g, 2)).astype(np.float32)
    x = ti.Vector.field(2, ti.f32, shape=n)
    grid = ti.Vector.field(2, ti.f32, shape=(g, g), offset=(-4, 3))
    out = ti.Vector.field(2, ti.f32, shape=n)
    x.from_numpy(pos)
    grid.from_numpy(cells)

    @ti.kernel
    def gather():
        for p in x:
            base = ti.cast(x[p] - 0.5, ti.i32)
            acc = ti.Vector([0.0, 0.0])
            for i, j in ti.static(ti.ndrange(3, 3)):
                w = (i + 1) * 0.5 + (j + 1) * 0.25
                acc += w * grid[base[0] + i - 4, base[1] + j + 3]
            out[p] = acc

    gather()
    base = (pos - 0.5).astype(np.int32)
    ref = np.zeros((n, 2), np.float64)
    for i in range(3):
        for j in range(3):
            ref += ((i + 1) * 0.5 + (j + 1) * 0.25) * cells[base[:, 0] + i, base[:, 1] + j]
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-5)


def test_offset_length_must_match_dimensions():
    # a compilation error, as in the original
    with pytest.raises(ti.FluxionCompilationError, match="dimensionality"):
        ti.field(ti.f32, shape=(3, 4), offset=(1,))
    with pytest.raises(ti.FluxionCompilationError, match="shape cannot be None"):
        ti.Vector.field(2, ti.f32, offset=(1,))   # (the offset was dropped silently)
    with pytest.raises(ti.FluxionCompilationError, match="shape cannot be None"):
        ti.Struct.field({"a": ti.f32}, offset=(1,))


# -- reset / re-init ------------------------------------------------------------------------
def test_reset_then_reinit_works():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k(f: ti.template()):
        for i in f:
            f[i] = i * i

    k(x)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(4) ** 2)
    ti.reset()
    ti.init(arch=ti.cpu)
    with pytest.raises(ti.FluxionError):
        x.to_numpy()                           # fields of the ended session are gone
    y = ti.field(ti.i32, shape=6)
    k(y)                                        # the same kernel recompiles in the new session
    np.testing.assert_array_equal(y.to_numpy(), np.arange(6) ** 2)
    assert len(k.instances) == 1
    # layouts built with ti.root work again after the reset
    a, b = ti.field(ti.f32), ti.field(ti.f32)
    ti.root.dense(ti.i, 3).place(a, b)
    k(a)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(3) ** 2)
    np.testing.assert_array_equal(b.to_numpy(), np.zeros(3))


def test_field_without_explicit_init():
    ti.reset()
    x = ti.field(ti.f32, shape=3)               # initializes fluxion implicitly
    x.fill(2)
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2])


def test_sparse_snodes_keep_values_and_visit_active_cells():
    """pointer/bitmasked: values written are read back, and a struct-for visits the cells that
    were written (tests/api/test_sparse.py compares the details with the original system)."""
    x = ti.field(ti.f32)
    ti.root.pointer(ti.i, 4).bitmasked(ti.i, 8).place(x)
    x[5] = 2.0
    x[30] = 3.0

    @ti.kernel
    def total() -> ti.types.vector(2, ti.f32):
        s = 0.0
        n = 0.0
        for i in x:
            s += x[i]
            n += 1
        return ti.Vector([s, n])

    assert list(total()) == [5.0, 2.0]
    assert x.shape == (32,)


def test_fill_inside_a_kernel():
    # in a kernel, x.fill(v) is a loop over the field (in Python scope it writes memory)
    s = ti.field(ti.i32, shape=(3, 4))
    m = ti.Matrix.field(2, 3, ti.f32, shape=5)

    @ti.kernel
    def fill_both(v: ti.i32, w: ti.types.matrix(2, 3, ti.f32)):
        s.fill(v)
        m.fill(w)

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    fill_both(7, ti.Matrix(w.tolist()))
    assert (s.to_numpy() == 7).all()
    assert (m.to_numpy() == w).all()
