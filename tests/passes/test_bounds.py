"""passes/bounds.py: with bounds checks on (check_out_of_bound=True, or debug), those whose
index provably stays in range are removed in simplify; where it must not fire, the check
stays and an index past the end is an error naming the kernel (and nothing outside the field
changes)."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import bounds, simplify
from test_simplify import count, frontend_ir

N = 16
# (the CPU's checks: the CUDA backend's are those of debug mode)
pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False, check_out_of_bound=True)
    yield
    ti.reset()


def asserts_after_simplify(kern):
    ir = frontend_ir(kern)
    before = count(ir, S.AssertStmt)
    simplify.run(ir, runtime.config())
    return before, count(ir, S.AssertStmt)


def test_loops_over_the_field_and_the_interior_keep_no_check():
    x = ti.field(ti.f32, shape=N)
    y = ti.field(ti.f32, shape=N)
    g = ti.field(ti.f32, shape=(N, N))
    h = ti.field(ti.f32, shape=(N, N))

    @ti.kernel
    def k():
        for i in x:
            y[i] = x[i] * 2.0
        for i, j in g:
            h[i, j] = g[i, j]
        for i, j in ti.ndrange((1, N - 1), (1, N - 1)):
            h[i, j] = 0.25 * (g[i - 1, j] + g[i + 1, j] + g[i, j - 1] + g[i, j + 1])
        for i in range(N // 2):
            y[2 * i + 1] = x[(i * 3) % N] + x[ti.min(i + 9, N - 1)]

    before, left = asserts_after_simplify(k)
    assert before == 12 and left == 0
    gv = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    g.from_numpy(gv)
    x.from_numpy(np.arange(N, dtype=np.float32))
    k()
    want = gv.copy()
    want[1:-1, 1:-1] = 0.25 * (gv[:-2, 1:-1] + gv[2:, 1:-1] + gv[1:-1, :-2] + gv[1:-1, 2:])
    np.testing.assert_allclose(h.to_numpy(), want, rtol=1e-6)
    yv = np.arange(N, dtype=np.float32) * 2
    for i in range(N // 2):
        yv[2 * i + 1] = (i * 3) % N + min(i + 9, N - 1)
    np.testing.assert_array_equal(y.to_numpy(), yv)


def test_checks_stay_where_an_index_may_leave_the_field():
    x = ti.field(ti.f32, shape=N)
    y = ti.field(ti.f32, shape=N)
    idx = ti.field(ti.i32, shape=N)
    n = ti.field(ti.i32, shape=())

    @ti.kernel
    def shifted():
        for i in x:
            y[i] = x[i + 1]          # the last i reads x[N]

    @ti.kernel
    def gathered():
        for i in x:
            y[i] = x[idx[i]]         # an index from memory

    @ti.kernel
    def counted():
        for i in range(n[None]):     # a bound known at run time only
            y[i] = 1.0

    for kern in (shifted, gathered, counted):
        before, left = asserts_after_simplify(kern)
        assert left >= 1 and left <= before, kern.name
    x.from_numpy(np.arange(N, dtype=np.float32))
    with pytest.raises(ti.FluxionOutOfBoundsError, match="shifted"):
        shifted()
    idx.from_numpy(np.arange(N, dtype=np.int32)[::-1].copy())
    gathered()
    np.testing.assert_array_equal(y.to_numpy(), np.arange(N, dtype=np.float32)[::-1])
    idx[3] = -1
    with pytest.raises(ti.FluxionOutOfBoundsError, match="gathered"):
        gathered()
    n[None] = N + 5
    with pytest.raises(ti.FluxionOutOfBoundsError, match="counted"):
        counted()
    n[None] = N
    counted()
    np.testing.assert_array_equal(y.to_numpy(), np.ones(N, np.float32))


def test_an_out_of_bounds_store_changes_nothing_else():
    # the store that would land past a small field's end in memory another field owns
    a = ti.field(ti.i32, shape=4)
    b = ti.field(ti.i32, shape=4)

    @ti.kernel
    def store(k: ti.i32):
        a[k] = 7

    with pytest.raises(ti.FluxionOutOfBoundsError, match="store"):
        store(5)
    np.testing.assert_array_equal(b.to_numpy(), np.zeros(4, np.int32))


def test_ndarray_arguments_are_checked():
    @ti.kernel
    def fill(a: ti.types.ndarray(), k: ti.i32):
        for i in range(k):
            a[i] = 1

    arr = np.zeros(6, np.int32)
    fill(arr, 6)
    with pytest.raises(ti.FluxionOutOfBoundsError, match="fill"):
        fill(arr, 7)


def test_the_interval_of_index_arithmetic():
    # the analysis itself, on the operations it knows (inclusive bounds)
    from fluxion.ir.ops import Op
    assert bounds._binary(Op.ADD, (0, 15), (1, 1)) == (1, 16)
    assert bounds._binary(Op.MOD, (-5, 40), (16, 16)) == (0, 15)
    assert bounds._binary(Op.MOD_NONNEG, (0, 7), (16, 16)) == (0, 7)
    assert bounds._binary(Op.FLOORDIV, (-3, 17), (4, 4)) == (-1, 4)
    assert bounds._binary(Op.MUL, (-2, 3), (-4, 5)) == (-12, 15)
    assert bounds._binary(Op.CMP_LT, (0, 15), (16, 16)) == (1, 1)
    assert bounds._binary(Op.CMP_LT, (0, 16), (16, 16)) == (0, 1)
    assert bounds._binary(Op.CMP_GE, (-1, 3), (0, 0)) == (0, 1)
    assert bounds._binary(Op.BIT_AND, (1, 1), (0, 1)) == (0, 1)
    assert bounds._binary(Op.BIT_AND, (1, 1), (1, 1)) == (1, 1)
    assert bounds._binary(Op.SHL, (0, 3), (1, 1)) is None


def test_a_passed_check_proves_the_checks_it_implies():
    # a 2-D scatter to the 3x3 cells around a particle: 18 checks (two fields), of which
    # those implied by earlier ones go (base + 1 lies between base and base + 2)
    n = 8
    x = ti.Vector.field(2, ti.f32, 5)
    gv = ti.field(ti.f32, (n, n))
    gm = ti.field(ti.f32, (n, n))

    @ti.kernel
    def p2g():
        for p in x:
            base = int(x[p] * n - 0.5)
            for i, j in ti.static(ti.ndrange(3, 3)):
                gv[base + ti.Vector([i, j])] += 1.0 + i
                gm[base + ti.Vector([i, j])] += 1.0

    before, left = asserts_after_simplify(p2g)
    assert before == 19 and 1 <= left <= 6     # (and one for x[p], always in range)
    pts = np.array([[0.1, 0.2], [0.5, 0.5], [0.7, 0.3], [0.3, 0.6], [0.55, 0.8]], np.float32)
    x.from_numpy(pts)
    p2g()
    want_v, want_m = np.zeros((n, n), np.float32), np.zeros((n, n), np.float32)
    for px, py in pts:
        bx, by = int(px * n - 0.5), int(py * n - 0.5)
        for i in range(3):
            for j in range(3):
                want_v[bx + i, by + j] += 1.0 + i
                want_m[bx + i, by + j] += 1.0
    np.testing.assert_array_equal(gv.to_numpy(), want_v)
    np.testing.assert_array_equal(gm.to_numpy(), want_m)
    x[2] = [0.95, 0.3]               # base.x + 2 = 9: past the grid
    with pytest.raises(ti.FluxionOutOfBoundsError, match="p2g"):
        p2g()


def test_a_check_inside_an_if_proves_nothing_after_it():
    x = ti.field(ti.f32, shape=N)
    c = ti.field(ti.i32, shape=N)
    idx = ti.field(ti.i32, shape=N)

    @ti.kernel
    def k():
        for i in x:
            if c[i] > 0:
                x[idx[i]] = 1.0
            x[idx[i]] += 2.0

    before, left = asserts_after_simplify(k)
    assert left == 2                   # both stores into x[idx[i]]
    idx[4] = N + 3                     # c[4] == 0: only the store after the if reads it
    with pytest.raises(ti.FluxionOutOfBoundsError, match="k"):
        k()


def _checks_in_serial_loops(kern):
    ir = frontend_ir(kern)
    simplify.run(ir, runtime.config())
    inner = [st for st in S.walk(ir.body) if isinstance(st, S.RangeForStmt) and not st.parallel]
    return sum(count_in(loop.body) for loop in inner)


def count_in(block):
    return sum(1 for st in S.walk(block) if isinstance(st, S.AssertStmt))


def test_checks_of_an_inner_loop_move_in_front_of_it():
    # a convolution's taps over a run-time range: checked at the first and last tap, once
    # per outer iteration, so the inner loop keeps no branch (LLVM vectorizes it)
    x = ti.field(ti.f32, shape=N)
    y = ti.field(ti.f32, shape=N)
    w = ti.field(ti.f32, shape=8)
    m = ti.field(ti.i32, shape=())

    @ti.kernel
    def conv():
        for i in range(N - 8):
            s = 0.0
            for u in range(m[None]):
                s += w[u] * x[i + 7 - u]
            y[i] = s

    assert _checks_in_serial_loops(conv) == 0
    xv = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    wv = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    x.from_numpy(xv)
    w.from_numpy(wv)
    for taps in (8, 3, 0):                 # 0: an empty loop checks nothing
        m[None] = taps
        conv()
        want = [sum(wv[u] * xv[i + 7 - u] for u in range(taps)) for i in range(N - 8)]
        np.testing.assert_allclose(y.to_numpy()[:N - 8], want, rtol=1e-5, atol=1e-6)
    m[None] = 9                            # w[8]: past the taps
    with pytest.raises(ti.FluxionOutOfBoundsError, match="conv"):
        conv()


def test_checks_stay_in_loops_that_may_stop_early_or_skip_them():
    x = ti.field(ti.f32, shape=N)
    m = ti.field(ti.i32, shape=())

    @ti.kernel
    def stops():
        for i in range(2):
            for u in range(m[None]):
                if x[u] < 0:
                    break
                x[u] += 1.0

    @ti.kernel
    def skips():
        for i in range(2):
            for u in range(m[None]):
                if u % 2 == 0:
                    x[u] += 1.0

    @ti.kernel
    def squares():
        for i in range(2):
            for u in range(m[None]):
                x[u * u] += 1.0        # not affine: the ends say nothing of the middle

    for kern in (stops, skips, squares):
        assert _checks_in_serial_loops(kern) >= 1, kern.name
    m[None] = N + 4
    x.fill(0)
    x[3] = -1.0
    stops()                            # stops at u = 3, before any index past the end
    np.testing.assert_array_equal(x.to_numpy()[:3], [2.0, 2.0, 2.0])
