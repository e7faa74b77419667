"""Stable fluids: one step (advection, dye, 60 Jacobi pressure iterations) on a 256^2 grid,
the stable_fluids example's kernels built with either module."""
TITLE = "stable fluids step, 256^2 grid, 60 Jacobi iterations"
N = 256
QUICK_N = 64


def make(ti, n):
    from fluxion.examples.stable_fluids import build
    sim = build(ti, n)
    state = {"t": 0}

    def run():
        state["t"] += 1
        sim["step"](state["t"] * 0.03)

    return run, (lambda: None)
