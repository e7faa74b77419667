"""Sparse (c): particles appended in parallel to the dynamic lists of the cells of a 128^2
grid (200k particles, lists of up to 1024), then a struct-for over the lists' elements; each
step empties the lists first."""
import numpy as np

TITLE = "sparse: 200k particles appended to per-cell dynamic lists + struct-for over them"
N = 200_000
QUICK_N = 50_000
MEMORY = True            # run.py reports the resident memory the workload adds
G = 128


def make(ti, n):
    pos = ti.Vector.field(2, ti.f32, shape=n)
    pid = ti.field(ti.i32)
    cells = ti.root.dense(ti.ij, G)
    cells.dynamic(ti.k, 1024, chunk_size=64).place(pid)
    count = ti.field(ti.i32, shape=(G, G))
    rng = np.random.default_rng(0)
    p = rng.random((n, 2)).astype(np.float32)
    p = 0.5 + (p - 0.5) * np.sqrt(p[:, :1])          # denser near the middle
    pos.from_numpy(p.astype(np.float32))

    @ti.kernel
    def build():
        for k in range(n):
            c = ti.cast(ti.floor(pos[k] * G), ti.i32)
            ti.append(pid.parent(), [c[0], c[1]], k)

    @ti.kernel
    def visit():
        for i, j, k in pid:
            count[i, j] += 1

    def step():
        cells.deactivate_all()
        build()
        visit()

    build()                   # compile, then nothing stays in the lists
    visit()
    cells.deactivate_all()

    def result():
        count.fill(0)
        step()
        return count.to_numpy()

    return step, result
