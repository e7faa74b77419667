"""ndarray kernel arguments with numpy arrays and fluxion's own `ti.ndarray`.

Zero copy, every scalar dtype, vector and matrix elements, ndim 1-3, strided views, template
signature reuse, argument errors, `arr.shape`, struct-for, the ti.ndarray API and kernel.grad
against finite differences. Every expected value is computed here with numpy.

The runtime is initialised and reset around each test by tests/conftest.py.
"""
import numpy as np
import pytest

import fluxion as ti

INT_DTYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64]
ALL_DTYPES = INT_DTYPES + [ti.f32, ti.f64]
NP = {ti.i8: np.int8, ti.i16: np.int16, ti.i32: np.int32, ti.i64: np.int64,
      ti.u8: np.uint8, ti.u16: np.uint16, ti.u32: np.uint32, ti.u64: np.uint64,
      ti.f32: np.float32, ti.f64: np.float64}


def _extremes(npdt):
    """Values that probe a dtype's whole range (and the sign bit of unsigned types)."""
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        vals = [info.min, info.max, 0, 1, info.max // 2, info.max // 2 + 1, info.min + 1]
        return np.array(vals, dtype=npdt)
    info = np.finfo(npdt)
    return np.array([info.min, info.max, info.tiny, -0.0, 1.0 / 3.0, -2.5, info.eps], npdt)


# -- zero copy ---------------------------------------------------------------------------------
def test_kernel_writes_are_seen_by_the_numpy_array_and_its_base():
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    base = np.full((4, 6), -1, np.int32)
    k(base)
    np.testing.assert_array_equal(base, np.arange(4)[:, None] * 10 + np.arange(6))

    # a view shares memory: the kernel writes the base array's elements in place
    base[:] = -1
    view = base[1:3, 2:5]
    k(view)
    expect = np.full((4, 6), -1, np.int32)
    expect[1:3, 2:5] = np.arange(2)[:, None] * 10 + np.arange(3)
    np.testing.assert_array_equal(base, expect)


def test_ti_ndarray_is_written_in_place_and_read_back():
    a = ti.ndarray(ti.f32, (3, 5))

    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i, j in a:
            a[i, j] += i - 0.5 * j

    a.fill(2.0)
    k(a)
    k(a)
    ref = 2.0 + 2 * (np.arange(3)[:, None] - 0.5 * np.arange(5))
    np.testing.assert_allclose(a.to_numpy(), ref)
    assert a[2, 4] == pytest.approx(ref[2, 4])


def test_numpy_input_is_not_modified_by_a_kernel_that_only_reads_it():
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i] + 1

    a = np.arange(8, dtype=np.float64)
    a0 = a.copy()
    b = np.zeros(8)
    k(a, b)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, a0 + 1)


# -- dtypes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_every_dtype_round_trips_its_extreme_values(dt):
    @ti.kernel
    def copy(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i]

    a = _extremes(NP[dt])
    b = np.zeros_like(a)
    copy(a, b)
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    if dt.is_float:   # the sign of -0.0 survives the copy
        assert np.signbit(b[3])


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_every_dtype_arithmetic_matches_numpy(dt):
    npdt = NP[dt]

    @ti.kernel
    def k(a: ti.types.ndarray(dtype=dt, ndim=2), b: ti.types.ndarray(dtype=dt, ndim=2)):
        for i, j in a:
            b[i, j] = a[i, j] * 3 + 1

    rng = np.random.default_rng(7)
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        a = rng.integers(info.min, info.max, size=(5, 9), dtype=npdt, endpoint=True)
    else:
        a = rng.uniform(-100, 100, size=(5, 9)).astype(npdt)
    b = np.zeros_like(a)
    k(a, b)
    with np.errstate(over="ignore"):
        ref = a * npdt(3) + npdt(1)          # integer overflow wraps, as it does in the kernel
    if dt.is_float:
        np.testing.assert_allclose(b, ref, rtol=1e-6 if dt == ti.f32 else 1e-14)
    else:
        np.testing.assert_array_equal(b, ref)


