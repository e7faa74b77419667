"""mass_spring_game_ggui's frame: its 1,024 particles (per-particle colours, radius 0.02) and
its index buffer of 2,097,152 entries (a million springs, the unused ones all on vertex 0), a
widget sub-window, at 768x768."""
import numpy as np

from benchmarks.workloads._ggui import field_of, finish, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "mass_spring_game_ggui frame: 1M line indices + 1,024 circles + widgets, 768x768"


def make(ti, n):
    m = 1024
    win = window(ti, (768, 768))
    rng = np.random.default_rng(4)
    pts = np.zeros((m, 2))
    pts[:40] = rng.random((40, 2)) * 0.5 + 0.25                 # the particles in use
    x = field_of(ti, pts, 2)
    colors = field_of(ti, np.zeros((m, 3)), 3)
    idx = np.zeros(m * m * 2, np.int32)
    pairs = np.array([(a, b) for a in range(40) for b in range(a + 1, 40) if b - a < 4])
    idx[:pairs.size] = pairs.reshape(-1)
    indices = ti.field(ti.i32, idx.size)
    indices.from_numpy(idx)
    canvas, gui = win.get_canvas(), win.get_gui()
    state = [1000.0, 1.0, 100.0]

    def draw():
        canvas.set_background_color((1, 1, 1))
        canvas.lines(x, indices=indices, color=(0, 0, 0), width=0.01)
        canvas.circles(x, per_vertex_color=colors, radius=0.02)
        with gui.sub_window("mass spring", 0.05, 0.05, 0.9, 0.2) as w:
            w.text("Left click: add mass point (with shift to fix); Right click: attract")
            w.text("C: clear all; Space: pause")
            state[0] = w.slider_float("Spring Young's modulus", state[0], 100, 10000)
            state[1] = w.slider_float("Drag damping", state[1], 0.0, 10)
            state[2] = w.slider_float("Dashpot damping", state[2], 10, 1000)

    return finish(win, draw)
