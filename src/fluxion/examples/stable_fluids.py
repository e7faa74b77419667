"""Stable fluids: semi-Lagrangian advection, Jacobi pressure projection, and dye.

A jet of dye and momentum is injected from the bottom of a square box. Each step advects
velocity and dye backwards along the flow (bilinear interpolation), then projects the
velocity onto a divergence-free field with Jacobi iterations on the pressure Poisson equation.
Prints the divergence before and after projection.

    python -m fluxion.examples stable_fluids [--n 256] [--frames 20] [--out out/fluids]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n, dt=0.03, jacobi_iters=60):
    vel = ti.Vector.field(2, ti.f32, shape=(n, n))
    vel_new = ti.Vector.field(2, ti.f32, shape=(n, n))
    dye = ti.field(ti.f32, shape=(n, n))
    dye_new = ti.field(ti.f32, shape=(n, n))
    p = ti.field(ti.f32, shape=(n, n))
    p_new = ti.field(ti.f32, shape=(n, n))
    div = ti.field(ti.f32, shape=(n, n))
    div_norm = ti.field(ti.f32, shape=())

    @ti.func
    def clamp_index(i, j):
        return ti.Vector([ti.min(ti.max(i, 0), n - 1), ti.min(ti.max(j, 0), n - 1)])

    @ti.func
    def bilerp(f: ti.template(), x, y):
        # x, y in cell units; sample with clamped neighbours
        fx, fy = x - 0.5, y - 0.5
        i0, j0 = int(ti.floor(fx)), int(ti.floor(fy))
        s, t = fx - i0, fy - j0
        a = f[clamp_index(i0, j0)]
        b = f[clamp_index(i0 + 1, j0)]
        c = f[clamp_index(i0, j0 + 1)]
        d = f[clamp_index(i0 + 1, j0 + 1)]
        return (a * (1 - s) + b * s) * (1 - t) + (c * (1 - s) + d * s) * t

    @ti.kernel
    def advect(src: ti.template(), dst: ti.template()):
        for i, j in src:
            back = ti.Vector([i + 0.5, j + 0.5]) - dt * n * vel[i, j]
            dst[i, j] = bilerp(src, back.x, back.y)

    @ti.kernel
    def inject(t: ti.f32):
        for i, j in vel:
            dx = (i + 0.5) / n - 0.5 - 0.1 * ti.sin(t * 2)
            dy = (j + 0.5) / n - 0.08
            if dx * dx + dy * dy < 0.0025:
                vel[i, j] = ti.Vector([0.0, 1.0])
                dye[i, j] = 1.0

    @ti.kernel
    def divergence():
        div_norm[None] = 0.0
        for i, j in vel:
            l = vel[clamp_index(i - 1, j)].x
            r = vel[clamp_index(i + 1, j)].x
            b = vel[clamp_index(i, j - 1)].y
            t = vel[clamp_index(i, j + 1)].y
            # solid walls: the normal velocity is zero at the boundary
            if i == 0:
                l = -vel[i, j].x
            if i == n - 1:
                r = -vel[i, j].x
            if j == 0:
                b = -vel[i, j].y
            if j == n - 1:
                t = -vel[i, j].y
            div[i, j] = 0.5 * (r - l + t - b)
            div_norm[None] += div[i, j] ** 2

    @ti.kernel
    def jacobi(src: ti.template(), dst: ti.template()):
        for i, j in src:
            s = src[clamp_index(i - 1, j)] + src[clamp_index(i + 1, j)] \
                + src[clamp_index(i, j - 1)] + src[clamp_index(i, j + 1)]
            dst[i, j] = (s - div[i, j]) * 0.25

    @ti.kernel
    def subtract_gradient():
        for i, j in vel:
            gx = p[clamp_index(i + 1, j)] - p[clamp_index(i - 1, j)]
            gy = p[clamp_index(i, j + 1)] - p[clamp_index(i, j - 1)]
            vel[i, j] -= 0.5 * ti.Vector([gx, gy])

    def step(t):
        advect(vel, vel_new)
        vel.copy_from(vel_new)
        advect(dye, dye_new)
        dye.copy_from(dye_new)
        inject(t)
        divergence()
        before = np.sqrt(div_norm[None])
        for _ in range(jacobi_iters // 2):
            jacobi(p, p_new)
            jacobi(p_new, p)
        subtract_gradient()
        divergence()
        return before, np.sqrt(div_norm[None])

    return dict(step=step, dye=dye, vel=vel)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--out", default="out/fluids")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args))
    sim = build(ti, args.n)
    gui = ti.GUI("Stable fluids", res=args.n, show_gui=args.window)
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        before, after = sim["step"](frame * 0.03)
        print(f"frame {frame:3d}  divergence {before:9.4f} -> {after:9.4f} after projection")
        gui.set_image(sim["dye"])
        gui.show(f"{args.out}/fluids_{frame:04d}.png")


if __name__ == "__main__":
    main()
