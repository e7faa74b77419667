"""Gravity from autodiff: forces are -dU/dx of the potential energy, computed by a Tape.

The seed document's example, run without a window: prints the total energy and its drift.

    python -m fluxion.examples autodiff_gravity [--n 8] [--steps 2000]
"""
import argparse

import numpy as np

import fluxion as ti


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
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--dt", type=float, default=1e-5)
    args = ap.parse_args()
    ti.init(arch=ti.cpu, random_seed=3)
    init, step, energy, x = build(ti, args.n, args.dt)
    init()
    e0 = energy()
    print(f"initial energy {e0:.6f}")
    for k in range(1, args.steps + 1):
        step()
        if k % (args.steps // 5) == 0:
            e = energy()
            print(f"step {k:5d}  energy {e:.6f}  drift {e - e0:+.2e} "
                  f"({abs(e - e0) / abs(e0):.1e} relative)")
    print("positions:", np.round(x.to_numpy(), 4).tolist())


if __name__ == "__main__":
    main()
