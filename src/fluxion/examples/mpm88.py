"""MLS-MPM 2-D fluid in the compact "88-line" formulation.

Particles carry position, velocity, an affine velocity field C and a volume ratio J. Each
substep scatters mass and momentum to a grid with quadratic B-spline weights, updates the grid
(gravity, walls), and gathers velocities back. Prints the total grid mass each frame (it must
stay equal to the particles' total mass) and writes frames.

    python -m fluxion.examples mpm88 [--frames 20] [--n-grid 128] [--out out/mpm88]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n_particles=8192, n_grid=128, dt=2e-4):
    dx = 1 / n_grid
    p_vol, p_rho = (dx * 0.5) ** 2, 1
    p_mass = p_vol * p_rho
    gravity, bound, E = 9.8, 3, 400

    x = ti.Vector.field(2, float, n_particles)
    v = ti.Vector.field(2, float, n_particles)
    C = ti.Matrix.field(2, 2, float, n_particles)
    J = ti.field(float, n_particles)
    grid_v = ti.Vector.field(2, float, (n_grid, n_grid))
    grid_m = ti.field(float, (n_grid, n_grid))

    @ti.kernel
    def substep():
        for i, j in grid_m:
            grid_v[i, j] = [0, 0]
            grid_m[i, j] = 0
        for p in x:
            Xp = x[p] / dx
            base = int(Xp - 0.5)
            fx = Xp - base
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            stress = -dt * 4 * E * p_vol * (J[p] - 1) / dx ** 2
            affine = ti.Matrix([[stress, 0], [0, stress]]) + p_mass * C[p]
            for i, j in ti.static(ti.ndrange(3, 3)):
                offset = ti.Vector([i, j])
                dpos = (offset - fx) * dx
                weight = w[i].x * w[j].y
                grid_v[base + offset] += weight * (p_mass * v[p] + affine @ dpos)
                grid_m[base + offset] += weight * p_mass
        for i, j in grid_m:
            if grid_m[i, j] > 0:
                grid_v[i, j] /= grid_m[i, j]
            grid_v[i, j].y -= dt * gravity
            if i < bound and grid_v[i, j].x < 0:
                grid_v[i, j].x = 0
            if i > n_grid - bound and grid_v[i, j].x > 0:
                grid_v[i, j].x = 0
            if j < bound and grid_v[i, j].y < 0:
                grid_v[i, j].y = 0
            if j > n_grid - bound and grid_v[i, j].y > 0:
                grid_v[i, j].y = 0
        for p in x:
            Xp = x[p] / dx
            base = int(Xp - 0.5)
            fx = Xp - base
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_v = ti.Vector.zero(float, 2)
            new_C = ti.Matrix.zero(float, 2, 2)
            for i, j in ti.static(ti.ndrange(3, 3)):
                offset = ti.Vector([i, j])
                dpos = (offset - fx) * dx
                weight = w[i].x * w[j].y
                g_v = grid_v[base + offset]
                new_v += weight * g_v
                new_C += 4 * weight * g_v.outer_product(dpos) / dx ** 2
            v[p] = new_v
            x[p] += dt * v[p]
            J[p] *= 1 + dt * new_C.trace()
            C[p] = new_C

    @ti.kernel
    def init():
        for i in range(n_particles):
            x[i] = [ti.random() * 0.4 + 0.2, ti.random() * 0.4 + 0.2]
            v[i] = [0, -1]
            J[i] = 1

    return dict(x=x, v=v, J=J, grid_m=grid_m, substep=substep, init=init, p_mass=p_mass,
                n_particles=n_particles)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--substeps", type=int, default=50)
    ap.add_argument("--n-grid", type=int, default=128)
    ap.add_argument("--particles", type=int, default=8192)
    ap.add_argument("--out", default="out/mpm88")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), random_seed=0)
    sim = build(ti, args.particles, args.n_grid)
    sim["init"]()
    gui = ti.GUI("MPM88", res=512, background_color=0x112F41, show_gui=args.window)
    total = sim["p_mass"] * sim["n_particles"]
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        for _ in range(args.substeps):
            sim["substep"]()
        grid_mass = float(sim["grid_m"].to_numpy().sum())
        print(f"frame {frame:3d}  grid mass {grid_mass:.6f}  particles' mass {total:.6f}")
        gui.circles(sim["x"].to_numpy(), radius=1.5, color=0x068587)
        gui.show(f"{args.out}/frame_{frame:04d}.png")
    pos = sim["x"].to_numpy()
    print(f"particles inside the box: {np.mean((pos > 0) & (pos < 1)):.3f}")


if __name__ == "__main__":
    main()
