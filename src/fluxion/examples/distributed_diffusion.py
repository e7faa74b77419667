"""2-D diffusion over 1, 2, 4 processes (torch.distributed): the field and gradient of one.

Each process owns a block of the n x n plate and a one-cell halo (fluxion.distributed); a
step is an explicit five-point stencil over the block, then a halo exchange with the
neighbours. The processes are started with torch.multiprocessing.spawn and meet over
loopback (a rendezvous file); rank 0 gathers the result.

  * forward: fields and a kernel over them; the halo is exchanged in the fields' own memory.
    Every run is compared with NumPy (np.pad + the same expression): with fast-math off the
    arithmetic of each cell is the same on any number of processes, so the fields are equal
    bit for bit. The total heat (a kernel's sum, all_reduce "sum") and the peak (all_reduce
    "max") are reported.
  * --grad, also: the step is a torch operation (ti.ad.torch_function over the kernel) and the
    halo exchange one with autograd (Decomposition.halo_exchange, whose backward sends each
    halo's gradient back to the cell's owner): d(loss)/d(initial field) by loss.backward().
    Compared with the one-process gradient and with NumPy's adjoint (the step's matrix is
    symmetric, so its transpose is the step itself); they agree to rounding (the gradients
    of cells on a cut arrive through the halo, so they are added in another order).

    python -m fluxion.examples distributed_diffusion [--procs 1 2 4] [--n 96] [--steps 40]
        [--dirichlet] [--grad]
"""
import argparse
import os
import tempfile

import numpy as np

import fluxion as ti
import fluxion.distributed as fd

K = 0.2          # diffusion number (stable below 0.25)


def initial(n):
    """A deterministic plate: two hot spots and a ramp."""
    x, y = np.meshgrid(np.arange(n) / n, np.arange(n) / n, indexing="ij")
    return (np.exp(-80 * ((x - 0.3) ** 2 + (y - 0.4) ** 2))
            + 0.5 * np.exp(-40 * ((x - 0.7) ** 2 + (y - 0.75) ** 2)) + 0.1 * x)


def weights(n):
    """The loss's weights: sum(w * u^2) over the final field."""
    x, y = np.meshgrid(np.arange(n) / n, np.arange(n) / n, indexing="ij")
    return 1.0 + np.sin(6 * x) * np.cos(4 * y)


def numpy_step(u, k, periodic):
    p = np.pad(u, 1, mode="wrap") if periodic else np.pad(u, 1)
    c = p[1:-1, 1:-1]
    return c + k * ((p[2:, 1:-1] + p[:-2, 1:-1]) + (p[1:-1, 2:] + p[1:-1, :-2]) - 4.0 * c)


@ti.kernel
def step(u: ti.template(), v: ti.template(), k: ti.f64):
    for i, j in ti.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        v[i, j] = u[i, j] + k * ((u[i + 1, j] + u[i - 1, j]) + (u[i, j + 1] + u[i, j - 1])
                                 - 4.0 * u[i, j])


@ti.kernel
def step_array(u: ti.types.ndarray(), k: ti.f64, v: ti.types.ndarray()):
    for i, j in ti.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        v[i, j] = u[i, j] + k * ((u[i + 1, j] + u[i - 1, j]) + (u[i, j + 1] + u[i, j - 1])
                                 - 4.0 * u[i, j])


@ti.kernel
def interior_sum(u: ti.template()) -> ti.f64:
    s = 0.0
    for i, j in ti.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        s += u[i, j]
    return s


@ti.kernel
def interior_max(u: ti.template()) -> ti.f64:
    m = -1e300
    for i, j in ti.ndrange((1, u.shape[0] - 1), (1, u.shape[1] - 1)):
        ti.atomic_max(m, u[i, j])
    return m


