"""The CPU loop passes on their own (passes/rows.py, jam.py, independent.py): a kernel through
the frontend and offload, then one pass, checked on the IR; each also where it must not fire.
That codegen runs what they mark with NumPy's results is tests/runtime/test_jammed_loops.py
and tests/passes/test_advanced_optimization.py."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.ir.ops import Op
from fluxion.ir.builder import BuildContext, building
from fluxion.ir.printer import print_kernel
from fluxion.lang import runtime
from fluxion.passes import (independent, jam, lower_struct_for, offload, pipeline, rows,
                            verify)

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def offloaded_ir(kern, *template_args):
    """The frontend's IR of `kern` (a ti.kernel whose arguments are all templates), offloaded."""
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(kern.source(), kern.globals(), kern.name).build_function(
            dict(zip(list(kern.params()), template_args)))
    lower_struct_for.run(ir, runtime.config())     # (as the compile driver does first)
    offload.run(ir)
    return ir


def parallel_loops(ir):
    return [st for st in ir.body.stmts if isinstance(st, S.RangeForStmt) and st.parallel]


def index_splits(loop):
    """The body's statements that divide the loop's own index (the frontend's flattening)."""
    return [st for st in S.walk(loop.body) if isinstance(st, S.BinaryOpStmt)
            and st.op in ("mod_nonneg", "div_nonneg") and isinstance(st.lhs, S.LoopIndexStmt)
            and st.lhs.loop is loop]


# -- rows ------------------------------------------------------------------------------------

def test_rows_splits_a_flattened_2d_loop_into_row_and_column_counters():
    x = ti.field(ti.f32, shape=(6, 9))

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = i * 10.0 + j

    ir = offloaded_ir(k)
    (loop,) = parallel_loops(ir)
    assert index_splits(loop) and loop.rows is None
    n_before = sum(1 for _ in S.walk(loop.body))
    assert rows.run(ir) is True
    verify.run(ir, after="rows")
    assert isinstance(loop.rows, S.ConstStmt) and loop.rows.value == 9
    assert not index_splits(loop)
    kinds = sorted(st.kind for st in S.walk(loop.body) if isinstance(st, S.RowIndexStmt))
    assert kinds == ["col", "row"]
    for st in S.walk(loop.body):
        if isinstance(st, S.RowIndexStmt):
            assert st.loop is loop and st.width.value == 9
    # statement for statement: what codegen counts (the task's grain) does not change
    assert sum(1 for _ in S.walk(loop.body)) == n_before
    assert "rows=" in print_kernel(ir) and "col_index" in print_kernel(ir)
    assert rows.run(ir) is False          # a fixpoint


def test_rows_takes_a_width_computed_before_the_loop():
    x = ti.field(ti.f32, shape=(64, 64))

    @ti.kernel
    def k(n: ti.template(), m: ti.template()):
        for i, j in ti.ndrange(n, m):
            x[i, j] = i + j

    ir = offloaded_ir(k, 5, 7)
    (loop,) = parallel_loops(ir)
    assert rows.run(ir) is True
    assert loop.rows.value == 7


def test_rows_does_not_fire_on_a_1d_loop_or_on_divisions_the_program_wrote():
    x = ti.field(ti.i32, shape=64)

    @ti.kernel
    def plain():
        for i in x:
            x[i] = i * 2

    @ti.kernel
    def written():
        # the program's own `%` and `//`: Python's floor semantics, not a flattened ndrange
        for i in x:
            x[i] = (i % 8) * 100 + i // 8

    for kern in (plain, written):
        ir = offloaded_ir(kern)
        assert rows.run(ir) is False
        (loop,) = parallel_loops(ir)
        assert loop.rows is None
        assert not any(isinstance(st, S.RowIndexStmt) for st in S.walk(ir.body))


def test_rows_does_not_fire_when_only_the_remainder_is_taken():
    from fluxion.passes.rows import row_split
    x = ti.field(ti.f32, shape=(4, 8))

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = 1.0

    ir = offloaded_ir(k)
    (loop,) = parallel_loops(ir)
    divs = [st for st in index_splits(loop) if st.op == "div_nonneg"]
    assert divs
    # the quotient turned into something else: what is left is not a flattened ndrange
    for d in divs:
        d.op = Op.ADD
    assert row_split(loop) is None
    assert rows.run(ir) is False and loop.rows is None


# -- jam -------------------------------------------------------------------------------------

def _reductions():
    x = ti.field(ti.f32, shape=(8, 8))
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def reduce_rows():
        for i in y:
            s = 0.0
            for j in range(8):
                s += x[i, j]
            y[i] = s

    @ti.kernel
    def three_sums():
        for i in y:
            a = 0.0
            b = 0.0
            c = 0.0
            for j in range(8):
                a += x[i, j]
                b += x[j, i]
                c += x[i, j] * x[j, i]
            y[i] = a + b + c

    @ti.kernel
    def store_inside():
        for i in y:
            for j in range(8):
                x[i, j] = y[i] * j

    @ti.kernel
    def atomic_inside():
        for i in y:
            for j in range(8):
                y[(i + j) % 8] += x[i, j]

    @ti.kernel
    def two_loops():
        for i in y:
            s = 0.0
            for j in range(8):
                s += x[i, j]
            for j in range(8):
                s += x[j, i]
            y[i] = s

    @ti.kernel
    def random_inside():
        for i in y:
            s = 0.0
            for j in range(8):
                s += x[i, j] * ti.random()
            y[i] = s

    return reduce_rows, three_sums, store_inside, atomic_inside, two_loops, random_inside


