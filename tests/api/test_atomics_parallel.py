"""Atomic operations and large parallel loops, checked against NumPy or exact counts.

On this machine parallel loops run on several threads, so every test here that touches one
location from many iterations also checks that the updates are atomic.
"""
import numpy as np
import pytest

import fluxion as ti

INT_TYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64]
ALL_TYPES = INT_TYPES + [ti.f32, ti.f64]


@pytest.mark.parametrize("dt", ALL_TYPES, ids=str)
def test_atomic_ops_return_old_values_and_combine_exactly(dt):
    n, groups = 4000, 4
    per = n // groups
    rng = np.random.default_rng(dt.bits + 17 * dt.is_float + 3 * dt.is_signed)
    if dt.is_float:
        vals_np = rng.uniform(-1e3, 1e3, n).astype(dt.np_dtype)
    else:
        info = np.iinfo(dt.np_dtype)
        vals_np = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt.np_dtype)
    vals = ti.field(dt, shape=n)
    vals.from_numpy(vals_np)
    cnt = ti.field(dt, shape=groups)
    old = ti.field(dt, shape=n)
    down = ti.field(dt, shape=())
    old_down = ti.field(dt, shape=n)
    mx = ti.field(dt, shape=())
    mn = ti.field(dt, shape=())
    bits = ti.field(dt, shape=3)
    mx[None] = vals_np[0]
    mn[None] = vals_np[0]
    if not dt.is_float:
        bits[0] = -1 if dt.is_signed else int(np.iinfo(dt.np_dtype).max)

    @ti.kernel
    def run():
        for i in range(n):
            old[i] = ti.atomic_add(cnt[i % groups], 1)
            old_down[i] = ti.atomic_sub(down[None], 1)
            ti.atomic_max(mx[None], vals[i])
            ti.atomic_min(mn[None], vals[i])
            if ti.static(not dt.is_float):
                ti.atomic_and(bits[0], vals[i])
                ti.atomic_or(bits[1], vals[i])
                ti.atomic_xor(bits[2], vals[i])

    run()
    t = dt.np_dtype.type
    np.testing.assert_array_equal(cnt.to_numpy(), np.full(groups, per).astype(dt.np_dtype))
    # every increment saw a distinct old value: per counter, the olds are 0, 1, ..., per - 1
    olds = old.to_numpy()
    for g in range(groups):
        np.testing.assert_array_equal(np.sort(olds[g::groups]),
                                      np.sort(np.arange(per).astype(dt.np_dtype)))
    assert down[None] == t(np.array(-n).astype(dt.np_dtype))
    np.testing.assert_array_equal(np.sort(old_down.to_numpy()),
                                  np.sort((-np.arange(n)).astype(dt.np_dtype)))
    assert mx[None] == vals_np.max()
    assert mn[None] == vals_np.min()
    if not dt.is_float:
        got = bits.to_numpy()
        assert got[0] == np.bitwise_and.reduce(vals_np)
        assert got[1] == np.bitwise_or.reduce(vals_np)
        assert got[2] == np.bitwise_xor.reduce(vals_np)


def test_atomic_return_values_in_serial_order():
    vals = [5, -3, 9, 9, 2, 12, -20, 7]
    v = ti.field(ti.i32, shape=len(vals))
    v.from_numpy(np.array(vals, np.int32))
    acc = ti.field(ti.i32, shape=3)
    olds = ti.field(ti.i32, shape=(3, len(vals)))

    @ti.kernel
    def run():
        ti.loop_config(serialize=True)
        for i in range(len(vals)):
            olds[0, i] = ti.atomic_max(acc[0], v[i])
            olds[1, i] = ti.atomic_min(acc[1], v[i])
            olds[2, i] = ti.atomic_xor(acc[2], v[i])

    run()
    ref = np.zeros((3, len(vals)), np.int64)
    a = [0, 0, 0]
    for i, x in enumerate(vals):
        ref[:, i] = a
        a = [max(a[0], x), min(a[1], x), a[2] ^ x]
    np.testing.assert_array_equal(olds.to_numpy(), ref)
    np.testing.assert_array_equal(acc.to_numpy(), a)


def test_atomics_on_locals_and_vector_elements():
    out = ti.field(ti.i32, shape=4)
    vec = ti.Vector.field(3, ti.f32, shape=())
    n = 3000

    @ti.kernel
    def run():
        for _ in range(1):
            x = 10
            o = ti.atomic_add(x, 5)
            out[0] = o
            out[1] = x
            o2 = ti.atomic_max(x, 3)
            out[2] = o2 * 100 + x
        for i in range(n):
            ti.atomic_add(vec[None], ti.Vector([1.0, 0.5, -1.0]))
            vec[None][2] += 2.0

    run()
    np.testing.assert_array_equal(out.to_numpy()[:3], [10, 15, 1515])
    np.testing.assert_array_equal(vec[None].to_numpy(), [n, n * 0.5, n])


