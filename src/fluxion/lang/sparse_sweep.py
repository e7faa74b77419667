"""deactivate_all of a pointer level in the dense layout in one native call
(runtime/block_sweep.py): the common case of lang/sparse_memory.py's deactivate_all, which
decides where it applies (`Plan` is made once per node) and keeps the Python version for
the rest.

What it covers: one pointer level with only dense and bitmasked levels below it, not pooled,
whose cells lie one after the other in one run of bytes of a reserved tree (a pointer at the
top of its tree: the benchmarks' grids). It does what the Python version does for it, by the
same rules (sparse_memory.deactivate_all's docstring): the blocks active now and at the
previous call are kept and zeroed (every active block, for a set that persists), the pages of
the blocks that changed go back, every `SWEEP_EVERY`-th call (and the first two) all the run's
pages but the kept ones; the states are cleared, those of a bitmasked level below only under
the active blocks where its axes split as the pointer's (else all of them, by `fill`). One
difference: in a page that also holds other bytes, it zeroes a block's written bytes page by
page, where the Python version zeroes a written stretch across two pages whole (committing
the other page when it was clean): it never holds more pages.
"""
from __future__ import annotations

import ctypes

import numpy as np

from fluxion.lang import tree_buffer
from fluxion.runtime import block_sweep

# every this many deactivate_alls of a pointer, all runs of its cells are swept
SWEEP_EVERY = 8


class Plan:
    """What the native call needs for one node, and its state between calls: the blocks
    active at the previous call (`prev`) and those kept then (`kept`)."""

    def __init__(self, top, mask, base, cell_size, n, boxes, fills, below, calls=0):
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
        # (the states' view and geometry of each bitmasked level cleared under the active
        # blocks; the arrays stay referenced, the call takes their addresses)
        self.boxes = [(view, geom, tree_buffer._address(view), tree_buffer._address(geom))
                      for view, geom in boxes]
        self.fills = fills
        # (the bitmasked levels' states fields and their views when planned)
        self.below = [(m, m._view) for m in below]
        # (-1: a pointer never active before its first call, which then does not count, as
        # in the Python version: its states did not exist)
        self.calls = calls
        self.unswept = 0

    def current(self):
        """Whether the plan still describes its node's memory."""
        return self.mask._view is self.views and all(m._view is v for m, v in self.below)

    def run(self):
        """One deactivate_all: (the cells active until now, as a bool array (flat), those
        that were active at the previous call and are not now, how many of those, this plan,
        the number of this call): what lang/sparse_copies.py's release takes."""
        sweep, boxes = block_sweep.functions()
        full = self.calls < 2 or self.unswept >= SWEEP_EVERY - 1
        self.unswept = 0 if full else self.unswept + 1
        self.calls += 1
        a = self.args
        a[4] = full
        sweep(*self.ptrs)
        active = a[7]
        top = self.top
        top._peak_allocated = max(active, getattr(top, "_peak_allocated", 0))
        if active:
            for _, _, view, geom in self.boxes:
                boxes(view, self.ptrs[5], active, geom)
        for f in self.fills:
            f.fill(0)
        return self.now, self.left, a[8], self, self.calls


def box_geometry(split):
    """The geometry block_sweep's clear_boxes takes (an int64 array) for `split`, a bitmasked
    level's states with each axis split into (the pointer's cells, the states in one), or
    None where it does not fit (more than 3 axes, the last not contiguous)."""
    d = split.ndim // 2
    if d > 3 or split.strides[-1] != 1 or split.dtype.itemsize != 1:
        return None
    shape = [1, 1] * (3 - d) + list(split.shape)
    strides = [0, 0] * (3 - d) + list(split.strides)
    return np.array([shape[2], shape[4], strides[0], strides[2], strides[4],
                     shape[1], shape[3], shape[5], strides[1], strides[3]], np.int64)


def contiguous_states(mask, n):
    """The u8 states of a pointer of `n` cells as one array over their memory, or None."""
    view = mask._views()[0][0]
    if view is None or view.dtype != np.uint8 or view.size != n or \
            not view.flags.c_contiguous:
        return None
    return view

