"""The autodiff_gravity example: one step = a Tape over the potential energy (its adjoint gives
the forces) and a velocity/position update, 8 bodies as in the example, built with the
example's build(). Small on purpose: the cost is the Tape and the launches."""
TITLE = "autodiff gravity example: one Tape step (energy + its adjoint + advance), 8 bodies"
N = 8
QUICK_N = 8
STEPS = 100  # steps per timed call


def make(ti, n):
    from fluxion.examples.autodiff_gravity import build
    init, step, energy, x = build(ti, n, 1e-5)
    init()

    def run():
        for _ in range(STEPS):
            step()

    # both peers start from their own random positions: nothing to compare
    return run, (lambda: None)
