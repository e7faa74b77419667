"""The diff_mass_spring example: one optimisation iteration = a Tape over the whole
simulation (init, 200 step kernels, the loss) and its gradient, then a gradient step; a chain
of 16 masses, built with the example's build()."""
TITLE = "differentiable mass-spring example: one iteration (200 steps forward + backward)"
N = 16
QUICK_N = 16


def make(ti, n):
    from fluxion.examples.diff_mass_spring import build
    iterate, x = build(ti, n, 200)
    iterate(25.0)
    # every iteration changes the parameters: keep the loss of one more to compare
    return (lambda: iterate(25.0)), (lambda: None)
