"""The host memory of an SNode tree: one zeroed buffer, aligned to 64 bytes, with a free row
after its end and one before its start.

Without bounds checks (`debug=False`) a kernel that writes one index past a field's end (`x[n]`
of a field of n rows: differential_evolution does, and Taichi's memory pool hides it) would
otherwise overwrite the allocator's own data and abort the process later ("malloc(): unaligned
tcache chunk"). One step past the end along every axis of the tree's first levels lands in the
free row instead (at most the buffer's size and 1 MiB). The row before the start does the
same for one step below the first index: a stencil reading `c[i - 1, j]` at i = 0
(Taichi's eulerfluid2d example) read memory below the buffer and could crash the process;
it reads zeros there, as the original reads whatever its pool holds."""
from __future__ import annotations

import numpy as np


def slack(root, size):
    """Bytes kept free after a tree of `size` bytes whose top node is `root`."""
    step = 0
    for c in root.children:
        extents = getattr(c, "extents", None)      # a level (a Place has none)
        if extents:
            step = max(step, 2 * c.cell_size * int(np.prod(extents[1:])))
    return (min(step, size, 1 << 20) + 63) // 64 * 64


def allocate(root, size):
    """(the tree's buffer of `size` bytes, the slack bytes after it; as many lie before it)."""
    extra = slack(root, size)
    raw = np.zeros(extra + size + extra + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + extra       # (extra is a multiple of 64)
    return raw[start:start + size], extra
