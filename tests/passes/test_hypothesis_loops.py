"""Random parallel loops (hypothesis) through the CPU code generator's loop transformations:
scatter privatization (fields and arrays), atomic demotion, row splitting of ndranges,
unroll-and-jam of reduction loops, reduction privatization. Each program mixes a scatter into
a small field, an update of the loop's own element, a tap loop and a reduction, over 1-D or
2-D iteration spaces of odd sizes, on 1 to 3 threads; results and gradients are compared
with NumPy."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fluxion as ti

programs = st.fixed_dictionaries({
    "shape": st.one_of(st.tuples(st.integers(1, 300)),
                       st.tuples(st.integers(1, 23), st.integers(1, 41))),
    "m": st.integers(1, 40),               # scatter target size
    "a": st.integers(0, 7), "b": st.integers(0, 7), "c": st.integers(0, 9),
    "taps": st.integers(1, 9),
    "threads": st.integers(1, 3),
    "array": st.booleans(),                # scatter into a numpy array instead of a field
    "seed": st.integers(0, 2 ** 16),
})


@settings(max_examples=25, deadline=None)
@given(programs)
def test_random_loops_match_numpy(p):
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=p["threads"])
    try:
        _check(p)
    finally:
        ti.reset()


def _check(p):
    shape, m, a, b, c, taps = p["shape"], p["m"], p["a"], p["b"], p["c"], p["taps"]
    two_d = len(shape) == 2
    n1 = shape[1] if two_d else shape[0]
    rng = np.random.default_rng(p["seed"])
    xs = rng.random(shape) - 0.5
    ws = rng.random(taps)
    src = ti.field(ti.f64, shape, needs_grad=True)
    own = ti.field(ti.f64, shape, needs_grad=True)
    out = ti.field(ti.f64, shape, needs_grad=True)
    dst = ti.field(ti.f64, m, needs_grad=True)
    w = ti.field(ti.f64, taps)
    total = ti.field(ti.f64, (), needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    src.from_numpy(xs)
    w.from_numpy(ws)

    if two_d:
        @ti.kernel
        def body(arr: ti.types.ndarray()):
            for i, j in src:
                v = src[i, j]
                dst[(a * i + b * j + c) % m] += v * 3.0
                arr[(a * i + b * j + c) % m] += 1.0
                own[i, j] += v * 2.0
                s = 0.0
                for t in range(taps):
                    s += w[t] * src[i, (j + t) % n1]
                out[i, j] = s
                total[None] += v
    else:
        @ti.kernel
        def body(arr: ti.types.ndarray()):
            for i in src:
                v = src[i]
                dst[(a * i + c) % m] += v * 3.0
                arr[(a * i + c) % m] += 1.0
                own[i] += v * 2.0
                s = 0.0
                for t in range(taps):
                    s += w[t] * src[(i + t) % n1]
                out[i] = s
                total[None] += v

    @ti.kernel
    def objective():
        for k in dst:
            loss[None] += dst[k] ** 2
        for I in ti.grouped(own):
            loss[None] += own[I] ** 2 + out[I] ** 2

    counts = np.zeros(m)
    with ti.ad.Tape(loss):
        body(counts)
        objective()

    # NumPy reference
    idx = np.indices(shape)
    i = idx[0]
    j = idx[1] if two_d else np.zeros(shape, int)
    cell = ((a * i + b * j + c) % m) if two_d else ((a * i + c) % m)
    want_dst = np.zeros(m)
    np.add.at(want_dst, cell, 3 * xs)
    want_counts = np.bincount(cell.ravel(), minlength=m).astype(float)
    want_own = 2 * xs
    want_out = sum(ws[t] * np.roll(xs, -t, axis=-1) for t in range(taps))
    np.testing.assert_allclose(dst.to_numpy(), want_dst, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(own.to_numpy(), want_own, rtol=1e-12)
    np.testing.assert_allclose(out.to_numpy(), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(total[None], xs.sum(), rtol=1e-12, atol=1e-12)
    # d loss / d src: the scatter's, the own update's and the tap loop's terms
    g = 6 * want_dst[cell] + 8 * xs
    g = g + sum(2 * ws[t] * np.roll(want_out, t, axis=-1) for t in range(taps))
    np.testing.assert_allclose(src.grad.to_numpy(), g, rtol=1e-10, atol=1e-12)