def test_mixed_dtypes_in_one_kernel_convert_on_store():
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.u8, ndim=1), b: ti.types.ndarray(dtype=ti.i16, ndim=1),
          out: ti.types.ndarray(dtype=ti.f64, ndim=1)):
        for i in a:
            out[i] = a[i] + b[i] * 0.5

    a = np.array([0, 1, 255, 128], np.uint8)
    b = np.array([-32768, 3, 32767, -1], np.int16)
    out = np.zeros(4)
    k(a, b, out)
    np.testing.assert_array_equal(out, a.astype(np.float64) + b.astype(np.float64) * 0.5)


# -- vector and matrix elements ------------------------------------------------------------------
def test_vector_elements_read_write_and_norm():
    @ti.kernel
    def k(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), out: ti.types.ndarray(ndim=1)):
        for i in p:
            out[i] = p[i].norm()
            p[i] = p[i].cross(ti.Vector([0.0, 0.0, 1.0]))

    rng = np.random.default_rng(1)
    p = rng.standard_normal((9, 3)).astype(np.float32)
    p0 = p.copy()
    out = np.zeros(9, np.float32)
    k(p, out)
    np.testing.assert_allclose(out, np.linalg.norm(p0, axis=1), rtol=1e-6)
    np.testing.assert_allclose(p, np.cross(p0, [0.0, 0.0, 1.0]), rtol=1e-6, atol=1e-7)


def test_matrix_elements_in_two_dimensions():
    mat23 = ti.types.matrix(2, 3, ti.f64)
    vec3 = ti.types.vector(3, ti.f64)

    @ti.kernel
    def k(m: ti.types.ndarray(dtype=mat23, ndim=2), v: ti.types.ndarray(dtype=vec3, ndim=1),
          out: ti.types.ndarray(dtype=ti.math.vec2, ndim=2),
          tr: ti.types.ndarray(dtype=ti.types.matrix(3, 2, ti.f64), ndim=2)):
        for i, j in m:
            out[i, j] = ti.cast(m[i, j] @ v[j], ti.f32)
            tr[i, j] = m[i, j].transpose()
            m[i, j][1, 2] = i * 10 + j          # one component, written in place

    rng = np.random.default_rng(2)
    m = rng.standard_normal((4, 5, 2, 3))
    v = rng.standard_normal((5, 3))
    m0 = m.copy()
    out = np.zeros((4, 5, 2), np.float32)
    tr = np.zeros((4, 5, 3, 2))
    k(m, v, out, tr)
    np.testing.assert_allclose(out, np.einsum("ijab,jb->ija", m0, v), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tr, np.swapaxes(m0, -1, -2))
    m0[:, :, 1, 2] = np.arange(4)[:, None] * 10 + np.arange(5)
    np.testing.assert_array_equal(m, m0)


def test_integer_vector_elements_and_vector_ndarray_container():
    v = ti.Vector.ndarray(4, ti.u8, (3, 2))
    assert v.shape == (3, 2) and v.to_numpy().shape == (3, 2, 4)
    v.from_numpy(np.arange(24, dtype=np.uint8).reshape(3, 2, 4))

    @ti.kernel
    def k(v: ti.types.ndarray(dtype=ti.types.vector(4, ti.u8), ndim=2)):
        for i, j in v:
            v[i, j] = v[i, j] * 2 + ti.Vector([250, 0, 1, 2], ti.u8)

    k(v)
    ref = (np.arange(24).reshape(3, 2, 4) * 2 + np.array([250, 0, 1, 2])) % 256
    np.testing.assert_array_equal(v.to_numpy(), ref.astype(np.uint8))


