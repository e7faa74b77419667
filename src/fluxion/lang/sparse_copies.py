"""The memory of the per-thread copies that the scatter pass (passes/scatter.py) makes of a
field under pointer levels: laid out by the field's cells in reserved memory
(lang/launch_values.py), so they commit the pages of the cells scattered into, and given back
with the cells by deactivate_all (lang/sparse_memory.py), so they follow the active cells as
the tree does."""
from __future__ import annotations

import numpy as np

from fluxion.lang import tree_buffer
from fluxion.runtime import scratch


def _dense_below(n):
    """Whether only dense levels and places lie below node `n`."""
    return all(getattr(c, "kind", "dense") == "dense" and _dense_below(c)
               for c in getattr(n, "children", ()))


def release(tops, mask_of, known=None):
    """Give back pages of the per-thread copies (passes/scatter.py) of fields under pointers
    `tops` that hold no active cell. A scatter activates the cells it adds into and its
    merge zeroes their copies, so between launches a copy holds zeros, in pages committed
    where some launch scattered: those of the cells active at the previous deactivate_all
    (`_dirty_cells`, or every cell before the first) that are inactive now go back, as the
    whole pages in the runs of inactive cells around them, so that the copies' memory
    follows the active cells as the tree's does (a particle blob that moves leaves no
    committed copies behind). Copies whose cells are not one pointer's go back whole.
    `known`: {pointer: (its active cells (flat bools), those active at its previous
    deactivate_all and not now, how many, the caller's plan, the number of its call)} where
    the caller read them already and has cleared the states (lang/sparse_sweep.py)."""
    made = scratch.buffers()
    key = (id(made), len(made))          # (copies are only ever added to a process state)
    got = getattr(tops[0], "_copies", None) if tops else None
    if got is None or got[0] != key:
        got = (key, [_copies_plan(s, hidden) for place, hidden in made.values()
                     if place is not None for s in tops if s in place.snode.path()])
        if tops:
            tops[0]._copies = got
    active = {}
    for s, hidden, buf, per_cell in got[1]:
        if buf is None or buf is not hidden.snode.tree.buffer:
            continue
        if per_cell is None:
            tree_buffer.release_pages(buf, [0], [buf.nbytes])
            continue
        field = hidden.field
        dirty = getattr(field, "_dirty_cells", None)
        if known is not None and s in known:
            now, left, count, plan, call = known[s]
            # (`now` is the caller's array, rewritten at its next call: the copies are
            # marked with the call instead, and after the one before this, what went
            # inactive since is `left`)
            synced = isinstance(dirty, tuple) and dirty[0] is plan and dirty[1] == call - 1
            field._dirty_cells = (plan, call)
            if synced and not count:
                continue
            gone = left if synced else _gone(dirty, now)
        else:
            if s not in active:
                active[s] = mask_of(s).to_numpy().reshape(-1) != 0
            now = active[s]
            field._dirty_cells = now
            gone = _gone(dirty, now)
        if not gone.any():
            continue
        # the runs of inactive cells, those that hold a cell gone since
        edges = np.flatnonzero(np.diff((~now).view(np.int8), prepend=0, append=0))
        starts, ends = edges[0::2], edges[1::2]
        hit = np.add.reduceat(gone.view(np.int8), starts) > 0
        lo, hi = starts[hit] * per_cell, ends[hit] * per_cell
        for t in range(field.shape[0]):
            at = t * now.size * per_cell
            tree_buffer.release_pages(buf, lo + at, hi + at)


def _gone(dirty, now):
    """The cells active in `dirty` (the cells active when the copies were last looked at; not
    an array: unknown, so every cell) and not in `now`."""
    if not isinstance(dirty, np.ndarray) or dirty.shape != now.shape:
        return ~now
    return dirty & ~now


def _copies_plan(s, hidden):
    """(s, the copies' hidden place, their buffer (None: not reserved), the bytes of a
    cell of a thread's copy (None: their cells are not `s`'s, so they go back whole))."""
    hidden.field._materialize()
    buf = hidden.snode.tree.buffer
    if not tree_buffer.is_reserved(buf):
        return s, hidden, None, None
    cells = getattr(hidden.field, "_copy_cells", None)
    n = hidden.field.shape[0] * int(np.prod(s.shape))
    if s.kind != "pointer" or not _dense_below(s) or cells != tuple(s.shape) or buf.nbytes % n:
        return s, hidden, buf, None
    return s, hidden, buf, buf.nbytes // n
