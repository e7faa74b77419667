"""`ti.init(advanced_optimization=False)`: the same results without the transforming passes
(atomic demotion, reduction and scatter privatization, the CPU loop transforms). The
differential fuzzer (tests/fuzz) runs this build, serial, as its oracle for the optimized one."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import runtime


def _program(n):
    x = ti.field(ti.f64, n)
    hist = ti.field(ti.i32, 7)
    total = ti.field(ti.i64, ())
    grid = ti.field(ti.f32, (6, 9))

    @ti.kernel
    def run(a: ti.types.ndarray(dtype=ti.i32, ndim=1)):
        for i in x:
            x[i] += 0.5 * i          # the loop's own element: demotion's case
            total[None] += a[i]      # one element: reduction privatization's case
            hist[a[i] % 7] += 1      # a scatter: scatter privatization's case
        for i, j in grid:            # a flattened ndrange: the row-split case
            grid[i, j] = i * 10 + j

    return x, hist, total, grid, run


@pytest.mark.parametrize("optimize", [True, False])
def test_every_transformed_loop_gives_the_numpy_result(optimize):
    ti.init(arch=ti.cpu, cpu_max_num_threads=2, advanced_optimization=optimize)
    assert runtime.config().advanced_optimization is optimize
    n = 5000
    a = (np.arange(n, dtype=np.int32) * 7919) % 1000
    x, hist, total, grid, run = _program(n)
    run(a)
    run(a)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(n) * 1.0)
    np.testing.assert_array_equal(hist.to_numpy(), 2 * np.bincount(a % 7, minlength=7))
    assert total[None] == 2 * int(a.sum())
    i, j = np.meshgrid(np.arange(6), np.arange(9), indexing="ij")
    np.testing.assert_array_equal(grid.to_numpy(), i * 10 + j)


@pytest.mark.cpu_only
def test_without_advanced_optimization_the_passes_and_loop_transforms_do_not_fire(
        no_offline_cache):
    ti.init(arch=ti.cpu, cpu_max_num_threads=2, advanced_optimization=False)
    n = 5000
    a = np.ones(n, np.int32)
    x, hist, total, grid, run = _program(n)
    run(a)
    c = next(iter(run.instances.values())).compiled
    text = c.llvm_ir
    assert "llvm.loop.parallel_accesses" not in text   # no parallel-loop metadata
    assert "fluxion_merge" not in text                 # no scatter copies
    assert not c.private and not getattr(run, "private_fields", ())
    # every update stays an atomic: the own-element add, the total, the histogram
    assert text.count("atomicrmw") + text.count("cmpxchg") >= 3
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    x, hist, total, grid, run = _program(n)
    run(a)
    assert "llvm.loop.parallel_accesses" in next(iter(run.instances.values())).compiled.llvm_ir


def test_the_option_is_off_only_when_asked():
    ti.init(arch=ti.cpu)
    assert runtime.config().advanced_optimization is True
