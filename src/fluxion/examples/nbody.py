"""All-pairs gravitational n-body with leapfrog integration.

Prints the total momentum (conserved: pairwise forces cancel) and the energy each few steps,
and draws the bodies.

    python -m fluxion.examples nbody [--n 1024] [--frames 20] [--out out/nbody]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n, dt=1e-4, eps2=1e-3):
    x = ti.Vector.field(2, ti.f64, shape=n)
    v = ti.Vector.field(2, ti.f64, shape=n)
    a = ti.Vector.field(2, ti.f64, shape=n)
    m = ti.field(ti.f64, shape=n)
    momentum = ti.Vector.field(2, ti.f64, shape=())
    energy = ti.field(ti.f64, shape=())

    @ti.kernel
    def accelerations():
        for i in x:
            acc = ti.Vector.zero(ti.f64, 2)     # f64 whatever default_fp is
            for j in range(n):
                d = x[j] - x[i]
                r2 = d.norm_sqr() + eps2
                acc += m[j] * d / (r2 * ti.sqrt(r2))
            a[i] = acc

    @ti.kernel
    def kick(h: ti.f64):
        for i in v:
            v[i] += h * a[i]

    @ti.kernel
    def drift():
        for i in x:
            x[i] += dt * v[i]

    @ti.kernel
    def measure():
        momentum[None] = ti.Vector([0.0, 0.0])
        energy[None] = 0.0
        for i in x:
            momentum[None] += m[i] * v[i]
            e = 0.5 * m[i] * v[i].norm_sqr()
            for j in range(n):
                if j != i:
                    e -= 0.5 * m[i] * m[j] / ti.sqrt((x[j] - x[i]).norm_sqr() + eps2)
            energy[None] += e

    def step():
        kick(dt / 2)
        drift()
        accelerations()
        kick(dt / 2)

    return dict(x=x, v=v, m=m, momentum=momentum, energy=energy, step=step,
                accelerations=accelerations, measure=measure)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default="out/nbody")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), default_fp=ti.f64)   # the constants dt and eps2 in f64 too
    sim = build(ti, args.n)
    rng = np.random.default_rng(0)
    r = np.sqrt(rng.random(args.n)) * 0.3
    th = rng.random(args.n) * 2 * np.pi
    pos = np.stack([0.5 + r * np.cos(th), 0.5 + r * np.sin(th)], 1)
    sim["x"].from_numpy(pos)
    sim["v"].from_numpy(np.stack([-np.sin(th), np.cos(th)], 1) * r[:, None] * 2.0)
    sim["m"].from_numpy(np.full(args.n, 1.0 / args.n))
    sim["accelerations"]()
    gui = ti.GUI("n-body", res=512, background_color=0x000010, show_gui=args.window)
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        for _ in range(args.steps):
            sim["step"]()
        sim["measure"]()
        p = sim["momentum"][None].to_numpy()
        print(f"frame {frame:3d}  momentum ({p[0]: .3e}, {p[1]: .3e})  "
              f"energy {sim['energy'][None]:.6f}")
        gui.circles(sim["x"].to_numpy(), radius=1.5, color=0xFFD080)
        gui.show(f"{args.out}/nbody_{frame:04d}.png")


if __name__ == "__main__":
    main()
