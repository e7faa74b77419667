"""deactivate_all of a pointer level in the dense layout in one native call
(runtime/block_sweep.py; runtime/levels_sweep.py for a pointer with pointers below it): the
common cases of lang/sparse_memory.py's deactivate_all, which decides where they apply (a
`Plan` or a `LevelsPlan` is made once per node) and keeps the Python version for the rest.

What it covers: one pointer level with only dense and bitmasked levels below it, not pooled,
whose cells lie one after the other in one run of bytes of a reserved tree (a pointer at the
top of its tree: the benchmarks' grids). It does what the Python version does for it, by the
same rules (sparse_memory.deactivate_all's docstring): the blocks active now and at the
previous call are kept and zeroed (every active block, for a set that persists), the pages of
the blocks that changed go back, every `SWEEP_EVERY`-th call (and the first two) all the run's
pages but the kept ones; the states are cleared (a bitmasked level's below lie in the blocks,
lang/sparse_block_states.py, and are cleared with them). One difference: in a page that also holds other bytes, it zeroes a block's written bytes page by
page, where the Python version zeroes a written stretch across two pages whole (committing
the other page when it was clean): it never holds more pages.
"""
from __future__ import annotations

import ctypes

import numpy as np

from fluxion.lang import sparse_copies, tree_buffer
from fluxion.runtime import block_sweep, levels_sweep
from fluxion.runtime.jit import get_jit

# every this many deactivate_alls of a pointer, all runs of its cells are swept
SWEEP_EVERY = 8
# a run of a LevelsPlan this long or longer goes back in chunks of this many bytes (a multiple
# of the page size) on the thread pool's threads (runtime/levels_sweep.py)
MADVISE_CHUNK = 32 << 20


class Plan:
    """What the native call needs for one node, and its state between calls: the blocks
    active at the previous call (`prev`) and those kept then (`kept`)."""

    def __init__(self, top, mask, base, cell_size, n, calls=0):
        self.top, self.mask = top, mask
        self.tops = [top]
        self.views = mask._view            # (a new materialization makes a new plan)
        self.prev = np.zeros(n, np.uint8)
        self.kept = np.zeros(n, np.uint8)
        self.gone = np.zeros(n, np.uint8)  # active at the previous call, not now
        self.act = np.zeros(n, np.int64)   # the flat indices of the active cells
        page = tree_buffer.PAGE
        self.pages = np.zeros((base + n * cell_size + page - 1) // page - base // page + 1,
                              np.uint8)
        # (a ctypes array: its items read as Python ints, without NumPy's scalars)
        self.args = (ctypes.c_int64 * block_sweep.ARGS)(
            n, base, cell_size, page, 0, *block_sweep.madvise())
        state = mask._views()[0][0]
        self.ptrs = tuple(tree_buffer._address(a) for a in (state, self.prev, self.kept,
                                                             self.gone, self.pages, self.act)
                          ) + (ctypes.addressof(self.args),)
        # (what run returns: views made once, NumPy calls costing tens of microseconds each
        # with cold caches)
        self.now, self.left = self.prev.view(bool), self.gone.view(bool)
        # (-1: a pointer never active before its first call, which then does not count, as
        # in the Python version: its states did not exist)
        self.calls = calls
        self.unswept = 0

    def current(self):
        """Whether the plan still describes its node's memory."""
        return self.mask._view is self.views

    def deactivate(self, mask_of):
        """One deactivate_all, with the per-thread copies' pages (lang/sparse_copies.py)."""
        sparse_copies.release(self.tops, mask_of, {self.top: self.run()})

    def run(self):
        """One deactivate_all: (the cells active until now, as a bool array (flat), those
        that were active at the previous call and are not now, how many of those, this plan,
        the number of this call): what lang/sparse_copies.py's release takes."""
        sweep = block_sweep.function()
        full = self.calls < 2 or self.unswept >= SWEEP_EVERY - 1
        self.unswept = 0 if full else self.unswept + 1
        self.calls += 1
        a = self.args
        a[4] = full
        sweep(*self.ptrs)
        active = a[7]
        top = self.top
        top._peak_allocated = max(active, getattr(top, "_peak_allocated", 0))
        return self.now, self.left, a[8], self, self.calls


class LevelsPlan:
    """deactivate_all of a pointer `top` with pointer levels below it, its cells in a few runs
    of bytes, no lists and no pools there (lang/sparse_memory.py's _native_plan decides), in
    one native call (runtime/levels_sweep.py), by the Python version's rules for such a tree:
    no block is kept (the top's blocks hold whole pointers), every level's states are counted
    (the pointers' peak, sparse_counts.note_allocated) and cleared, and each run's whole pages
    go back, its partial end pages zeroed where written. `masks`: the states fields of every
    sparse level at or below the node; `runs`: (starts, ends) of the runs, byte offsets in
    the tree's buffer `buf`."""

    def __init__(self, top, nodes, masks, buf, runs):
        self.top, self.tops = top, [top]
        self.masks, self.views = masks, [m._view for m in masks]
        self.states = [m._views()[0][0] for m in masks]    # (referenced: the call takes them)
        self.sizes = [v.size for v in self.states]
        self.pointers = [(k, s) for k, s in enumerate(nodes) if s.kind == "pointer"]
        self.levels = (ctypes.c_int64 * (2 * len(masks)))(
            *[x for v in self.states for x in (tree_buffer._address(v), v.size)])
        at = tree_buffer._address(buf)
        self.runs = (ctypes.c_int64 * (2 * len(runs[0])))(
            *[at + int(x) for pair in zip(*runs) for x in pair])
        self.sys = (ctypes.c_int64 * levels_sweep.SYS)(tree_buffer.PAGE, *block_sweep.madvise(),
                                                       0, 0, MADVISE_CHUNK)
        self.args = (ctypes.addressof(self.levels), len(masks), ctypes.addressof(self.runs),
                     len(runs[0]), ctypes.addressof(self.sys))

    def current(self):
        """Whether the plan still describes its node's memory."""
        return all(m._view is v for m, v in zip(self.masks, self.views))

    def deactivate(self, mask_of):
        """One deactivate_all (the copies' pages, lang/sparse_copies.py, as the Python version
        gives them back: whole, the top's cells holding pointers)."""
        # (the pool of this session's kernels: looked up each call, as ti.init makes a new one)
        pool = getattr(get_jit(), "pool", None)
        self.sys[4] = 0 if pool is None else pool.parallel_for_addr
        levels_sweep.function()(*self.args)
        counts = self.levels
        for k, s in self.pointers:
            s._peak_allocated = max(counts[2 * k + 1], getattr(s, "_peak_allocated", 0))
        for k, n in enumerate(self.sizes):
            counts[2 * k + 1] = n
        sparse_copies.release(self.tops, mask_of, {})


def contiguous_states(mask, n):
    """The u8 states of a pointer of `n` cells as one array over their memory, or None."""
    view = mask._views()[0][0]
    if view is None or view.dtype != np.uint8 or view.size != n or \
            not view.flags.c_contiguous:
        return None
    return view

