"""Whole-field reads and writes (to_numpy, from_numpy, fill) of dense trees that split axes over
several levels go through a numpy view with an axis per level (lang/field_host.py's Blocked),
not a table of every element's byte offset; a vector or matrix field's components that lie
side by side in each element are read and written as one array. Values are checked against
NumPy formulas of the indices, written and read by kernels too."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang.field_host import Blocked

LAYOUTS = {
    # name: (how to place fields, the field shape)
    "blocks_2d": (lambda *f: ti.root.dense(ti.ij, (2, 3)).dense(ti.ij, (4, 5)).place(*f),
                  (8, 15)),
    "three_levels": (lambda *f: ti.root.dense(ti.i, 3).dense(ti.ij, (2, 4)).dense(ti.j, 2)
                     .place(*f), (6, 8)),
    "blocks_3d": (lambda *f: ti.root.dense(ti.ijk, 2).dense(ti.ijk, (3, 1, 2)).place(*f),
                  (6, 2, 4)),
    # (extents given in the order of the axes named: j 2, i 3)
    "axis_order_ji": (lambda *f: ti.root.dense(ti.axes(1, 0), (2, 3)).dense(ti.ij, (4, 2))
                      .place(*f), (12, 4)),
}
ELEMS = {"scalar": (), "vector": (3,), "matrix": (2, 2)}


def _field(elem, dtype=ti.f32):
    es = ELEMS[elem]
    if not es:
        return ti.field(dtype)
    if len(es) == 1:
        return ti.Vector.field(es[0], dtype)
    return ti.Matrix.field(es[0], es[1], dtype)


def _formula(shape, es):
    """Element I's entry e: the flat index of I times 10 plus the entry's flat index."""
    flat = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if not es:
        return flat * 10
    ent = np.arange(int(np.prod(es)), dtype=np.float32).reshape(es)
    return flat.reshape(shape + (1,) * len(es)) * 10 + ent


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("elem", sorted(ELEMS))
def test_split_axes_read_and_write_through_a_view_per_level(layout, elem):
    place, shape = LAYOUTS[layout]
    es = ELEMS[elem]
    x = _field(elem)
    other = ti.field(ti.i32)          # a neighbour in every cell: strides are not the element's
    place(x, other)
    assert x.shape == shape

    @ti.kernel
    def write():
        for I in ti.grouped(x):
            k = 0
            for d in ti.static(range(len(shape))):
                k = k * ti.static(shape)[d] + I[d]
            if ti.static(len(es) == 0):
                x[I] = k * 10.0
            else:
                for e in ti.static(range(int(np.prod(es)))):
                    if ti.static(len(es) == 1):
                        x[I][e] = k * 10.0 + e
                    else:
                        x[I][e // es[1], e % es[1]] = k * 10.0 + e
            other[I] = -1

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for I in ti.grouped(x):
            if ti.static(len(es) == 0):
                s += x[I] * (I[0] + 1)
            else:
                s += x[I].sum() * (I[0] + 1)
        return s

    write()
    views = x._views()
    assert all(view is None and isinstance(offs, Blocked) for view, offs in views)
    want = _formula(shape, es)
    np.testing.assert_array_equal(x.to_numpy(), want)
    new = np.random.default_rng(1).normal(size=shape + es).astype(np.float32)
    x.from_numpy(new)
    np.testing.assert_array_equal(x.to_numpy(), new)
    weights = (np.arange(shape[0]) + 1).reshape((shape[0],) + (1,) * (len(shape) - 1 + len(es)))
    np.testing.assert_allclose(total(), float((new.astype(np.float64) * weights).sum()),
                               rtol=1e-6)
    x.fill(2.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full(shape + es, 2.5, np.float32))
    assert (other.to_numpy() == -1).all()       # (its bytes between x's were not touched)


def test_side_by_side_components_read_as_one_copy():
    v = ti.Vector.field(3, ti.f32, shape=(5, 7))
    assert v._side_by_side() is not None
    v.from_numpy(_formula((5, 7), (3,)))
    got = v.to_numpy()
    np.testing.assert_array_equal(got, _formula((5, 7), (3,)))
    got[...] = 0                                # a copy, not the field's memory
    np.testing.assert_array_equal(v.to_numpy(), _formula((5, 7), (3,)))
    assert v[4, 6][2] == (4 * 7 + 6) * 10 + 2


def test_side_by_side_writes_convert_as_numpy_stores():
    m = ti.Matrix.field(2, 2, ti.u8, shape=3)
    m.from_numpy(np.array([[[-1, 256], [3.9, 7]]] * 3))
    np.testing.assert_array_equal(m.to_numpy(), [[[255, 0], [3, 7]]] * 3)
    m.from_numpy(np.array([[[1, 2], [3, 4]]] * 3, dtype=np.int64))
    assert m.to_numpy().dtype == np.uint8 and m[2][1, 0] == 3


def test_components_apart_keep_a_view_each():
    # entries of a vector with another field's between them are not side by side
    v = ti.Vector.field(2, ti.f32)
    pad = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).place(v.get_scalar_field(0), pad, v.get_scalar_field(1))
    assert v._side_by_side() is None
    v.from_numpy(np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32))

    @ti.kernel
    def diff() -> ti.f32:
        s = 0.0
        for i in v:
            s += v[i][1] - v[i][0]
        return s

    assert diff() == 4.0
    np.testing.assert_array_equal(v.to_numpy()[:, 1], [2, 4, 6, 8])
    assert (pad.to_numpy() == 0).all()
