"""`ti.profiler`: the kernel profiler of `ti.init(kernel_profiler=True)`.

While it is on, every launch of a compiled kernel instance is timed (on CUDA the launch is
waited for, so the time is the kernel's): `print_kernel_profiler_info()` prints the counts and
times per kernel ('count') or every launch in order ('trace'), `query_kernel_profiler_info`
returns one kernel's, `clear_kernel_profiler_info` starts over. When it is off, launches are
not touched at all (the timing wrapper is installed only then).

fluxion has no scoped (C++ pass) profiler and no CUPTI metrics: those functions say so.
"""
from __future__ import annotations

import sys
import time
import warnings

from fluxion.lang import tree_buffer
from fluxion.lang.sync import sync
from fluxion.runtime import program
from fluxion.runtime.launch import Instance

_records = []          # (kernel name, start time, seconds)
_original_launch = []


class KernelProfilerQueryResult:
    """`counter` launches, `min`/`max`/`avg` milliseconds."""

    def __init__(self, counter, min, max, avg):  # noqa: A002 (the original's names)
        self.counter, self.min, self.max, self.avg = counter, min, max, avg

    def __repr__(self):
        return (f"KernelProfilerQueryResult(counter={self.counter}, min={self.min:.3f} ms, "
                f"max={self.max:.3f} ms, avg={self.avg:.3f} ms)")


def _enable(on):
    """Install or remove the timing of launches (ti.init calls this)."""
    if on and not _original_launch:
        plain = Instance.launch
        _original_launch.append(plain)

        def timed_launch(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return plain(self, *args, **kwargs)
            finally:
                if program.on_cuda():
                    sync()
                _records.append((self.kernel.name, t0, time.perf_counter() - t0))
        timed_launch.__doc__ = plain.__doc__
        Instance.launch = timed_launch
    elif not on and _original_launch:
        Instance.launch = _original_launch.pop()
    if not on:
        _records.clear()


def clear_kernel_profiler_info():
    """Forget the launches timed so far."""
    _records.clear()


def _by_kernel():
    out = {}
    for name, _, dt in _records:
        out.setdefault(name, []).append(dt)
    return out


def query_kernel_profiler_info(name):
    """The launches of kernel `name`: a KernelProfilerQueryResult (times in ms)."""
    times = [dt * 1e3 for n, _, dt in _records if n == name]
    if not times:
        return KernelProfilerQueryResult(0, 0.0, 0.0, 0.0)
    return KernelProfilerQueryResult(len(times), min(times), max(times),
                                     sum(times) / len(times))


def get_kernel_profiler_total_time():
    """Seconds spent in the launches timed so far."""
    return sum(dt for _, _, dt in _records)


def print_kernel_profiler_info(mode="count"):
    """Print the timed launches: per kernel ('count') or each in order ('trace')."""
    if not _original_launch:
        print("fluxion: the kernel profiler is off: ti.init(kernel_profiler=True) turns it on")
        return
    arch = program.config().arch
    if mode == "count":
        total = get_kernel_profiler_total_time()
        rows = sorted(_by_kernel().items(), key=lambda kv: -sum(kv[1]))
        line = "=" * 73
        print(line)
        print(f"Kernel Profiler(count, default) @ {str(arch).upper()}")
        print(line)
        print("[      %     total   count |      min       avg       max   ] Kernel name")
        print("-" * 73)
        for name, ts in rows:
            share = 100 * sum(ts) / total if total else 0.0
            print(f"[{share:6.2f}% {sum(ts):7.3f} s {len(ts):6d}x | {1e3 * min(ts):8.3f} "
                  f"{1e3 * sum(ts) / len(ts):9.3f} {1e3 * max(ts):9.3f} ms] {name}")
        print("-" * 73)
        print(f"[100.00%] Total execution time: {total:7.3f} s   number of results: {len(rows)}")
        print(line)
    elif mode == "trace":
        line = "=" * 41
        print(line)
        print(f"Kernel Profiler(trace, default) @ {str(arch).upper()}")
        print(line)
        print("[  start.time | kernel.time ] Kernel name")
        print("-" * 41)
        t0 = _records[0][1] if _records else 0.0
        for name, start, dt in _records:
            print(f"[{1e3 * (start - t0):9.3f} ms | {1e3 * dt:8.3f} ms ] {name}")
        print("-" * 41)
        print(f"Number of records: {len(_records):4d}")
        print(line)
    else:
        raise ValueError(f"print_kernel_profiler_info(mode={mode!r}): 'count' or 'trace'")


def set_kernel_profiler_toolkit(toolkit_name="default"):
    """Only the 'default' toolkit (host timers) exists here."""
    if toolkit_name != "default":
        warnings.warn(f"fluxion: kernel profiler toolkit {toolkit_name!r} is not available; "
                      f"launches are timed with host timers ('default')", stacklevel=2)
        return False
    return True


def set_kernel_profiler_metrics(metric_list=None):
    raise NotImplementedError("fluxion has no CUPTI metrics (the kernel profiler times "
                              "launches only)")


def collect_kernel_profiler_metrics(metric_list=None):
    raise NotImplementedError("fluxion has no CUPTI metrics (the kernel profiler times "
                              "launches only)")


def print_scoped_profiler_info():
    print("fluxion: no scoped profiler (the original's profiles its C++ compiler passes); "
          "ti.init(print_ir=True) shows what each kernel becomes")


def clear_scoped_profiler_info():
    pass


def print_memory_profiler_info():
    """The memory the session's field trees hold: reserved (their size) and in use (a tree
    with pointer or dynamic levels commits only its active cells' pages; lang/sparse_memory.py;
    the query behind it is `ti.sparse.memory_in_use`)."""
    trees = [t for t in program.state().trees if t.buffer is not None]
    sizes = [(t.buffer.nbytes, tree_buffer.bytes_in_use(t.buffer)) for t in trees]
    total, used = sum(s[0] for s in sizes), sum(s[1] for s in sizes)
    print(f"fluxion: {len(trees)} field trees, {total} bytes ({total / 2**20:.2f} MiB) "
          f"reserved, {used} bytes ({used / 2**20:.2f} MiB) in use")


# The original's ti.profiler is a package of these submodules; Taichi programs call through
# them (`ti.profiler.memory_profiler.print_memory_profiler_info()`) or import from them, so
# each is registered under its dotted name, holding the same functions as ti.profiler.
def _submodule(name, doc, *functions):
    m = type(sys)(f"{__name__}.{name}", doc)
    for f in functions:
        setattr(m, f.__name__, f)
    m.__all__ = [f.__name__ for f in functions]
    sys.modules[m.__name__] = m
    return m


kernel_profiler = _submodule(
    "kernel_profiler", "The kernel profiler (launch counts and times).",
    clear_kernel_profiler_info, collect_kernel_profiler_metrics, get_kernel_profiler_total_time,
    print_kernel_profiler_info, query_kernel_profiler_info, set_kernel_profiler_metrics,
    set_kernel_profiler_toolkit)
memory_profiler = _submodule("memory_profiler", "The memory the field trees hold.",
                             print_memory_profiler_info)
scoped_profiler = _submodule("scoped_profiler", "The scoped profiler (absent here: it says so).",
                             print_scoped_profiler_info, clear_scoped_profiler_info)
