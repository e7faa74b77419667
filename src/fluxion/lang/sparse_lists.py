"""Short dynamic lists interleaved by chunks (see below), so that lists share pages: their
layout's terms, where their chunks' bytes lie, and the pages those fill (lang/sparse_memory.py
gives them back)."""
from __future__ import annotations

import numpy as np

from fluxion.lang import tree_buffer


# -- interleaved lists ---------------------------------------------------------------------
# Short lists (a page or a few) laid out one after the other cost a page each once used, though
# most hold a few elements (particles binned per cell: 16384 lists of 4 KiB holding 12 on
# average commit 34 MiB where the original's pool of chunks takes 2-3 MiB). Such lists are
# interleaved instead: chunk q (elements [q*g, (q+1)*g), a cache line) of every list of the
# grid lies in one run, so a page holds the same chunk of many neighbouring lists and memory
# follows the elements (2.3 MiB there). It is still a fixed layout, an address is still a sum
# of terms (the list's axis split in two), so kernels address the lists as before. Long lists
# stay contiguous: there a page of one list is full, and a page shared by the chunks of lists
# of different lengths would be kept for the longest.
_CHUNK_BYTES = 64
_SHORT_LIST = 4 * tree_buffer.PAGE       # lists up to this many bytes are interleaved
_MAX_ELEMENTS = 1 << 24                  # (a Python-scope view of them is an offset table)


def list_chunk(d):
    """Elements per chunk when the lists of dynamic node `d` are interleaved, or None: its
    parent is a dense level at the top of a reserved tree, holding only `d`, whose cells
    hold fields only, and its lists are short (see above)."""
    p = getattr(d, "up", None)
    if getattr(d, "kind", None) != "dynamic" or getattr(p, "kind", None) != "dense" or \
            not p.extents or p.children != [d] or p.tree is None or p.up is not p.tree.root:
        return None
    if not d.children or any(hasattr(c, "children") or hasattr(c, "places")
                             for c in d.children):
        return None
    if p.tree.buffer is None or not tree_buffer.is_reserved(p.tree.buffer):
        return None
    e, n = d.cell_size, d.extents[0]
    if n * e > _SHORT_LIST or n * int(np.prod(p.extents)) > _MAX_ELEMENTS:
        return None
    g = max(1, _CHUNK_BYTES // e)
    while n % g:
        g -= 1
    return g if n // g >= 2 else None


def interleaved_terms(level):
    """The address terms (axis, extent, stride) of `level` when it is an interleaved list or
    the level holding them (list_chunk), None otherwise (row-major)."""
    d = level if getattr(level, "kind", None) == "dynamic" else \
        (level.children[0] if len(getattr(level, "children", ())) == 1 else None)
    g = list_chunk(d) if d is not None else None
    if g is None:
        return None
    p, e, n = d.up, d.cell_size, d.extents[0]
    cells = int(np.prod(p.extents))
    if level is d:
        return [(d.axes[0], n // g, cells * g * e), (d.axes[0], g, e)]
    strides, acc = [], g * e
    for x in reversed(p.extents):
        strides.append(acc)
        acc *= x
    return list(zip(p.axes, p.extents, strides[::-1]))


def list_runs(d, cells, lengths=None):
    """(starts, ends): the bytes of the chunks of interleaved lists `cells` (k, dims) of
    dynamic node `d` (list_chunk), all of them or those that the `lengths` reach."""
    g, p = list_chunk(d), d.up
    e, n = d.cell_size, d.extents[0]
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, len(p.axes))
    axes = p.space_axes()
    flat = np.zeros(len(cells), dtype=np.int64)
    for a, x in zip(p.axes, p.extents):           # row-major over the level's own axes
        flat = flat * x + cells[:, axes.index(a)]
    off = p.up._offsets[p.up.children.index(p)]
    first = off + flat * (g * e)
    nq = np.full(len(cells), n // g, np.int64) if lengths is None else \
        -(-np.minimum(np.asarray(lengths, np.int64), n) // g)
    q = np.arange(int(nq.sum()), dtype=np.int64) - np.repeat(np.cumsum(nq) - nq, nq)
    starts = np.repeat(first, nq) + q * (int(np.prod(p.extents)) * g * e)
    return starts, starts + g * e


def list_region(d):
    """The bytes [lo, hi) of every list of interleaved dynamic node `d`."""
    p = d.up
    off = p.up._offsets[p.up.children.index(p)]
    return off, off + p.cell_size * int(np.prod(p.extents))


def chunk_pages(s, length):
    """The pages (indices in the buffer) that the chunks of interleaved lists `s` up to their
    `length`s (its state's values) lie in, as arrays. Where a row of chunks (chunk q of every
    list) is whole pages, chunk q of a list lies in the pages of its chunk 0 shifted by q rows,
    so each page of row 0 is used up to the most chunks among the lists there: the work
    follows the pages, not the chunks (list_runs of every chunk: ~0.4 ms for 200k elements)."""
    g, n, page = list_chunk(s), s.extents[0], tree_buffer.PAGE
    nq = -(-np.minimum(length.reshape(-1).astype(np.int64), n) // g)
    row = int(np.prod(s.up.extents)) * g * s.cell_size
    plan = getattr(s, "_page_plan", None)
    if row % page:
        cells = np.argwhere(length != 0)
        lo, hi = list_runs(s, cells, length[tuple(cells.T)])
        return lo // page, (hi - 1) // page
    if plan is None or plan[0] is not s.tree.buffer:
        # (lists in the state's order; a list's chunk 0 lies in pages a to b)
        a, _ = list_runs(s, np.indices(length.shape).reshape(length.ndim, -1).T,
                         np.ones(length.size, np.int64))
        ends = [a // page, (a + g * s.cell_size - 1) // page]
        plan = s._page_plan = (s.tree.buffer, [], row // page)
        for x in ends[:1] if np.array_equal(*ends) else ends:
            order = np.argsort(x, kind="stable")
            seg = np.flatnonzero(np.diff(x[order], prepend=-1))
            plan[1].append((order, seg, x[order][seg]))
    out = []
    for order, seg, pages in plan[1]:
        most = np.maximum.reduceat(nq[order], seg)
        q = np.arange(int(most.max(initial=0)))[:, None]
        out.append((pages[None, :] + q * plan[2])[q < most[None, :]])
    return out
