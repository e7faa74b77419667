"""ti.graph: launches recorded over symbolic arguments and run with concrete ones, compared with
the same launches written out, and with taichi's graph where it is installed."""
import numpy as np
import pytest

import fluxion as ti
from taichi_ref import taichi_values


def _program(mod):
    @mod.kernel
    def init(x: mod.types.ndarray(ndim=1), s: mod.f32):
        for i in x:
            x[i] = mod.Vector([i * s, -i * s])

    @mod.kernel
    def step(x: mod.types.ndarray(ndim=1), m: mod.types.ndarray(ndim=2), k: mod.i32):
        for i in x:
            x[i] = x[i] * 0.5 + m[i % 4, 1] * k

    x = mod.graph.Arg(mod.graph.ArgKind.NDARRAY, "x", dtype=mod.math.vec2, ndim=1)
    m = mod.graph.Arg(mod.graph.ArgKind.NDARRAY, "m", mod.f32, ndim=2)
    s = mod.graph.Arg(mod.graph.ArgKind.SCALAR, "s", mod.f32)
    k = mod.graph.Arg(mod.graph.ArgKind.SCALAR, "k", mod.i32)
    b = mod.graph.GraphBuilder()
    b.dispatch(init, x, s)
    seq = b.create_sequential()
    seq.dispatch(step, x, m, k)
    for _ in range(3):
        b.append(seq)
    g = b.compile()
    xa = mod.ndarray(mod.math.vec2, shape=16)
    ma = mod.ndarray(mod.f32, shape=(4, 4))
    ma.from_numpy(np.arange(16, dtype=np.float32).reshape(4, 4))
    g.run({"x": xa, "m": ma, "s": 0.25, "k": 3})
    return xa.to_numpy(), (init, step, ma)


def test_a_graph_runs_its_launches_in_order():
    got, (init, step, ma) = _program(ti)
    ref = ti.ndarray(ti.math.vec2, shape=16)
    init(ref, 0.25)
    for _ in range(3):
        step(ref, ma, 3)
    np.testing.assert_array_equal(got, ref.to_numpy())
    want = np.stack([np.arange(16) * 0.25, -np.arange(16) * 0.25], 1).astype(np.float32)
    m = np.arange(16, dtype=np.float32).reshape(4, 4)
    for _ in range(3):
        want = want * 0.5 + m[np.arange(16) % 4, 1][:, None] * 3
    np.testing.assert_allclose(got, want, rtol=1e-6)


def graph_values(ti):
    return {"x": _program(ti)[0]}


def test_same_values_as_taichi():
    # (taichi in a child process: taichi_ref)
    (status, want), = taichi_values(graph_values, helpers=(_program,), offline_cache=False)
    assert status == "ok", want
    got, _ = _program(ti)
    np.testing.assert_array_equal(got, want["x"])


def test_run_checks_the_arguments_against_their_declaration():
    @ti.kernel
    def k(x: ti.types.ndarray(ndim=1), one: ti.i32):
        for i in x:
            x[i] += one

    x = ti.graph.Arg(ti.graph.ArgKind.NDARRAY, "x", ti.f32, ndim=1)
    b = ti.graph.GraphBuilder()
    b.dispatch(k, x, 1)           # a value fixed when the graph is built (taichi: only Args)
    g = b.compile()
    with pytest.raises(ti.FluxionRuntimeError, match="missing the argument.*'x'"):
        g.run({})
    with pytest.raises(ti.FluxionRuntimeError, match="'x' was declared with dtype f32"):
        g.run({"x": ti.ndarray(ti.i32, shape=4)})
    with pytest.raises(ti.FluxionRuntimeError, match="'x' was declared with ndim=1"):
        g.run({"x": ti.ndarray(ti.f32, shape=(2, 2))})
    a = ti.ndarray(ti.f32, shape=4)
    g.run({"x": a})
    g.run({"x": a})
    np.testing.assert_array_equal(a.to_numpy(), [2, 2, 2, 2])
    with pytest.raises(ti.FluxionRuntimeError, match="textures are not supported"):
        ti.graph.Arg(ti.graph.ArgKind.TEXTURE, "t", ndim=2)