def test_matrix_ndarray_container():
    m = ti.Matrix.ndarray(2, 2, ti.f32, 6)
    assert m.shape == (6,) and m.to_numpy().shape == (6, 2, 2)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 2, 2)).astype(np.float32)
    m.from_numpy(a)

    @ti.kernel
    def k(m: ti.types.ndarray(dtype=ti.math.mat2, ndim=1), det: ti.types.ndarray()):
        for i in m:
            det[i] = m[i].determinant()
            m[i] = m[i] @ m[i]

    det = np.zeros(6, np.float32)
    k(m, det)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.to_numpy(), a @ a, rtol=1e-5, atol=1e-6)


# -- shapes, ndim, strides, instances --------------------------------------------------------------
@pytest.mark.parametrize("shape", [(11,), (3, 7), (2, 3, 4)], ids=str)
def test_ndim_one_to_three_with_grouped_loops(shape):
    @ti.kernel
    def k(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for I in ti.grouped(a):
            out[I] = a[I] * 2 + I.sum()

    a = np.random.default_rng(4).random(shape)
    out = np.zeros(shape)
    k(a, out)
    idx_sum = sum(np.indices(shape))
    np.testing.assert_allclose(out, a * 2 + idx_sum)


def test_three_dimensional_struct_for_and_shape():
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=3), out: ti.types.ndarray(ndim=3)):
        for i, j, l in a:
            out[i, j, l] = a[a.shape[0] - 1 - i, j, l] + l * a.shape[2]

    a = np.random.default_rng(5).random((3, 4, 5)).astype(np.float32)
    out = np.zeros_like(a)
    k(a, out)
    np.testing.assert_allclose(out, a[::-1] + np.arange(5) * 5)


def test_non_contiguous_numpy_views():
    @ti.kernel
    def k(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in a:
            out[i, j] = a[i, j] * 10 + i - j

    base = np.arange(60, dtype=np.float64).reshape(6, 10)

    def ij(s):
        return np.arange(s[0])[:, None] - np.arange(s[1])

    views = {
        "transpose": base.T,
        "step slice": base[::2, 1::3],
        "reversed": base[::-1, ::-1],
        "column block": base[:, 3:5],
        "fortran": np.asfortranarray(base),
    }
    for name, v in views.items():
        out = np.zeros(v.shape)
        k(v, out)
        np.testing.assert_array_equal(out, v * 10 + ij(v.shape), err_msg=name)
    # writing into a strided output too
    out_base = np.zeros((10, 6))
    k(base, out_base.T)
    np.testing.assert_array_equal(out_base.T, base * 10 + ij(base.shape))
    # a broadcast (stride 0) input
    b = np.broadcast_to(np.arange(5.0), (3, 5))
    out = np.zeros((3, 5))
    k(b, out)
    np.testing.assert_array_equal(out, b * 10 + ij((3, 5)))


def test_non_contiguous_vector_elements():
    @ti.kernel
    def k(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1), out: ti.types.ndarray()):
        for i in p:
            out[i] = p[i].dot(ti.Vector([1.0, 10.0, 100.0]))

    base = np.arange(40, dtype=np.float32).reshape(10, 4)
    v = base[::2, 1:]                       # strided rows, elements not at offset 0
    out = np.zeros(5, np.float32)
    k(v, out)
    np.testing.assert_allclose(out, v @ np.array([1.0, 10.0, 100.0], np.float32))
    soa = np.ascontiguousarray(np.arange(30, dtype=np.float32).reshape(3, 10)).T   # (10, 3)
    out = np.zeros(10, np.float32)
    k(soa, out)
    np.testing.assert_allclose(out, soa @ np.array([1.0, 10.0, 100.0], np.float32))


