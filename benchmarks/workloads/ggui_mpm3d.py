"""mpm3d_ggui's frame: 65,536 sphere particles (radius 0.02, per-particle colours) in a block,
two point lights, its camera, and its three widget sub-windows, at 1080x720."""
import numpy as np

from benchmarks.workloads._ggui import field_of, finish, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "mpm3d_ggui frame: 65,536 lit sphere particles + 3 widget panels, 1080x720"


def make(ti, n):
    rng = np.random.default_rng(0)
    win = window(ti, (1080, 720))
    x = field_of(ti, rng.random((65536, 3)) * [0.4, 0.4, 0.4] + [0.3, 0.05, 0.3], 3)
    col = field_of(ti, np.concatenate([np.tile([[0.1, 0.6, 0.9]], (65536, 1)),
                                       np.ones((65536, 1))], 1), 4)
    canvas, scene, gui = win.get_canvas(), win.get_scene(), win.get_gui()
    camera = ti.ui.Camera()
    camera.position(0.5, 1.0, 1.95)
    camera.lookat(0.5, 0.3, 0.5)
    camera.fov(55)
    state = {"g": [0.0, -9.8, 0.0], "r": 0.02, "c": [(0.1, 0.6, 0.9), (0.93, 0.33, 0.23),
                                                     (1.0, 1.0, 1.0)]}

    def draw():
        scene.set_camera(camera)
        scene.ambient_light((0, 0, 0))
        scene.particles(x, per_vertex_color=col, radius=state["r"])
        scene.point_light(pos=(0.5, 1.5, 0.5), color=(0.5, 0.5, 0.5))
        scene.point_light(pos=(0.5, 1.5, 1.5), color=(0.5, 0.5, 0.5))
        canvas.scene(scene)
        with gui.sub_window("Presets", 0.05, 0.1, 0.2, 0.15) as w:
            for i, name in enumerate(["Single Dam Break", "Double Dam Break", "Water Snow Jelly"]):
                w.checkbox(name, i == 0)
        with gui.sub_window("Gravity", 0.05, 0.3, 0.2, 0.1) as w:
            for k in range(3):
                state["g"][k] = w.slider_float("xyz"[k], state["g"][k], -10, 10)
        with gui.sub_window("Options", 0.05, 0.45, 0.2, 0.4) as w:
            w.checkbox("use_random_colors", False)
            for k, name in enumerate(["water color", "snow color", "jelly color"]):
                state["c"][k] = w.color_edit_3(name, state["c"][k])
            state["r"] = w.slider_float("particles radius ", state["r"], 0, 0.1)
            w.button("restart")
            w.button("Pause")

    return finish(win, draw)
