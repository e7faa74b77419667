"""The Julia set of z -> z^2 + c, computed per pixel in a kernel and saved as an image.

    python -m fluxion.examples julia [--n 320] [--frames 1] [--out out/julia]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n, max_iter=50):
    pixels = ti.field(ti.f32, shape=(n * 2, n))
    iters = ti.field(ti.i32, shape=(n * 2, n))

    @ti.func
    def complex_sqr(z):
        return ti.Vector([z[0] ** 2 - z[1] ** 2, z[1] * z[0] * 2])

    @ti.kernel
    def paint(t: ti.f32):
        for i, j in pixels:
            c = ti.Vector([-0.8, ti.cos(t) * 0.2])
            z = ti.Vector([i / n - 1, j / n - 0.5]) * 2
            k = 0
            while z.norm() < 20 and k < max_iter:
                z = complex_sqr(z) + c
                k += 1
            iters[i, j] = k
            pixels[i, j] = 1 - k * 0.02

    return pixels, iters, paint


def numpy_iterations(n, t, max_iter=50):
    """The same iteration counts, computed with NumPy in float32 (for checking)."""
    i, j = np.meshgrid(np.arange(2 * n), np.arange(n), indexing="ij")
    z = (np.stack([i / n - 1, j / n - 0.5], -1) * 2).astype(np.float32)
    c = np.array([-0.8, np.cos(np.float32(t)) * 0.2], np.float32)
    k = np.zeros(i.shape, np.int32)
    active = np.ones(i.shape, bool)
    for _ in range(max_iter):
        active &= np.sqrt((z ** 2).sum(-1)) < 20
        if not active.any():
            break
        zn = np.stack([z[..., 0] ** 2 - z[..., 1] ** 2, z[..., 1] * z[..., 0] * 2], -1) + c
        z = np.where(active[..., None], zn, z).astype(np.float32)
        k += active
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=320)
    ap.add_argument("--frames", type=int, default=1)
    ap.add_argument("--out", default="out/julia")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args))
    pixels, iters, paint = build(ti, args.n)
    gui = ti.GUI("Julia set", res=(args.n * 2, args.n), show_gui=args.window)
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        paint(frame * 0.03)
        gui.set_image(pixels)
        gui.show(f"{args.out}/julia_{frame:04d}.png")
    k = iters.to_numpy()
    print(f"mean iterations {k.mean():.3f}, points never escaping {np.mean(k == 50):.4f}")


if __name__ == "__main__":
    main()
