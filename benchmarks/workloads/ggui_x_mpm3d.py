"""One frame of Taichi's example ggui_examples/mpm3d_ggui.py, drawn by fluxion's ti.ui after
N frames of the example itself (see _ggui_examples.py): the example's own draw calls on its own
data."""
from benchmarks.workloads._ggui_examples import make_example

N, QUICK_N = 3, 1     # frames of the example run before the one that is timed
TITLE = "mpm3d_ggui frame: its 65,536 MPM particles as lit spheres, 3 widget panels (1080x720)"


def make(ti, n):
    return make_example(ti, "mpm3d_ggui", n)