def setup(rank, world, rendezvous):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)
    # the processes share the machine's cores; fast-math off: the same arithmetic per cell
    # on any decomposition
    ti.init(arch=ti.cpu, default_fp=ti.f64, fast_math=False,
            cpu_max_num_threads=max(1, (os.cpu_count() or 1) // world))


def forward(dec, u0, steps, k):
    u, v = dec.field(ti.f64), dec.field(ti.f64)
    u.from_numpy(dec.scatter(u0))         # owned cells and halo; past a wall: 0
    v.from_numpy(dec.scatter(u0))
    for _ in range(steps):
        step(u, v, k)
        dec.exchange(v)
        u, v = v, u
    heat = fd.all_reduce(interior_sum(u), "sum")
    peak = fd.all_reduce(interior_max(u), "max")
    return dec.gather(u), heat, peak


def gradient(dec, u0, w, steps, k):
    import torch
    diffuse = ti.ad.torch_function(step_array, outputs={"v": lambda u, k: torch.zeros_like(u)})
    x = torch.from_numpy(dec.scatter(u0)).requires_grad_()
    u = dec.halo_exchange(x)
    for _ in range(steps):
        u = dec.halo_exchange(diffuse(u, k))
    wl = torch.from_numpy(dec.scatter(w))[dec.interior]
    local = (wl * u[dec.interior] ** 2).sum()
    local.backward()
    loss = fd.all_reduce(local.item(), "sum")
    grad = torch.zeros_like(x)
    grad[dec.interior] = x.grad[dec.interior]
    return dec.gather(grad), loss


def worker(rank, world, rendezvous, n, steps, periodic, grad, out):
    import torch.distributed as dist
    setup(rank, world, rendezvous)
    try:
        dec = fd.Decomposition((n, n), halo=1, periodic=periodic)
        field, heat, peak = forward(dec, initial(n), steps, K)
        result = dict(field=field, heat=heat, peak=peak)
        if grad:
            result["grad"], result["loss"] = gradient(dec, initial(n), weights(n), steps, K)
        if rank == 0:
            np.savez(out, parts=np.array(dec.parts), **result)
    finally:
        dist.destroy_process_group()


def run(procs, n, steps, periodic, grad):
    """The result of rank 0 of a run on `procs` processes (a dict of arrays)."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix="fluxion-dist-") as tmp:
        out = os.path.join(tmp, "result.npz")
        mp.spawn(worker, args=(procs, os.path.join(tmp, "rendezvous"), n, steps, periodic,
                               grad, out), nprocs=procs)
        with np.load(out) as f:
            return {k: f[k] for k in f.files}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dirichlet", action="store_true",
                    help="walls held at 0 instead of a periodic plate")
    ap.add_argument("--grad", action="store_true",
                    help="also the gradient of sum(w * u^2) at the last step w.r.t. the first")
    args = ap.parse_args()
    periodic = not args.dirichlet
    n, steps = args.n, args.steps
    u = initial(n)
    for _ in range(steps):
        u = numpy_step(u, K, periodic)
    print(f"{n}x{n} plate, {steps} steps, {'periodic' if periodic else 'walls at 0'}"
          f"{', gradient' if args.grad else ''}")
    if args.grad:
        # the adjoint: the step's matrix is symmetric, so its transpose is the step
        want = 2 * weights(n) * u
        for _ in range(steps):
            want = numpy_step(want, K, periodic)
        scale = np.abs(want).max()
    ref = {}
    for procs in sorted(set(args.procs)):
        r = run(procs, n, steps, periodic, args.grad)
        parts = "x".join(map(str, r["parts"]))
        f = r["field"]
        same = "identical to" if np.array_equal(f, u) else "DIFFERENT from"
        line = (f"{procs} process(es), blocks {parts}: field {same} NumPy's "
                f"(max |diff| {np.abs(f - u).max():.1e}); heat {float(r['heat']):.15e} "
                f"(NumPy {u.sum():.15e}), peak {float(r['peak']):.15e} "
                f"(NumPy {u.max():.15e})")
        if ref:
            line += ("; identical to 1 process" if np.array_equal(f, ref["field"])
                     else "; DIFFERENT from 1 process")
        print(line)
        if args.grad:
            g = r["grad"]
            line = (f"{procs} process(es), gradient: loss {float(r['loss']):.15e}, max relative "
                    f"difference from NumPy's adjoint {np.abs(g - want).max() / scale:.1e}")
            if ref:
                line += f", from 1 process {np.abs(g - ref['grad']).max() / scale:.1e}"
            print(line)
        if not ref:
            ref = r


if __name__ == "__main__":
    main()
