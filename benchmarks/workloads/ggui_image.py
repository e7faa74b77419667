"""stable_fluid_ggui's and fractal3d_ggui's frames: set_image of a vec3 field, 512x512 and
1280x720, one after the other."""
import numpy as np

from benchmarks.workloads._ggui import field_of, window

N = QUICK_N = 1  # one frame size: the example's own
TITLE = "stable_fluid + fractal3d frames: set_image of 512x512 and 1280x720 vec3 fields"


def make(ti, n):
    rng = np.random.default_rng(3)
    fluid_win, fractal_win = window(ti, (512, 512)), window(ti, (1280, 720))
    dye = field_of(ti, rng.random((512, 512, 3)), 3)
    image = field_of(ti, rng.random((1280, 720, 3)), 3)

    def run():
        fluid_win.get_canvas().set_image(dye)
        fluid_win.show()
        fractal_win.get_canvas().set_image(image)
        fractal_win.show()

    def result():
        fluid_win.get_canvas().set_image(dye)
        img = fluid_win.get_image_buffer_as_numpy()
        fluid_win.show()
        return np.array([img[:, :, :3].mean()])

    return run, result
