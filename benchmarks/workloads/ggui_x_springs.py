"""One frame of Taichi's example ggui_examples/mass_spring_game_ggui.py, drawn by fluxion's ti.ui after
N frames of the example itself (see _ggui_examples.py): the example's own draw calls on its own
data."""
from benchmarks.workloads._ggui_examples import make_example

N, QUICK_N = 3, 1     # frames of the example run before the one that is timed
TITLE = "mass_spring_game_ggui frame: springs as lines, masses as circles, a widget panel (768x768)"


def make(ti, n):
    return make_example(ti, "mass_spring_game_ggui", n)
