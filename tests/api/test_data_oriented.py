"""`@ti.data_oriented` classes: kernels and ti.funcs as methods, fields as attributes, `self`
a compile-time value (per object), gradients of method kernels, properties and static
methods; objects are held weakly by the kernels' caches."""
import gc

import numpy as np
import pytest

import fluxion as ti


@ti.data_oriented
class Grid:
    def __init__(self, n, step):
        self.n = n
        self.step = step                     # a Python number: a constant of the kernels
        self.val = ti.field(ti.f32, shape=(n, n), needs_grad=True)
        self.total = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.func
    def weight(self, i, j):
        return i + 2 * j

    @ti.kernel
    def fill(self, base: ti.f32):
        for i, j in self.val:
            self.val[i, j] = base + self.step * self.weight(i, j)

    @ti.kernel
    def reduce(self):
        for i, j in self.val:
            self.total[None] += self.val[i, j] ** 2


def test_methods_see_their_object():
    a, b = Grid(4, 1.0), Grid(3, 0.5)
    a.fill(10.0)
    b.fill(1.0)
    i, j = np.indices((4, 4))
    assert np.allclose(a.val.to_numpy(), 10 + (i + 2 * j))
    i, j = np.indices((3, 3))
    assert np.allclose(b.val.to_numpy(), 1 + 0.5 * (i + 2 * j))
    assert len(Grid.fill.instances) == 2             # one per object


def test_gradients_of_method_kernels():
    g = Grid(4, 1.0)
    g.fill(1.0)
    with ti.ad.Tape(loss=g.total):
        g.reduce()
    assert np.allclose(g.val.grad.to_numpy(), 2 * g.val.to_numpy())
    g.val.grad.fill(0)
    g.total.grad[None] = 1
    g.reduce.grad()
    assert np.allclose(g.val.grad.to_numpy(), 2 * g.val.to_numpy())


def test_kernel_methods_need_the_decorator():
    class Plain:
        def __init__(self):
            self.x = ti.field(ti.i32, shape=2)

        @ti.kernel
        def k(self):
            self.x[0] = 1

    with pytest.raises(ti.TaichiSyntaxError, match="data_oriented"):
        Plain().k()


def test_func_methods_work_on_any_class():
    class Helper:
        scale = 3

        @ti.func
        def times(self, v):
            return v * self.scale

    h = Helper()
    out = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        for i in out:
            out[i] = h.times(i)

    k()
    assert out.to_numpy().tolist() == [0, 3, 6, 9]
    assert h.times(5) == 15                          # Python scope: a plain call


def test_property_and_static_kernels():
    @ti.data_oriented
    class C:
        @property
        @ti.kernel
        def answer(self) -> ti.i32:
            return 42

        @staticmethod
        @ti.kernel
        def twice(x: ti.i32) -> ti.i32:
            return 2 * x

    c = C()
    assert c.answer == 42 and c.twice(4) == 8 and C.twice(5) == 10


def test_objects_are_held_weakly():
    g = Grid(2, 1.0)
    g.fill(0.0)
    assert len(Grid.fill.instances) == 1
    del g
    gc.collect()
    assert len(Grid.fill.instances) == 0


def test_nested_objects_and_a_kernel_stored_as_an_attribute():
    @ti.kernel
    def set_all(x: ti.template(), v: ti.i32):
        for i in x:
            x[i] = v

    @ti.data_oriented
    class Inner:
        def __init__(self):
            self.x = ti.field(ti.i32, shape=3)

    @ti.data_oriented
    class Outer:
        def __init__(self):
            self.inner = Inner()
            self.hook = set_all                      # an attribute: not bound

        @ti.kernel
        def bump(self):
            for i in self.inner.x:
                self.inner.x[i] += 1

    o = Outer()
    o.hook(o.inner.x, 5)
    o.bump()
    assert o.inner.x.to_numpy().tolist() == [6, 6, 6]


def test_grad_replaced_methods():
    @ti.data_oriented
    class A:
        def __init__(self):
            self.x = ti.field(ti.f32, shape=4, needs_grad=True)
            self.total = ti.field(ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def func(self, mul: ti.f32):
            for i in self.x:
                self.total[None] += self.x[i] * mul

        @ti.ad.grad_replaced
        def forward(self, mul):
            self.func(mul)
            self.func(mul)

        @ti.ad.grad_for(forward)
        def backward(self, mul):
            self.func.grad(mul)

    a = A()
    with ti.ad.Tape(loss=a.total):
        a.forward(4)
    assert a.x.grad.to_numpy().tolist() == [4.0] * 4   # the replaced gradient: once, not twice
