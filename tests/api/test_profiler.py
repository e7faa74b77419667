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
