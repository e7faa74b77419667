"""A mesh's frame (as fem99's elements): triangles of 2,048 small triangles, each of its own
colour, on a 512x512 GUI, then show()."""
import numpy as np

from benchmarks.workloads._gui import finish, gui

N = 2048
QUICK_N = 256
TITLE = "ti.GUI mesh frame: 2,048 triangles of per-triangle colours on 512x512 + show"


def make(ti, n):
    rng = np.random.default_rng(4)
    a = rng.uniform(0.05, 0.95, (n, 2)).astype(np.float32)
    b = (a + rng.normal(0, 0.02, (n, 2))).astype(np.float32)
    c = (a + rng.normal(0, 0.02, (n, 2))).astype(np.float32)
    colors = rng.integers(0, 1 << 24, n).astype(np.uint32)
    g = gui(ti, 512, background_color=0x112F41)
    return finish(g, lambda: g.triangles(a, b, c, color=colors))
