"""MPM 2-D with three materials: fluid, jelly (elastic) and snow (elastoplastic).

Fixed-corotated elasticity through `ti.svd` of each particle's deformation gradient; snow
clamps its singular values (plasticity) and hardens when compressed. Prints the total mass on
the grid and the particles' momentum each frame, and draws the materials in three colors.

    python -m fluxion.examples mpm_materials [--frames 20] [--out out/mpm_materials]
"""
import argparse

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n_particles=9000, n_grid=128, dt=1e-4):
    dx = 1 / n_grid
    p_vol, p_rho = (dx * 0.5) ** 2, 1
    p_mass = p_vol * p_rho
    E, nu = 5e3, 0.2
    mu_0, lambda_0 = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    x = ti.Vector.field(2, float, n_particles)
    v = ti.Vector.field(2, float, n_particles)
    C = ti.Matrix.field(2, 2, float, n_particles)
    F = ti.Matrix.field(2, 2, float, n_particles)
    material = ti.field(int, n_particles)     # 0 fluid, 1 jelly, 2 snow
    Jp = ti.field(float, n_particles)
    grid_v = ti.Vector.field(2, float, (n_grid, n_grid))
    grid_m = ti.field(float, (n_grid, n_grid))
    momentum = ti.Vector.field(2, float, ())

    @ti.kernel
    def substep():
        for i, j in grid_m:
            grid_v[i, j] = [0, 0]
            grid_m[i, j] = 0
        for p in x:
            base = (x[p] / dx - 0.5).cast(int)
            fx = x[p] / dx - base.cast(float)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            F[p] = (ti.Matrix.identity(float, 2) + dt * C[p]) @ F[p]
            h = ti.exp(10 * (1.0 - Jp[p]))        # snow hardens when compressed
            if material[p] == 1:
                h = 0.3                           # jelly is softer
            mu, la = mu_0 * h, lambda_0 * h
            if material[p] == 0:
                mu = 0.0
            U, sig, V = ti.svd(F[p])
            J = 1.0
            for d in ti.static(range(2)):
                new_sig = sig[d, d]
                if material[p] == 2:
                    new_sig = ti.min(ti.max(sig[d, d], 1 - 2.5e-2), 1 + 4.5e-3)  # plasticity
                Jp[p] *= sig[d, d] / new_sig
                sig[d, d] = new_sig
                J *= new_sig
            if material[p] == 0:
                F[p] = ti.Matrix.identity(float, 2) * ti.sqrt(J)   # fluid: keep only volume
            elif material[p] == 2:
                F[p] = U @ sig @ V.transpose()                    # snow: plastic part dropped
            stress = 2 * mu * (F[p] - U @ V.transpose()) @ F[p].transpose() + \
                ti.Matrix.identity(float, 2) * la * J * (J - 1)
            stress = (-dt * p_vol * 4 / dx ** 2) * stress
            affine = stress + p_mass * C[p]
            for i, j in ti.static(ti.ndrange(3, 3)):
                offset = ti.Vector([i, j])
                dpos = (offset.cast(float) - fx) * dx
                weight = w[i][0] * w[j][1]
                grid_v[base + offset] += weight * (p_mass * v[p] + affine @ dpos)
                grid_m[base + offset] += weight * p_mass
        for i, j in grid_m:
            if grid_m[i, j] > 0:
                grid_v[i, j] = (1 / grid_m[i, j]) * grid_v[i, j]
                grid_v[i, j][1] -= dt * 50
                if i < 3 and grid_v[i, j][0] < 0:
                    grid_v[i, j][0] = 0
                if i > n_grid - 3 and grid_v[i, j][0] > 0:
                    grid_v[i, j][0] = 0
                if j < 3 and grid_v[i, j][1] < 0:
                    grid_v[i, j][1] = 0
                if j > n_grid - 3 and grid_v[i, j][1] > 0:
                    grid_v[i, j][1] = 0
        for p in x:
            base = (x[p] / dx - 0.5).cast(int)
            fx = x[p] / dx - base.cast(float)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_v = ti.Vector.zero(float, 2)
            new_C = ti.Matrix.zero(float, 2, 2)
            for i, j in ti.static(ti.ndrange(3, 3)):
                dpos = ti.Vector([i, j]).cast(float) - fx
                g_v = grid_v[base + ti.Vector([i, j])]
                weight = w[i][0] * w[j][1]
                new_v += weight * g_v
                new_C += 4 * weight * g_v.outer_product(dpos) / dx
            v[p], C[p] = new_v, new_C
            x[p] += dt * v[p]

    @ti.kernel
    def init():
        group = n_particles // 3
        for i in range(n_particles):
            k = i // group
            x[i] = [ti.random() * 0.2 + 0.3 + 0.10 * k, ti.random() * 0.2 + 0.05 + 0.32 * k]
            material[i] = ti.min(k, 2)
            v[i] = ti.Matrix([0, 0])
            F[i] = ti.Matrix([[1, 0], [0, 1]])
            Jp[i] = 1

    @ti.kernel
    def measure():
        momentum[None] = ti.Vector([0.0, 0.0])
        for p in v:
            momentum[None] += p_mass * v[p]

    return dict(substep=substep, init=init, measure=measure, x=x, material=material,
                grid_m=grid_m, momentum=momentum, p_mass=p_mass, n_particles=n_particles,
                F=F, Jp=Jp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--substeps", type=int, default=25)
    ap.add_argument("--particles", type=int, default=9000)
    ap.add_argument("--out", default="out/mpm_materials")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), random_seed=1)
    sim = build(ti, args.particles)
    sim["init"]()
    gui = ti.GUI("MPM materials", res=512, background_color=0x112F41, show_gui=args.window)
    total = sim["p_mass"] * sim["n_particles"]
    palette = [0x068587, 0xED553B, 0xEEEEF0]
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        for _ in range(args.substeps):
            sim["substep"]()
        sim["measure"]()
        m = float(sim["grid_m"].to_numpy().sum())
        p = sim["momentum"][None].to_numpy()
        print(f"frame {frame:3d}  grid mass {m:.6f} (particles {total:.6f})  "
              f"momentum ({p[0]: .4f}, {p[1]: .4f})")
        gui.circles(sim["x"].to_numpy(), radius=1.5, palette=palette,
                    palette_indices=sim["material"].to_numpy())
        gui.show(f"{args.out}/frame_{frame:04d}.png")
    x = sim["x"].to_numpy()
    print(f"all particles inside: {bool(((x > 0) & (x < 1)).all())}")


if __name__ == "__main__":
    main()
