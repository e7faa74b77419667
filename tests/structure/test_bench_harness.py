"""The benchmark harness's alternated timing (benchmarks/run.py), without timing anything:
a fake clock that each call advances by its peer's cost, and a fake workload whose calls
write down who ran. (How fast things are is the benchmarks' business: no times asserted.)"""
import os
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import run as bench  # noqa: E402

pytestmark = pytest.mark.cpu_only


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fake_cases(clock, log, costs):
    """{peer: (run, sync)}: a run advances the clock by the peer's cost of its round."""
    rounds = {p: 0 for p in costs}

    def case(p):
        def run():
            log.append(p)
            clock.now += costs[p][rounds[p] % len(costs[p])]

        def sync():
            log.append(p + ":sync")
            rounds[p] += 1
        return run, sync
    return {p: case(p) for p in costs}


def test_rounds_alternate_and_time_each_batch():
    clock, log, pauses = FakeClock(), [], []
    cases = fake_cases(clock, log, {"fluxion": [1.0, 3.0], "taichi": [2.0]})
    times = bench.time_alternated(cases, inner=2, samples=4, budget_s=1e9, pause_s=0.5,
                                  clock=clock, sleep=pauses.append)
    batch = lambda p: [p, p, p + ":sync"]
    # one batch of each peer a round, the order turned round every other round
    assert log == (batch("fluxion") + batch("taichi") + batch("taichi") + batch("fluxion")) * 2
    assert pauses == [0.5] * 8  # a pause before every batch
    # seconds per call: the batch's time divided by its calls
    assert times == {"fluxion": [1.0, 3.0, 1.0, 3.0], "taichi": [2.0] * 4}
    assert bench.rounds_won(times["fluxion"], times["taichi"]) == 2


def test_budget_stops_after_three_rounds_at_least():
    clock, log = FakeClock(), []
    cases = fake_cases(clock, log, {"a": [10.0], "b": [10.0], "c": [10.0]})
    times = bench.time_alternated(cases, inner=1, samples=15, budget_s=1.0,
                                  clock=clock, sleep=lambda s: None)
    assert [len(t) for t in times.values()] == [3, 3, 3]
    # three peers: every other round reversed
    assert [e for e in log if ":" not in e] == list("abc" "cba" "abc")
    # a generous budget: all the samples asked for
    times = bench.time_alternated(cases, inner=1, samples=5, budget_s=1e9,
                                  clock=clock, sleep=lambda s: None)
    assert [len(t) for t in times.values()] == [5, 5, 5]


def test_rounds_won():
    assert bench.rounds_won([1, 2, 3], [2, 2, 1]) == 1
    assert bench.rounds_won([], []) == 0


def _fake_workload(log):
    mod = types.ModuleType("benchmarks.workloads._fake_alternated")
    mod.N = mod.QUICK_N = 8
    mod.INNER = 1

    def make(ti, n):
        return (lambda: log.append("fluxion")), (lambda: [1.0, 2.0])

    def setup_numpy(n):
        return (lambda: log.append("numpy")), (lambda: [1.0, 2.5])

    mod.make, mod.setup_numpy = make, setup_numpy
    return mod


@pytest.mark.parametrize("alternate", [True, False])
def test_run_workload_rows(monkeypatch, capsys, alternate):
    log = []
    mod = _fake_workload(log)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(bench, "TIME_BUDGET_S", 0.0)  # the fewest rounds: 3
    name = mod.__name__.rsplit(".", 1)[1]
    rows = bench.run_workload(name, quick=True, peers=["fluxion", "numpy"], alternate=alternate)
    calls = [p for p in log]
    warm = ["fluxion"] * bench.WARMUP
    if alternate:
        # both warmed up first, then one call of each a round, the order turned round
        assert calls == warm + ["numpy"] * bench.WARMUP + ["fluxion", "numpy", "numpy",
                                                           "fluxion", "fluxion", "numpy"]
    else:
        assert calls == warm + ["fluxion"] * 3 + ["numpy"] * (bench.WARMUP + 3)
    flux, np_row = rows
    assert (flux["peer"], np_row["peer"]) == ("fluxion", "numpy")
    assert flux["samples"] == np_row["samples"] == 3
    assert flux["vs_fluxion"] == 1.0
    assert np_row["vs_fluxion"] == pytest.approx(np_row["seconds"] / flux["seconds"])
    assert ("fluxion_won" in np_row) == alternate
    if alternate:
        assert 0 <= np_row["fluxion_won"] <= 3
        assert flux.get("alternated") and "fluxion_won" not in flux
    # the results are compared against the first peer's
    assert "mismatch" in np_row and "mismatch" not in flux
    out = capsys.readouterr().out
    assert ("rounds" in out) == alternate and "RESULT DIFFERS" in out


def test_memory_is_measured_after_the_runtime_ran_a_kernel(monkeypatch):
    # fluxion loads LLVM at its first kernel, Taichi at ti.init: measured before any kernel
    # ran, fluxion's first memory workload of a process was charged ~80 MiB of LLVM
    log = []

    class FakeTi:
        cpu, i32 = "cpu", "i32"

        @staticmethod
        def kernel(fn):
            def launch():
                log.append("kernel " + fn.__name__)
                return fn()
            return launch

        @staticmethod
        def sync():
            pass

    workload = types.ModuleType("benchmarks.workloads.fake_memory")
    workload.N = workload.QUICK_N = 4
    workload.MEMORY = True
    workload.TITLE = "fake"

    def make(ti, n):
        log.append("make")
        return (lambda: None), (lambda: [1.0])
    workload.make = make
    monkeypatch.setitem(sys.modules, "benchmarks.workloads.fake_memory", workload)
    monkeypatch.setattr(bench, "ti_module", lambda peer, name: FakeTi)
    monkeypatch.setattr(bench, "rss_bytes", lambda: log.append("rss") or 0)
    monkeypatch.setattr(bench.time, "sleep", lambda s: None)
    bench.run_workload("fake_memory", quick=True, peers=["fluxion"], alternate=False)
    assert log[:3] == ["kernel nothing", "rss", "make"], log
