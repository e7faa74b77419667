"""Launch overhead with a scalar argument and a little work: a 16-element write."""
import numpy as np

TITLE = "launch with an i32 argument, 16-iteration loop writing a 16-element field"
N = QUICK_N = 16
INNER = 1000
VALUE = 7


def make(ti, n):
    a = ti.field(ti.i32, shape=n)

    @ti.kernel
    def fill(v: ti.i32):
        for i in range(n):  # top level: a parallel loop, as Taichi programs write it
            a[i] = v + i

    return (lambda: fill(VALUE)), a.to_numpy


def setup_numpy(n):
    a = np.zeros(n, np.int32)
    idx = np.arange(n, dtype=np.int32)
    return (lambda: np.add(idx, VALUE, out=a)), lambda: a


def setup_numba(n):
    import numba

    @numba.njit
    def fill(a, v):
        for i in range(a.shape[0]):
            a[i] = v + i

    a = np.zeros(n, np.int32)
    return (lambda: fill(a, VALUE)), lambda: a


def setup_torch(n):
    import torch

    a = torch.zeros(n, dtype=torch.int32)
    idx = torch.arange(n, dtype=torch.int32)
    return (lambda: torch.add(idx, VALUE, out=a)), lambda: a.numpy()


def setup_warp(n):
    import warp as wp

    @wp.kernel
    def fill(a: wp.array(dtype=wp.int32), v: wp.int32):
        i = wp.tid()
        a[i] = v + i

    a = wp.zeros(n, dtype=wp.int32, device="cpu")
    return (lambda: wp.launch(fill, dim=n, inputs=[a, VALUE], device="cpu")), a.numpy
