"""mass_spring_3d_ggui's frame: a 128x128 cloth (two-sided mesh, per-vertex colours, computed
normals) draped over a ball (one sphere particle), lit, at 768x768."""
import numpy as np

from benchmarks.workloads._ggui import field_of, finish, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "mass_spring_3d_ggui frame: 128x128 two-sided cloth mesh + a ball, 768x768"


def make(ti, n):
    m = 128
    win = window(ti, (768, 768))
    i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    px, pz = i / (m - 1) - 0.5, j / (m - 1) - 0.5
    py = 0.6 - 0.5 * np.exp(-6 * (px ** 2 + pz ** 2))           # sagging over the ball
    verts = field_of(ti, np.stack([px, py, pz], -1).reshape(-1, 3), 3)
    checker = ((i // 4 + j // 4) % 2).reshape(-1, 1)
    colors = field_of(ti, np.where(checker, [0.22, 0.72, 0.52], [1.0, 0.334, 0.52]), 3)
    quads = (i[:-1, :-1] * m + j[:-1, :-1]).reshape(-1)
    tri = np.stack([quads, quads + m, quads + 1, quads + m + 1, quads + 1, quads + m], 1)
    indices = ti.field(ti.i32, tri.size)
    indices.from_numpy(tri.reshape(-1).astype(np.int32))
    ball = field_of(ti, [[0.0, 0.0, 0.0]], 3)
    canvas, scene = win.get_canvas(), win.get_scene()
    canvas.set_background_color((1, 1, 1))
    camera = ti.ui.Camera()

    def draw():
        camera.position(0.0, 0.0, 3)
        camera.lookat(0.0, 0.0, 0)
        scene.set_camera(camera)
        scene.point_light(pos=(0, 1, 2), color=(1, 1, 1))
        scene.ambient_light((0.5, 0.5, 0.5))
        scene.mesh(verts, indices=indices, per_vertex_color=colors, two_sided=True)
        scene.particles(ball, radius=0.3 * 0.95, color=(0.5, 0.42, 0.8))
        canvas.scene(scene)

    return finish(win, draw)
