"""rendering/simple_uv's frame: set_image of a 512x512 vec3 field, then show()."""
import numpy as np

from benchmarks.workloads._gui import finish, gui, vector_field_of

N = QUICK_N = 512
TITLE = "ti.GUI simple_uv frame: set_image of a 512x512 vec3 field + show"


def make(ti, n):
    u, v = np.meshgrid(np.arange(n) / n, np.arange(n) / n, indexing="ij")
    pixels = vector_field_of(ti, np.stack([u, v, 0 * u], axis=-1))
    g = gui(ti, (n, n))
    return finish(g, lambda: g.set_image(pixels))
