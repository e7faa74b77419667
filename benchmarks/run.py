"""Time each workload on fluxion and on every peer that imports, in one process, and print
a table of medians and of each peer's time divided by fluxion's (above 1: fluxion is faster).

    python -m benchmarks [--only NAME[,NAME]] [--quick] [--json PATH]
    python benchmarks/run.py ...

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


def run_workload(name, quick, peers):
    mod = importlib.import_module("benchmarks.workloads." + name)
    n = mod.QUICK_N if quick else mod.N
    inner = getattr(mod, "INNER", 1)
    if quick:
        inner = max(1, inner // 5)
    samples = QUICK_SAMPLES if quick else SAMPLES
    rows, ref = [], None
    for peer in peers:
        row = {"workload": name, "peer": peer, "n": n}
        try:
            if peer in TI_PEERS and getattr(mod, "MEMORY", False):
                ti_module(peer, mod.__name__)  # (initialised before the memory is measured)
            rss0 = rss_bytes()
            case = setup(mod, peer, n)
            if case is None:
                continue  # no version of this workload for this peer: not a failure
            run, result, sync = case
            time.sleep(0.2)  # let the previous peer's worker threads go idle
            # min too: this 2-core machine is often shared, and the min shows the undisturbed speed
            row["seconds"], row["min_seconds"], row["samples"] = time_peer(
                run, sync, inner, samples)
            if getattr(mod, "MEMORY", False):
                # what the workload added, from its fields to its compiled kernels and the
                # cells its timed calls activated: the same measure for every peer (fluxion's
                # own count of the pages its trees hold too)
                row["rss_added_mb"] = (rss_bytes() - rss0) / 2**20
                if peer == "fluxion":
                    row["in_use_mb"] = _ti_modules[peer].sparse.memory_in_use() / 2**20
            out = result()
            if out is not None:
                # the first peer to produce a result is the reference (fluxion, else taichi)
                if ref is None:
                    ref = out
                elif (why := compare(ref, out)) is not None:
                    row["mismatch"] = why
        except Exception as e:  # a missing or failing peer must not stop the run
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
        bpi = getattr(mod, "BYTES_PER_ITEM", None)
        if bpi and "seconds" in row:
            row["gb_per_s"] = bpi * n / row["seconds"] / 1e9
        rows.append(row)
        print_row(row)
    base = next((r.get("seconds") for r in rows if r["peer"] == "fluxion"), None)
    for r in rows:
        if base and "seconds" in r:
            r["vs_fluxion"] = r["seconds"] / base
    return rows


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
    args = ap.parse_args(argv)

    names = args.only.split(",") if args.only else NAMES
    peers = args.peers.split(",") if args.peers else PEERS
    for bad in set(names) - set(NAMES):
        ap.error(f"unknown workload {bad!r}")
    for bad in set(peers) - set(PEERS):
        ap.error(f"unknown peer {bad!r}")

    info = machine()
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}"
          f"{', quick' if args.quick else ''}")
    print(HEADER)
    rows = []
    for name in names:
        rows += run_workload(name, args.quick, peers)
    print_summary(rows)

    partial = args.quick or args.only or args.peers
    path = args.json or os.path.join(RESULTS, "partial.json" if partial else "latest.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   "machine": info, "quick": args.quick, "versions": versions(peers),
                   "results": rows}, f, indent=1)
    print(f"\nwrote {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
