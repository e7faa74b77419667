"""Conway's game of life on an integer field, with wrap-around borders.

    python -m fluxion.examples game_of_life [--n 128] [--frames 50] [--out out/life]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def build(ti, n):
    alive = ti.field(ti.i32, shape=(n, n))
    count = ti.field(ti.i32, shape=(n, n))

    @ti.kernel
    def step():
        for i, j in alive:
            s = 0
            for di, dj in ti.static(ti.ndrange((-1, 2), (-1, 2))):
                if ti.static(di != 0 or dj != 0):
                    s += alive[(i + di + n) % n, (j + dj + n) % n]
            count[i, j] = s
        for i, j in alive:
            c = count[i, j]
            alive[i, j] = 1 if c == 3 or (alive[i, j] == 1 and c == 2) else 0

    return alive, step


def numpy_step(a):
    s = sum(np.roll(np.roll(a, di, 0), dj, 1) for di in (-1, 0, 1) for dj in (-1, 0, 1)
            if di or dj)
    return ((s == 3) | ((a == 1) & (s == 2))).astype(a.dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--out", default="out/life")
    ap.add_argument("--window", action="store_true",
                    help="also show the frames in a window, where a display exists")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args))
    alive, step = build(ti, args.n)
    alive.from_numpy((np.random.default_rng(0).random((args.n, args.n)) < 0.3).astype(np.int32))
    gui = ti.GUI("Game of life", res=args.n * 4, show_gui=args.window)
    for frame in range(args.frames):
        if not gui.running:               # the window was closed
            break
        step()
        if frame % 10 == 0 or frame == args.frames - 1:
            img = np.kron(alive.to_numpy(), np.ones((4, 4))).astype(np.float32)
            gui.set_image(img)
            gui.show(f"{args.out}/life_{frame:04d}.png")
            print(f"generation {frame + 1:4d}  alive {int(alive.to_numpy().sum())}")


if __name__ == "__main__":
    main()
