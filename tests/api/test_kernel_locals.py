"""Kernel-level locals updated from a parallel loop.

A local defined before a top-level `for` is one variable shared by every iteration; the
language makes `s += v` (and `ti.atomic_*(s, v)`) on it atomic, so it is a reduction, not a
race. Locals defined inside the loop are private to an iteration and stay plain. Each test
computes its expectation with NumPy or plain Python.
"""
import numpy as np
import pytest

import fluxion as ti

N = 100_003   # more than one chunk per thread, not a multiple of any vector width


def _ints(n):
    return (np.arange(n, dtype=np.int64) * 7919 % 1009 - 500).astype(np.int32)


@pytest.mark.parametrize("dtype", [ti.i32, ti.f32, ti.f64])
def test_local_sum_with_a_store_in_the_body(dtype):
    # the reported program: any store in the body made the sum come out wrong (32 for 1000)
    x = ti.field(dtype, shape=N)
    y = ti.field(dtype, shape=N)
    vals = _ints(N)
    x.from_numpy(vals.astype({ti.i32: np.int32, ti.f32: np.float32, ti.f64: np.float64}[dtype]))

    @ti.kernel
    def k() -> dtype:
        s = ti.cast(0, dtype)
        for i in x:
            y[i] = 3
            s += x[i]
        return s

    assert k() == int(vals.astype(np.int64).sum())   # small integers: exact in every type
    assert (y.to_numpy() == 3).all()


def test_local_sum_over_range_and_ndarray():
    vals = _ints(N).astype(np.float32)
    out = np.zeros(N, np.float32)

    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray(), n: ti.i32) -> ti.f32:
        s = 0.0
        for i in range(n):
            b[i] = a[i] * 2
            s += a[i]
        return s

    assert k(vals, out, N) == float(vals.astype(np.float64).sum())
    np.testing.assert_array_equal(out, vals * 2)


def test_every_augmented_operator_and_explicit_atomics_on_locals():
    vals = _ints(N)
    x = ti.field(ti.i32, shape=N)
    y = ti.field(ti.i32, shape=N)
    x.from_numpy(vals)
    r = ti.field(ti.i32, shape=6)

    @ti.kernel
    def k():
        a, b, c, d, lo, hi = 0, 0, 0, -1, 10**6, -10**6
        for i in x:
            y[i] = i
            a += x[i]
            b -= x[i]
            c |= x[i] & 0xFF
            d &= ~(1 << (i % 20))
            ti.atomic_min(lo, x[i])
            ti.atomic_max(hi, x[i])
        r[0], r[1], r[2], r[3], r[4], r[5] = a, b, c, d, lo, hi

    k()
    s = int(vals.astype(np.int64).sum())
    c = 0
    for v in vals & 0xFF:
        c |= int(v)
    d = -1
    for i in range(20):
        d &= ~(1 << i)
    assert list(r.to_numpy()) == [s, -s, c, d, int(vals.min()), int(vals.max())]


def test_vector_local_accumulator():
    x = ti.Vector.field(3, ti.f32, shape=N)
    vals = np.stack([_ints(N), _ints(N) * 2, np.ones(N, np.int32)], axis=1).astype(np.float32)
    x.from_numpy(vals)
    y = ti.field(ti.f32, shape=N)

    @ti.kernel
    def k() -> ti.types.vector(3, ti.f32):
        acc = ti.Vector([0.0, 0.0, 0.0])
        for i in x:
            y[i] = x[i].sum()
            acc += x[i]
        return acc

    np.testing.assert_array_equal(k().to_numpy(), vals.astype(np.float64).sum(axis=0))


def test_atomic_on_a_local_whose_old_value_is_used_hands_out_distinct_slots():
    # the reduction must not be privatized here: each iteration reads the shared counter
    n = 5000
    y = ti.field(ti.i32, shape=n)

    @ti.kernel
    def k() -> ti.i32:
        c = 0
        for i in range(n):
            y[ti.atomic_add(c, 1)] = i
        return c

    assert k() == n
    assert sorted(y.to_numpy().tolist()) == list(range(n))


