"""One frame of Taichi's example ggui_examples/fractal3d_ggui.py, drawn by fluxion's ti.ui after
N frames of the example itself (see _ggui_examples.py): the example's own draw calls on its own
data."""
from benchmarks.workloads._ggui_examples import make_example

N, QUICK_N = 3, 1     # frames of the example run before the one that is timed
TITLE = "fractal3d_ggui frame: set_image of its ray-marched 1280x720 image"


def make(ti, n):
    return make_example(ti, "fractal3d_ggui", n)