def test_new_shapes_reuse_the_compiled_instance():
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i, j in a:
            b[i, j] = a[i, j] + a.shape[0] * 100 + a.shape[1]

    for shape in [(2, 3), (7, 1), (1, 9), (16, 16)]:
        a = np.random.default_rng(6).random(shape)
        b = np.zeros(shape)
        k(a, b)
        np.testing.assert_allclose(b, a + shape[0] * 100 + shape[1])
    assert len(k.instances) == 1
    # ti.ndarray of the same dtype and ndim: still one instance
    t = ti.ndarray(ti.f64, (4, 4))
    k(t, np.zeros((4, 4)))
    assert len(k.instances) == 1
    # a new dtype is a new signature
    k(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))
    assert len(k.instances) == 2
    k(np.ones((5, 3), np.float32), np.zeros((5, 3), np.float32))
    assert len(k.instances) == 2


def test_a_reused_instance_does_not_keep_the_first_arrays_pointer():
    @ti.kernel
    def k(a: ti.types.ndarray(), s: ti.f32):
        for i in a:
            a[i] = s

    arrays = [np.zeros(n, np.float32) for n in (3, 5, 2)]
    for n, a in enumerate(arrays):
        k(a, n + 1.0)
    for n, a in enumerate(arrays):
        np.testing.assert_array_equal(a, np.full(a.shape, n + 1.0, np.float32))
    assert len(k.instances) == 1


# -- arr.shape, struct-for ---------------------------------------------------------------------
def test_shape_in_kernels_ranges_and_returns():
    @ti.kernel
    def rowsum(a: ti.types.ndarray(), out: ti.types.ndarray()) -> ti.i32:
        for i in range(a.shape[0]):
            s = 0.0
            for j in range(a.shape[1]):
                s += a[i, j]
            out[i] = s
        return a.shape[0] * 1000 + a.shape[1]

    a = np.random.default_rng(8).random((6, 13))
    out = np.zeros(6)
    assert rowsum(a, out) == 6013
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-5)    # `s = 0.0` is an f32

    @ti.kernel
    def vshape(p: ti.types.ndarray(dtype=ti.math.vec2, ndim=2)) -> ti.i32:
        return p.shape[0] * 10 + p.shape[1]      # element dimensions are not counted

    assert vshape(np.zeros((3, 4, 2), np.float32)) == 34


def test_struct_for_visits_every_index_once():
    @ti.kernel
    def count(a: ti.types.ndarray(), hits: ti.types.ndarray()):
        for i, j in a:
            hits[i, j] += 1
            ti.atomic_add(hits[0, 0], 0)

    for shape in [(1, 1), (5, 3), (33, 65)]:
        hits = np.zeros(shape, np.int32)
        count(np.zeros(shape, np.float32), hits)
        np.testing.assert_array_equal(hits, np.ones(shape, np.int32))


def test_struct_for_over_a_vector_ndarray_iterates_outer_dims_and_reduces():
    @ti.kernel
    def total(p: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)) -> ti.f32:
        s = 0.0
        for i in p:
            s += p[i][0] - p[i][1]
        return s

    p = np.random.default_rng(9).random((1000, 2)).astype(np.float32)
    assert total(p) == pytest.approx(float((p[:, 0] - p[:, 1]).astype(np.float64).sum()),
                                     rel=1e-4, abs=1e-3)


def test_zero_dimensional_ndarray():
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        b[None] = a[None] * 2

    a = ti.ndarray(ti.f32, ())
    a.fill(1.25)
    b = np.zeros((), np.float32)
    k(a, b)
    assert float(b) == 2.5


