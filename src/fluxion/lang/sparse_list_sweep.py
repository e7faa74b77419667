"""deactivate_all of interleaved dynamic lists (lang/sparse_lists.py's layout: a dense grid at
the top of its tree holding only the lists, short ones): the Python version, and the same work
in one native call (runtime/list_sweep.py) where lang/sparse_memory.py's _native_plan finds it
applies (a `ListsPlan`, made once per node).

The rules (sparse_memory.deactivate_all's docstring): each list's elements up to its length are
zeroed in place and its length cleared, so a list refilled at once finds its pages; the pages
that the chunks of the lists used since the previous call lie in are kept, and the pages kept
at that call that no list used since go back (nothing wrote them: a write lengthens its list
over its chunk). Only pages wholly among the lists count; the bytes of others around them stay.
The units counted (sparse_counts.note_allocated) are those of the lengths before clearing.
"""
from __future__ import annotations

import ctypes

import numpy as np

from fluxion.lang import sparse_copies, tree_buffer
from fluxion.lang.sparse_counts import note_allocated
from fluxion.lang.sparse_lists import chunk_pages, list_chunk, list_region, list_runs
from fluxion.runtime import block_sweep, list_sweep
from fluxion.runtime.jit import get_jit

# (node, its lengths) -> whether it emptied every list of dynamic node `node`, zeroing its
# elements, by a kernel (set by lang/sparse_kernels.py)
clear_lists = None
# the native call clears lists on the thread pool's threads in ranges of at least this many
# lists (fewer lists: on the calling thread)
GRAIN = 1024


def deactivate_interleaved(s, mask, buf):
    """The Python version for interleaved lists `s` (list_chunk), `mask`: their lengths, `buf`:
    their tree's buffer."""
    length = mask.to_numpy()
    note_allocated(s, length)
    first, end = _whole_pages(s)
    used = np.zeros(max(end - first, 0), dtype=bool)
    for at in chunk_pages(s, length):
        at = at - first
        used[at[(at >= 0) & (at < len(used))]] = True
    if clear_lists is None or not clear_lists(s, mask):
        cells = np.argwhere(length != 0)
        mask.fill(0)
        tree_buffer.zero(buf, *list_runs(s, cells, length[tuple(cells.T)]))
    old = getattr(s, "_kept_pages", None)
    s._kept_pages = used
    if old is not None:
        gone = np.flatnonzero(old & ~used) + first
        if len(gone):
            page = tree_buffer.PAGE
            tree_buffer.release_pages(buf, *tree_buffer.merge_runs(gone * page,
                                                                  (gone + 1) * page))


def _whole_pages(s):
    """The pages [first, end) (indices in the buffer) wholly among the lists of `s`."""
    r_lo, r_hi = list_region(s)
    page = tree_buffer.PAGE
    return -(-r_lo // page), r_hi // page


class ListsPlan:
    """What the native call needs for the interleaved lists `tops` (one call each), and their
    state between calls: the pages kept, shared with the Python version (`_kept_pages`)."""

    def __init__(self, tops, masks, buf):
        self.tops, self.masks = tops, masks
        self.views = [m._view for m in masks]      # (a new materialization makes a new plan)
        self.parts = [self._part(s, m, buf) for s, m in zip(tops, masks)]

    @staticmethod
    def make(tops, mask_of, buf):
        """The plan for lists `tops` (each interleaved, with fields only, not pooled: the
        caller checks), or None where their lengths or layout do not fit the call."""
        masks = [mask_of(s) for s in tops]
        if tree_buffer._address(buf) % tree_buffer.PAGE:
            return None
        for s, m in zip(tops, masks):
            state = m._views()[0][0]
            n = int(np.prod(s.up.shape))
            if m._snode.tree.device_ptr is not None or state is None or \
                    state.dtype != np.int32 or state.size != n or \
                    not state.flags.c_contiguous:
                return None
            # (list k of the states' order must be the k-th of the layout's)
            first, _ = list_runs(s, np.indices(state.shape).reshape(state.ndim, -1).T,
                                 np.ones(n, np.int64))
            if not np.array_equal(first, first[0] + np.arange(n) * list_chunk(s) *
                                  s.cell_size) or first[0] != list_region(s)[0]:
                return None
        return ListsPlan(tops, masks, buf)

    @staticmethod
    def _part(s, mask, buf):
        """(the node, the call's arguments and the arrays they point to) for lists `s`."""
        g, e, n = list_chunk(s), s.cell_size, s.extents[0]
        page = tree_buffer.PAGE
        at = tree_buffer._address(buf)
        r_lo, r_hi = list_region(s)
        first, end = _whole_pages(s)
        p0 = r_lo // page
        pages = np.zeros((r_hi - 1) // page - p0 + 1, np.uint8)
        # (the pages kept by the Python version's last call, if it made one; then shared: it
        # reads them as it left them)
        kept = pages[first - p0:max(end, first) - p0].view(bool)
        old = getattr(s, "_kept_pages", None)
        if old is not None and old.shape == kept.shape:
            kept[:] = old
        s._kept_pages = kept
        state = mask._views()[0][0]
        unit = max(1, getattr(s, "chunk_size", n))
        args = (ctypes.c_int64 * list_sweep.ARGS)(
            state.size, at + r_lo, g, e, n, int(np.prod(s.up.shape)) * g * e,
            unit, page.bit_length() - 1, (at + r_lo) // page,
            first - p0, end - p0, *block_sweep.madvise(), len(pages), 0, 0,
            tree_buffer._address(state), tree_buffer._address(pages), 0, GRAIN,
            unit.bit_length() - 1 if unit & (unit - 1) == 0 else -1)
        ptrs = (ctypes.addressof(args),)
        return s, args, ptrs, (state, pages, kept)

    def current(self):
        """Whether the plan still describes its nodes' memory."""
        return all(m._view is v for m, v in zip(self.masks, self.views))

    def deactivate(self, mask_of):
        """One deactivate_all (the copies' pages as the Python version gives them back)."""
        sweep = list_sweep.function()
        # (the pool of this session's kernels: looked up each call, as ti.init makes a new one)
        pool = getattr(get_jit(), "pool", None)
        pool = 0 if pool is None else pool.parallel_for_addr
        for s, args, ptrs, _ in self.parts:
            args[18], args[19] = pool, GRAIN
            sweep(*ptrs)
            s._peak_allocated = max(args[14], getattr(s, "_peak_allocated", 0))
        sparse_copies.release(self.tops, mask_of, {})
