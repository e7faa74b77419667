"""The demo: a heat-diffusion plate with a moving hot spot and particles drifting uphill.

A 2-D plate is heated by a spot moving in a circle; particles drift up the temperature
gradient. Prints the plate's total heat and the particles' mean position
every few steps, and saves the final temperature field (and a PNG when Pillow is installed).

    python -m fluxion.examples demo [--steps 400] [--n 256] [--out out]
"""
import argparse
import os
import time

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--particles", type=int, default=4096)
    ap.add_argument("--out", default="out")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), random_seed=1)

    n = args.n
    temp = ti.field(ti.f32, shape=(n, n))
    new = ti.field(ti.f32, shape=(n, n))
    pos = ti.Vector.field(2, ti.f32, shape=args.particles)
    heat = ti.field(ti.f32, shape=())
    mean = ti.Vector.field(2, ti.f32, shape=())

    @ti.kernel
    def seed_particles():
        for p in pos:
            pos[p] = ti.Vector([ti.random(), ti.random()]) * (n - 1)

    @ti.func
    def sample(i, j):
        # zero-temperature boundary: outside the plate reads as 0
        inside = 0 <= i < n and 0 <= j < n
        return temp[ti.min(ti.max(i, 0), n - 1), ti.min(ti.max(j, 0), n - 1)] if inside else 0.0

    @ti.kernel
    def diffuse(t: ti.f32, k: ti.f32):
        cx = n * (0.5 + 0.3 * ti.cos(t))
        cy = n * (0.5 + 0.3 * ti.sin(t))
        for i, j in temp:
            lap = sample(i + 1, j) + sample(i - 1, j) + sample(i, j + 1) + sample(i, j - 1) \
                - 4.0 * temp[i, j]
            source = 1.0 if (i - cx) ** 2 + (j - cy) ** 2 < (n * 0.03) ** 2 else 0.0
            new[i, j] = temp[i, j] + k * lap + source
        for i, j in temp:
            temp[i, j] = new[i, j]

    @ti.kernel
    def drift(rate: ti.f32):
        for p in pos:
            i = ti.cast(pos[p].x, ti.i32)
            j = ti.cast(pos[p].y, ti.i32)
            grad = ti.Vector([sample(i + 1, j) - sample(i - 1, j),
                              sample(i, j + 1) - sample(i, j - 1)])
            pos[p] = ti.math.clamp(pos[p] + rate * grad, 0.0, n - 1.0)

    @ti.kernel
    def measure():
        for i, j in temp:
            heat[None] += temp[i, j]
        for p in pos:
            mean[None] += pos[p] / args.particles

    seed_particles()
    start = time.perf_counter()
    for step in range(args.steps):
        diffuse(step * 0.02, 0.2)
        drift(40.0)
        if step % (args.steps // 8 or 1) == 0 or step == args.steps - 1:
            heat[None] = 0.0
            mean[None] = [0.0, 0.0]
            measure()
            m = mean[None]
            print(f"step {step:4d}  total heat {heat[None]:12.1f}  "
                  f"particles' mean position ({m[0]:6.1f}, {m[1]:6.1f})")
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps on a {n}x{n} plate with {args.particles} particles "
          f"in {elapsed:.2f} s")

    os.makedirs(args.out, exist_ok=True)
    t = temp.to_numpy()
    np.save(os.path.join(args.out, "temperature.npy"), t)
    saved = [os.path.join(args.out, "temperature.npy")]
    try:
        from PIL import Image
        img = (255 * np.clip(t / max(t.max(), 1e-6), 0, 1)).astype(np.uint8)
        rgb = np.stack([img, img // 3, 255 - img], axis=-1)
        p = pos.to_numpy().astype(int)
        rgb[p[:, 0], p[:, 1]] = 255
        Image.fromarray(rgb.transpose(1, 0, 2)[::-1]).save(os.path.join(args.out, "demo.png"))
        saved.append(os.path.join(args.out, "demo.png"))
    except ImportError:
        pass
    print("saved", ", ".join(saved))


if __name__ == "__main__":
    main()
