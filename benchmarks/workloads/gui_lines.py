"""A spring network's frame (as mass_spring, the cloth and FEM wireframes of Taichi's
examples): lines of 2,048 short segments of radius 1 in one colour on a 512x512 GUI, then
show()."""
import numpy as np

from benchmarks.workloads._gui import finish, gui

N = 2048
QUICK_N = 256
TITLE = "ti.GUI springs frame: lines of 2,048 segments (radius 1) on 512x512 + show"


def make(ti, n):
    rng = np.random.default_rng(3)
    begin = rng.uniform(0.05, 0.95, (n, 2)).astype(np.float32)
    end = (begin + rng.normal(0, 0.02, (n, 2))).astype(np.float32)
    g = gui(ti, 512, background_color=0xDDDDDD)
    return finish(g, lambda: g.lines(begin, end, radius=1, color=0x444444))
