"""rendering/taichi_logo's frame: set_image of a 512x512 scalar field, then show()."""
import numpy as np

from benchmarks.workloads._gui import finish, gui, vector_field_of

N = QUICK_N = 512
TITLE = "ti.GUI taichi_logo frame: set_image of a 512x512 f32 field + show"


def make(ti, n):
    x, y = np.meshgrid(np.linspace(-1, 1, n), np.linspace(-1, 1, n), indexing="ij")
    logo = vector_field_of(ti, (x * x + y * y < 0.6) * (0.5 + 0.5 * np.sin(8 * x)))
    g = gui(ti, (n, n))
    return finish(g, lambda: g.set_image(logo))
