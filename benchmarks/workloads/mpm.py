"""MLS-MPM 2-D fluid: one frame of 50 substeps, 8192 particles on a 128^2 grid (the
mpm88 example's kernels, built with either module)."""
TITLE = "MLS-MPM 2-D, 8192 particles, 128^2 grid, one frame = 50 substeps"
N = 8192
QUICK_N = 2048
SUBSTEPS = 50


def make(ti, n):
    from fluxion.examples.mpm88 import build
    sim = build(ti, n_particles=n, n_grid=128)
    sim["init"]()
    substep = sim["substep"]

    def run():
        for _ in range(SUBSTEPS):
            substep()

    # the state depends on how many frames ran: nothing to compare across peers
    return run, (lambda: None)
