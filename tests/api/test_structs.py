"""Structs: ti.types.struct, @ti.dataclass with methods, ti.Struct.field."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def test_dataclass_fields_methods_and_member_updates():
    vec3 = ti.math.vec3

    @ti.dataclass
    class Particle:
        pos: vec3
        vel: vec3
        mass: ti.f32

        @ti.func
        def energy(self):
            return 0.5 * self.mass * self.vel.norm_sqr()

        @ti.func
        def moved(self, dt):
            return self.pos + dt * self.vel

    n = 6
    ps = Particle.field(shape=n)
    total = ti.field(ti.f32, shape=())

    @ti.kernel
    def init():
        for i in ps:
            ps[i] = Particle(pos=vec3(i, 0, 0), vel=vec3(1, 2, 2), mass=i + 1.0)

    @ti.kernel
    def advance(dt: ti.f32):
        for i in ps:
            p = ps[i]
            ps[i].pos = p.moved(dt)
            total[None] += p.energy()

    init()
    advance(0.5)
    ref_pos = np.stack([np.arange(n) + 0.5, np.ones(n), np.ones(n)], axis=1)
    np.testing.assert_allclose(ps.pos.to_numpy(), ref_pos)
    assert total[None] == pytest.approx(0.5 * 9 * np.sum(np.arange(n) + 1.0))
    np.testing.assert_allclose(ps.mass.to_numpy(), np.arange(n) + 1.0)


def test_struct_locals_annotations_and_whole_struct_stores():
    S = ti.types.struct(a=ti.i32, b=ti.types.vector(2, ti.f32))
    sf = ti.Struct.field({"a": ti.i32, "b": ti.math.vec2}, shape=3)

    @ti.kernel
    def k() -> ti.f32:
        s: S = S(a=3, b=ti.Vector([1.0, 2.0]))
        s.a += 1
        sf[1].a = s.a
        sf[2] = s
        return s.b.sum() * s.a

    assert k() == 12.0
    d = sf.to_numpy()
    np.testing.assert_array_equal(d["a"], [0, 4, 4])
    np.testing.assert_array_equal(d["b"], [[0, 0], [0, 0], [1, 2]])
    assert sf[2].a == 4


def test_struct_field_python_scope_and_struct_for():
    sf = ti.Struct.field({"x": ti.f32, "n": ti.i32}, shape=(2, 3))
    sf[1, 2] = {"x": 1.5, "n": 7}
    assert sf[1, 2].x == 1.5 and sf[1, 2].n == 7
    out = ti.field(ti.f32, shape=())

    @ti.kernel
    def k():
        for i, j in sf:
            out[None] += sf[i, j].x * sf[i, j].n

    k()
    assert out[None] == pytest.approx(10.5)


def test_a_struct_argument_of_a_func_is_a_copy():
    # a ti.func's struct parameter is passed by value: the function may assign its members
    # (also when the caller passed a temporary) and the caller's variable keeps its values;
    # the function's later reads see its own assignments (they read the values from before
    # them, and wrote through to the caller)
    vec3 = ti.math.vec3
    Ray = ti.types.struct(origin=vec3, color=vec3)
    out = ti.field(ti.f32, shape=(4, 8))

    @ti.func
    def f(ray: Ray) -> Ray:
        ray.color = vec3(0)
        ray.color *= 2
        ray.origin += 1
        return ray

    @ti.func
    def g(ray):
        ray.color = vec3(5)
        return ray

    @ti.func
    def h(ray: Ray):
        ray.color = ray.origin * 2      # the temporary's member assigned: a copy too
        return ray.color.x + ray.origin.y

    @ti.kernel
    def k():
        for i in range(4):
            r = Ray(vec3(i), vec3(1))
            q = f(r)
            out[i, 0] = q.origin.x
            out[i, 1] = q.color.x
            out[i, 2] = r.color.x
            w = g(r)
            out[i, 3] = w.color.x
            out[i, 4] = r.color.x
            out[i, 5] = r.origin.x
            out[i, 6] = h(Ray(vec3(i + 1), vec3(7)))

    k()
    i = np.arange(4, dtype=np.float32)
    want = np.stack([i + 1, 0 * i, 1 + 0 * i, 5 + 0 * i, 1 + 0 * i, i, 3 * (i + 1),
                     0 * i], axis=1)
    np.testing.assert_array_equal(out.to_numpy(), want)
