"""Where an ndarray argument's element shape comes from: a `ti.ndarray` of vectors or matrices
carries its own, so a bare `ti.types.ndarray()` annotation iterates its array dimensions only;
numpy arrays and torch tensors have none, so every dimension is an array dimension unless the
annotation names an element type. Expected values are computed here with numpy."""
import numpy as np
import pytest

import fluxion as ti


@ti.kernel
def _double(a: ti.types.ndarray(), p: ti.types.ndarray()):
    for i in p:
        p[i] = a[i] * 2.0


@ti.kernel
def _count(a: ti.types.ndarray()) -> ti.i32:
    c = 0
    for I in ti.grouped(a):
        c += 1
    return c


def test_a_loop_over_an_ndarray_of_vectors_with_a_bare_annotation():
    n = 6
    a = ti.ndarray(ti.math.vec2, shape=n, needs_grad=True)
    p = ti.ndarray(ti.math.vec2, shape=n, needs_grad=True)
    av = np.stack([np.arange(n), 10.0 + np.arange(n)], axis=1).astype(np.float32)
    a.from_numpy(av)
    _double(a, p)
    np.testing.assert_array_equal(p.to_numpy(), 2 * av)
    g = np.stack([np.full(n, 1.0), np.arange(n)], axis=1).astype(np.float32)
    p.grad.from_numpy(g)
    _double.grad(a, p)
    np.testing.assert_array_equal(a.grad.to_numpy(), 2 * g)