# -- ti.ndarray API --------------------------------------------------------------------------------
def test_ti_ndarray_api():
    a = ti.ndarray(ti.i32, (3, 4))
    assert a.shape == (3, 4) and a.dtype == ti.i32
    np.testing.assert_array_equal(a.to_numpy(), np.zeros((3, 4), np.int32))
    a.fill(7)
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 4), 7))
    a[1, 2] = -5
    assert a[1, 2] == -5 and a[0, 0] == 7
    src = np.arange(12, dtype=np.int32).reshape(3, 4)
    a.from_numpy(src)
    np.testing.assert_array_equal(a.to_numpy(), src)
    snap = a.to_numpy()
    snap[0, 0] = 99                                 # to_numpy is a copy
    assert a[0, 0] == 0
    src[0, 1] = 99                                  # from_numpy copies too
    assert a[0, 1] == 1
    with pytest.raises(ValueError):
        a.from_numpy(np.zeros((4, 3), np.int32))
    b = ti.ndarray(ti.f64, 5)                       # an int shape
    assert b.shape == (5,)
    assert b.grad is None
    c = ti.ndarray(ti.f32, (2, 3), needs_grad=True)
    assert c.grad is not None and c.grad.shape == (2, 3)
    np.testing.assert_array_equal(c.grad.to_numpy(), np.zeros((2, 3)))


def test_ti_ndarray_vector_indexing_from_python():
    v = ti.Vector.ndarray(3, ti.f32, 4)
    v[2] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(np.asarray(v[2]), [1.0, 2.0, 3.0])
    v.fill(0.5)
    np.testing.assert_array_equal(v.to_numpy(), np.full((4, 3), 0.5, np.float32))


# -- errors ----------------------------------------------------------------------------------------
def _typed():
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.f32, ndim=2)):
        for i, j in a:
            a[i, j] = 1

    return k


def test_wrong_dtype_names_the_argument_and_both_types():
    k = _typed()
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*f32.*f64"):
        k(np.zeros((2, 2)))
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*f32.*i32"):
        k(np.zeros((2, 2), np.int32))
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'"):
        k(ti.ndarray(ti.f64, (2, 2)))


def test_wrong_ndim_names_the_argument():
    k = _typed()
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a' expects 2 dimensions"):
        k(np.zeros(3, np.float32))
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a' expects 2 dimensions"):
        k(np.zeros((2, 2, 2), np.float32))
    ok = np.zeros((2, 3), np.float32)
    k(ok)                                             # the right array still works afterwards
    np.testing.assert_array_equal(ok, np.ones((2, 3)))


def test_wrong_element_shape_names_the_argument():
    @ti.kernel
    def v(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1)):
        for i in p:
            p[i] = p[i] * 0

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'p'.*element.*\(3,\)"):
        v(np.zeros((4, 2), np.float32))

    @ti.kernel
    def m(p: ti.types.ndarray(dtype=ti.math.mat2, ndim=1)):
        for i in p:
            p[i] = p[i] * 0

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'p'.*element.*\(2, 2\)"):
        m(np.zeros((4, 2, 3), np.float32))
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'p'"):
        m(np.zeros((4, 4), np.float32))              # no element dims at all
    # right shape, another scalar type: as in the original, a numpy array passed for a vector
    # element type keeps its own scalar type (only the element shape must match)
    a = np.full((4, 3), 0.1, np.float64)
    v(a)
    assert not a.any()


def test_non_array_arguments_are_rejected():
    k = _typed()
    for bad in ([[1.0, 2.0]], 3.0, "abc", None):
        with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'"):
            k(bad)


def test_wrong_number_of_indices_inside_a_kernel():
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=1)):
        a[0, 1] = 1

    with pytest.raises(ti.FluxionIndexError, match=r"'a' has 1 dimensions.*2 indices"):
        k(np.zeros(3))


def test_out_of_bounds_access_is_caught_in_debug_mode():
    ti.reset()
    ti.init(arch=ti.cpu, debug=True)

    @ti.kernel
    def k(a: ti.types.ndarray(), n: ti.i32):
        a[n] = 1

    a = np.zeros(3)
    k(a, 2)
    assert a[2] == 1
    with pytest.raises(ti.FluxionOutOfBoundsError, match=r"out of bounds.*'a'"):
        k(a, 3)


