"""Float32 sum of an array: a parallel reduction."""
import numpy as np

TITLE = "float32 sum into a 0-D field, s[None] += x[i]"
N = 10_000_000
QUICK_N = 1_000_000
BYTES_PER_ITEM = 4


def _input(n):
    return np.random.default_rng(1).random(n, dtype=np.float32)


def make(ti, n):
    x = ti.field(ti.f32, shape=n)
    s = ti.field(ti.f32, shape=())
    x.from_numpy(_input(n))

    @ti.kernel
    def total() -> ti.f32:
        s[None] = 0.0
        for i in x:
            s[None] += x[i]  # Taichi's idiom: an atomic add the compiler turns into a reduction
        return s[None]

    return total, lambda: s[None]


def setup_numpy(n):
    x = _input(n)
    return (lambda: np.sum(x)), lambda: float(np.sum(x))


def setup_numba(n):
    import numba

    @numba.njit(parallel=True, fastmath=True)
    def total(x):
        s = np.float32(0.0)
        for i in numba.prange(x.shape[0]):
            s += x[i]
        return s

    x = _input(n)
    return (lambda: total(x)), lambda: float(total(x))


def setup_torch(n):
    import torch

    x = torch.from_numpy(_input(n))
    return (lambda: torch.sum(x)), lambda: float(torch.sum(x))


def setup_warp(n):
    import warp as wp

    @wp.kernel
    def total(x: wp.array(dtype=wp.float32), s: wp.array(dtype=wp.float32)):
        wp.atomic_add(s, 0, x[wp.tid()])

    x = wp.array(_input(n), device="cpu")
    s = wp.zeros(1, dtype=wp.float32, device="cpu")

    def run():
        s.zero_()
        wp.launch(total, dim=n, inputs=[x, s], device="cpu")

    return run, lambda: float(s.numpy()[0])
