"""The frames of Taichi's GGUI examples (python/taichi/examples/ggui_examples), drawn by
`ti.ui` headless: the draw calls each example makes per frame, on data of the size and
shape its simulation gives (made up here, deterministic), then `window.show()`. What is
timed is the frame's drawing only, not the simulation. Taichi's GGUI needs Vulkan: on a
machine without it the taichi peer reports that instead of a time."""
import numpy as np



def window(ti, res):
    if ti.__name__ != "fluxion" and not ti._lib.core.with_vulkan():
        raise RuntimeError("Taichi's GGUI needs Vulkan, which this machine lacks")
    return ti.ui.Window("bench", res, show_window=False)


def field_of(ti, a, n=None):
    a = np.ascontiguousarray(a, np.float32)
    f = (ti.field(ti.f32, a.shape) if a.ndim == 1 or n is None else
         ti.Vector.field(a.shape[-1], ti.f32, a.shape[:-1]))
    f.from_numpy(a)
    return f


def finish(win, draw):
    def run():
        draw()
        win.show()

    def result():
        draw()
        img = win.get_image_buffer_as_numpy()
        win.show()
        return np.array([img[:, :, :3].mean()])

    return run, result
