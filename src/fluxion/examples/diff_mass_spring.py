"""A differentiable mass-spring simulation, optimised by gradient descent.

A chain of masses connected by springs starts at rest; we learn the initial velocity of every
mass so that, after `steps` steps, the chain's centre of mass reaches a target and the chain
is stretched to a target length. Each iteration runs the whole simulation under a Tape and
follows the gradient; the loss printed each iteration falls. The last iteration's motion is
drawn into `--frames` PNGs (the chain, its centre of mass, and the target in red).

    python -m fluxion.examples diff_mass_spring [--iters 30] [--steps 200] [--frames 10]
                                               [--out DIR]
"""
import argparse

import fluxion as ti
from fluxion.examples import _arch


TARGET = (0.8, 0.6)         # where the chain's centre of mass should end


def build(ti, n=16, steps=200):
    """Fields and kernels, built with `ti` (fluxion, or the original system's package for the
    benchmarks). Returns iterate(lr) (one Tape over the whole simulation, then a gradient
    step; returns the loss), and the positions field."""
    dt = 2e-3
    stiffness, damping, rest = 300.0, 2.0, 0.05
    target = ti.Vector(list(TARGET))
    target_len = 1.2 * rest * (n - 1)

    # one slot per time step: every state is written once, read afterwards (no overwrites)
    x = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
    v0 = ti.Vector.field(2, ti.f64, shape=n, needs_grad=True)     # the parameters
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def init():
        for i in range(n):
            x[0, i] = [0.2 + rest * i, 0.2]
            v[0, i] = v0[i]

    @ti.func
    def spring_force(t, i, j):
        d = x[t, j] - x[t, i]
        length = d.norm(1e-9)
        return stiffness * (length - rest) * d / length

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            f = ti.Vector([0.0, -0.5])              # a little gravity
            if i > 0:
                f += spring_force(t, i, i - 1)
            if i < n - 1:
                f += spring_force(t, i, i + 1)
            vn = v[t, i] * ti.exp(-damping * dt) + dt * f
            v[t + 1, i] = vn
            x[t + 1, i] = x[t, i] + dt * vn

    @ti.kernel
    def compute_loss():
        center = ti.Vector([0.0, 0.0])
        for i in ti.static(range(n)):
            center += x[steps, i] / n
        stretch = (x[steps, n - 1] - x[steps, 0]).norm()
        loss[None] += (center - target).norm_sqr() + (stretch - target_len) ** 2

    @ti.kernel
    def descend(lr: ti.f64):
        for i in range(n):
            v0[i] -= lr * v0.grad[i]

    def iterate(lr):
        with ti.ad.Tape(loss=loss):
            init()
            for t in range(steps):
                step(t)
            compute_loss()
        value = loss[None]
        descend(lr)
        return value

    return iterate, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--lr", type=float, default=25.0)
    ap.add_argument("--frames", type=int, default=10, help="images of the last iteration's motion")
    ap.add_argument("--out", default="out/diff_mass_spring")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), default_fp=ti.f64)
    iterate, x = build(ti, args.n, args.steps)
    for it in range(args.iters):
        print(f"iteration {it:3d}  loss {iterate(args.lr):.6f}")
    traj = x.to_numpy()                      # (steps + 1, n, 2): the last iteration's motion
    c = traj[args.steps].mean(axis=0)
    print(f"final centre of mass ({c[0]:.3f}, {c[1]:.3f}), target (0.8, 0.6)")
    gui = ti.GUI("Differentiable mass-spring", res=512, background_color=0x101820,
                 show_gui=args.window)
    frames = max(1, args.frames)
    for frame in range(frames):
        if not gui.running:               # the window was closed
            break
        t = round(args.steps * frame / max(1, frames - 1))
        p = traj[t]
        gui.circle(TARGET, radius=6, color=0xE04040)
        gui.lines(p[:-1], p[1:], radius=1.5, color=0x8090A0)
        gui.circles(p, radius=3, color=0xF0F0F0)
        gui.circle(p.mean(axis=0), radius=4, color=0x40C0E0)
        gui.text(f"step {t}", (0.02, 0.98), font_size=14, color=0xA0A0A0)
        gui.show(f"{args.out}/spring_{frame:04d}.png")


if __name__ == "__main__":
    main()
