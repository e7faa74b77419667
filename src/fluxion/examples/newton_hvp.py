"""Newton's method on an elastic energy, with Hessian-vector products.

A 2-D mass-spring sheet hangs under gravity with its top row pinned. Its equilibrium
minimises the elastic + gravitational energy E(x). Each Newton step solves H d = -g with
conjugate gradients, where every H v comes from `ti.ad.hvp` (forward-over-reverse autodiff,
about the cost of one gradient) — the Hessian is never formed. The gradient norm printed
each iteration drops quadratically once close.

    python -m fluxion.examples newton_hvp [--n 8]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.examples import _arch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--iters", type=int, default=12)
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args), default_fp=ti.f64)
    n = args.n
    rest = 1.0 / (n - 1)
    k_spring, gravity = 200.0, 0.5

    x = ti.Vector.field(2, ti.f64, shape=(n, n), needs_grad=True)
    energy = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def spring(a, b, length):
        d = (x[b] - x[a]).norm(1e-12) - length
        return 0.5 * k_spring * d * d

    @ti.kernel
    def compute_energy():
        for i, j in ti.ndrange(n, n):
            e = gravity * x[i, j].y / (n * n)
            if i + 1 < n:
                e += spring((i, j), (i + 1, j), rest)
            if j + 1 < n:
                e += spring((i, j), (i, j + 1), rest)
            if i + 1 < n and j + 1 < n:
                e += spring((i, j), (i + 1, j + 1), rest * 1.4142135623730951)
            energy[None] += e

    # the sheet starts flat and slightly stretched; column j = n-1 (the top) stays pinned
    grid = np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij"), -1) * rest * 1.05
    x.from_numpy(grid)
    free = np.ones((n, n, 2), bool)
    free[:, n - 1] = False

    def grad_and_hvp(v):
        g, hv = ti.ad.hvp(compute_energy, energy, x, v)
        return g * free, hv * free

    for it in range(args.iters):
        g, _ = grad_and_hvp(np.zeros((n, n, 2)))
        gnorm = np.linalg.norm(g)
        print(f"iteration {it:2d}  energy {energy[None]: .10f}  |grad| {gnorm:.3e}")
        if gnorm < 1e-10:
            break
        # conjugate gradients on H d = -g, with H applied through Hessian-vector products
        d = np.zeros_like(g)
        r = -g
        p = r.copy()
        rr = np.vdot(r, r)
        for _ in range(4 * n * n):
            _, hp = grad_and_hvp(p)
            alpha = rr / np.vdot(p, hp)
            d += alpha * p
            r -= alpha * hp
            rr_new = np.vdot(r, r)
            if np.sqrt(rr_new) < 1e-3 * gnorm * min(1.0, gnorm):
                break
            p = r + (rr_new / rr) * p
            rr = rr_new
        x.from_numpy(x.to_numpy() + d)
    print("converged" if gnorm < 1e-8 else "not converged")


if __name__ == "__main__":
    main()