def test_jam_marks_a_parallel_loop_around_one_reduction_loop():
    reduce_rows = _reductions()[0]
    ir = offloaded_ir(reduce_rows)
    (loop,) = parallel_loops(ir)
    text = print_kernel(ir)
    assert jam.run(ir, vector_registers=16) is True
    assert loop.jam == 8                     # one accumulator: 8 fit in either register file
    verify.run(ir, after="jam")
    after = print_kernel(ir)
    assert " jam=8" in after
    assert after.replace(" jam=8", "").split() == text.split()   # nothing else changes
    assert jam.run(ir) is False


def test_jam_width_comes_from_the_target_registers_given():
    three_sums = _reductions()[1]
    # three accumulators: 8 iterations take 24 registers, 3/4 of 32 but more than 3/4 of 16
    for registers, width in ((32, 8), (16, 4)):
        ir = offloaded_ir(three_sums)
        assert jam.run(ir, vector_registers=registers) is True
        assert parallel_loops(ir)[0].jam == width


@pytest.mark.parametrize("which", [2, 3, 4, 5])
def test_jam_does_not_fire_on_side_effects_or_other_loop_shapes(which):
    # an inner loop that stores or updates atomically would interleave its side effects;
    # two inner loops (or a random number, whose sequence would change) are not the pattern
    kern = _reductions()[which]
    ir = offloaded_ir(kern)
    assert jam.run(ir, vector_registers=32) is False
    assert parallel_loops(ir)[0].jam is None


# -- independent -----------------------------------------------------------------------------

def test_independent_marks_a_plain_parallel_loop():
    x = ti.field(ti.f32, shape=16)

    @ti.kernel
    def k():
        for i in x:
            x[i] = x[(i * 7) % 16] + 1.0

    ir = offloaded_ir(k)
    assert independent.run(ir) is True
    assert parallel_loops(ir)[0].independent is True
    assert " independent" in print_kernel(ir)
    assert independent.run(ir) is False


def test_independent_does_not_fire_across_a_real_function_or_per_thread_copies():
    x = ti.field(ti.f32, shape=16)

    @ti.real_func
    def bump(i: ti.i32) -> ti.f32:
        x[i] += 1.0
        return x[i]

    @ti.kernel
    def calls():
        for i in x:
            bump(i)

    @ti.kernel
    def worker():
        for i in x:
            x[i] = 1.0

    ir = offloaded_ir(calls)
    assert independent.run(ir) is False
    assert not parallel_loops(ir)[0].independent
    # the scatter pass's copies are indexed by the running thread: adds of one thread's
    # iterations may meet in one element of its copy
    ir = offloaded_ir(worker)
    loop = parallel_loops(ir)[0]
    w = S.WorkerIndexStmt(ret_type=ti.i32)
    w.parent = loop.body
    loop.body.stmts.insert(0, w)
    assert independent.run(ir) is False and not loop.independent


# -- the pipeline ----------------------------------------------------------------------------

def _flattened_reduction():
    x = ti.field(ti.f32, shape=(8, 16))
    y = ti.field(ti.f32, shape=(8, 16))

    @ti.kernel
    def k():
        for i, j in y:
            s = 0.0
            for t in range(4):
                s += x[i, (j + t) % 16]
            y[i, j] = s

    return x, y, k


@pytest.mark.parametrize("cpu,optimize", [(True, True), (False, True), (True, False)])
def test_pipeline_runs_the_loop_passes_on_the_optimized_cpu_build_only(cpu, optimize):
    ti.init(arch=ti.cpu, advanced_optimization=optimize)
    *_, k = _flattened_reduction()
    ir = offloaded_ir(k)
    ir.tasks = None
    target = type("Target", (), {"vector_registers": 32})() if cpu else False
    pipeline.run(ir, runtime.config(), cpu=target)
    (loop,) = parallel_loops(ir)
    fired = cpu and optimize
    assert (loop.rows is not None) == fired
    assert (loop.jam == 8) == fired and (loop.jam is None) == (not fired)
    assert bool(loop.independent) == fired
    assert any(isinstance(st, S.RowIndexStmt) for st in S.walk(ir.body)) == fired


def test_kernel_with_rows_and_jam_gives_the_numpy_result():
    x, y, k = _flattened_reduction()
    xs = np.random.default_rng(3).random((8, 16), dtype=np.float32)
    x.from_numpy(xs)
    k()
    want = sum(np.roll(xs, -t, axis=1) for t in range(4))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-5)


def test_an_iteration_that_reads_its_own_vector_write_sees_it():
    # tests/fuzz seed 3002557: x1[i] = [x1[i][2], x1[i][0], 0]; x1[i][2] = x1[i][0] - x1[i][2],
    # with a store through a computed index that only the parallel mark lets LLVM vectorize
    # around. Marked independent, the vectorizer read x1[i][0] before the store (one thread
    # too).
    x1 = ti.Vector.field(3, ti.f32, shape=64)
    x2 = ti.field(ti.f32, shape=64)
    init = (np.random.default_rng(3002557).integers(-16, 17, size=(64, 3)) * 0.25
            ).astype(np.float32)
    x1.from_numpy(init)
    arr = np.zeros(16, np.int64)

    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.i64, ndim=1)):
        for i in range(2, 64):
            x1[i] = ti.Vector([x1[i][2], x1[i][0], ti.min(ti.max(0.0 * x2[22], -64.0), 64.0)])
            a[((5 - i) & 65535) % 16] = 4
            x1[i][2] = x1[i][0] - x1[i][2]

    k(arr)
    k(arr)
    want = init.copy()
    for _ in range(2):
        a0, a2 = want[2:, 0].copy(), want[2:, 2].copy()
        want[2:, 0], want[2:, 1], want[2:, 2] = a2, a0, a2
    np.testing.assert_array_equal(x1.to_numpy(), want)
    assert (arr == 4).all()
