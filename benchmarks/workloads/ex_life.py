"""The game_of_life example: one generation (one step() kernel, two parallel loops) on its
default 128^2 board, built with the example's build()."""
import numpy as np

TITLE = "game of life example: one generation, 128^2 board"
N = 128
QUICK_N = 64
INNER = 20  # a generation takes microseconds: time batches of calls
CHECK_STEPS = 10


def _board(n):
    return (np.random.default_rng(0).random((n, n)) < 0.3).astype(np.int32)


def make(ti, n):
    from fluxion.examples.game_of_life import build
    alive, step = build(ti, n)
    alive.from_numpy(_board(n))

    def result():
        # untimed: the same generations from the same board on both peers
        alive.from_numpy(_board(n))
        for _ in range(CHECK_STEPS):
            step()
        return alive.to_numpy()

    return step, result
