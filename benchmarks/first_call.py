"""First-call latency in a fresh process, with the offline cache of compiled kernels cold
(empty directory), warm (filled by an earlier process) and off, for fluxion and Taichi.

    python -m benchmarks.first_call [--runs 5] [--peers fluxion,taichi] [--json PATH]

Each sample is a new Python process that imports the module, calls `ti.init(arch=ti.cpu)`,
builds the MLS-MPM example's fields and kernels (benchmarks/workloads/mpm.py, 8192 particles),
and times:
  * first kernel: from `ti.init` to the end of the first kernel call (`init`, a 5-line
    kernel): what a process pays before anything runs (the JIT, the thread pool, imports of
    the compiler), plus that kernel;
  * first call: the first call of the MLS-MPM substep (a 60-line kernel) after that;
  * alone: in other processes, the substep called first (the process's setup included);
  * steady: the median of 20 later calls of the substep.
Wall-clock milliseconds, and the CPU time of the calling thread (what compiling costs on a
loaded machine: this one is shared). Medians over the runs; a fresh cache directory per cold
run, one directory filled by a preceding run for the warm ones. The processes write and use
bytecode caches (in a temporary PYTHONPYCACHEPREFIX, even under PYTHONDONTWRITEBYTECODE), as
an installed package has them.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
peer, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
ti = __import__(peer)
t_import = time.perf_counter() - t0
kw = dict(arch=ti.cpu)
if mode == "off":
    kw["offline_cache"] = False
else:
    kw["offline_cache"] = True
    kw["offline_cache_file_path"] = path
if peer == "taichi":
    kw["log_level"] = ti.WARN
from fluxion.examples.mpm88 import build
order = sys.argv[4]
w0, c0 = time.perf_counter(), time.thread_time()
ti.init(**kw)
sim = build(ti, n_particles=8192, n_grid=128)
if order == "alone":
    sim["substep"]()
    ti.sync()
    w1, c1 = time.perf_counter(), time.thread_time()
    print(json.dumps(dict(alone_ms=1e3 * (w1 - w0), alone_cpu_ms=1e3 * (c1 - c0))))
    sys.exit(0)
sim["init"]()
ti.sync()
w1, c1 = time.perf_counter(), time.thread_time()
sim["substep"]()
ti.sync()
w2, c2 = time.perf_counter(), time.thread_time()
steady = []
for _ in range(20):
    s = time.perf_counter()
    sim["substep"]()
    ti.sync()
    steady.append(time.perf_counter() - s)
steady.sort()
notes = None
if peer == "fluxion":
    notes = [i.cache_note for k in (sim["init"], sim["substep"]) for i in k.instances.values()]
print(json.dumps(dict(import_ms=1e3 * t_import, first_kernel_ms=1e3 * (w1 - w0),
                      first_kernel_cpu_ms=1e3 * (c1 - c0), first_call_ms=1e3 * (w2 - w1),
                      first_call_cpu_ms=1e3 * (c2 - c1), steady_ms=1e3 * steady[10],
                      notes=notes)))
"""


def sample(peer, mode, path, order="init-first"):
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), ROOT] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("FLUXION_ARCH", None)
    res = subprocess.run([sys.executable, "-c", CHILD, peer, mode, path, order],
                         capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"{peer} {mode}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


_PYCACHE = os.path.join(tempfile.gettempdir(), "fluxion-first-call-pycache")


def measure(peer, runs):
    out = {}
    tmp = tempfile.mkdtemp(prefix="first-call-")
    try:
        sample(peer, "off", os.path.join(tmp, "pyc"))   # writes the bytecode caches
        warm_dir = os.path.join(tmp, "warm")
        sample(peer, "cold", warm_dir)                  # fills the warm cache
        for mode in ("cold", "warm", "off"):
            rows = []
            for r in range(runs):
                d = os.path.join(tmp, f"{mode}{r}") if mode != "warm" else warm_dir
                row = sample(peer, mode, d)
                d2 = os.path.join(tmp, f"{mode}{r}-alone") if mode != "warm" else warm_dir
                row.update(sample(peer, mode, d2, "alone"))
                rows.append(row)
            out[mode] = rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def median(samples, k):
    return statistics.median(s[k] for s in samples)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peers", default="fluxion,taichi")
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results",
                                                   "first_call.json"))
    args = ap.parse_args(argv)
    results = {}
    for peer in args.peers.split(","):
        try:
            __import__("importlib").util.find_spec(peer) or (_ for _ in ()).throw(ImportError)
        except ImportError:
            print(f"{peer}: not installed, skipped")
            continue
        results[peer] = measure(peer, args.runs)
    cols = ("first_kernel_ms", "first_kernel_cpu_ms", "first_call_ms", "first_call_cpu_ms",
            "alone_ms", "alone_cpu_ms", "steady_ms", "import_ms")
    print(f"{'peer':8} {'cache':5} " + " ".join(f"{c[:-3]:>17}" for c in cols))
    for peer, modes in results.items():
        for mode, samples in modes.items():
            print(f"{peer:8} {mode:5} " + " ".join(f"{median(samples, c):17.1f}" for c in cols))
    if peer == "fluxion" and "fluxion" in results:
        print("fluxion notes (warm):", results["fluxion"]["warm"][0]["notes"])
    summary = {peer: {mode: {c: median(s, c) for c in cols} for mode, s in modes.items()}
               for peer, modes in results.items()}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump({"summary": summary, "runs": args.runs, "samples": results}, fh, indent=1)
    print(f"wrote {os.path.relpath(args.json)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
