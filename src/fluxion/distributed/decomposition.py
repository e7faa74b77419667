"""A dense array split in blocks over the ranks of a torch.distributed process group, with
halo (ghost) cells that `exchange` fills from the neighbours' blocks.

The halo of axis d is filled by two messages per rank: its first `halo[d]` owned layers to
the lower neighbour, its last ones to the upper neighbour, each slab spanning the whole
padded extent of the other axes. Axes are exchanged in turn (0, 1, ...), so a slab of a
later axis carries the halo layers that an earlier axis just received: the corner cells
arrive without diagonal messages.

The adjoint of that copy (`exchange_adjoint`, used by `halo_exchange`'s backward) runs the
axes in the reverse order: each halo's gradient goes back to the rank that owns the cells
and is added to their gradient, and the halo's own gradient becomes zero.
"""
from __future__ import annotations

import numpy as np

import fluxion as ti
from fluxion.distributed.grid import Grid
from fluxion.distributed.memory import tensors_of
from fluxion.lang.field import Field


def _dist():
    import torch.distributed as dist
    return dist


def _slab(t, axis, lo, hi):
    index = [slice(None)] * t.dim()
    index[axis] = slice(lo, hi)
    return t[tuple(index)]


class Decomposition:
    """`global_shape` split over the ranks of `group` (default: the world group, which
    `torch.distributed.init_process_group` must have set up).

        dec = Decomposition((512, 512), halo=1, periodic=True)      # parts: dims_create
        u = dec.field(ti.f64)           # this rank's block, halo included
        u.from_numpy(dec.scatter(u0))   # u0: the global initial state (on every rank)
        dec.exchange(u)                 # fill the halo from the neighbours
        total = fluxion.distributed.all_reduce(local_sum(u), "sum")
        whole = dec.gather(u)           # the global array, on every rank

    Indices: a rank's padded block has `halo[d]` ghost layers on both sides of axis d; its
    own cells are `interior` (slices of the padded block), the global cells
    `start[d] .. start[d] + local_shape[d]`. Past a non-periodic edge the halo is not
    written by the exchange: it holds what the caller put there (a boundary condition).
    A rank with one part along a periodic axis fills that axis's halo from its own block.
    """

    def __init__(self, global_shape, halo=1, parts=None, periodic=True, group=None):
        dist = _dist()
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("fluxion.distributed needs torch.distributed's default process "
                               "group: call torch.distributed.init_process_group first")
        self.group = group
        self.rank = dist.get_rank(group)
        world = dist.get_world_size(group)
        self.grid = Grid(global_shape, world, parts=parts, halo=halo, periodic=periodic)
        g = self.grid
        self.global_shape, self.parts = g.global_shape, g.parts
        self.halo, self.periodic = g.halo, g.periodic
        self.coords = g.coords(self.rank)
        self.start, self.local_shape = g.block(self.rank)
        self.padded_shape = g.padded_shape(self.rank)
        self.interior = g.interior(self.rank)
        # torch's point-to-point calls address global ranks, not the group's
        self._neighbors = [tuple(self._global(r) for r in g.neighbors(self.rank, d))
                           for d in range(g.ndim)]

    def _global(self, r):
        if r is None or self.group is None:
            return r
        return _dist().get_global_rank(self.group, r)

    @property
    def world_size(self):
        return self.grid.world_size

    # -- storage ---------------------------------------------------------------------------
    def field(self, dtype, **kw):
        """A dense fluxion field the shape of this rank's padded block (`kw` as ti.field's)."""
        return ti.field(dtype, shape=self.padded_shape, **kw)

    def scatter(self, global_array, fill=0):
        """This rank's padded block of `global_array` (numpy, global shape, element
        dimensions after): its own cells, and halo cells taken from the global array as an
        exchange would fill them (wrapping around periodic axes); past a non-periodic edge
        the halo is `fill`."""
        a = np.asarray(global_array)
        nd = self.grid.ndim
        if a.shape[:nd] != self.global_shape:
            raise ValueError(f"scatter: the array has shape {a.shape}, the domain "
                             f"{self.global_shape}")
        out = np.full(self.padded_shape + a.shape[nd:], fill, dtype=a.dtype)
        src, dst = [], []
        for d in range(nd):
            n, h = self.global_shape[d], self.halo[d]
            idx = np.arange(self.start[d] - h, self.start[d] + self.local_shape[d] + h)
            if self.periodic[d]:
                keep = np.ones(len(idx), bool)
                idx = idx % n
            else:
                keep = (idx >= 0) & (idx < n)
            src.append(idx[keep])
            dst.append(np.nonzero(keep)[0])
        out[np.ix_(*dst)] = a[np.ix_(*src)]
        return out

    def gather(self, x):
        """The global array (numpy) assembled from every rank's owned cells of `x` (a field,
        ti.ndarray, numpy array or tensor of the padded block's shape), on every rank."""
        import torch
        dist = _dist()
        if isinstance(x, Field):
            x = x.to_numpy()        # element dimensions last (a gather copies anyway)
        local = tensors_of(x, self.padded_shape).tensors[0][self.interior]
        elem = tuple(local.shape[self.grid.ndim:])
        # blocks differ by one cell at most: all_gather wants one size, so pad to the largest
        biggest = tuple(-(-n // p) for n, p in zip(self.global_shape, self.parts))
        buf = torch.zeros(biggest + elem, dtype=local.dtype, device=local.device)
        buf[tuple(slice(0, n) for n in self.local_shape)] = local
        bufs = [torch.empty_like(buf) for _ in range(self.world_size)]
        dist.all_gather(bufs, buf, group=self.group)
        blocks = [b.cpu().numpy() for b in bufs]
        out = np.empty(self.global_shape + elem, dtype=blocks[0].dtype)
        for r, b in enumerate(blocks):
            start, size = self.grid.block(r)
            dst = tuple(slice(s, s + n) for s, n in zip(start, size))
            out[dst] = b[tuple(slice(0, n) for n in size)]
        return out

    # -- halo exchange ---------------------------------------------------------------------
    def exchange(self, x):
        """Fill the halo of `x` (a field, ti.ndarray, numpy array or tensor with this rank's
        padded block as its leading dimensions) from the neighbours' owned cells, in place.
        Every rank of the group must call it (with arrays of the same dtype). Returns `x`."""
        tx = tensors_of(x, self.padded_shape)
        for t in tx.tensors:
            for d in range(self.grid.ndim):
                self._exchange_axis(t, d)
        tx.commit()
        return x

    def exchange_adjoint(self, x):
        """The transpose of `exchange`, for gradients: each halo cell's value is added to the
        cell it was copied from (on its owner) and the halo cell becomes zero. Run it on the
        gradient of an array, after the backward pass of what read its halo (for instance
        between the grad kernels of two steps). Returns `x`."""
        tx = tensors_of(x, self.padded_shape)
        for t in tx.tensors:
            for d in reversed(range(self.grid.ndim)):
                self._adjoint_axis(t, d)
        tx.commit()
        return x

    def halo_exchange(self, t):
        """A torch operation with autograd: a copy of tensor `t` with its halo filled; its
        backward is `exchange_adjoint`. With fluxion kernels wrapped by
        `ti.ad.torch_function`, a distributed simulation differentiates as one process."""
        return _halo_function().apply(t, self)

    def _edges(self, t, d):
        h, n = self.halo[d], self.local_shape[d]
        return (_slab(t, d, 0, h), _slab(t, d, h, 2 * h),            # lower halo, edge
                _slab(t, d, n, n + h), _slab(t, d, n + h, n + 2 * h))  # upper edge, halo

    def _exchange_axis(self, t, d):
        if self.halo[d] == 0:
            return
        lo_halo, lo_edge, hi_edge, hi_halo = self._edges(t, d)
        lo, hi = self._neighbors[d]
        if self.parts[d] == 1:
            if lo is not None:                  # periodic: the block is its own neighbour
                lo_halo.copy_(hi_edge)
                hi_halo.copy_(lo_edge)
            return
        dist = _dist()
        up, down = 2 * d, 2 * d + 1             # tags: which way a message travels
        reqs, fills = [], []
        for peer, edge, tag in ((lo, lo_edge, down), (hi, hi_edge, up)):
            if peer is not None:
                reqs.append(dist.isend(edge.contiguous(), peer, group=self.group, tag=tag))
        for peer, halo, tag in ((lo, lo_halo, up), (hi, hi_halo, down)):
            if peer is not None:
                # a contiguous halo (whole rows) is received in place
                buf = halo if halo.is_contiguous() else _empty_like(halo)
                reqs.append(dist.irecv(buf, peer, group=self.group, tag=tag))
                if buf is not halo:
                    fills.append((halo, buf))
        for r in reqs:
            r.wait()
        for halo, buf in fills:
            halo.copy_(buf)

    def _adjoint_axis(self, t, d):
        if self.halo[d] == 0:
            return
        lo_halo, lo_edge, hi_edge, hi_halo = self._edges(t, d)
        lo, hi = self._neighbors[d]
        if self.parts[d] == 1:
            if lo is not None:
                hi_edge += lo_halo
                lo_edge += hi_halo
                lo_halo.zero_()
                hi_halo.zero_()
            return
        dist = _dist()
        up, down = 2 * d, 2 * d + 1
        reqs, adds = [], []
        for peer, halo, tag in ((lo, lo_halo, down), (hi, hi_halo, up)):
            if peer is not None:
                reqs.append(dist.isend(halo.contiguous(), peer, group=self.group, tag=tag))
        for peer, edge, tag in ((lo, lo_edge, up), (hi, hi_edge, down)):
            if peer is not None:
                buf = _empty_like(edge)
                reqs.append(dist.irecv(buf, peer, group=self.group, tag=tag))
                adds.append((edge, buf))
        for r in reqs:
            r.wait()
        for edge, buf in adds:
            edge += buf
        if lo is not None:
            lo_halo.zero_()
        if hi is not None:
            hi_halo.zero_()


def _empty_like(t):
    import torch
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


_HALO_FUNCTION = []


def _halo_function():
    """The autograd.Function of `halo_exchange`, made on first use (importing this module
    does not import torch)."""
    if _HALO_FUNCTION:
        return _HALO_FUNCTION[0]
    import torch

    class HaloExchange(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, dec):
            ctx.dec = dec
            out = t.detach().clone(memory_format=torch.contiguous_format)
            dec.exchange(out)
            return out

        @staticmethod
        def backward(ctx, g):
            g = g.clone(memory_format=torch.contiguous_format)
            ctx.dec.exchange_adjoint(g)
            return g, None

    _HALO_FUNCTION.append(HaloExchange)
    return HaloExchange


def all_reduce(value, op="sum", group=None):
    """`value` (a kernel's scalar result: a Python or numpy number, or a tensor) combined
    over the ranks of `group` by `op` ("sum" or "max"), returned on every rank as the same
    kind of value. Numbers are combined in float64 (int64 for integers): a float32 result
    loses nothing on the way. A sum's rounding depends on the number of ranks (the partial
    sums are added in another order); a max is exact."""
    import torch
    dist = _dist()
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}
    if op not in ops:
        raise ValueError(f"all_reduce: op must be 'sum' or 'max', got {op!r}")
    if isinstance(value, torch.Tensor):
        out = value.detach().clone()
        dist.all_reduce(out, op=ops[op], group=group)
        return out
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"all_reduce: expected a number or a tensor, got "
                        f"{type(value).__name__}")
    is_int = isinstance(value, (int, np.integer))
    # NCCL reduces device memory only
    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
    t = torch.tensor([value], dtype=torch.int64 if is_int else torch.float64, device=device)
    dist.all_reduce(t, op=ops[op], group=group)
    return int(t.item()) if is_int else float(t.item())
