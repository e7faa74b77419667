"""The julia example: one frame (the paint kernel: up to 50 iterations per pixel) on its
default 640x320 image, built with the example's build()."""
import numpy as np

TITLE = "julia example: one paint() frame, 640x320 pixels, max 50 iterations"
N = 320
QUICK_N = 160
T = 0.6  # the time argument: fixed, so every call does the same work and results compare


def make(ti, n):
    from fluxion.examples.julia import build
    pixels, iters, paint = build(ti, n)

    def result():
        # what the example prints: the mean iteration count and the share of points that never
        # escape. Per pixel, a few (13 of 204800 here) points on the set's boundary take one
        # iteration more or less on either peer: float32 rounding (contraction) differs there.
        k = iters.to_numpy()
        return np.array([k.mean(), np.mean(k == 50)])

    return (lambda: paint(T)), result
