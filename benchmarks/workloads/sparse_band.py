"""Sparse (a): a 2-level pointer -> bitmasked 2-D grid (2048^2 cells in 16^2 blocks) with a
band of 64 rows that moves 16 rows a step: each step deactivates the grid, activates the band
(a kernel writes it) and runs a 5-point stencil struct-for over the active cells."""
import numpy as np

TITLE = "sparse: pointer/bitmasked 2-D grid, moving band: activate + stencil struct-for"
N = 2048
QUICK_N = 512
MEMORY = True            # run.py reports the resident memory the workload adds
BAND, SHIFT, CHECK_STEPS = 64, 16, 6


def make(ti, n):
    x, y = ti.field(ti.f32), ti.field(ti.f32)
    blocks = ti.root.pointer(ti.ij, n // 16)
    blocks.bitmasked(ti.ij, 16).place(x, y)

    @ti.kernel
    def activate(row0: ti.i32, rows: ti.i32):
        for i, j in ti.ndrange(rows, n):
            r = (row0 + i) % n
            x[r, j] = ti.sin(r * 0.01) + ti.cos(j * 0.02)

    @ti.kernel
    def stencil():
        for i, j in x:
            # (inside the grid: Taichi's pointer lookup of index -1 crashes)
            if 0 < i < n - 1 and 0 < j < n - 1:
                y[i, j] = 0.2 * (x[i, j] + x[i - 1, j] + x[i + 1, j] + x[i, j - 1]
                                 + x[i, j + 1])

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for i, j in y:
            s += ti.cast(y[i, j], ti.f64)
        return s

    state = {"t": 0}

    def step():
        blocks.deactivate_all()
        activate(state["t"] * SHIFT % n, BAND)
        stencil()
        state["t"] += 1

    activate(0, 0)          # compile before the timed steps, leaving nothing active
    stencil()
    total()
    blocks.deactivate_all()

    def result():
        state["t"] = 0
        sums = []
        for _ in range(CHECK_STEPS):
            step()
            sums.append(total())
        return np.array(sums)

    return step, result
