"""`order=` and `layout=` of ti.field / ti.Vector.field: the nesting of the axes and of a
vector's components in memory (values are the same whatever the layout; addresses follow
it), and `get_scalar_field` of a placed vector/matrix field."""
import numpy as np
import pytest

import fluxion as ti


@ti.kernel
def addr3(a: ti.template(), i: ti.i32, j: ti.i32, k: ti.i32) -> ti.u64:
    return ti.get_addr(a, [i, j, k])


@pytest.mark.parametrize("order", ["ijk", "ikj", "jik", "jki", "kij", "kji"])
def test_order_nests_the_axes(order):
    shape = (5, 3, 4)
    a = ti.field(ti.i32, shape=shape, order=order)

    @ti.kernel
    def fill():
        for i, j, k in a:
            a[i, j, k] = i * 100 + j * 10 + k

    fill()
    i, j, k = np.indices(shape)
    assert (a.to_numpy() == i * 100 + j * 10 + k).all()
    # the byte offset of (i, j, k): row-major over the axes in `order`
    idx = {"i": 2, "j": 1, "k": 3}
    base = addr3(a, 0, 0, 0)
    stride, strides = 4, {}
    for ch in reversed(order):
        strides[ch] = stride
        stride *= shape["ijk".index(ch)]
    got = addr3(a, idx["i"], idx["j"], idx["k"]) - base
    assert got == sum(idx[ch] * strides[ch] for ch in "ijk")


def test_order_errors():
    with pytest.raises(ti.TaichiCompilationError, match="dimensionality"):
        ti.field(ti.f32, shape=3, order="ij")
    with pytest.raises(ti.TaichiCompilationError, match="shape cannot be None"):
        ti.field(ti.f32, order="i")
    with pytest.raises(ti.TaichiCompilationError, match="must be different"):
        ti.field(ti.f32, shape=(3, 4, 3), order="iji")
    with pytest.raises(ti.TaichiCompilationError, match="Invalid axis"):
        ti.Vector.field(3, ti.f32, shape=(3, 4, 3), order="ihj")


@pytest.mark.parametrize("layout", [ti.Layout.AOS, ti.Layout.SOA])
def test_vector_layouts(layout):
    X, Y, Z = 4, 3, 2
    v = ti.Vector.field(Z, ti.i32, shape=(X, Y), layout=layout, needs_grad=False)

    @ti.kernel
    def fill():
        for i, j in v:
            v[i, j] = [i, j]

    @ti.kernel
    def addr(a: ti.template(), i: ti.i32, j: ti.i32) -> ti.u64:
        return ti.get_addr(a, [i, j])

    fill()
    i, j = np.indices((X, Y))
    assert (v.to_numpy() == np.stack([i, j], -1)).all()
    base = addr(v.get_scalar_field(0), 0, 0)
    for k in range(Z):
        off = addr(v.get_scalar_field(k), 2, 1) - base
        want = (2 * Y + 1) * Z + k if layout == ti.Layout.AOS else k * X * Y + 2 * Y + 1
        assert off == want * 4


def test_get_scalar_field_shares_storage():
    m = ti.Matrix.field(2, 2, ti.f32, shape=3, needs_grad=True)
    e = m.get_scalar_field(1, 0)
    e[2] = 7.0
    assert m[2][1, 0] == 7.0 and e.shape == (3,)

    @ti.kernel
    def double():
        for i in e:
            e[i] *= 2

    double()
    assert m[2][1, 0] == 14.0
    assert e.grad is not None and e.grad.shape == (3,)
    # entries of an unplaced field are placed one by one, under one child of ti.root
    # (test_example_blockers.py checks the values against taichi); fluxion's fields address
    # one SNode tree, so entries in two trees are a clear error
    v = ti.Vector.field(2, ti.f32)
    ti.root.dense(ti.i, 4).place(v.get_scalar_field(0))
    with pytest.raises(ti.FluxionError, match="different SNode trees"):
        ti.root.dense(ti.i, 4).place(v.get_scalar_field(1))
