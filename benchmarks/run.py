"""Time each workload on fluxion and on every peer that imports, in one process, and print
a table of medians and of each peer's time divided by fluxion's (above 1: fluxion is faster).

    python -m benchmarks [--only NAME[,NAME]] [--peers P[,P]] [--quick] [--sequential]
                         [--json PATH]
    python benchmarks/run.py ...

With several peers, each workload's peers are timed in alternating rounds: every round times
one sample (a batch of calls) of each peer, in an order that turns round each time, after a
pause that lets the previous peer's idle threads stop spinning. A burst of other load on this
shared machine then slows every peer's samples alike instead of one peer's whole stretch
(timed one peer after the other, the same code gave ratios from 0.8x to 6x). Rows then say in
how many rounds fluxion was the faster. `--sequential` times each peer in one stretch.

A full run writes benchmarks/results/latest.json (the figures the README quotes); a partial
one (--only, --quick) writes benchmarks/results/partial.json so it does not replace them.
"""
import argparse
import datetime
import importlib
import json
import os
import platform
import statistics
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# run as a script: make `benchmarks` (and an uninstalled `fluxion`) importable
for _p in (os.path.join(ROOT, "src"), ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from benchmarks.workloads import NAMES  # noqa: E402

PEERS = ["fluxion", "taichi", "numba", "numpy", "torch", "warp"]
TI_PEERS = ("fluxion", "taichi")  # run the workload's shared make(ti, n)
WARMUP = 2  # the first call compiles (fluxion, taichi, numba); the second settles caches
SAMPLES, QUICK_SAMPLES = 15, 5
TIME_BUDGET_S = 3.0  # per workload and peer: slow peers take fewer samples (at least 3)
# before each sample of an alternated run: longer than fluxion's pool and the peers' OpenMP
# workers spin after their work before sleeping (a spinning pool would slow the next peer)
PAUSE_S = 0.02
RESULTS = os.path.join(ROOT, "benchmarks", "results")

_ti_modules = {}
_ti_workload = {}


def ti_module(peer, workload):
    """fluxion or taichi, initialised afresh on the CPU for each workload. They are separate
    modules, so both can live in one process. Afresh, because the fields of earlier workloads
    would otherwise stay alive, and a Tape clears the gradients of every field there is (in
    both systems): the Tape workloads would time the other workloads' gradients."""
    ti = _ti_modules.get(peer)
    if ti is None:
        ti = _ti_modules[peer] = importlib.import_module(peer)
    if _ti_workload.get(peer) != workload:
        if peer in _ti_workload:
            ti.reset()
        kwargs = {"arch": ti.cpu}
        if peer == "taichi":
            # keep its log lines out of the table (its import banner still prints once)
            kwargs["log_level"] = ti.WARN
        ti.init(**kwargs)
        _ti_workload[peer] = workload
    return ti


def warm_runtime(ti):
    """Compile and run a kernel of nothing, so that what a runtime loads once a process is not
    counted as a workload's memory: Taichi loads its LLVM at ti.init, fluxion its own at the
    first kernel (about 80 MiB resident: the library's pages, the thread pool), which a
    workload measured first in its process was charged with."""
    @ti.kernel
    def nothing() -> ti.i32:
        return 1

    nothing()


def setup(mod, peer, n):
    """(run, result, sync) for one peer, or None if the workload has no version for it."""
    if peer in TI_PEERS:
        ti = ti_module(peer, mod.__name__)
        run, result = mod.make(ti, n)
        return run, result, ti.sync
    fn = getattr(mod, "setup_" + peer, None)
    if fn is None:
        return None
    lib = importlib.import_module(peer)  # a missing peer fails here, with a clear ImportError
    sync = lambda: None  # numpy, numba and torch on the CPU return when the work is done
    if peer == "warp":
        lib.config.quiet = True  # no banner or module-load lines in the table
        lib.config.log_level = lib.LOG_WARNING
        lib.config.enable_backward = False  # no adjoint kernels to compile: none is timed
        sync = lib.synchronize
    run, result = fn(n)
    return run, result, sync


def time_peer(run, sync, inner, samples):
    """Median seconds per call: warm up, then time batches of `inner` calls, each batch
    ending with a sync so that queued work is counted."""
    for _ in range(WARMUP):
        run()
    sync()
    times = []
    deadline = time.perf_counter() + TIME_BUDGET_S
    while len(times) < samples and (len(times) < 3 or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        for _ in range(inner):
            run()
        sync()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times), min(times), len(times)


def time_alternated(cases, inner, samples, budget_s, pause_s=PAUSE_S,
                    clock=time.perf_counter, sleep=time.sleep):
    """{peer: [seconds per call, one per round]} for cases {peer: (run, sync)}, timed in
    rounds: each round takes one sample of every peer (a batch of `inner` calls ending with
    a sync), the order reversed every other round so that no peer always follows the same
    one. Rounds go on until `samples`, or past `budget_s` with at least 3. The peers were
    warmed up by the caller."""
    peers = list(cases)
    times = {p: [] for p in peers}
    deadline = clock() + budget_s
    rounds = 0
    while rounds < samples and (rounds < 3 or clock() < deadline):
        for p in (peers if rounds % 2 == 0 else peers[::-1]):
            run, sync = cases[p]
            sleep(pause_s)
            t0 = clock()
            for _ in range(inner):
                run()
            sync()
            times[p].append((clock() - t0) / inner)
        rounds += 1
    return times


def rounds_won(base, other):
    """In how many rounds the `base` sample was faster than the `other` one."""
    return sum(b < o for b, o in zip(base, other))


def rss_bytes():
    """The process's resident memory (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def compare(ref, got):
    """None when the results agree (float32 tolerances), else a short reason."""
    import numpy as np

    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    if ref.shape != got.shape:
        return f"shape {got.shape} != {ref.shape}"
    # sums of 10M float32 values differ by summation order: compare relative to the size
    scale = max(float(np.abs(ref).max(initial=0.0)), 1e-30)
    err = float(np.abs(ref - got).max(initial=0.0)) / scale
    return None if err < 1e-3 else f"max rel. error {err:.1e}"


def fmt_time(s):
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def run_workload(name, quick, peers, alternate=True):
    mod = importlib.import_module("benchmarks.workloads." + name)
    n = mod.QUICK_N if quick else mod.N
    inner = getattr(mod, "INNER", 1)
    if quick:
        inner = max(1, inner // 5)
    samples = QUICK_SAMPLES if quick else SAMPLES
    memory = getattr(mod, "MEMORY", False)
    rows, cases = [], {}
    for peer in peers:
        # set up and warm up every peer first (one after the other, as the memory measure
        # needs), then time them: alternated, or each in one stretch
        row = {"workload": name, "peer": peer, "n": n}
        try:
            if peer in TI_PEERS and memory:
                # initialised before the memory is measured
                warm_runtime(ti_module(peer, mod.__name__))
            rss0 = rss_bytes()
            case = setup(mod, peer, n)
            if case is None:
                continue  # no version of this workload for this peer: not a failure
            run, result, sync = case
            time.sleep(0.2)  # let the previous peer's worker threads go idle
            if alternate:
                for _ in range(WARMUP):
                    run()
                sync()
            else:
                # min too: this 2-core machine is often shared, and the min shows the
                # undisturbed speed
                row["seconds"], row["min_seconds"], row["samples"] = time_peer(
                    run, sync, inner, samples)
            if memory:
                # what the workload added, from its fields to its compiled kernels and the
                # cells its warm-up (alternated) or timed calls activated: the same measure
                # for every peer (fluxion's own count of the pages its trees hold too)
                row["rss_added_mb"] = (rss_bytes() - rss0) / 2**20
            cases[peer] = (run, sync, result)
        except Exception as e:  # a missing or failing peer must not stop the run
            _failed(row, e)
        rows.append(row)
    live = [r for r in rows if r["peer"] in cases]
    if alternate and live:
        rss0 = rss_bytes()
        try:
            times = time_alternated({p: cases[p][:2] for p in cases}, inner, samples,
                                    TIME_BUDGET_S * len(cases))
        except Exception as e:  # one peer failing mid-run: report it on every timed row
            for r in live:
                _failed(r, e)
            times = {}
        grown = (rss_bytes() - rss0) / 2**20
        base = times.get("fluxion")
        for r in live:
            t = times.get(r["peer"])
            if not t:
                continue
            r["seconds"], r["min_seconds"], r["samples"] = (
                statistics.median(t), min(t), len(t))
            r["alternated"] = True
            if base and r["peer"] != "fluxion":
                r["fluxion_won"] = rounds_won(base, t)
            if memory:
                # resident memory all peers together added while timed (the warm-up should
                # have reached the steady state: this shows when it did not)
                r["rss_rounds_mb"] = grown
    ref = None
    for r in rows:
        if r["peer"] not in cases or "error" in r:
            continue
        try:
            if memory and r["peer"] == "fluxion":
                r["in_use_mb"] = _ti_modules["fluxion"].sparse.memory_in_use() / 2**20
            out = cases[r["peer"]][2]()
            if out is not None:
                # the first peer to produce a result is the reference (fluxion, else taichi)
                if ref is None:
                    ref = out
                elif (why := compare(ref, out)) is not None:
                    r["mismatch"] = why
        except Exception as e:
            _failed(r, e)
    bpi = getattr(mod, "BYTES_PER_ITEM", None)
    base = next((r.get("seconds") for r in rows if r["peer"] == "fluxion"), None)
    for r in rows:
        if bpi and "seconds" in r:
            r["gb_per_s"] = bpi * n / r["seconds"] / 1e9
        if base and "seconds" in r:
            r["vs_fluxion"] = r["seconds"] / base
        print_row(r)
    return rows


def _failed(row, e):
    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]
    if os.environ.get("BENCH_TRACEBACK"):
        traceback.print_exc()


HEADER = f"{'workload':<14} {'peer':<8} {'median':>11} {'min':>11}  note"


def print_row(r):
    if "error" in r:
        print(f"{r['workload']:<14} {r['peer']:<8} {'n/a':>11} {'':>11}  {r['error']}", flush=True)
        return
    notes = []
    if "gb_per_s" in r:
        notes.append(f"{r['gb_per_s']:.1f} GB/s")
    if "rss_added_mb" in r:
        notes.append(f"+{r['rss_added_mb']:.1f} MiB resident")
    if "in_use_mb" in r:
        notes.append(f"({r['in_use_mb']:.1f} MiB in its trees)")
    if r["seconds"] > 1.5 * r["min_seconds"]:
        # typically another process holding a core: a parallel loop then waits a time slice
        notes.append("noisy")
    if "fluxion_won" in r:
        notes.append(f"fluxion faster in {r['fluxion_won']}/{r['samples']} rounds")
    if "mismatch" in r:
        notes.append("RESULT DIFFERS: " + r["mismatch"])
    print(f"{r['workload']:<14} {r['peer']:<8} {fmt_time(r['seconds']):>11} "
          f"{fmt_time(r['min_seconds']):>11}  {'  '.join(notes)}", flush=True)


def print_summary(rows):
    """Ratios need fluxion's time, known only after its row, so they get their own table."""
    print("\npeer time / fluxion time (above 1: fluxion is faster)")
    print(f"{'workload':<14} " + " ".join(f"{p:>9}" for p in PEERS))
    for name in dict.fromkeys(r["workload"] for r in rows):
        cells = []
        for p in PEERS:
            r = next((r for r in rows if r["workload"] == name and r["peer"] == p), None)
            if r is None:
                cells.append("-")
            elif "error" in r:
                cells.append("n/a")
            elif "vs_fluxion" in r:
                cells.append(f"{r['vs_fluxion']:.2f}x")
            else:
                # no fluxion time to divide by: show the time itself
                cells.append(fmt_time(r["seconds"]).replace(" ", ""))
        print(f"{name:<14} " + " ".join(f"{c:>9}" for c in cells))


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def _loadavg():
    """The 1, 5 and 15 minute load averages (Linux; '?' elsewhere): a run's figures mean
    little without the load it ran under."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def versions(peers):
    out = {}
    for p in peers:
        mod = _ti_modules.get(p) or sys.modules.get(p)
        if mod is not None:
            v = getattr(mod, "__version__", "?")
            out[p] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated workloads (" + ", ".join(NAMES) + ")")
    ap.add_argument("--peers", help="comma-separated peers (default: " + ",".join(PEERS) + ")")
    ap.add_argument("--quick", action="store_true", help="small sizes, few samples: a smoke test")
    ap.add_argument("--json", help="where to write the figures")
    ap.add_argument("--sequential", action="store_true",
                    help="time each peer in one stretch, not in alternating rounds")
    args = ap.parse_args(argv)

    names = args.only.split(",") if args.only else NAMES
    peers = args.peers.split(",") if args.peers else PEERS
    for bad in set(names) - set(NAMES):
        ap.error(f"unknown workload {bad!r}")
    for bad in set(peers) - set(PEERS):
        ap.error(f"unknown peer {bad!r}")

    info = machine()
    alternate = not args.sequential and len(peers) > 1
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}"
          f"{', quick' if args.quick else ''}, peers "
          f"{'alternated' if alternate else 'one after the other'}, load average "
          f"{_loadavg()}")
    print(HEADER)
    load0 = _loadavg()
    rows = []
    for name in names:
        rows += run_workload(name, args.quick, peers, alternate)
    print_summary(rows)

    partial = args.quick or args.only or args.peers
    path = args.json or os.path.join(RESULTS, "partial.json" if partial else "latest.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   "machine": info, "quick": args.quick, "alternated": alternate,
                   "load_before": load0, "load_after": _loadavg(), "versions": versions(peers),
                   "results": rows}, f, indent=1)
    print(f"\nwrote {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
