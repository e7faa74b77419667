"""A differentiable cloth: forward plus backward of a mass-spring cloth under a Tape.

32x32 masses, 256 steps; every state is kept (one slot per step), the loss is the cloth's
height at the end, and the Tape runs the 256 step kernels' gradients in reverse: 514
launches each way, so launch overhead matters as much as the kernels.
"""
import numpy as np

TITLE = "differentiable 32x32 cloth, 256 steps, forward + backward (Tape)"
N = 32          # masses per side
QUICK_N = 16
STEPS = 256


def make(ti, n):
    count = n * n
    steps = STEPS
    dt = 2e-3
    x = ti.Vector.field(3, ti.f32, shape=(steps + 1, count), needs_grad=True)
    v = ti.Vector.field(3, ti.f32, shape=(steps + 1, count), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def init():
        for i in range(count):
            x[0, i] = ti.Vector([i // n, 0.0, i % n]) * (1.0 / n)
            v[0, i] = ti.Vector([0.0, 0.0, 0.0])

    @ti.kernel
    def step(t: ti.i32):
        for i in range(count):
            r, c = i // n, i % n
            f = ti.Vector([0.0, -9.8, 0.0])
            for k in ti.static(range(4)):
                rr = r + ti.static((1, -1, 0, 0)[k])
                cc = c + ti.static((0, 0, 1, -1)[k])
                if 0 <= rr < n and 0 <= cc < n:
                    d = x[t, rr * n + cc] - x[t, i]
                    length = d.norm(1e-6)
                    f += 1000.0 * (length - 1.0 / n) * d / length
            vn = v[t, i] * 0.999 + dt * f
            v[t + 1, i] = vn
            x[t + 1, i] = x[t, i] + dt * vn

    @ti.kernel
    def compute_loss():
        for i in range(count):
            loss[None] += x[steps, i][1]

    def run():
        with ti.ad.Tape(loss=loss):
            init()
            for t in range(steps):
                step(t)
            compute_loss()

    def result():
        g = x.grad.to_numpy()[0]
        return np.concatenate([[loss[None]], g.reshape(-1)])

    return run, result
