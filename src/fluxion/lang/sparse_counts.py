"""What the sparse levels hold, counted: the allocation units in use (`snode.
_num_dynamically_allocated`), the hidden state fields of a tree and the bytes a tree's memory
holds (`ti.sparse.memory_in_use`). Kept apart from lang/sparse_memory.py, which gives the
memory back and samples these counts before each deactivation."""
from __future__ import annotations

import numpy as np

from fluxion.lang import tree_buffer


def chunked(node, chunk_size):
    """A dynamic node with its allocation unit (`chunk_size` elements; the whole list when
    None, as in the original)."""
    node.chunk_size = int(chunk_size) if chunk_size else node.extents[0]
    return node


def allocated(s, m=None):
    """How many of sparse node `s`'s allocation units are in use now: its active cells (a
    pointer or bitmasked node), the chunks its lists hold (a dynamic node). `m`: its states'
    values, when the caller has read them."""
    if s._active_mask is None:
        return 0
    m = s._active_mask.to_numpy() if m is None else m
    if s.kind == "dynamic":
        c = max(1, getattr(s, "chunk_size", s.extents[0]))
        return int(((m.astype(np.int64) + c - 1) // c).sum())
    return int(np.count_nonzero(m))


def note_allocated(s, m=None):
    """The most units node `s` had in use at once, as far as Python sees (sampled before
    each deactivation, and now); 0 for a bitmasked node, whose memory is dense. (`m`: see
    allocated.)"""
    if s.kind == "bitmasked":
        return 0
    s._peak_allocated = max(allocated(s, m), getattr(s, "_peak_allocated", 0))
    return s._peak_allocated


def peak_allocated(s):
    """`snode._num_dynamically_allocated`: the original counts the slots its pool ever handed
    out, and reuses freed ones, so with cells freed and allocated again it is the most cells
    (or list chunks) active at once; here as sampled by `note_allocated`."""
    return 0 if s.kind == "dense" else note_allocated(s)


def _sparse_nodes(node):
    for c in getattr(node, "children", ()):
        if getattr(c, "kind", "dense") != "dense":
            yield c
        yield from _sparse_nodes(c)


def state_fields(tree):
    """The hidden fields of the cell states of `tree`'s sparse levels (and of their pools)
    that have storage in trees of their own (not those in the blocks of a pointer level:
    lang/sparse_block_states.py)."""
    out = []
    for s in _sparse_nodes(tree.root):
        pool = s._pool
        for m in [s._active_mask] + ([pool.table, pool.alloc, pool.free] if pool else []):
            if m is not None and m._snode is not None and m._snode.tree is not tree and \
                    m._snode.tree.buffer is not None:
                out.append(m)
    return out


def tree_bytes(tree):
    """(bytes reserved, bytes in use) of a tree's host memory, with the hidden fields of its
    sparse levels' states (dense)."""
    if tree.buffer is None:
        return 0, 0
    total, used = tree.buffer.nbytes, tree_buffer.bytes_in_use(tree.buffer)
    for m in state_fields(tree):
        total += m._snode.tree.buffer.nbytes
        used += m._snode.tree.buffer.nbytes
    return total, used
