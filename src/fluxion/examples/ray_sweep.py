"""A diffusion parameter sweep as Ray tasks; workers load the kernels from the offline cache.

The local Ray cluster is started (and stopped) by the example itself. Each worker process
compiles nothing: it loads the kernels from the offline cache once and reuses them for
every later task.

The diffusion number k is a kernel argument, not a constant baked into the code, so one
compiled kernel serves every point of the sweep. This process runs the simulation once
first (compiling the kernels and writing them to the offline cache, a directory every
worker is pointed to); then each Ray worker's first task loads them from there, and its
later tasks find them in memory. Per worker the example prints how many tasks it ran and
how its kernels were obtained ("loaded" from the cache or "compiled"), and compares the
time of a worker's first simulation with this process's first one (the compile). Each
point's spread (the heat's second moment) is checked against 4 k steps, the variance of the
random walk that explicit diffusion is.

    python -m fluxion.examples ray_sweep [--points 8] [--workers 2] [--n 64] [--steps 100]

Requires ray (`pip install fluxion[distributed]`).
"""
import argparse
import collections
import os
import tempfile
import time

import numpy as np

import fluxion as ti

_WORKER = {}       # per worker process: the kernels, built by its first task


def build():
    @ti.kernel
    def step(u: ti.types.ndarray(), v: ti.types.ndarray(), k: ti.f64):
        n = u.shape[0]
        for i, j in ti.ndrange(n, n):
            v[i, j] = u[i, j] + k * ((u[(i + 1) % n, j] + u[(i + n - 1) % n, j])
                                     + (u[i, (j + 1) % n] + u[i, (j + n - 1) % n])
                                     - 4.0 * u[i, j])

    @ti.kernel
    def spread(u: ti.types.ndarray()) -> ti.f64:
        """The second moment about the plate's centre: how far the heat has gone."""
        n = u.shape[0]
        s = 0.0
        for i, j in ti.ndrange(n, n):
            s += u[i, j] * ((i - n / 2) ** 2 + (j - n / 2) ** 2)
        return s
    return step, spread


def simulate(kernels, k, n, steps):
    step, spread = kernels
    u = np.zeros((n, n))
    u[n // 2, n // 2] = 1.0
    v = np.empty_like(u)
    for _ in range(steps):
        step(u, v, k)
        u, v = v, u
    return spread(u)


def how_built(kernels):
    """How the kernels' instances were obtained in this process: 'loaded' (offline cache) or
    'compiled', each with a count."""
    notes = collections.Counter()
    for kern in kernels:
        for inst in kern.instances.values():
            notes[getattr(inst, "cache_note", "compiled").split(",")[0].split(" (")[0]] += 1
    return dict(notes)


def task(k, n, steps, cache):
    """One point of the sweep, in a Ray worker."""
    first = "kernels" not in _WORKER
    if first:
        ti.init(arch=ti.cpu, default_fp=ti.f64, offline_cache_file_path=cache,
                cpu_max_num_threads=1)
        _WORKER["kernels"] = build()
    t0 = time.perf_counter()
    value = simulate(_WORKER["kernels"], k, n, steps)
    return dict(k=k, spread=value, pid=os.getpid(), first=first,
                seconds=time.perf_counter() - t0, built=how_built(_WORKER["kernels"]))


def main():
    import ray
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    ks = np.linspace(0.02, 0.24, args.points)
    with tempfile.TemporaryDirectory(prefix="fluxion-sweep-cache-") as cache:
        # this process compiles the kernels once and writes them to the cache (ti.reset)
        ti.init(arch=ti.cpu, default_fp=ti.f64, offline_cache_file_path=cache,
                cpu_max_num_threads=1)
        t0 = time.perf_counter()
        local = simulate(build(), float(ks[0]), args.n, args.steps)
        t_compile = time.perf_counter() - t0
        ti.reset()
        # the workers import fluxion as this process does
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"),
                                           os.path.dirname(os.path.dirname(
                                               os.path.dirname(ti.__file__)))) if p)
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
        try:
            remote = ray.remote(num_cpus=1)(task)
            results = ray.get([remote.remote(float(k), args.n, args.steps, cache)
                               for k in ks])
        finally:
            ray.shutdown()
    print(f"{args.points} points of k on {args.workers} Ray workers "
          f"({args.n}x{args.n} plate, {args.steps} steps)")
    for r in results:
        print(f"  k={r['k']:.3f}  spread {r['spread']:.6e}  worker {r['pid']}"
              f"{'  (first task of its worker)' if r['first'] else ''}")
    # oracles: k = ks[0] again in this process; and a random walk's variance, 2k per step
    # and axis, until the heat wraps around the plate (nearly not, at these sizes)
    assert results[0]["spread"] == local, (results[0]["spread"], local)
    worst = max(abs(r["spread"] / (4 * r["k"] * args.steps) - 1) for r in results)
    print(f"spread vs 4 k steps (a random walk's variance): max relative difference "
          f"{worst:.1e}")
    print(f"this process, first simulation (compiling): {1e3 * t_compile:.0f} ms")
    per = collections.defaultdict(list)
    for r in results:
        per[r["pid"]].append(r)
    loaded = compiled = 0
    for pid, rs in sorted(per.items()):
        built = rs[-1]["built"]
        loaded += built.get("loaded", 0)
        compiled += built.get("compiled", 0)
        first = next(r for r in rs if r["first"])
        print(f"worker {pid}: {len(rs)} tasks, kernel instances {built}; first simulation "
              f"{1e3 * first['seconds']:.0f} ms, later ones "
              f"{1e3 * np.median([r['seconds'] for r in rs if not r['first']] or [0]):.0f} ms")
    print(f"kernel instances in the workers: {loaded} loaded from the offline cache, "
          f"{compiled} compiled, for {len(results)} tasks")


if __name__ == "__main__":
    main()
