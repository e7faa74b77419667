"""Python-scope stores of integers out of an element type's range wrap around, into fields and
ndarrays alike, as in the original (against taichi, the oracle, where installed, and against
NumPy's wrapping cast). An ndarray refused them with NumPy's OverflowError where a field of the
same type wrapped: `a_u8[0] = -1` failed, `x_u8[0] = -1` stored 255."""
import numpy as np
import pytest

from taichi_ref import check_against_taichi

TYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
VALUES = (-1, 300, 70000, 2**32 + 5, -2**31 - 1)


def wrapping_stores(ti):
    out = {}
    for name in ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"):
        dt = getattr(ti, name)
        a = ti.ndarray(dt, shape=5)
        f = ti.field(dt, shape=5)
        for k, v in enumerate((-1, 300, 70000, 2**32 + 5, -2**31 - 1)):
            a[k] = v
            f[k] = v
        out[name] = [int(a[k]) for k in range(5)] + [int(f[k]) for k in range(5)]
    return out


def test_integer_stores_wrap_as_in_taichi():
    check_against_taichi(wrapping_stores, rtol=0)


@pytest.mark.parametrize("name", TYPES)
def test_ndarray_stores_and_fill_wrap_as_fields_do(name):
    import fluxion as ti
    ti.init(arch=ti.cpu)
    dt = getattr(ti, name)
    np_t = np.dtype({"i": "int", "u": "uint"}[name[0]] + name[1:])
    want = [np.array(v).astype(np_t).item() for v in VALUES]   # NumPy's wrapping cast
    a, f = ti.ndarray(dt, shape=len(VALUES)), ti.field(dt, shape=len(VALUES))
    for k, v in enumerate(VALUES):
        a[k] = v
        f[k] = v
    assert [a[k] for k in range(len(VALUES))] == want == [f[k] for k in range(len(VALUES))]
    a.fill(-1)
    assert a.to_numpy().tolist() == [np.array(-1).astype(np_t).item()] * len(VALUES)
    v = ti.ndarray(ti.types.vector(2, dt), shape=2)
    v[1] = [-1, 300]
    assert v[1].to_list() == [np.array(-1).astype(np_t).item(), np.array(300).astype(np_t).item()]
