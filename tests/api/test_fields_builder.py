"""`ti.FieldsBuilder`: a tree of its own, allocated by `finalize()`, freed by the returned
SNodeTree's `destroy()`; kernels compiled against a destroyed tree compile again."""
import pytest

import fluxion as ti


def test_build_finalize_use():
    fb = ti.FieldsBuilder()
    x = ti.field(ti.f32)
    y = ti.field(ti.i32)
    fb.dense(ti.i, 5).place(x)
    fb.dense(ti.ij, (2, 3)).place(y)
    tree = fb.finalize()
    assert isinstance(tree.id, int)

    @ti.kernel
    def k():
        for i in x:
            x[i] = i * 1.5
        for i, j in y:
            y[i, j] = i * 10 + j

    k()
    assert x.to_numpy().tolist() == [0, 1.5, 3, 4.5, 6]
    assert y.to_numpy().tolist() == [[0, 1, 2], [10, 11, 12]]
    with pytest.raises(ti.TaichiRuntimeError):
        fb.dense(ti.i, 2)                           # finalized: no more fields


def test_destroy_frees_and_later_trees_start_at_zero():
    fb = ti.FieldsBuilder()
    a = ti.field(ti.i32)
    fb.dense(ti.i, 4).place(a)
    t = fb.finalize()
    a.fill(5)
    t.destroy()
    with pytest.raises(ti.TaichiRuntimeError):
        a[0]
    with pytest.raises(ti.TaichiRuntimeError):
        t.destroy()                                 # twice
    fb2 = ti.FieldsBuilder()
    b = ti.field(ti.i32)
    fb2.dense(ti.i, 4).place(b)
    fb2.finalize()
    assert b.to_numpy().tolist() == [0, 0, 0, 0]


def test_a_kernel_recompiles_after_its_tree_is_destroyed():
    @ti.data_oriented
    class Holder:
        def build(self, n):
            self.x = ti.field(ti.i32)
            fb = ti.FieldsBuilder()
            fb.dense(ti.i, n).place(self.x)
            self.tree = fb.finalize()

        @ti.kernel
        def fill(self, m: ti.i32):
            for i in self.x:
                self.x[i] = m * i

    h = Holder()
    h.build(8)
    h.fill(2)
    assert h.x[7] == 14
    old = h.x
    h.tree.destroy()
    h.build(16)                                     # new fields, maybe at the same address
    h.fill(3)
    assert h.x.to_numpy().tolist() == [3 * i for i in range(16)]
    with pytest.raises(ti.TaichiRuntimeError):
        old.to_numpy()


def test_grads_placed_by_the_program():
    arr = ti.field(ti.f32, needs_grad=True)
    fb0 = ti.FieldsBuilder()
    fb0.dense(ti.i, 10).place(arr, arr.grad)        # needs_grad and an explicit grad: one
    fb0.finalize()
    loss = ti.field(ti.f32)
    fb1 = ti.FieldsBuilder()
    fb1.place(loss, loss.grad)
    fb1.finalize()

    @ti.kernel
    def calc(a: ti.template(), l: ti.template()):
        for i in a:
            l[None] += a[i] * 3.0

    arr.fill(1.0)
    calc(arr, loss)
    loss.grad[None] = 1.0
    calc.grad(arr, loss)
    assert arr.grad.to_numpy().tolist() == [3.0] * 10


def test_lazy_grad_of_a_builder():
    fb = ti.FieldsBuilder()
    x = ti.field(ti.f32)
    fb.dense(ti.i, 3).place(x)
    fb.lazy_grad()
    fb.finalize()
    assert x.grad.shape == (3,)
    assert x.grad.snode._snode_tree_id == x.snode._snode_tree_id   # the same tree