def test_augmented_assignment_is_atomic_under_contention():
    n = 10 ** 6
    c = ti.field(ti.i32, shape=())
    f = ti.field(ti.f32, shape=())
    d = ti.field(ti.f64, shape=())
    b = ti.field(ti.u32, shape=2)
    m = ti.field(ti.i64, shape=())

    @ti.kernel
    def run():
        for i in range(n):
            c[None] += 1
            f[None] += 1.0                    # exact in f32 up to 2**24
            d[None] -= 0.5
            b[0] |= ti.cast(1 << (i % 32), ti.u32)
            b[1] ^= ti.cast(i & 0xFF, ti.u32)
            m[None] += i

    run()
    assert c[None] == n
    assert f[None] == float(n)
    assert d[None] == -0.5 * n
    assert b[0] == 2 ** 32 - 1
    assert b[1] == int(np.bitwise_xor.reduce(np.arange(n) & 0xFF))
    assert m[None] == n * (n - 1) // 2


def test_contended_updates_whose_old_value_is_used():
    # the old values are used, so each update must be a real atomic read-modify-write
    n = 10 ** 6
    c = ti.field(ti.i32, shape=())
    seen = ti.field(ti.i32, shape=n)

    @ti.kernel
    def run():
        for i in range(n):
            k = ti.atomic_add(c[None], 1)
            seen[k] += 1

    run()
    assert c[None] == n
    assert (seen.to_numpy() == 1).all()


def test_histogram_matches_bincount():
    n = 2 * 10 ** 6
    rng = np.random.default_rng(0)
    data_np = rng.integers(0, 1000, n).astype(np.int32)
    data = ti.field(ti.i32, shape=n)
    data.from_numpy(data_np)
    hist = ti.field(ti.i32, shape=37)

    @ti.kernel
    def run():
        for i in data:
            hist[data[i] % 37] += 1

    run()
    np.testing.assert_array_equal(hist.to_numpy(), np.bincount(data_np % 37, minlength=37))


def test_large_elementwise_loop_matches_numpy():
    n = 4 * 10 ** 6
    rng = np.random.default_rng(1)
    x_np = rng.uniform(-4, 4, n).astype(np.float32)
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f32, shape=n)
    x.from_numpy(x_np)

    @ti.kernel
    def run():
        for i in range(n):
            v = x[i]
            y[i] = ti.sin(v) * 2.0 + ti.sqrt(ti.abs(v)) - (i % 7) * 0.25

    run()
    X = x_np.astype(np.float64)
    ref = np.sin(X) * 2 + np.sqrt(np.abs(X)) - (np.arange(n) % 7) * 0.25
    np.testing.assert_allclose(y.to_numpy(), ref, rtol=1e-5, atol=1e-5)


def test_ten_million_iteration_reductions():
    n = 10 ** 7
    s = ti.field(ti.i64, shape=4)
    fm = ti.field(ti.f64, shape=2)
    fm[0] = 1e300
    fm[1] = -1e300

    @ti.kernel
    def run():
        for i in range(n):
            s[0] += i % 7
            s[1] += ti.cast(i, ti.i64) * i % 1000003
            ti.atomic_max(s[2], (i * 7919) % 1000)
            ti.atomic_min(fm[0], ti.cos(ti.cast(i, ti.f64)))
            ti.atomic_max(fm[1], ti.cast(i, ti.f64) * 0.5)

    run()
    i = np.arange(n, dtype=np.int64)
    assert s[0] == int((i % 7).sum())
    assert s[1] == int((i * i % 1000003).sum())
    assert s[2] == 999
    assert fm[0] == pytest.approx(np.cos(i.astype(np.float64)).min(), abs=1e-12)
    assert fm[1] == (n - 1) * 0.5


def test_reduction_under_condition_and_inner_loop():
    n = 200000
    x_np = np.random.default_rng(4).integers(-50, 50, n).astype(np.int32)
    x = ti.field(ti.i32, shape=n)
    x.from_numpy(x_np)
    s = ti.field(ti.i64, shape=3)
    u = ti.field(ti.u8, shape=2)
    u[1] = 255

    @ti.kernel
    def run():
        for i in x:
            if x[i] > 0:
                s[0] += x[i]
            for k in range(3):
                if k == 2:
                    break
                s[1] += x[i] * k
            ti.atomic_min(s[2], x[i])
            ti.atomic_max(u[0], ti.cast(x[i] + 50, ti.u8))
            ti.atomic_min(u[1], ti.cast(x[i] + 60, ti.u8))

    run()
    assert s[0] == x_np[x_np > 0].astype(np.int64).sum()
    assert s[1] == x_np.astype(np.int64).sum()
    assert s[2] == min(0, x_np.min())
    assert u[0] == x_np.max() + 50
    assert u[1] == x_np.min() + 60


def test_parallel_ndrange_and_struct_for_over_large_fields():
    a = ti.field(ti.f32, shape=(1000, 1000))
    total = ti.field(ti.f64, shape=())

    @ti.kernel
    def run():
        for i, j in ti.ndrange(1000, 1000):
            a[i, j] = (i - j) * 0.5
        for i, j in a:
            total[None] += a[i, j] * a[i, j]

    run()
    i, j = np.meshgrid(np.arange(1000), np.arange(1000), indexing="ij")
    ref = (i - j) * 0.5
    np.testing.assert_array_equal(a.to_numpy(), ref.astype(np.float32))
    assert total[None] == pytest.approx((ref ** 2).sum(), rel=1e-12)
