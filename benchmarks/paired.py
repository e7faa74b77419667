"""fluxion against PyTorch on the seed's two workloads, timed in alternating blocks:

    python -m benchmarks.paired [--rounds 15] [--only rwkv,pad]

The main harness times each peer in one stretch, minutes apart from the other; on a shared
machine whose speed drifts, a ratio near 1 can then fall either way from run to run. Here
every round times a block of fluxion calls and a block of PyTorch calls under the same
conditions, with a pause before each block so that the other library's idle threads have
stopped spinning (both PyTorch's OpenMP workers and fluxion's pool spin for a while after
their work before they sleep, and would otherwise slow the block that follows). It prints
the medians, the ratio of medians and how many rounds each side won.
"""
import argparse
import statistics
import time

from benchmarks.workloads import pad, rwkv

PAUSE_S = 0.02    # longer than either library's spin before its threads sleep
BLOCK = 5         # calls per block; a block's time is its median call


def _block(run):
    ts = []
    for _ in range(BLOCK):
        t0 = time.perf_counter()
        run()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def paired(name, flux_run, torch_run, rounds):
    for run in (flux_run, torch_run):      # compiled, caches warm
        run()
        run()
    flux, tor = [], []
    for r in range(rounds):
        # alternate which side goes first, so neither always follows the other
        order = ((flux, flux_run), (tor, torch_run))
        for times, run in (order if r % 2 == 0 else order[::-1]):
            time.sleep(PAUSE_S)
            times.append(_block(run))
    mf, mt = statistics.median(flux), statistics.median(tor)
    wins = sum(f < t for f, t in zip(flux, tor))
    print(f"{name:<6} fluxion {1e3 * mf:8.2f} ms   torch {1e3 * mt:8.2f} ms   "
          f"torch/fluxion {mt / mf:5.2f}x   fluxion faster in {wins}/{rounds} rounds")
    return mf, mt, wins


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="rwkv,pad")
    args = ap.parse_args(argv)
    import fluxion as ti
    ti.init(arch=ti.cpu)
    mods = {"rwkv": rwkv, "pad": pad}
    for name in args.only.split(","):
        mod = mods[name]
        flux_run, _ = mod.make(ti, mod.N)
        torch_run, _ = mod.setup_torch(mod.N)
        paired(name, flux_run, torch_run, args.rounds)


if __name__ == "__main__":
    main()
