"""features/gui/gui_widgets' frame: one circle of radius 10 on a 512x512 GUI, then show()
(headless: no widgets are drawn, on either peer)."""
from benchmarks.workloads._gui import finish, gui

N = QUICK_N = 1
TITLE = "ti.GUI gui_widgets frame: one circle of radius 10 on 512x512 + show"


def make(ti, n):
    g = gui(ti, 512)
    return finish(g, lambda: g.circle((0.5, 0.5), radius=10))