# -- gradients ---------------------------------------------------------------------------------
def _fd_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        g[idx] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def test_kernel_grad_with_ti_ndarrays_matches_finite_differences():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n, m = 5, 3
    x = ti.ndarray(ti.f64, (n, m), needs_grad=True)
    w = ti.ndarray(ti.f64, m, needs_grad=True)
    loss = ti.ndarray(ti.f64, (), needs_grad=True)

    @ti.kernel
    def f(x: ti.types.ndarray(), w: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i, j in x:
            loss[None] += ti.sin(x[i, j] * w[j]) * x[(i + 1) % x.shape[0], j] + ti.exp(w[j]) * 0.1

    def ref(xv, wv):
        return np.sum(np.sin(xv * wv) * np.roll(xv, -1, axis=0) + 0.1 * np.exp(wv))

    rng = np.random.default_rng(10)
    xs, ws = rng.uniform(-1, 1, (n, m)), rng.uniform(-1, 1, m)
    x.from_numpy(xs)
    w.from_numpy(ws)
    f(x, w, loss)
    assert loss[None] == pytest.approx(ref(xs, ws), rel=1e-12)
    loss.grad.fill(1.0)
    f.grad(x, w, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), _fd_grad(lambda v: ref(v, ws), xs), rtol=1e-7,
                               atol=1e-9)
    np.testing.assert_allclose(w.grad.to_numpy(), _fd_grad(lambda v: ref(xs, v), ws), rtol=1e-7,
                               atol=1e-9)


def test_kernel_grad_with_vector_ndarrays_and_output_seed():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 4
    p = ti.Vector.ndarray(3, ti.f64, n, needs_grad=True)
    e = ti.ndarray(ti.f64, n, needs_grad=True)

    @ti.kernel
    def energy(p: ti.types.ndarray(dtype=ti.types.vector(3, ti.f64), ndim=1),
               e: ti.types.ndarray()):
        for i in p:
            d = p[i] - p[(i + 1) % n]
            e[i] = d.norm() ** 3 + p[i][2] * d[0]

    def ref(pv):
        d = pv - np.roll(pv, -1, axis=0)
        return np.linalg.norm(d, axis=1) ** 3 + pv[:, 2] * d[:, 0]

    ps = np.random.default_rng(11).standard_normal((n, 3))
    seed = np.array([1.0, -2.0, 0.5, 3.0])
    p.from_numpy(ps)
    energy(p, e)
    np.testing.assert_allclose(e.to_numpy(), ref(ps), rtol=1e-12)
    e.grad.from_numpy(seed)
    energy.grad(p, e)
    np.testing.assert_allclose(p.grad.to_numpy(), _fd_grad(lambda v: ref(v) @ seed, ps),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("view", ["reversed", "step", "reversed_columns"])
def test_kernel_grad_with_strided_numpy_arrays(view):
    # numpy arrays get a scratch gradient that every index must land in (negative strides
    # reach below the first element); a torch-free gradient is checked through a ti.ndarray
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 1 << 16
    base = np.linspace(0.5, 1.5, 2 * n).reshape(n, 2)
    c = {"reversed": base[::-1, 0], "step": base[::2, 1],
         "reversed_columns": base[:, ::-1]}[view]
    w = ti.ndarray(ti.f64, c.shape, needs_grad=True)
    out = ti.ndarray(ti.f64, c.shape, needs_grad=True)

    @ti.kernel
    def f(c: ti.types.ndarray(), w: ti.types.ndarray(), out: ti.types.ndarray()):
        for I in ti.grouped(c):
            out[I] = c[I] * w[I] ** 2

    ws = np.random.default_rng(12).uniform(-1, 1, c.shape)
    w.from_numpy(ws)
    f(c, w, out)
    np.testing.assert_allclose(out.to_numpy(), c * ws ** 2, rtol=1e-12)
    out.grad.fill(1.0)
    f.grad(c, w, out)
    np.testing.assert_allclose(w.grad.to_numpy(), 2 * c * ws, rtol=1e-12)
