"""The mpm_materials example (fluid, jelly, snow; per-particle SVD): one frame of its main
loop = 25 substeps, 9000 particles on a 128^2 grid, built with the example's build()."""
TITLE = "MPM 3 materials example: one frame = 25 substeps, 9000 particles, 128^2"
N = 9000
QUICK_N = 3000
SUBSTEPS = 25  # the example's --substeps default


def make(ti, n):
    from fluxion.examples.mpm_materials import build
    sim = build(ti, n_particles=n, n_grid=128)
    sim["init"]()
    substep = sim["substep"]

    def run():
        for _ in range(SUBSTEPS):
            substep()

    # init draws from ti.random (different streams per peer): nothing to compare
    return run, (lambda: None)
