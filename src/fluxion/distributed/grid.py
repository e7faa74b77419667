"""The geometry of a block decomposition: which block of the global array each rank owns,
with how many halo cells, and who its neighbours are. Pure arithmetic, no torch: the
communication is in decomposition.py.

Ranks are laid out on a Cartesian grid of `parts[0] x parts[1] x ...` in row-major order
(rank = ((c0 * parts[1]) + c1) * parts[2] + ...). Along an axis of n cells split in p parts,
the first n % p blocks have one cell more than the others, so every cell has one owner.
"""
from __future__ import annotations

import math


def dims_create(world_size, ndim):
    """A balanced split of `world_size` ranks over `ndim` axes (as MPI_Dims_create): the
    parts per axis, largest first, whose product is `world_size`. 4 ranks in 2-D: (2, 2); 6:
    (3, 2); a prime p: (p, 1). Balanced parts keep the halo (the blocks' surface) small."""
    if world_size < 1 or ndim < 1:
        raise ValueError(f"dims_create: need world_size >= 1 and ndim >= 1, got {world_size} "
                         f"and {ndim}")
    dims = [1] * ndim
    left = world_size
    # the prime factors, largest first, each to the axis with the fewest parts so far
    factors = []
    f = 2
    while f * f <= left:
        while left % f == 0:
            factors.append(f)
            left //= f
        f += 1
    if left > 1:
        factors.append(left)
    for f in sorted(factors, reverse=True):
        k = min(range(ndim), key=lambda a: (dims[a], a))
        dims[k] *= f
    return tuple(sorted(dims, reverse=True))


def _per_axis(value, ndim, what, kind):
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(f"{what} has {len(value)} entries for {ndim} axes")
        out = tuple(value)
    else:
        out = (value,) * ndim
    for v in out:
        if not isinstance(v, kind):
            raise TypeError(f"{what} must be {kind.__name__} (or one per axis), got {v!r}")
    return out


class Grid:
    """The blocks of `global_shape` over `world_size` ranks.

    `parts`: ranks per axis (None: `dims_create`); `halo`: ghost cells on each side, one
    int for every axis or one per axis (0: no halo along that axis); `periodic`: whether the
    domain wraps around along each axis (one bool or one per axis)."""

    def __init__(self, global_shape, world_size, parts=None, halo=1, periodic=True):
        shape = tuple(int(n) for n in global_shape)
        if not shape or any(n < 1 for n in shape):
            raise ValueError(f"global_shape must be a non-empty tuple of positive sizes, got "
                             f"{global_shape!r}")
        ndim = len(shape)
        if parts is None:
            parts = dims_create(world_size, ndim)
        parts = _per_axis(parts, ndim, "parts", int)
        if math.prod(parts) != world_size:
            raise ValueError(f"parts {parts} make {math.prod(parts)} blocks but the group has "
                             f"{world_size} ranks")
        halo = _per_axis(halo, ndim, "halo", int)
        if any(h < 0 for h in halo):
            raise ValueError(f"halo widths must be >= 0, got {halo}")
        periodic = _per_axis(periodic, ndim, "periodic", bool)
        self.global_shape, self.world_size = shape, world_size
        self.parts, self.halo, self.periodic = parts, halo, periodic
        for d, (n, p, h) in enumerate(zip(shape, parts, halo)):
            if p > n:
                raise ValueError(f"axis {d}: {n} cells cannot be split in {p} parts")
            # a halo wider than a block would need cells of the neighbour's neighbour
            if h and (p > 1 or periodic[d]) and n // p < h:
                raise ValueError(f"axis {d}: blocks of {n // p} cells are narrower than the "
                                 f"halo ({h}); use fewer parts or a larger domain")

    @property
    def ndim(self):
        return len(self.global_shape)

    def coords(self, rank):
        """The block coordinates of `rank` on the grid of parts."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is not in 0..{self.world_size - 1}")
        out = []
        for p in reversed(self.parts):
            out.append(rank % p)
            rank //= p
        return tuple(reversed(out))

    def rank_of(self, coords):
        r = 0
        for c, p in zip(coords, self.parts):
            r = r * p + c
        return r

    def block(self, rank):
        """(start, size): the global index of the block's first cell and its size, per axis."""
        start, size = [], []
        for n, p, c in zip(self.global_shape, self.parts, self.coords(rank)):
            q, r = divmod(n, p)
            start.append(c * q + min(c, r))
            size.append(q + (1 if c < r else 0))
        return tuple(start), tuple(size)

    def neighbors(self, rank, axis):
        """(lower, upper): the ranks owning the blocks before and after `rank`'s along `axis`
        (wrapping around on a periodic axis), None past a non-periodic edge. A rank may be
        its own neighbour (one part on a periodic axis)."""
        c = list(self.coords(rank))
        p = self.parts[axis]
        out = []
        for step in (-1, 1):
            k = c[axis] + step
            if not 0 <= k < p:
                if not self.periodic[axis]:
                    out.append(None)
                    continue
                k %= p
            out.append(self.rank_of(c[:axis] + [k] + c[axis + 1:]))
        return tuple(out)

    def padded_shape(self, rank):
        """The block's shape with its halo on both sides of every axis."""
        return tuple(n + 2 * h for n, h in zip(self.block(rank)[1], self.halo))

    def interior(self, rank):
        """Slices of a padded block that select the cells the rank owns."""
        return tuple(slice(h, h + n) for n, h in zip(self.block(rank)[1], self.halo))
