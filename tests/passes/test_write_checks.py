"""passes/write_checks.py: by default (no check_out_of_bound given) every write into a field or
an ndarray is checked, reads are not. A write past the end is an error naming the kernel and
line, and nothing is written; where it must not fire (reads, loops over the field's own
cells, a session with every access checked) there is no check."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.passes import write_checks

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False)
    yield
    ti.reset()


def _kept_checks(monkeypatch):
    """Counts of the checks the pass keeps, per kernel name."""
    kept = {}
    real = write_checks.run

    def run(kernel, cfg=None):
        before = sum(isinstance(s, S.AssertStmt) for s in S.walk_all(kernel))
        out = real(kernel, cfg)
        kept[kernel.name] = sum(isinstance(s, S.AssertStmt) for s in S.walk_all(kernel)) - before
        return out
    monkeypatch.setattr(write_checks, "run", run)
    return kept


def test_a_store_past_a_field_is_an_error_and_writes_nothing():
    a = ti.field(ti.i32, shape=8)
    b = ti.field(ti.i32, shape=8)       # allocated next to `a`: what a stray store would hit

    @ti.kernel
    def put(k: ti.i32, v: ti.i32):
        a[k] = v

    @ti.kernel
    def bump(k: ti.i32):
        ti.atomic_add(a[k], 5)

    put(3, 7)
    for k in (8, 9, 100, -1, 2**31 - 1):
        with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
            put(k, 1)
        text = str(ei.value)
        assert "'put'" in text and f"({k},)" in text and "a[k] = v" in text
        with pytest.raises(ti.FluxionOutOfBoundsError):
            bump(k)
    want = np.zeros(8, np.int32)
    want[3] = 7
    np.testing.assert_array_equal(a.to_numpy(), want)
    np.testing.assert_array_equal(b.to_numpy(), np.zeros(8, np.int32))


def test_offsets_and_several_axes():
    g = ti.field(ti.f32, shape=(4, 6), offset=(-2, 10))

    @ti.kernel
    def put(i: ti.i32, j: ti.i32):
        g[i, j] = 1.0

    put(-2, 10)
    put(1, 15)
    for i, j in ((-3, 10), (2, 10), (0, 9), (0, 16)):
        with pytest.raises(ti.FluxionOutOfBoundsError):
            put(i, j)
    want = np.zeros((4, 6), np.float32)
    want[0, 0] = want[3, 5] = 1.0
    np.testing.assert_array_equal(g.to_numpy(), want)


def test_ndarray_writes_checked_against_the_run_time_shape():
    @ti.kernel
    def put(a: ti.types.ndarray(), k: ti.i32):
        a[k] = 2.0

    @ti.kernel
    def put8(a: ti.types.ndarray(), k: ti.i8):
        a[k] = 3.0      # an i8 index against an extent of 1000: no truncation of the extent

    a = np.zeros(5, np.float32)
    put(a, 4)
    with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
        put(a, 5)
    assert "ndarray argument 'a'" in str(ei.value)
    np.testing.assert_array_equal(a, [0, 0, 0, 0, 2])
    big = np.zeros(1000, np.float32)
    put8(big, 100)
    with pytest.raises(ti.FluxionOutOfBoundsError):
        put8(big, -1)
    assert big[100] == 3.0 and big.sum() == 3.0


def test_reads_are_not_checked_by_default():
    """The original's programs read past a field where the value is unused: a ternary
    evaluates both sides (must not fire)."""
    v = ti.field(ti.f32, shape=4)
    v.from_numpy(np.arange(4, dtype=np.float32) + 1)

    @ti.kernel
    def prev(i: ti.i32) -> ti.f32:
        return v[i - 1] if i > 0 else 0.0

    assert prev(0) == 0.0 and prev(2) == 2.0


def test_loops_over_the_field_keep_no_check(monkeypatch):
    kept = _kept_checks(monkeypatch)
    x = ti.field(ti.f32, shape=64)
    y = ti.field(ti.f32, shape=64)

    @ti.kernel
    def own_cells():
        for i in x:
            y[i] = 2.0 * x[i]
        for i in range(1, 63):
            y[i + 1] += x[i - 1]

    @ti.kernel
    def scattered(n: ti.i32):
        for i in range(n):          # n is an argument: i < 64 is not known
            y[i] = 1.0

    own_cells()
    scattered(64)
    assert kept == {"own_cells": 0, "scattered": 1}
    with pytest.raises(ti.FluxionOutOfBoundsError):
        scattered(65)


def test_gradient_writes_are_checked():
    """A read past the end in the forward kernel is a write past the end of the gradient in
    the adjoint (its atomic add)."""
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def f(k: ti.i32):
        loss[None] += x[k] * x[k]

    x.from_numpy(np.arange(4, dtype=np.float32))
    loss.grad[None] = 1.0
    f.grad(2)
    np.testing.assert_array_equal(x.grad.to_numpy(), [0, 0, 4, 0])
    with pytest.raises(ti.FluxionOutOfBoundsError):
        f.grad(4)
    np.testing.assert_array_equal(x.grad.to_numpy(), [0, 0, 4, 0])


def test_a_sparse_write_past_the_tree_activates_nothing():
    x = ti.field(ti.i32)
    ti.root.pointer(ti.i, 4).dense(ti.i, 4).place(x)

    @ti.kernel
    def put(k: ti.i32):
        x[k] = 1

    @ti.kernel
    def active() -> ti.i32:
        n = 0
        for i in x:
            n += 1
        return n

    put(5)
    with pytest.raises(ti.FluxionOutOfBoundsError):
        put(16)
    assert active() == 4           # the one block of cell 5
    assert x[5] == 1


def test_not_with_every_access_checked(monkeypatch):
    """check_out_of_bound=True checks reads and writes in the frontend: no second check."""
    ti.init(arch=ti.cpu, offline_cache=False, check_out_of_bound=True)
    kept = _kept_checks(monkeypatch)
    a = ti.field(ti.i32, shape=8)

    @ti.kernel
    def put(k: ti.i32):
        a[k] = 1

    with pytest.raises(ti.FluxionOutOfBoundsError):
        put(8)
    assert kept == {}
    ti.init(arch=ti.cpu, offline_cache=False, check_out_of_bound=False)
    kept.clear()
    b = ti.field(ti.i32, shape=8)

    @ti.kernel
    def put2(k: ti.i32):
        b[k] = 1

    put2(3)
    assert kept == {} and b[3] == 1
