"""Struct kernel arguments, matrix constructors, dynamic indexing of local vectors, hints."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def test_struct_kernel_arguments():
    Ray = ti.types.struct(origin=ti.math.vec3, direction=ti.math.vec3, t=ti.f32, bounces=ti.i32)
    out = ti.Vector.field(3, ti.f32, shape=())

    @ti.kernel
    def at(r: Ray) -> ti.i32:
        out[None] = r.origin + r.t * r.direction
        return r.bounces * 2

    ray = Ray(origin=ti.math.vec3(1, 2, 3), direction=ti.math.vec3(0, 1, 0), t=2.5, bounces=4)
    assert at(ray) == 8
    np.testing.assert_allclose(out[None].to_numpy(), [1, 4.5, 3])
    assert at({"origin": [0, 0, 0], "direction": [1, 1, 1], "t": 2.0, "bounces": 1}) == 2
    np.testing.assert_allclose(out[None].to_numpy(), [2, 2, 2])
    assert len(at.instances) == 1


def test_matrix_constructors_in_kernels():
    out = ti.Matrix.field(3, 3, ti.f32, shape=4)

    @ti.kernel
    def k():
        out[0] = ti.Matrix.identity(ti.f32, 3) * 2
        out[1] = ti.Matrix.rows([ti.Vector([1.0, 2.0, 3.0]), ti.Vector([4.0, 5.0, 6.0]),
                                 ti.Vector([7.0, 8.0, 9.0])])
        out[2] = ti.Matrix.cols([ti.Vector([1.0, 2.0, 3.0]), ti.Vector([4.0, 5.0, 6.0]),
                                 ti.Vector([7.0, 8.0, 9.0])])
        out[3] = ti.Matrix.zero(ti.f32, 3, 3) + ti.Matrix.diag(3, 5.0)

    k()
    a = out.to_numpy()
    rows = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(a[0], 2 * np.eye(3))
    np.testing.assert_array_equal(a[1], rows)
    np.testing.assert_array_equal(a[2], rows.T)
    np.testing.assert_array_equal(a[3], 5 * np.eye(3))


def test_local_vectors_indexed_by_loop_variables():
    out = ti.field(ti.f32, shape=5)

    @ti.kernel
    def k():
        for i in range(5):
            v = ti.Vector([10.0, 20.0, 30.0, 40.0, 50.0])
            v[i] += 1.0                     # a store at a run-time index
            m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
            out[i] = v[i] + m[i % 2, (i + 1) % 2]

    k()
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    ref = [10 * (i + 1) + 1 + m[i % 2, (i + 1) % 2] for i in range(5)]
    np.testing.assert_array_equal(out.to_numpy(), ref)


def test_hints_atomics_on_components_and_u8_images():
    img = ti.Vector.field(3, ti.u8, shape=(4, 2))
    acc = ti.Vector.field(2, ti.f32, shape=())

    @ti.kernel
    def k():
        ti.block_local(img)
        for i, j in img:
            img[i, j] = ti.Vector([i * 60, j * 100, 255])
            ti.atomic_add(acc[None][0], 1.0)
            acc[None][1] += 0.5

    k()
    a = img.to_numpy()
    assert a.dtype == np.uint8 and a[3, 1].tolist() == [180, 100, 255]
    assert acc[None].to_numpy().tolist() == [8.0, 4.0]


def test_static_print_once_per_instance_and_static_assert(capfd):
    x = ti.field(ti.f32, shape=6)

    @ti.kernel
    def scale(a: ti.template(), k: ti.f32):
        ti.static_print("instance for", a.shape)
        ti.static_assert(len(a.shape) == 1, "one-dimensional fields only")
        ti.static_assert(a.shape[0] % 2 == 0)
        for i in a:
            a[i] = i * k

    scale(x, 2.0)
    scale(x, 3.0)                       # the same instance: nothing printed again
    out = capfd.readouterr().out
    assert out.count("instance for (6,)") == 1
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6) * 3.0)

    y = ti.field(ti.f32, shape=(2, 2))
    with pytest.raises(ti.FluxionCompilationError, match="one-dimensional fields only"):
        scale(y, 1.0)
    assert (y.to_numpy() == 0).all()    # it failed while compiling: nothing ran
    odd = ti.field(ti.f32, shape=5)
    with pytest.raises(ti.FluxionCompilationError, match="static assertion failed"):
        scale(odd, 1.0)

    @ti.kernel
    def runtime_condition(v: ti.i32):
        ti.static_assert(v > 0)

    with pytest.raises(ti.FluxionCompilationError, match="known at compile time"):
        runtime_condition(1)


def test_vector_and_matrix_types_as_annotations_and_local_types():
    vec3i = ti.types.vector(3, ti.i32)
    mat2 = ti.types.matrix(2, 2, ti.f32)
    out = ti.Vector.field(3, ti.i32, shape=())

    @ti.kernel
    def k(m: mat2, v: ti.math.vec3) -> ti.f32:
        a: mat2 = ti.Matrix([[1, 2], [3, 4]])     # integers stored as the annotated f32
        w = vec3i(1.7, -2.9, 3)                     # a local type constructor casts
        out[None] = w
        r: ti.f32 = 0
        r = (a @ m).sum() + v.dot(v) + a[1, 0] / 2
        return r

    m = np.array([[0.5, 1.0], [-1.0, 2.0]], np.float32)
    v = np.array([1.0, 2.0, 0.5], np.float32)
    a = np.array([[1, 2], [3, 4]], np.float32)
    assert k(m, v) == pytest.approx((a @ m).sum() + v @ v + 1.5)
    np.testing.assert_array_equal(out[None].to_numpy(), [1, -2, 3])   # truncation to zero


def test_all_atomics_on_vector_components_and_matrix_entries():
    n = 64
    vals = ti.field(ti.f32, shape=n)
    acc = ti.Vector.field(4, ti.f32, shape=())
    cnt = ti.Vector.field(3, ti.i32, shape=2)
    mat = ti.Matrix.field(2, 2, ti.f32, shape=())

    @ti.kernel
    def k():
        ti.loop_config(block_dim=16)
        for i in vals:
            ti.cache_read_only(vals)
            x = vals[i]
            ti.atomic_add(acc[None][0], x)
            ti.atomic_sub(acc[None][1], x)
            ti.atomic_max(acc[None][2], x)
            ti.atomic_min(acc[None][3], x)
            ti.atomic_or(cnt[1][0], 1 << (i % 8))
            ti.atomic_and(cnt[1][1], ~(1 << (i % 5)))
            ti.atomic_xor(cnt[1][2], i)
            cnt[0][i % 3] += 1
            mat[None][i % 2, 1] += x

    rng = np.random.default_rng(3)
    v = rng.standard_normal(n).astype(np.float32)
    vals.from_numpy(v)
    acc[None] = [0, 0, -1e9, 1e9]
    cnt[1] = [0, -1, 0]
    k()
    a = acc[None].to_numpy()
    assert a[0] == pytest.approx(v.sum(), abs=1e-4) and a[1] == pytest.approx(-v.sum(), abs=1e-4)
    assert a[2] == v.max() and a[3] == v.min()
    np.testing.assert_array_equal(cnt.to_numpy()[0], np.bincount(np.arange(n) % 3))
    xor = 0
    for i in range(n):
        xor ^= i
    np.testing.assert_array_equal(cnt.to_numpy()[1], [255, ~0b11111, xor])
    np.testing.assert_allclose(mat[None].to_numpy(),
                               [[0, v[0::2].sum()], [0, v[1::2].sum()]], atol=1e-4)


def test_dict_unpacking_in_a_kernel_is_python_scope_work():
    @ti.kernel
    def pick(k: ti.template()) -> ti.i32:
        a = {1: 2, 3: 4}
        b = {5: 6, **a, 3: 7}     # later keys win, as in Python
        return b[k]

    assert [pick(1), pick(3), pick(5)] == [2, 7, 6]
    with pytest.raises(ti.TaichiCompilationError):
        pick(2)


def test_a_field_as_an_operand_says_to_index_it():
    x = ti.field(ti.i32, shape=())

    @ti.kernel
    def bad():
        a = ti.Vector([1, 1, 1])
        b = a * x  # noqa: F841

    with pytest.raises(ti.TaichiTypeError, match=r"unsupported operand type.*index the field"):
        bad()
