"""`ti.u1` (and `bool` as a dtype): a boolean type. Converting to it is a truth test
(`ti.u1(2)` is 1, like Python's bool(2)); arithmetic between u1 values wraps in one bit
(1 + 1 is 0), as in the original system; in memory it is NumPy's bool."""
import numpy as np
import pytest

import fluxion as ti


def test_u1_is_a_type_and_bool_means_u1():
    assert ti.u1 is ti.uint1 and ti.types.u1 is ti.u1
    assert ti.u1.to_string() == "u1"
    assert ti.types.is_integral(ti.u1) and not ti.types.is_signed(ti.u1)
    f = ti.field(bool, shape=3)
    assert f.dtype is ti.u1 and f.to_numpy().dtype == np.bool_


def test_arguments_and_returns_take_truth_values():
    @ti.kernel
    def negate(x: ti.u1) -> ti.u1:
        return not x

    for v in (False, True, 0, 1, 2, -5, np.int64(7), np.bool_(True)):
        assert negate(v) == int(not bool(v))
    with pytest.raises(ti.TaichiRuntimeTypeError):
        negate(0.5)                                # a float is no boolean argument


def test_conversion_is_a_truth_test_and_arithmetic_wraps():
    @ti.kernel
    def conv(x: ti.i32, y: ti.f32) -> ti.types.vector(5, ti.i32):
        a = ti.u1(x)
        return ti.Vector([a, ti.cast(x, ti.u1), ti.u1(y), a + a, a + 5])

    for x, y in [(0, 0.0), (1, 0.5), (2, -1.0), (-7, 0.0), (3, 2.0)]:
        t = int(bool(x))
        assert list(conv(x, y)) == [t, t, int(bool(y)), (t + t) % 2, t + 5]


def test_a_bool_local_is_a_kernel_variable():
    # a Python bool bound to a local was a compile-time constant: a runtime branch's
    # `found = True` then made it true whatever the condition
    @ti.kernel
    def first(x: ti.i32) -> ti.i32:
        found = False
        if x > 3:
            found = True
        return found

    assert [first(v) for v in (0, 3, 4, 9)] == [0, 0, 1, 1]


def test_u1_fields_store_and_update_atomically():
    flags = ti.field(ti.u1, shape=8)
    any_hit = ti.field(ti.u1, shape=())
    data = np.array([0, 5, 0, 0, 2, 0, 0, 9], np.int32)
    arr = ti.ndarray(ti.i32, shape=8)
    arr.from_numpy(data)

    @ti.kernel
    def mark(a: ti.types.ndarray()):
        for i in flags:
            flags[i] = a[i]                  # a truth test: 5 is true
            any_hit[None] |= a[i] == 9

    mark(arr)
    assert flags.to_numpy().tolist() == (data != 0).tolist()
    assert any_hit[None] == 1
    flags[3] = 7
    assert flags[3] == 1


def test_vectors_of_u1():
    @ti.kernel
    def positive(v: ti.types.vector(3, ti.i32)) -> ti.types.vector(3, ti.u1):
        return v > 0

    assert list(positive(ti.Vector([1, 0, -4]))) == [1, 0, 0]


def test_u1_arrays():
    @ti.kernel
    def parity(x: ti.types.ndarray(dtype=ti.u1)):
        for i in x:
            x[i] = i % 2

    a = ti.ndarray(ti.u1, shape=4)
    parity(a)
    assert a.to_numpy().tolist() == [False, True, False, True]
    b = np.zeros(4, np.bool_)                  # NumPy's bools are u1 bytes
    parity(b)
    assert b.tolist() == [False, True, False, True]
    with pytest.raises(TypeError):
        parity(np.zeros(4, np.uint8))           # uint8 is no boolean array
