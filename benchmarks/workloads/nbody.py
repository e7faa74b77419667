"""All-pairs gravitational n-body: the acceleration of every body, O(N^2), compute bound."""
import numpy as np

TITLE = "all-pairs gravitational acceleration, 3-D float32, softened"
N = 4096
QUICK_N = 1024
EPS2 = 1e-2  # softening squared: keeps close pairs finite and the i == j term zero


def _inputs(n):
    rng = np.random.default_rng(2)
    pos = rng.standard_normal((n, 3), dtype=np.float32)
    mass = rng.random(n, dtype=np.float32) / n
    return pos, mass


def make(ti, n):
    pos = ti.Vector.field(3, ti.f32, shape=n)
    acc = ti.Vector.field(3, ti.f32, shape=n)
    mass = ti.field(ti.f32, shape=n)
    p0, m0 = _inputs(n)
    pos.from_numpy(p0)
    mass.from_numpy(m0)

    @ti.kernel
    def accelerations():
        for i in pos:  # parallel over bodies
            p = pos[i]
            a = ti.Vector([0.0, 0.0, 0.0])
            for j in range(n):  # serial inner loop over all bodies
                d = pos[j] - p
                inv_r = 1.0 / ti.sqrt(d.dot(d) + EPS2)
                a += mass[j] * inv_r * inv_r * inv_r * d
            acc[i] = a

    return accelerations, acc.to_numpy


def setup_numpy(n):
    pos, mass = _inputs(n)
    acc = np.empty_like(pos)
    block = 256  # rows of the pair matrix at a time: 256 x N x 3 floats stays in a few MB

    def run():
        for s in range(0, n, block):
            d = pos[None, :, :] - pos[s:s + block, None, :]  # (block, n, 3)
            r2 = np.einsum("ijk,ijk->ij", d, d) + np.float32(EPS2)
            w = mass[None, :] / (r2 * np.sqrt(r2))
            acc[s:s + block] = np.einsum("ij,ijk->ik", w, d)

    return run, lambda: acc


def setup_numba(n):
    import numba

    @numba.njit(parallel=True, fastmath=True)
    def accelerations(pos, mass, acc):
        eps2 = np.float32(EPS2)
        for i in numba.prange(pos.shape[0]):
            ax = ay = az = np.float32(0.0)
            for j in range(pos.shape[0]):
                dx = pos[j, 0] - pos[i, 0]
                dy = pos[j, 1] - pos[i, 1]
                dz = pos[j, 2] - pos[i, 2]
                inv_r = np.float32(1.0) / np.sqrt(dx * dx + dy * dy + dz * dz + eps2)
                w = mass[j] * inv_r * inv_r * inv_r
                ax += w * dx
                ay += w * dy
                az += w * dz
            acc[i, 0] = ax
            acc[i, 1] = ay
            acc[i, 2] = az

    pos, mass = _inputs(n)
    acc = np.empty_like(pos)
    return (lambda: accelerations(pos, mass, acc)), lambda: acc


def setup_torch(n):
    import torch

    p0, m0 = _inputs(n)
    pos, mass = torch.from_numpy(p0), torch.from_numpy(m0)
    acc = torch.empty_like(pos)
    block = 256

    def run():
        for s in range(0, n, block):
            d = pos[None, :, :] - pos[s:s + block, None, :]
            r2 = (d * d).sum(-1) + EPS2
            w = mass[None, :] * torch.rsqrt(r2) ** 3
            acc[s:s + block] = torch.einsum("ij,ijk->ik", w, d)

    return run, lambda: acc.numpy()


def setup_warp(n):
    import warp as wp

    @wp.kernel
    def accelerations(pos: wp.array(dtype=wp.vec3), mass: wp.array(dtype=wp.float32),
                      eps2: wp.float32, acc: wp.array(dtype=wp.vec3)):
        i = wp.tid()
        p = pos[i]
        a = wp.vec3(0.0, 0.0, 0.0)
        for j in range(pos.shape[0]):
            d = pos[j] - p
            inv_r = 1.0 / wp.sqrt(wp.dot(d, d) + eps2)
            a += mass[j] * inv_r * inv_r * inv_r * d
        acc[i] = a

    p0, m0 = _inputs(n)
    pos = wp.array(p0, dtype=wp.vec3, device="cpu")
    mass = wp.array(m0, device="cpu")
    acc = wp.zeros(n, dtype=wp.vec3, device="cpu")
    inputs = [pos, mass, EPS2, acc]
    return (lambda: wp.launch(accelerations, dim=n, inputs=inputs, device="cpu")), acc.numpy
