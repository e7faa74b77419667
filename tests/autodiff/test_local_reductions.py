"""Gradients through kernel-level locals updated from parallel loops (`s += f(x[i])`).

The update is atomic in the primal; reverse mode must replay the loop to know the local's value
where later statements need it (`loss = s * s`), and forward mode must carry its tangent. Each
test checks against central differences in float64 of a NumPy evaluation of the same program.
"""
import numpy as np
import pytest

import fluxion as ti
from op_cases import fd

N = 257


@pytest.fixture(autouse=True)
def _f64_session(fluxion_arch):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    yield
    ti.reset()


def program(xs):
    """What the kernels below compute, in NumPy."""
    s = np.sum(np.sin(xs) * xs)
    m = s / len(xs)
    v = np.sum((xs - m) ** 2)
    return s * s + np.sqrt(v)


def _build():
    x = ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        s = 0.0
        for i in x:
            y[i] = x[i] * 2.0          # a store in the body, as in the reported program
            s += ti.sin(x[i]) * x[i]
        m = s / N
        v = 0.0
        for i in x:
            v += (x[i] - m) ** 2
        loss[None] = s * s + ti.sqrt(v)   # needs the primal values of both locals

    return x, loss, k


def test_reverse_mode_through_local_reductions():
    x, loss, k = _build()
    xs = np.linspace(-1.0, 2.0, N)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        k()
    assert loss[None] == pytest.approx(program(xs), rel=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), fd(program, xs), rtol=1e-6, atol=1e-6)


def test_forward_mode_through_local_reductions():
    x, loss, k = _build()
    xs = np.linspace(-1.0, 2.0, N)
    x.from_numpy(xs)
    seed = np.cos(np.arange(N))
    with ti.ad.FwdMode(loss=loss, param=x, seed=list(seed)):
        k()
    expected = fd(program, xs) @ seed
    assert loss.dual[None] == pytest.approx(expected, rel=1e-6)


def test_old_value_of_a_local_atomic_is_refused_in_a_grad_kernel():
    x = ti.field(ti.f64, shape=8, needs_grad=True)
    y = ti.field(ti.f64, shape=8, needs_grad=True)

    @ti.kernel
    def k():
        c = 0
        for i in x:
            y[ti.atomic_add(c, 1)] = x[i] ** 2

    k()
    with pytest.raises(ti.TaichiCompilationError, match="old value"):
        k.grad()
