"""Sparse (b): deactivate_all and reactivation cycles on a 3-level 3-D tree (pointer 16^3 ->
pointer 4^3 -> dense 8^3: 512^3 f32 cells, 512 MiB dense): each cycle deactivates everything,
activates 2% of the leaf blocks (a hashed choice, different each cycle) and sums them."""
import numpy as np

TITLE = "sparse: 3-level 3-D tree, deactivate_all + reactivate 2% of blocks + sum"
N = 512
QUICK_N = 256
MEMORY = True            # run.py reports the resident memory the workload adds
CHECK_CYCLES = 4


def make(ti, n):
    x = ti.field(ti.f32)
    top = ti.root.pointer(ti.ijk, 16)
    mid = top.pointer(ti.ijk, n // 128)
    mid.dense(ti.ijk, 8).place(x)
    nb = n // 8                            # leaf blocks per axis

    @ti.kernel
    def activate(seed: ti.i32):
        for b in range(nb * nb * nb):
            h = (b * 73856093 + seed * 19349663) % 1000
            if h < 20:
                bi, bj, bk = b // (nb * nb), b // nb % nb, b % nb
                for e in range(512):
                    i, j, k = bi * 8 + e // 64, bj * 8 + e // 8 % 8, bk * 8 + e % 8
                    x[i, j, k] = (i + 2 * j + 3 * k) % 17

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for i, j, k in x:
            s += ti.cast(x[i, j, k], ti.f64)
        return s

    state = {"c": 0}

    def cycle():
        top.deactivate_all()
        activate(state["c"])
        state["c"] += 1
        return total()

    activate(-1)                            # compile: (nothing is active afterwards)
    total()
    top.deactivate_all()

    def result():
        state["c"] = 0
        return np.array([cycle() for _ in range(CHECK_CYCLES)])

    return cycle, result
