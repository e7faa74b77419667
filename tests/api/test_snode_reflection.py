"""The SNode API of the original system: `x.snode` is the field's place (its `parent()` the
node it was placed in), shapes in axis order, paths from `ti.root`, cell sizes; a float
field's grad exists before it is placed (`place(x, x.grad)`)."""
import numpy as np
import pytest

import fluxion as ti


def test_parents_and_paths():
    val = ti.field(ti.i32)
    blk1 = ti.root.dense(ti.k, 3)
    blk2 = blk1.dense(ti.i, 7)
    blk3 = blk2.dense(ti.j, 11)
    blk3.place(val)
    assert val.shape == (7, 11, 3)                  # axis order, whatever the nesting
    s = val.snode
    assert s.parent(0) is s and s.parent() is blk3 and s.parent(2) is blk2
    assert s.parent(3) is blk1 and s.parent(4) is ti.root and s.parent(5) is None
    assert ti.root.parent() is None
    assert s._path_from_root() == [ti.root, blk1, blk2, blk3, s]
    assert blk1.shape == (3,) and blk2.shape == (7, 3) and blk3.shape == (7, 11, 3)
    assert str(s) == "ti.root => dense [3] => dense [7, 3] => dense [7, 11, 3] => place [7, 11, 3]"
    assert s in blk3._get_children() and blk2 in blk1._get_children()
    assert val.parent() is blk3 and s._name == val._name == ""


def test_cell_sizes_and_offsets():
    x = ti.field(ti.i32)
    ti.root.dense(ti.l, 3).dense(ti.ijk, 5).place(x)
    assert x.shape == (5, 5, 5, 3)
    assert x.snode.parent().parent()._cell_size_bytes == 4 * 5 ** 3
    a, b = ti.field(ti.f64), ti.field(ti.i32)
    ti.root.dense(ti.i, 4).place(a, b)
    assert a.snode._offset_bytes_in_parent_cell == 0
    assert b.snode._offset_bytes_in_parent_cell == 8


def test_a_field_under_later_axes_only():
    # as the original: the axes a tree splits, in order, are the field's dimensions
    y = ti.field(ti.i32)
    ti.root.dense(ti.j, 5).place(y)
    assert y.shape == (5,)

    @ti.kernel
    def k():
        for i in y:
            y[i] = i * i

    k()
    assert y.to_numpy().tolist() == [0, 1, 4, 9, 16]


def test_one_extent_for_several_axes():
    z = ti.field(ti.i32)
    ti.root.dense(ti.ij, (3,)).place(z)
    assert z.shape == (3, 3)


def test_tree_ids_count_allocated_trees():
    ids = []
    for _ in range(3):
        s = ti.field(int, shape=())
        ids.append(s.snode._snode_tree_id)
    assert ids == [0, 1, 2]


def test_grad_placed_beside_its_primal():
    x = ti.field(ti.f32)
    y = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).place(x, x.grad, y, y.grad)

    @ti.kernel
    def f():
        for i in x:
            y[i] = ti.sin(x[i])

    x.from_numpy(np.linspace(0, 1, 4, dtype=np.float32))
    y.grad.fill(1)
    f()
    f.grad()
    assert np.allclose(x.grad.to_numpy(), np.cos(x.to_numpy()), atol=1e-6)


def test_grad_placed_later_and_checked():
    a = ti.field(ti.f32)
    ti.root.dense(ti.i, 3).place(a)
    ti.root.dense(ti.i, 3).place(a.grad)
    assert a.grad.shape == (3,)
    b = ti.field(ti.f32)
    ti.root.dense(ti.i, 3).place(b)
    with pytest.raises(ti.FluxionError, match="primal has shape"):
        ti.root.dense(ti.i, 4).place(b.grad)
    assert ti.field(ti.i32).grad is None             # integers have none


def test_an_unplaced_grad_in_a_kernel_names_itself():
    x = ti.field(ti.f32, shape=(), name="x")
    y = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        y[None] = x.grad[None]

    with pytest.raises(ti.TaichiCompilationError, match=r"Gradient x.grad has not been placed"):
        k()
