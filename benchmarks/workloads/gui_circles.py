"""A particle program's frame (as mpm99, pbf2d): circles of 8,192 particles of radius 1.5,
each of one of three colours, on a 512x512 GUI, then show().

The colours are given per particle, not as palette + palette_indices: Taichi 1.7.4 draws a
palette's circles in an order that changes from one process to the next (the frame's mean
moved by 0.3% between runs), so its result could not be compared; with per-particle colours
it is the same every run, and the same as fluxion's."""
import numpy as np

from benchmarks.workloads._gui import finish, gui

N = 8192
QUICK_N = 2048
TITLE = "ti.GUI particles frame: circles of 8,192 particles (radius 1.5) on 512x512 + show"


def make(ti, n):
    rng = np.random.default_rng(7)
    pos = rng.random((n, 2)).astype(np.float32)
    material = rng.integers(0, 3, n)
    colors = np.array([0x068587, 0xED553B, 0xEEEEF0], np.uint32)[material]
    g = gui(ti, 512, background_color=0x112F41)
    return finish(g, lambda: g.circles(pos, radius=1.5, color=colors))
