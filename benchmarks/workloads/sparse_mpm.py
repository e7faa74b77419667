"""Sparse (d): an MPM-like step on a pointer grid that the particles activate: 50k particles
in a blob falling in a 1024^2 grid of 8^2 blocks; each step deactivates the grid, scatters
mass and momentum (P2G, quadratic B-splines), updates the active grid nodes (a struct-for)
and gathers the velocities back (G2P)."""
import numpy as np

TITLE = "sparse: MPM-like P2G / grid / G2P on a 1024^2 pointer grid the particles activate"
N = 50_000
QUICK_N = 10_000
MEMORY = True            # run.py reports the resident memory the workload adds
RES, CHECK_STEPS = 1024, 5


def make(ti, n):
    inv_dx = float(RES)
    dt = 2e-4
    x = ti.Vector.field(2, ti.f32, shape=n)
    v = ti.Vector.field(2, ti.f32, shape=n)
    gm = ti.field(ti.f32)
    gv = ti.Vector.field(2, ti.f32)
    grid = ti.root.pointer(ti.ij, RES // 8)
    grid.dense(ti.ij, 8).place(gm, gv)
    rng = np.random.default_rng(1)
    x0 = (0.4 + 0.2 * rng.random((n, 2))).astype(np.float32)

    @ti.kernel
    def p2g():
        for p in x:
            base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
            fx = x[p] * inv_dx - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            for i, j in ti.static(ti.ndrange(3, 3)):
                weight = w[i][0] * w[j][1]
                gm[base + ti.Vector([i, j])] += weight
                gv[base + ti.Vector([i, j])] += weight * v[p]

    @ti.kernel
    def grid_op():
        for i, j in gm:
            if gm[i, j] > 0:
                gv[i, j] = gv[i, j] / gm[i, j] + ti.Vector([0.0, -9.8]) * dt
                if j < 8 and gv[i, j][1] < 0:
                    gv[i, j][1] = 0.0

    @ti.kernel
    def g2p():
        for p in x:
            base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)
            fx = x[p] * inv_dx - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            nv = ti.Vector([0.0, 0.0])
            for i, j in ti.static(ti.ndrange(3, 3)):
                nv += w[i][0] * w[j][1] * gv[base + ti.Vector([i, j])]
            v[p] = nv
            x[p] += dt * nv

    def step():
        grid.deactivate_all()
        p2g()
        grid_op()
        g2p()

    def reset():
        x.from_numpy(x0)
        v.from_numpy(np.zeros_like(x0))

    reset()
    step()                    # compile; then the grid is emptied again
    grid.deactivate_all()
    reset()

    def result():
        reset()
        for _ in range(CHECK_STEPS):
            step()
        return x.to_numpy()

    return step, result