def test_locals_inside_the_loop_stay_private_to_the_iteration():
    x = ti.field(ti.i32, shape=N)
    y = ti.field(ti.i32, shape=N)
    vals = _ints(N)
    x.from_numpy(vals)

    @ti.kernel
    def k():
        for i in x:
            t = 0
            for j in range(3):
                t += x[i] + j
            y[i] = t

    k()
    np.testing.assert_array_equal(y.to_numpy(), 3 * vals + 3)


def test_serialized_loop_keeps_running_sum_in_order():
    n = 1000
    x = ti.field(ti.i32, shape=n)
    y = ti.field(ti.i32, shape=n)
    vals = _ints(n)
    x.from_numpy(vals)

    @ti.kernel
    def k():
        s = 0
        ti.loop_config(serialize=True)
        for i in range(n):
            s += x[i]
            y[i] = s

    k()
    np.testing.assert_array_equal(y.to_numpy(), np.cumsum(vals))


def test_local_reductions_in_two_loops_and_reused_after():
    n = 10_000
    x = ti.field(ti.f64, shape=n)
    x.from_numpy(np.arange(n, dtype=np.float64))
    y = ti.field(ti.f64, shape=n)

    @ti.kernel
    def k() -> ti.f64:
        s: ti.f64 = 0.0        # a bare 0.0 would be the default f32
        for i in x:
            s += x[i]
        m = s / n
        v: ti.f64 = 0.0
        for i in x:
            y[i] = x[i] - m
            v += (x[i] - m) ** 2
        return v / n

    ref = np.arange(n, dtype=np.float64)
    assert k() == pytest.approx(ref.var(), rel=1e-12)
    np.testing.assert_allclose(y.to_numpy(), ref - ref.mean(), rtol=0, atol=1e-9)


def test_index_with_a_side_effect_is_evaluated_once():
    # `s[ti.atomic_add(c[None], 1)] = i` advanced the counter twice and wrote past the end
    n = 64
    s = ti.field(ti.i32, shape=n)
    c = ti.field(ti.i32, shape=())

    @ti.kernel
    def k():
        for i in range(n):
            s[ti.atomic_add(c[None], 1)] = i

    k()
    assert c[None] == n
    assert sorted(s.to_numpy().tolist()) == list(range(n))


def test_augmented_index_with_a_side_effect_is_evaluated_once():
    n = 16
    s = ti.field(ti.i32, shape=n)
    c = ti.field(ti.i32, shape=())

    @ti.kernel
    def k() -> ti.i32:
        v = ti.Vector([0, 0, 0, 0])
        k = 0
        ti.loop_config(serialize=True)
        for i in range(n):
            s[ti.atomic_add(c[None], 1)] += i
            v[ti.atomic_add(k, 1) % 4] += 1      # a local vector with a run-time index
        return v[0] * 1000 + k

    assert k() == 4 * 1000 + n
    assert c[None] == n
    np.testing.assert_array_equal(s.to_numpy(), np.arange(n))


def test_kernel_level_vector_updated_at_a_run_time_index_from_a_parallel_loop():
    # a histogram in a local vector: each update goes to one entry chosen per iteration
    n = 1_000_003
    x = ti.field(ti.i32, shape=n)
    vals = _ints(n)
    x.from_numpy(vals)

    @ti.kernel
    def k() -> ti.types.vector(4, ti.i32):
        h = ti.Vector([0, 0, 0, 0])
        for i in x:
            h[x[i] % 4] += 1
        return h

    np.testing.assert_array_equal(k().to_numpy(), np.bincount(vals % 4, minlength=4))


def test_bool_local_assigned_under_a_run_time_condition():
    # `ok = True` is a variable: `ok = False` in a branch that never runs leaves it True
    # (it once rebound the Python name at compile time, and the kernel returned False)
    x = ti.field(ti.f32, shape=64)
    x.from_numpy(np.linspace(-1, 1, 64).astype(np.float32))

    @ti.kernel
    def all_below(t: ti.f32) -> ti.i32:
        ok = True
        for i in x:
            if x[i] < t:
                pass
            else:
                ok = False
        return ok

    @ti.kernel
    def serial_flag(t: ti.f32) -> ti.i32:
        found = False
        ti.loop_config(serialize=True)
        for i in range(64):
            if x[i] > t:
                found = True
        return found

    assert all_below(2.0) == 1
    assert all_below(0.5) == 0
    assert serial_flag(0.5) == 1
    assert serial_flag(2.0) == 0
