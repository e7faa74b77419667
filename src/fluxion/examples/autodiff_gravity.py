"""Gravity from autodiff: forces are -dU/dx of the potential energy, computed by a Tape.

The seed document's example, run without a window: prints the total energy and its drift
once a frame, and draws the bodies into a PNG a frame.

    python -m fluxion.examples autodiff_gravity [--n 8] [--steps 2000] [--frames 5] [--out DIR]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, N, dt):
    """The simulation's fields and kernels, built with `ti` (fluxion, or the original system's
    package for the benchmarks). Returns (init, step, energy, x)."""
    x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)  # positions
    v = ti.Vector.field(2, dtype=ti.f32, shape=N)                   # velocities
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)           # potential energy
    K = ti.field(dtype=ti.f32, shape=())                            # kinetic energy

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(N, N):
            r = x[i] - x[j]
            # r.norm(1e-3) is sqrt(|r|^2 + 1e-3): no 1/0 at i == j, and a finite derivative
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]     # dv/dt = -dU/dx
        for i in x:
            x[i] += dt * v[i]

    @ti.kernel
    def kinetic():
        for i in v:
            K[None] += 0.5 * v[i].norm_sqr()

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]

    def energy():
        K[None] = 0
        kinetic()
        U[None] = 0
        compute_U()
        return K[None] + U[None]

    def step():
        with ti.ad.Tape(loss=U):
            compute_U()
        advance()

    return init, step, energy, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2000, help="time steps in all")
    ap.add_argument("--frames", type=int, default=5, help="frames (energy reports, images)")
    ap.add_argument("--dt", type=float, default=1e-5)
    ap.add_argument("--out", default="out/autodiff_gravity")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), random_seed=3)
    init, step, energy, x = build(ti, args.n, args.dt)
    init()
    e0 = energy()
    print(f"initial energy {e0:.6f}")
    gui = ti.GUI("Gravity from autodiff", res=512, background_color=0x000010, show_gui=args.window)
    frames = max(1, min(args.frames, args.steps))
    done = 0
    trail = [x.to_numpy()]          # positions now and then, drawn as the bodies' paths
    for frame in range(frames):
        if not gui.running:               # the window was closed
            break
        todo = args.steps * (frame + 1) // frames - done
        for k in range(todo):
            step()
            if (k + 1) % max(1, todo // 25) == 0:
                trail.append(x.to_numpy())
        done += todo
        e = energy()
        print(f"step {done:5d}  energy {e:.6f}  drift {e - e0:+.2e} "
              f"({abs(e - e0) / abs(e0):.1e} relative)")
        gui.circles(np.concatenate(trail), radius=1, color=0x806840)
        gui.circles(x.to_numpy(), radius=5, color=0xFFD080)
        gui.text(f"step {done}  energy {e:.4f}", (0.02, 0.98), font_size=14, color=0xA0A0A0)
        gui.show(f"{args.out}/gravity_{frame:04d}.png")
    print("positions:", np.round(x.to_numpy(), 4).tolist())


if __name__ == "__main__":
    main()
