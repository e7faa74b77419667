"""y = a*x + y over float32 arrays: bound by memory bandwidth."""
import numpy as np

TITLE = "y[i] = a*x[i] + y[i], float32"
N = 10_000_000
QUICK_N = 1_000_000
BYTES_PER_ITEM = 12  # read x, read y, write y
A = 0.5  # y grows by 0.5 a call: no overflow however many calls are timed


def _inputs(n):
    rng = np.random.default_rng(0)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def make(ti, n):
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f32, shape=n)
    x0, y0 = _inputs(n)
    x.from_numpy(x0)
    y.from_numpy(y0)

    @ti.kernel
    def saxpy(a: ti.f32):
        for i in x:
            y[i] = a * x[i] + y[i]

    # y depends on the number of calls, so there is nothing to compare across peers
    return (lambda: saxpy(A)), lambda: None


def setup_numpy(n):
    x, y = _inputs(n)
    tmp = np.empty_like(x)

    def run():  # numpy's best: no temporaries allocated, but two passes
        np.multiply(x, A, out=tmp)
        np.add(tmp, y, out=y)

    return run, lambda: None


def setup_numba(n):
    import numba

    @numba.njit(parallel=True, fastmath=True)
    def saxpy(a, x, y):
        for i in numba.prange(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x, y = _inputs(n)
    a = np.float32(A)
    return (lambda: saxpy(a, x, y)), lambda: None


def setup_torch(n):
    import torch

    x, y = (torch.from_numpy(v) for v in _inputs(n))
    return (lambda: y.add_(x, alpha=A)), lambda: None


def setup_warp(n):
    import warp as wp

    @wp.kernel
    def saxpy(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        y[i] = a * x[i] + y[i]

    x, y = (wp.array(v, device="cpu") for v in _inputs(n))
    return (lambda: wp.launch(saxpy, dim=n, inputs=[A, x, y], device="cpu")), lambda: None
