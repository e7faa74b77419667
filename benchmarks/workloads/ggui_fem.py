"""fem128_ggui's frame: its 12x12 mesh (288 triangles, per-vertex colours), 169 vertex dots,
the ball and the mouse circle, at 512x512."""
import numpy as np

from benchmarks.workloads._ggui import field_of, finish, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "fem128_ggui frame: 288 triangles + 171 circles, 512x512"


def make(ti, n):
    k = 12
    win = window(ti, (512, 512))
    i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
    pos = field_of(ti, np.stack([0.45 + 0.25 * i / k, 0.3 + 0.25 * j / k], -1).reshape(-1, 2), 2)
    rng = np.random.default_rng(1)
    colors = field_of(ti, rng.random(((k + 1) ** 2, 3)), 3)
    q = (i[:-1, :-1] * (k + 1) + j[:-1, :-1]).reshape(-1)
    tri = np.stack([q, q + k + 1, q + 1, q + k + 2, q + 1, q + k + 1], 1).reshape(-1)
    indices = ti.field(ti.i32, tri.size)
    indices.from_numpy(tri.astype(np.int32))
    mouse, ball = field_of(ti, [[0.3, 0.7]], 2), field_of(ti, [[0.5, 0.0]], 2)
    canvas = win.get_canvas()

    def draw():
        canvas.circles(mouse, color=(0.2, 0.4, 0.6), radius=0.02)
        canvas.circles(ball, color=(0.4, 0.4, 0.4), radius=0.31)
        canvas.triangles(pos, indices=indices, per_vertex_color=colors)
        canvas.circles(pos, radius=0.003, color=(1, 0.6, 0.2))

    return finish(win, draw)