def test_vector_components_accumulated_under_a_tape_twice():
    @ti.kernel
    def weigh(a: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in a:
            loss[None] += a[i][0] * 2.0 + a[i][1] * 3.0

    n = 5
    a = ti.ndarray(ti.math.vec2, shape=n, needs_grad=True)
    loss = ti.ndarray(ti.f32, shape=(), needs_grad=True)
    av = np.linspace(-1.0, 1.0, 2 * n).reshape(n, 2).astype(np.float32)
    a.from_numpy(av)
    for _ in range(2):
        a.grad.fill(0.0)
        with ti.ad.Tape(loss=loss):
            weigh(a, loss)
        np.testing.assert_allclose(loss[None], np.sum(av[:, 0] * 2 + av[:, 1] * 3), atol=1e-5)
        np.testing.assert_array_equal(a.grad.to_numpy(), np.tile([2.0, 3.0], (n, 1)))


def test_matrix_ndarray_elements_with_a_bare_annotation():
    @ti.kernel
    def corner(m: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in m:
            out[i, j] = m[i, j][1, 0] + m[i, j][0, 2]

    m = ti.Matrix.ndarray(2, 3, ti.f32, shape=(2, 4))
    mv = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 2, 3)
    m.from_numpy(mv)
    out = np.zeros((2, 4), np.float32)
    corner(m, out)
    np.testing.assert_array_equal(out, mv[:, :, 1, 0] + mv[:, :, 0, 2])
    assert _count(m) == 8


def test_numpy_and_torch_arrays_have_no_element_dimensions():
    assert _count(np.zeros((4, 2), np.float32)) == 8
    assert _count(ti.ndarray(ti.f32, shape=(4, 2))) == 8
    assert _count(ti.ndarray(ti.math.vec2, shape=4)) == 4
    torch = pytest.importorskip("torch")
    assert _count(torch.zeros(4, 2)) == 8


def test_one_kernel_takes_vector_ndarrays_and_plain_arrays_of_the_same_memory_shape():
    # the same (4, 2) float32 memory is 4 vectors in one call and 8 scalars in the next: each
    # call gets its own compiled instance
    @ti.kernel
    def fill_index(a: ti.types.ndarray()) -> ti.i32:
        c = 0
        for I in ti.grouped(a):
            a[I] = a[I] * 0 + I[0] + 1
            c += 1
        return c

    want = np.repeat(np.arange(1.0, 5.0), 2).reshape(4, 2)
    v = ti.ndarray(ti.math.vec2, shape=4)
    assert fill_index(v) == 4
    np.testing.assert_array_equal(v.to_numpy(), want)
    s = np.zeros((4, 2), np.float32)
    assert fill_index(s) == 8
    np.testing.assert_array_equal(s, want)
    v2 = ti.ndarray(ti.math.vec2, shape=4)
    assert fill_index(v2) == 4
    np.testing.assert_array_equal(v2.to_numpy(), want)


def test_annotations_that_contradict_the_ndarray_element_are_refused():
    @ti.kernel
    def scalar(a: ti.types.ndarray(dtype=ti.f32)) -> ti.i32:
        return a.shape[0]

    @ti.kernel
    def vec3(a: ti.types.ndarray(dtype=ti.math.vec3)) -> ti.i32:
        return a.shape[0]

    @ti.kernel
    def one_dim(a: ti.types.ndarray(ndim=1)) -> ti.f32:
        return a[1][1]

    a = ti.ndarray(ti.math.vec2, shape=3)
    a[1] = [5.0, 7.0]
    with pytest.raises(TypeError, match="scalar elements"):
        scalar(a)
    with pytest.raises(TypeError, match=r"elements of shape \(3,\)"):
        vec3(a)
    assert one_dim(a) == 7.0       # ndim counts the array's own dimensions


def test_zero_d_ndarray_indexed_with_none_in_python_scope():
    x = ti.ndarray(ti.f32, shape=())
    x[None] = 2.5
    assert x[None] == 2.5
    assert isinstance(x[None], float)


def test_python_scope_writes_through_an_element_of_a_vector_or_matrix_ndarray():
    m = ti.Matrix.ndarray(2, 2, ti.i32, 5)
    for i in range(5):
        for j, k in ti.ndrange(2, 2):
            m[i][j, k] = i * 100 + j * 10 + k
    want = (np.arange(5)[:, None, None] * 100 + np.arange(2)[None, :, None] * 10
            + np.arange(2)[None, None, :])
    np.testing.assert_array_equal(m.to_numpy(), want)
    v = ti.Vector.ndarray(4, ti.f32, 3)
    v[2][3] = 1.5
    assert v[2][3] == 1.5
    np.testing.assert_array_equal(v.to_numpy()[2], [0.0, 0.0, 0.0, 1.5])


def test_boundary_clamp_reads_and_writes_the_nearest_element():
    @ti.kernel
    def read(x: ti.types.ndarray(boundary="clamp"), i: ti.i32, j: ti.i32) -> ti.f32:
        return x[i, j]

    @ti.kernel
    def write(x: ti.types.ndarray(boundary="clamp"), i: ti.i32, j: ti.i32):
        x[i, j] = -1.0

    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    for i, j in [(-1, 0), (-5, 2), (3, 3), (7, -2), (1, 9), (2, 1)]:
        assert read(xs, i, j) == xs[min(max(i, 0), 2), min(max(j, 0), 3)]
    y = xs.copy()
    write(y, 5, -3)
    want = xs.copy()
    want[2, 0] = -1.0
    np.testing.assert_array_equal(y, want)
    with pytest.raises(ValueError, match="boundary"):
        ti.types.ndarray(boundary="wrap")


def test_ndarray_element_shape_and_shape_checks():
    assert ti.ndarray(ti.f32, (3, 4)).element_shape == ()
    v = ti.Vector.ndarray(5, ti.i32, 2)
    assert (v.shape, v.element_shape, v.n) == ((2,), (5,), 5)
    m = ti.Matrix.ndarray(2, 3, ti.f64, (4, 1))
    assert (m.shape, m.element_shape, m.n, m.m) == ((4, 1), (2, 3), 2, 3)
    assert ti.ndarray(ti.i32, (1, np.int32(3))).shape == (1, 3)
    for bad in (1.5, (2, 0.5), -1, 2 ** 31, (1, 2 ** 31)):
        with pytest.raises(RuntimeError, match="not a valid shape"):
            ti.ndarray(ti.i32, bad)


def test_boundary_clamp_also_clamps_component_indices():
    @ti.kernel
    def vec_at(x: ti.types.ndarray(boundary="clamp"), c: ti.i32) -> ti.f32:
        return x[1, 2][c]

    @ti.kernel
    def mat_at(x: ti.types.ndarray(boundary="clamp"), r: ti.i32, c: ti.i32) -> ti.f32:
        return x[1, 2][r, c]

    v = ti.ndarray(ti.math.vec2, shape=(3, 3))
    v.from_numpy(np.arange(18, dtype=np.float32).reshape(3, 3, 2))
    for c in (-1, 0, 1, 2, 5):
        assert vec_at(v, c) == v.to_numpy()[1, 2, min(max(c, 0), 1)]
    m = ti.ndarray(ti.math.mat2, shape=(3, 3))
    mv = np.arange(36, dtype=np.float32).reshape(3, 3, 2, 2)
    m.from_numpy(mv)
    for r, c in [(-1, 0), (0, 3), (2, -4), (1, 1), (1, -1)]:
        # a matrix element index is clamped as the flat index r * 2 + c, as the original
        # system does (checked with Taichi 1.7.4: (1, -1) reads entry 1, not (1, 0))
        assert mat_at(m, r, c) == mv[1, 2].reshape(-1)[min(max(r * 2 + c, 0), 3)]
