"""features/gui/fullscreen's frame: set_image of a 1920x1080 vec3 field into a fast_gui GUI,
then show()."""
import numpy as np

from benchmarks.workloads._gui import finish, gui, vector_field_of

N = QUICK_N = 1  # the example's own size
TITLE = "ti.GUI fullscreen frame: set_image of a 1920x1080 vec3 field (fast_gui) + show"


def make(ti, n):
    res = (1920, 1080)
    i, j = np.meshgrid(np.arange(res[0]) / res[0], np.arange(res[1]) / res[1], indexing="ij")
    img = vector_field_of(ti, np.cos(np.stack([i, j + 2, i + 4], axis=-1)) * 0.5 + 0.5)
    g = gui(ti, res, fast_gui=True)
    run, _ = finish(g, lambda: g.set_image(img))
    # no result to compare: with fast_gui the original's get_image is its packed 8-bit
    # buffer, fluxion's the float frame (gui_simple_uv compares set_image's pictures)
    return run, lambda: None
