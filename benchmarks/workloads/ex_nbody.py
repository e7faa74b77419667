"""The nbody example: one frame of its main loop = 10 leapfrog steps (kick, drift, all-pairs
accelerations, kick), 1024 bodies in 2-D float64, built with the example's build()."""
import numpy as np

TITLE = "n-body example frame: 10 leapfrog steps, 1024 bodies, 2-D f64"
N = 1024
QUICK_N = 256
STEPS = 10  # the example's --steps default: step() calls per frame


def _state(n):
    # the example's initial disc
    rng = np.random.default_rng(0)
    r = np.sqrt(rng.random(n)) * 0.3
    th = rng.random(n) * 2 * np.pi
    pos = np.stack([0.5 + r * np.cos(th), 0.5 + r * np.sin(th)], 1)
    vel = np.stack([-np.sin(th), np.cos(th)], 1) * r[:, None] * 2.0
    return pos, vel


def make(ti, n):
    from fluxion.examples.nbody import build
    sim = build(ti, n)
    pos, vel = _state(n)

    def reset():
        sim["x"].from_numpy(pos)
        sim["v"].from_numpy(vel)
        sim["m"].from_numpy(np.full(n, 1.0 / n))
        sim["accelerations"]()

    reset()
    step = sim["step"]

    def run():
        for _ in range(STEPS):
            step()

    def result():
        # untimed: the same frame from the initial state on both peers
        reset()
        run()
        return sim["x"].to_numpy()

    return run, result
