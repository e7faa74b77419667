"""mpm128_ggui's frame: 9,000 particles in three circle calls (radius 0.003), the mouse circle,
the background colour, at 512x512."""
import numpy as np

from benchmarks.workloads._ggui import field_of, finish, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "mpm128_ggui frame: 9,000 particles in 3 circle calls + 1, 512x512"


def make(ti, n):
    win = window(ti, (512, 512))
    rng = np.random.default_rng(2)
    groups = [field_of(ti, rng.random((3000, 2)) * 0.2 + [0.3 + 0.1 * g, 0.05 + 0.32 * g], 2)
              for g in range(3)]
    mouse = field_of(ti, [[0.5, 0.5]], 2)
    canvas = win.get_canvas()

    def draw():
        canvas.circles(mouse, color=(0.2, 0.4, 0.6), radius=0.05)
        canvas.set_background_color((0.067, 0.184, 0.255))
        for g, col in zip(groups, [(0, 0.5, 0.5), (0.93, 0.33, 0.23), (1, 1, 1)]):
            canvas.circles(g, radius=0.003, color=col)

    return finish(win, draw)
