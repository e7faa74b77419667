"""The cell states of a bitmasked level below a pointer level, kept in the pointer's blocks.

Why (issue 16): a bitmasked level's states were a u8 field of their own over the level's
whole index space (lang/sparse.py's `mask_of`), so they cost a byte per cell of the domain
wherever a block had ever been active: a 2048^2 grid in 16^2 pointer blocks held 4 MiB of
states for a band of 1 MiB of data (the sparse band benchmark: 5.3 MiB in use against the
original's 1.5). Placed as a hidden dense level in each cell of the nearest pointer above,
they are bytes of that cell, so they follow its block: committed when it is written, given
back or zeroed with it (lang/sparse_memory.py, the native sweeps), taken from and returned
to its pool (lang/sparse_pool.py). A block that is not active then reads as cells that are
not active, as in the original, which keeps a bitmask in the block. A byte a cell (not a
bit): kernels set states with plain stores from many threads.

Which nodes: a bitmasked node whose levels up to the nearest pointer above are dense or
bitmasked (a list between them would make the states' index space the list's). The states
field keeps the node's index space, so everything that reads or writes it by index (the
IR's state loads and stores, Python-scope element access) is unchanged; what handles the
states as one array over their own memory (`fill`, the native sweeps' state arrays) must
not be used on these (`in_blocks`): deactivate_all clears them with their blocks, or, for
a node below the pointer, under the pointer's active cells only (`clear`), writing no byte
of an inactive block (which would commit its page).
"""
from __future__ import annotations

import numpy as np

from fluxion.ir import types as T
from fluxion.lang import tree_buffer
from fluxion.lang.snode_nodes import SNode

# (dtype, name) -> an unplaced hidden field (set by lang/sparse.py, which builds on fields:
# trees, which call `place`, cannot import them)
new_field = None


def block_pointer(s):
    """The pointer node whose cells would hold bitmasked node `s`'s states, or None."""
    if getattr(s, "kind", None) != "bitmasked":
        return None
    n = s.up
    while isinstance(n, SNode) and n.up is not None:
        if n.kind == "pointer":
            return n
        if n.kind == "dynamic":
            return None
        n = n.up
    return None


def in_blocks(s):
    """The pointer whose blocks hold sparse node `s`'s states (placed), or None."""
    return getattr(s, "_states_in", None)


def place(root):
    """Before the tree under `root` is laid out: the states of each bitmasked node with a
    pointer above it become a hidden u8 field placed in a hidden dense level of that
    pointer's cells, whose extents along each axis are those of the levels from below the
    pointer down to the node (so the field's index space is the node's)."""
    for s in list(_nodes(root)):
        p = block_pointer(s)
        if p is None or s._active_mask is not None:
            continue
        ext = {}
        n = s
        while n is not p:
            for a, e in zip(n.axes, n.extents):
                ext[a] = ext.get(a, 1) * e
            n = n.up
        axes = tuple(sorted(ext))
        holder = SNode(p, axes, tuple(ext[a] for a in axes))
        holder._hidden = True
        p.children.append(holder)
        f = new_field(T.u8, "<active cells of a bitmasked node, in its pointer's blocks>")
        f._place_in(holder)
        s._active_mask = f
        s._states_in = p


def _nodes(n):
    for c in getattr(n, "children", ()):
        if isinstance(c, SNode):
            yield c
            yield from _nodes(c)


def cleared_with(s, node):
    """Whether deactivate_all of `node` clears the states of sparse node `s` (below it) with
    the blocks that hold them: they are in the blocks of a pointer at or below `node`."""
    p = in_blocks(s)
    while p is not None:
        if p is node:
            return True
        p = p.up if isinstance(p.up, SNode) else None
    return False


def clear(s):
    """Zero the states of bitmasked node `s` (in the blocks of its pointer) under the
    pointer's active cells, in place: an inactive block's states are 0 already (its bytes
    were given back or zeroed when it was deactivated), and writing them would commit
    them."""
    p, f = in_blocks(s), s._active_mask
    if p._active_mask is None:
        return
    cells = np.argwhere(p._active_mask.to_numpy() != 0)
    if not len(cells):
        return
    place, holder = f.places[0], f.places[0].snode
    size = holder.cell_size * int(np.prod(holder.extents))
    buf = s.tree.buffer
    if place.pool is not None:
        # (a pooled block's states start its slot; a cell without one has none written)
        pp = place.pool
        slots = pp.pool.table.to_numpy()[tuple(cells.T)].astype(np.int64)
        starts = pp.base + slots[slots > 0] * pp.pool.span
    else:
        # the first state of each block: the block's index times the holder's extents
        p_axes, axes = p.space_axes(), holder.space_axes()
        ext = dict(zip(holder.axes, holder.extents))
        first = np.zeros((len(cells), len(axes)), np.int64)
        for d, a in enumerate(axes):
            if a in p_axes:
                first[:, d] = cells[:, p_axes.index(a)] * ext.get(a, 1)
        starts = np.full(len(cells), place.addr - tree_buffer._address(buf), np.int64)
        for t in place.terms:
            starts += first[:, t.axis] // t.divisor % t.extent * t.stride
    tree_buffer.zero(buf, starts, starts + size)
