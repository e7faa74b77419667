"""A torch model with a fluxion kernel layer under DDP (gloo): the gradients of one process.

The model is trained under DistributedDataParallel on P processes (2 by default), each on
1/P of the global batch, and compared with the same model trained in one process on the
whole batch.

The layer is a learnable circular convolution along the features
(y[b, j] = sum_t w[t] x[b, j + t - taps // 2], indices wrapping around), a fluxion kernel
made a torch operation by ti.ad.torch_function; its backward is the kernel's adjoint. Each
of the P processes takes 1/P of the global batch; DDP averages the gradients over the
processes, which is the gradient of the mean loss over the whole batch. The same model is
trained in this process on the whole batch, and the gradients of the first step and the
parameters after the last are compared. They agree to rounding (float64): the batch's sum
is split in P partial sums, added in another order, and the adjoint kernel adds its
contributions to w in the order its threads run.

    python -m fluxion.examples distributed_ddp [--procs 2] [--batch 32] [--iters 5]
"""
import argparse
import os
import tempfile

import numpy as np

import fluxion as ti

N_IN, WIDTH, TAPS = 6, 16, 5


@ti.kernel
def circular_conv(x: ti.types.ndarray(), w: ti.types.ndarray(), y: ti.types.ndarray()):
    for b, j in ti.ndrange(x.shape[0], x.shape[1]):
        n = x.shape[1]
        s = 0.0
        for t in range(w.shape[0]):
            s += w[t] * x[b, (j + t - w.shape[0] // 2 + n) % n]
        y[b, j] = s


def make_model(torch):
    conv = ti.ad.torch_function(circular_conv, outputs={"y": lambda x, w: torch.empty_like(x)})

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(N_IN, WIDTH, dtype=torch.float64)
            self.w = torch.nn.Parameter(torch.linspace(-0.5, 0.7, TAPS, dtype=torch.float64))
            self.out = torch.nn.Linear(WIDTH, 1, dtype=torch.float64)

        def forward(self, x):
            # x @ W^T + b is contiguous: the kernel gets the tensor's memory as it is
            return self.out(torch.tanh(conv(self.inp(x), self.w)))

    torch.manual_seed(0)
    return Net()


def data(batch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, N_IN))
    y = np.sin(x[:, :1] * 1.5) + 0.3 * x[:, 1:2] * x[:, 2:3]
    return x, y


def train(torch, model, x, y, iters, lr=0.1):
    """(gradients of the first step, parameters after `iters` steps), by parameter name."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    first = None
    for _ in range(iters):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if first is None:
            first = {k: p.grad.detach().clone() for k, p in named(model)}
        opt.step()
    return first, {k: p.detach().clone() for k, p in named(model)}


def named(model):
    # DDP's parameters are its module's, under "module."
    return [(k.removeprefix("module."), p) for k, p in model.named_parameters()]


def worker(rank, world, rendezvous, batch, iters, out):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world)
    ti.init(arch=ti.cpu, default_fp=ti.f64,
            cpu_max_num_threads=max(1, (os.cpu_count() or 1) // world))
    try:
        x, y = data(batch)
        share = slice(rank * batch // world, (rank + 1) * batch // world)
        model = torch.nn.parallel.DistributedDataParallel(make_model(torch))
        first, final = train(torch, model, torch.from_numpy(x[share]),
                             torch.from_numpy(y[share]), iters)
        if rank == 0:
            np.savez(out, **{"grad." + k: v.numpy() for k, v in first.items()},
                     **{"param." + k: v.numpy() for k, v in final.items()})
    finally:
        dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    if args.batch % args.procs:
        raise SystemExit("--batch must be a multiple of --procs (equal shares, or DDP's "
                         "mean of means is not the batch's mean)")
    with tempfile.TemporaryDirectory(prefix="fluxion-ddp-") as tmp:
        out = os.path.join(tmp, "ddp.npz")
        mp.spawn(worker, args=(args.procs, os.path.join(tmp, "rendezvous"), args.batch,
                               args.iters, out), nprocs=args.procs)
        with np.load(out) as f:
            ddp = {k: f[k] for k in f.files}
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x, y = data(args.batch)
    first, final = train(torch, make_model(torch), torch.from_numpy(x), torch.from_numpy(y),
                         args.iters)
    print(f"global batch {args.batch}: {args.procs} processes under DDP (gloo) vs 1 process")
    worst = 0.0
    for what, ref in (("grad", first), ("param", final)):
        for k, v in ref.items():
            v = v.numpy()
            d = np.abs(ddp[f"{what}.{k}"] - v).max() / max(np.abs(v).max(), 1e-300)
            worst = max(worst, d)
            label = "gradient, first step" if what == "grad" else f"after {args.iters} steps"
            print(f"  {k:12s} {label:22s} max relative difference {d:.1e}")
    print(("gradients and parameters match" if worst < 1e-12 else "MISMATCH")
          + f" (worst {worst:.1e}, tolerance 1e-12)")


if __name__ == "__main__":
    main()
