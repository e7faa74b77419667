"""The fem example: explicit neo-Hookean FEM, forces from a Tape over the elastic energy.
One frame of the example's main loop = 25 step() calls (each: Tape(elastic_energy) + advance),
on its default 12x12 mesh (169 nodes, 288 triangles), built with the example's build()."""
TITLE = "fem example frame: 25 x (Tape(energy) + advance), 12x12 mesh, f64"
N = 12
QUICK_N = 6
STEPS = 25  # the example's --steps default: step() calls per frame


def make(ti, n):
    from fluxion.examples.fem import build
    sim = build(ti, n)
    sim["init"](0.3)
    step = sim["step"]

    def run():
        for _ in range(STEPS):
            step()

    def result():
        # untimed: the same frame from the initial state on both peers
        sim["init"](0.3)
        run()
        return sim["x"].to_numpy()

    return run, result
