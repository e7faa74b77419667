"""ti.algorithms: parallel_sort and PrefixSumExecutor on fields (with offsets), ndarrays and
numpy arrays, against numpy's sort and cumsum computed here."""
import numpy as np
import pytest

import fluxion as ti


@pytest.mark.parametrize("dtype", ["i32", "f32", "f64", "u8"])
@pytest.mark.parametrize("n", [1, 2, 257, 4099])
def test_parallel_sort_field_keys_and_values(dtype, n):
    rng = np.random.default_rng(n)
    dt = getattr(ti, dtype)
    keys = ti.field(dt, n, offset=-7)
    values = ti.Vector.field(2, ti.i32, n, offset=-7)
    k = (rng.integers(0, 200, n) if dtype in ("i32", "u8") else rng.standard_normal(n))
    k = k.astype(keys.to_numpy().dtype)
    keys.from_numpy(k)
    values.from_numpy(np.stack([np.arange(n), -np.arange(n)], axis=1).astype(np.int32))
    ti.algorithms.parallel_sort(keys, values)
    order = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(keys.to_numpy(), k[order])
    np.testing.assert_array_equal(values.to_numpy()[:, 0], order)
    np.testing.assert_array_equal(values.to_numpy()[:, 1], -order)


def test_parallel_sort_keys_only_and_ndarrays():
    rng = np.random.default_rng(0)
    k = rng.standard_normal(1000).astype(np.float32)
    keys = ti.ndarray(ti.f32, 1000)
    keys.from_numpy(k)
    ti.algorithms.parallel_sort(keys)
    np.testing.assert_array_equal(keys.to_numpy(), np.sort(k))
    arr = rng.integers(-50, 50, 300).astype(np.int64)
    vals = ti.ndarray(ti.i64, 300)
    vals.from_numpy(arr * 10)
    ti.algorithms.parallel_sort(arr, vals)   # a numpy array is sorted in place too
    assert np.all(np.diff(arr) >= 0)
    np.testing.assert_array_equal(vals.to_numpy(), arr * 10)


def test_parallel_sort_after_a_kernel_and_before_one():
    n = 500
    keys = ti.field(ti.f32, n)
    out = ti.field(ti.i32, ())

    @ti.kernel
    def fill():
        for i in keys:
            keys[i] = ti.random()

    @ti.kernel
    def count_sorted():
        for i in range(n - 1):
            if keys[i] <= keys[i + 1]:
                out[None] += 1

    fill()
    ti.algorithms.parallel_sort(keys)
    count_sorted()
    assert out[None] == n - 1


def test_parallel_sort_rejects_bad_input():
    with pytest.raises(ValueError, match="one dimension"):
        ti.algorithms.parallel_sort(ti.field(ti.f32, (4, 4)))
    with pytest.raises(ValueError, match="do not match"):
        ti.algorithms.parallel_sort(ti.field(ti.f32, 4), ti.field(ti.f32, 5))
    with pytest.raises(TypeError, match="field"):
        ti.algorithms.parallel_sort([3, 2, 1])


@pytest.mark.parametrize("n", [1, 512, 1000])
@pytest.mark.parametrize("offset", [0, -300])
def test_prefix_sum_inclusive_in_place(n, offset):
    rng = np.random.default_rng(n)
    a = rng.integers(0, n, n).astype(np.int32)
    arr = ti.field(ti.i32, n, offset=offset)
    arr.from_numpy(a)
    ti.algorithms.PrefixSumExecutor(n).run(arr)
    np.testing.assert_array_equal(arr.to_numpy(), np.cumsum(a))


def test_prefix_sum_prefix_only_wraps_and_floats():
    a = np.array([2**31 - 1, 1, 5, 7], dtype=np.int32)
    arr = ti.ndarray(ti.i32, 4)
    arr.from_numpy(a)
    ti.algorithms.PrefixSumExecutor(3).run(arr)
    # int32 addition wraps, as in a kernel; the fourth element is outside the length
    np.testing.assert_array_equal(arr.to_numpy(), [2**31 - 1, -(2**31), -(2**31) + 5, 7])
    f = ti.field(ti.f64, 5)
    f.from_numpy(np.array([0.5, 1.5, 2.0, -1.0, 4.0]))
    ti.algorithms.PrefixSumExecutor(5).run(f)
    np.testing.assert_array_equal(f.to_numpy(), [0.5, 2.0, 4.0, 3.0, 7.0])
    with pytest.raises(ValueError, match="only 5"):
        ti.algorithms.PrefixSumExecutor(6).run(f)
