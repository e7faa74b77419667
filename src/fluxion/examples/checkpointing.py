"""Checkpointing through a custom gradient: keep every k-th state, recompute the rest.

A damped nonlinear oscillator chain is simulated for T steps. The plain version keeps all
T+1 states (and their gradients) for the backward pass. The checkpointed version keeps only
every k-th state; its backward pass (a `@ti.ad.grad_for` function) recomputes each segment of
k steps from its checkpoint before running that segment's kernel gradients in reverse.
Both give the same gradient; the example prints both memory footprints.

    python -m fluxion.examples checkpointing [--steps 512] [--k 32] [--n 4096]
"""
import argparse

import numpy as np

import fluxion as ti
from fluxion.lang import runtime


def field_bytes():
    """Bytes held by every field tree of the session (values and gradients)."""
    return sum(t.buffer.nbytes for t in runtime.state().trees)


def plain(n, steps, dt, x0):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    v = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            f = -ti.sin(x[t, i]) - 0.1 * v[t, i] \
                + 0.5 * (x[t, (i + 1) % n] + x[t, (i + n - 1) % n] - 2.0 * x[t, i])
            v[t + 1, i] = v[t, i] + dt * f
            x[t + 1, i] = x[t, i] + dt * v[t + 1, i]

    @ti.kernel
    def compute_loss():
        for i in range(n):
            loss[None] += x[steps, i] ** 2 + v[steps, i] ** 2

    x0f = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def load():
        for i in range(n):
            x[0, i] = x0f[i]

    x0f.from_numpy(x0)
    with ti.ad.Tape(loss=loss):
        load()
        for t in range(steps):
            step(t)
        compute_loss()
    out = loss[None], x0f.grad.to_numpy(), field_bytes()
    ti.reset()
    return out


def checkpointed(n, steps, k, dt, x0):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    segments = steps // k
    ckpt_x = ti.field(ti.f64, shape=(segments + 1, n))          # every k-th state only
    ckpt_v = ti.field(ti.f64, shape=(segments + 1, n))
    x = ti.field(ti.f64, shape=(k + 1, n), needs_grad=True)     # one segment, reused
    v = ti.field(ti.f64, shape=(k + 1, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x0f = ti.field(ti.f64, shape=n, needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            f = -ti.sin(x[t, i]) - 0.1 * v[t, i] \
                + 0.5 * (x[t, (i + 1) % n] + x[t, (i + n - 1) % n] - 2.0 * x[t, i])
            v[t + 1, i] = v[t, i] + dt * f
            x[t + 1, i] = x[t, i] + dt * v[t + 1, i]

    @ti.kernel
    def save(s: ti.i32, src: ti.i32):
        for i in range(n):
            ckpt_x[s, i] = x[src, i]
            ckpt_v[s, i] = v[src, i]

    @ti.kernel
    def restore(s: ti.i32):
        for i in range(n):
            x[0, i] = ckpt_x[s, i]
            v[0, i] = ckpt_v[s, i]

    @ti.kernel
    def carry_grad():
        # the gradient at the start of a segment is the one at the end of the previous one
        for i in range(n):
            x.grad[k, i] = x.grad[0, i]
            v.grad[k, i] = v.grad[0, i]
            x.grad[0, i] = 0.0
            v.grad[0, i] = 0.0

    @ti.kernel
    def clear_segment_grads():
        for t, i in ti.ndrange(k, n):
            x.grad[t, i] = 0.0
            v.grad[t, i] = 0.0

    @ti.kernel
    def compute_loss():
        for i in range(n):
            loss[None] += x[k, i] ** 2 + v[k, i] ** 2

    @ti.kernel
    def load():
        for i in range(n):
            x[0, i] = x0f[i]
            v[0, i] = 0.0

    @ti.kernel
    def load_grad():
        for i in range(n):
            x0f.grad[i] += x.grad[0, i]

    @ti.ad.grad_replaced
    def simulate():
        load()
        save(0, 0)
        for s in range(segments):
            if s > 0:
                restore(s)
            for t in range(k):
                step(t)
            save(s + 1, k)
        compute_loss()

    @ti.ad.grad_for(simulate)
    def simulate_grad():
        compute_loss.grad()
        for s in reversed(range(segments)):
            restore(s)                      # recompute the segment from its checkpoint
            for t in range(k):
                step(t)
            clear_segment_grads()
            for t in reversed(range(k)):
                step.grad(t)
            if s > 0:
                carry_grad()
        load_grad()

    x0f.from_numpy(x0)
    with ti.ad.Tape(loss=loss):
        simulate()
    out = loss[None], x0f.grad.to_numpy(), field_bytes()
    ti.reset()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=512)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args()
    assert args.steps % args.k == 0, "--steps must be a multiple of --k"
    x0 = np.random.default_rng(0).uniform(-1, 1, args.n)
    dt = 0.05
    l1, g1, m1 = plain(args.n, args.steps, dt, x0)
    l2, g2, m2 = checkpointed(args.n, args.steps, args.k, dt, x0)
    print(f"plain:        loss {l1:.10f}  field memory {m1 / 2**20:8.2f} MiB")
    print(f"checkpointed: loss {l2:.10f}  field memory {m2 / 2**20:8.2f} MiB "
          f"({m1 / m2:.1f}x less)")
    err = np.abs(g1 - g2).max() / np.abs(g1).max()
    print(f"gradients agree: max relative difference {err:.2e}")


if __name__ == "__main__":
    main()
