"""Frames of `ti.GUI` programs (Taichi's examples rendering/simple_uv, rendering/taichi_logo,
features/gui/fullscreen, features/gui/gui_widgets, and a particle program's circles): the
draw calls each makes per frame, on made-up deterministic data of the example's size, then
`gui.show()`. Headless (show_gui=False) on both peers, so what is timed is the drawing into
the frame and starting the next one, not a window system; the simulation is not timed."""
import numpy as np


def gui(ti, res, **kwargs):
    return ti.GUI("bench", res, show_gui=False, **kwargs)


def vector_field_of(ti, a):
    a = np.ascontiguousarray(a, np.float32)
    f = ti.Vector.field(a.shape[-1], ti.f32, a.shape[:-1]) if a.ndim == 3 else \
        ti.field(ti.f32, a.shape)
    f.from_numpy(a)
    return f


def finish(g, draw):
    """(run, result): run draws a frame and shows it; result draws one more and returns the
    mean of its RGB before showing it."""
    def run():
        draw()
        g.show()

    def result():
        draw()
        img = np.asarray(g.get_image())
        g.show()
        return np.array([img[:, :, :3].astype(np.float64).mean()])

    return run, result
