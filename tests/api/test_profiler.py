"""`ti.profiler` with `ti.init(kernel_profiler=True)`: launches are counted and timed per
kernel; when the profiler is off, launches are not wrapped at all."""
import pytest

import fluxion as ti
from fluxion.lang.kernel import Instance


def test_launches_are_counted_and_timed(capsys):
    plain = Instance.launch
    ti.init(arch=ti.cpu, kernel_profiler=True)
    assert Instance.launch is not plain
    x = ti.field(ti.f32, shape=64)

    @ti.kernel
    def inc():
        for i in x:
            x[i] += 1

    @ti.kernel
    def total() -> ti.f32:
        s = 0.0
        for i in x:
            s += x[i]
        return s

    for _ in range(5):
        inc()
    assert total() == 5 * 64
    r = ti.profiler.query_kernel_profiler_info("inc")
    assert r.counter == 5 and 0 <= r.min <= r.avg <= r.max
    assert ti.profiler.query_kernel_profiler_info("total").counter == 1
    assert ti.profiler.query_kernel_profiler_info("absent").counter == 0
    assert ti.profiler.get_kernel_profiler_total_time() > 0
    ti.profiler.print_kernel_profiler_info()
    ti.profiler.print_kernel_profiler_info("trace")
    out = capsys.readouterr().out
    assert "5x" in out and out.count("] inc") == 6     # one count row, five trace rows
    ti.profiler.clear_kernel_profiler_info()
    assert ti.profiler.query_kernel_profiler_info("inc").counter == 0
    with pytest.raises(ValueError):
        ti.profiler.print_kernel_profiler_info("other")
    ti.init(arch=ti.cpu)
    assert Instance.launch is plain                    # off: nothing wraps the launches


def test_the_original_submodule_names(capsys):
    # Taichi programs reach the functions through the original's submodules
    from fluxion.profiler.kernel_profiler import query_kernel_profiler_info
    from fluxion.profiler import memory_profiler, scoped_profiler
    import fluxion.profiler.kernel_profiler as kp
    assert query_kernel_profiler_info is ti.profiler.query_kernel_profiler_info
    assert set(kp.__all__) == {
        "clear_kernel_profiler_info", "collect_kernel_profiler_metrics",
        "get_kernel_profiler_total_time", "print_kernel_profiler_info",
        "query_kernel_profiler_info", "set_kernel_profiler_metrics",
        "set_kernel_profiler_toolkit"}
    assert memory_profiler.__all__ == ["print_memory_profiler_info"]
    assert set(scoped_profiler.__all__) == {"print_scoped_profiler_info",
                                            "clear_scoped_profiler_info"}
    ti.init(arch=ti.cpu, kernel_profiler=True)
    x = ti.field(ti.i32, shape=16)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i

    fill()
    fill()
    assert kp.query_kernel_profiler_info("fill").counter == 2
    kp.clear_kernel_profiler_info()
    assert ti.profiler.query_kernel_profiler_info("fill").counter == 0
    capsys.readouterr()
    ti.profiler.memory_profiler.print_memory_profiler_info()
    assert "1 field trees" in capsys.readouterr().out
    ti.profiler.scoped_profiler.print_scoped_profiler_info()
    ti.profiler.scoped_profiler.clear_scoped_profiler_info()
    assert "scoped profiler" in capsys.readouterr().out
    ti.init(arch=ti.cpu)
