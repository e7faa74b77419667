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
