"""Explicit FEM on a 2-D triangle mesh, with forces from autodiff of the elastic energy.

A square of neo-Hookean material spins and oscillates; the elastic energy of every
triangle is summed in a kernel, and the nodal forces are -dE/dx from a Tape (no hand-written
force code). Prints the total energy (kinetic + elastic) and its drift.

    python -m fluxion.examples fem [--n 12] [--frames 20] [--out out/fem]
"""
import argparse

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n, dt=2e-4, E=1000.0, nu=0.3):
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    nodes = (n + 1) * (n + 1)
    tris = 2 * n * n
    x = ti.Vector.field(2, ti.f64, shape=nodes, needs_grad=True)
    v = ti.Vector.field(2, ti.f64, shape=nodes)
    tri = ti.Vector.field(3, ti.i32, shape=tris)
    B = ti.Matrix.field(2, 2, ti.f64, shape=tris)    # inverse rest shape
    area = ti.field(ti.f64, shape=tris)
    energy = ti.field(ti.f64, shape=(), needs_grad=True)
    kinetic = ti.field(ti.f64, shape=())
    mass = 1.0 / nodes

    @ti.kernel
    def init(size: ti.f64):
        for k in range(nodes):
            i, j = k // (n + 1), k % (n + 1)
            x[k] = ti.Vector([0.3 + size * i / n, 0.4 + size * j / n])
            r = x[k] - ti.Vector([0.3 + size / 2, 0.4 + size / 2])
            # spin plus a horizontal stretch, so the block both turns and oscillates
            v[k] = ti.Vector([-r.y, r.x]) * 4.0 + ti.Vector([r.x * 6.0, -r.y * 3.0])
        for c in range(n * n):
            i, j = c // n, c % n
            a = i * (n + 1) + j
            tri[2 * c] = ti.Vector([a, a + n + 1, a + 1])
            tri[2 * c + 1] = ti.Vector([a + 1, a + n + 1, a + n + 2])
        for t in range(tris):
            D = ti.Matrix.cols([x[tri[t][1]] - x[tri[t][0]], x[tri[t][2]] - x[tri[t][0]]])
            B[t] = D.inverse()
            area[t] = ti.abs(D.determinant()) * 0.5

    @ti.kernel
    def elastic_energy():
        for t in range(tris):
            a, b, c = tri[t][0], tri[t][1], tri[t][2]
            F = ti.Matrix.cols([x[b] - x[a], x[c] - x[a]]) @ B[t]
            J = ti.max(F.determinant(), 1e-6)
            logJ = ti.log(J)
            psi = mu / 2 * ((F.transpose() @ F).trace() - 2) - mu * logJ + lam / 2 * logJ ** 2
            energy[None] += area[t] * psi

    @ti.kernel
    def advance():
        for k in range(nodes):
            v[k] += dt * (-x.grad[k] / mass)
            x[k] += dt * v[k]

    @ti.kernel
    def measure_kinetic():
        for k in range(nodes):
            kinetic[None] += 0.5 * mass * v[k].norm_sqr()

    def step():
        with ti.ad.Tape(loss=energy):
            elastic_energy()
        advance()

    def total_energy():
        energy[None] = 0.0
        elastic_energy()
        kinetic[None] = 0.0
        measure_kinetic()
        return energy[None] + kinetic[None]

    return dict(init=init, step=step, total_energy=total_energy, x=x, tri=tri)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--out", default="out/fem")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), default_fp=ti.f64)
    sim = build(ti, args.n)
    sim["init"](0.3)
    e0 = sim["total_energy"]()
    gui = ti.GUI("FEM", res=512, background_color=0x222222, show_gui=args.window)
    tri = sim["tri"].to_numpy()
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        for _ in range(args.steps):
            sim["step"]()
        e = sim["total_energy"]()
        print(f"frame {frame:3d}  energy {e:.6f}  drift {(e - e0) / abs(e0):+.2e}")
        pos = sim["x"].to_numpy()
        gui.triangles(pos[tri[:, 0]], pos[tri[:, 1]], pos[tri[:, 2]], color=0x4FB99F)
        gui.show(f"{args.out}/fem_{frame:04d}.png")


if __name__ == "__main__":
    main()
