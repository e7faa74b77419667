"""`ti.algorithms`: sorting and prefix sums over whole fields and arrays, called from Python.

Both work on the host copy of the data (numpy), where a sort or a scan is one call over
contiguous memory; on CUDA the field is brought to the host and back (one copy each way).

>>> keys = ti.field(ti.f32, 1000); values = ti.field(ti.i32, 1000)
>>> ti.algorithms.parallel_sort(keys, values)     # keys ascending, values permuted alike
>>> ti.algorithms.PrefixSumExecutor(1000).run(values)   # inclusive, in place
"""
from __future__ import annotations

import numpy as np

from fluxion.lang.field import Field
from fluxion.lang.ndarray import Ndarray

__all__ = ["PrefixSumExecutor", "parallel_sort"]


def _read(arr, what):
    """(numpy copy of `arr`, a function writing a numpy array back into it)."""
    if isinstance(arr, Field):
        return arr.to_numpy(), arr.from_numpy
    if isinstance(arr, Ndarray):
        return arr.to_numpy(), arr.from_numpy
    if isinstance(arr, np.ndarray):
        def write(a):
            arr[...] = a
        return arr.copy(), write
    raise TypeError(f"{what} must be a field, a ti.ndarray or a numpy array, "
                    f"got {type(arr).__name__}")


def parallel_sort(keys, values=None):
    """Sort the 1-D field (or ndarray) `keys` ascending, in place; when `values` is given (a
    field or ndarray with the same number of elements along its first axis: scalars, vectors
    or matrices), its elements move with their keys. Equal keys keep their order (the
    original system's odd-even merge sort gives them in some order)."""
    k, write_keys = _read(keys, "keys")
    if k.ndim != 1:
        raise ValueError(f"parallel_sort: keys must have one dimension, got shape {k.shape}")
    order = np.argsort(k, kind="stable")
    if values is not None:
        v, write_values = _read(values, "values")
        if v.ndim == 0 or v.shape[0] != k.shape[0]:
            raise ValueError(f"parallel_sort: values of shape {v.shape} do not match "
                             f"{k.shape[0]} keys")
        write_values(v[order])
    write_keys(k[order])


class PrefixSumExecutor:
    """Inclusive prefix sums, in place, over the first `length` elements of a 1-D field or
    ndarray: `PrefixSumExecutor(n).run(arr)` leaves arr[i] = arr[0] + ... + arr[i]. Integer
    sums wrap around on overflow in the array's type, as additions in a kernel do.
    (The original system runs it on CUDA and Vulkan only, and on ti.i32 only.)"""

    def __init__(self, length):
        length = int(length)
        if length < 0:
            raise ValueError(f"PrefixSumExecutor: negative length {length}")
        self.sorting_length = length      # the original system's attribute name

    def run(self, input_arr):
        a, write = _read(input_arr, "the array")
        n = self.sorting_length
        if a.ndim != 1:
            raise ValueError(f"PrefixSumExecutor.run: the array must have one dimension, got "
                             f"shape {a.shape}")
        if n > a.shape[0]:
            raise ValueError(f"PrefixSumExecutor({n}).run: the array has only {a.shape[0]} "
                             f"elements")
        if a.dtype == np.bool_:
            raise TypeError("PrefixSumExecutor.run: a boolean array has no sums")
        with np.errstate(over="ignore"):
            a[:n] = np.cumsum(a[:n], dtype=a.dtype)
        write(a)
