"""Weak scaling of a halo-exchanged 2-D diffusion step (fluxion.distributed over gloo).

    python -m benchmarks.distributed_weak_scaling [--procs 1 2 4] [--block 512] [--steps 200]
        [--threads 1] [--pingpong] [--json PATH]

Every process owns a `block` x `block` float64 block (so the global domain grows with the
number of processes: weak scaling) and runs `steps` steps of the five-point stencil of
fluxion/examples/distributed_diffusion.py, each followed by a halo exchange (one cell,
periodic). The blocks are laid out by dims_create (2 processes: 2 x 1, 4: 2 x 2). Each
process runs its kernels on `threads` threads (1 by default, so that P processes ask for P
cores). Per P it prints the median over the steps of the slowest process's step (kernel +
exchange), the kernel and the exchange alone, the halo bytes a process sends per step,
and the weak-scaling efficiency t(1) / t(P). The machine's core count is printed: with
more processes than cores the processes time-share and the efficiency says so, not how
the exchange scales. `--pingpong` first times one message between two processes by size
(the latency and bandwidth of the README's cost model).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np


def worker(rank, world, rendezvous, block, steps, threads, out):
    import torch.distributed as dist
    import fluxion as ti
    import fluxion.distributed as fd
    from fluxion.examples.distributed_diffusion import step
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)
    ti.init(arch=ti.cpu, default_fp=ti.f64, fast_math=False, cpu_max_num_threads=threads)
    try:
        parts = fd.dims_create(world, 2)
        dec = fd.Decomposition((parts[0] * block, parts[1] * block), halo=1, periodic=True)
        u, v = dec.field(ti.f64), dec.field(ti.f64)
        rng = np.random.default_rng(rank)
        u.from_numpy(rng.random(dec.padded_shape))
        v.from_numpy(u.to_numpy())
        step(u, v, 0.2)                     # compile (or load) before timing
        dec.exchange(v)
        kernel, exchange = [], []
        for _ in range(steps):
            dist.barrier()                  # every step starts together
            t0 = time.perf_counter()
            step(u, v, 0.2)
            ti.sync()
            t1 = time.perf_counter()
            dec.exchange(v)
            t2 = time.perf_counter()
            kernel.append(t1 - t0)
            exchange.append(t2 - t1)
            u, v = v, u
        # the slowest process sets the pace of each step
        import torch
        times = torch.tensor([kernel, exchange], dtype=torch.float64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        # bytes sent per step: both halos of every split axis (a single part copies locally)
        sent = sum(2 * np.prod([n for k, n in enumerate(dec.padded_shape) if k != d]) * 8
                   for d in range(2) if dec.parts[d] > 1)
        if rank == 0:
            k, e = times[0].numpy(), times[1].numpy()
            with open(out, "w") as f:
                json.dump({"parts": list(dec.parts), "step": float(np.median(k + e)),
                           "kernel": float(np.median(k)), "exchange": float(np.median(e)),
                           "bytes_sent": int(sent)}, f)
    finally:
        dist.destroy_process_group()


def pingpong(rank, world, rendezvous, out):
    """Half the round trip of a message between two processes, by size: the latency and
    bandwidth of the halo cost model."""
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)
    try:
        res = {}
        for nbytes in (8, 8 << 10, 64 << 10, 1 << 20, 8 << 20):
            t = torch.zeros(nbytes // 8, dtype=torch.float64)
            times = []
            for _ in range(30):
                dist.barrier()
                t0 = time.perf_counter()
                if rank == 0:
                    dist.send(t, 1)
                    dist.recv(t, 1)
                else:
                    dist.recv(t, 0)
                    dist.send(t, 0)
                times.append((time.perf_counter() - t0) / 2)
            res[nbytes] = statistics.median(times)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(res, f)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    import torch.multiprocessing as mp
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--pingpong", action="store_true",
                    help="also time one message between two processes, by size")
    args = ap.parse_args(argv)
    if args.pingpong:
        with tempfile.TemporaryDirectory(prefix="fluxion-pp-") as tmp:
            out = os.path.join(tmp, "pp.json")
            mp.spawn(pingpong, args=(2, os.path.join(tmp, "rdv"), out), nprocs=2)
            with open(out) as f:
                pp = json.load(f)
        print("one message between two processes (gloo, loopback), half a round trip:")
        for nbytes, t in pp.items():
            nbytes = int(nbytes)
            print(f"  {nbytes:>9d} bytes  {1e6 * t:9.1f} us  ({nbytes / t / 1e9:6.2f} GB/s)")
    rows = []
    print(f"weak scaling: {args.block}x{args.block} f64 per process, {args.steps} steps, "
          f"{args.threads} thread(s) per process, {os.cpu_count()} cores on this machine")
    print(f"{'procs':>5} {'blocks':>6} {'step ms':>8} {'kernel ms':>9} {'exchange ms':>11} "
          f"{'halo KiB sent':>13} {'efficiency':>10}")
    for p in args.procs:
        with tempfile.TemporaryDirectory(prefix="fluxion-weak-") as tmp:
            out = os.path.join(tmp, "r.json")
            mp.spawn(worker, args=(p, os.path.join(tmp, "rdv"), args.block, args.steps,
                                   args.threads, out), nprocs=p)
            with open(out) as f:
                r = json.load(f)
        r["procs"] = p
        rows.append(r)
        eff = rows[0]["step"] / r["step"] if rows[0]["procs"] == 1 else float("nan")
        r["efficiency"] = eff
        print(f"{p:5d} {'x'.join(map(str, r['parts'])):>6} {1e3 * r['step']:8.3f} "
              f"{1e3 * r['kernel']:9.3f} {1e3 * r['exchange']:11.3f} "
              f"{r['bytes_sent'] / 1024:13.1f} {eff:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "block": args.block, "steps": args.steps,
                       "threads": args.threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
