"""fluxion programs over torch.distributed: a dense array split in blocks over the ranks of
a process group, halo (ghost) cells exchanged between neighbouring blocks, and reductions of
kernels' results across ranks.

    import torch.distributed as dist
    import fluxion as ti
    import fluxion.distributed as fd

    dist.init_process_group("gloo")          # NCCL on GPUs: see the README
    ti.init(arch=ti.cpu)
    dec = fd.Decomposition((1024, 1024), halo=1, periodic=(True, False))
    u = dec.field(ti.f32)                    # this rank's block and its halo
    u.from_numpy(dec.scatter(u0))
    for _ in range(steps):
        dec.exchange(u)                      # neighbours' edge cells -> u's halo
        step(u, ...)                         # a kernel over dec.interior
    total = fd.all_reduce(total_of(u), "sum")

`Decomposition` (decomposition.py) splits the domain, moves halos (`exchange`; its
transpose for gradients, `exchange_adjoint`; `halo_exchange`, a torch operation with
autograd) and assembles or distributes whole arrays (`gather`, `scatter`); `all_reduce`
combines a kernel's scalar result; `Grid` and `dims_create` (grid.py) are the geometry.
Fields on the CPU, ti.ndarrays, numpy arrays and tensors are exchanged through zero-copy
torch views of their memory (memory.py). Nothing here imports torch until it is used.
"""
from fluxion.distributed.decomposition import Decomposition, all_reduce
from fluxion.distributed.grid import Grid, dims_create

__all__ = ["Decomposition", "Grid", "all_reduce", "dims_create"]
