"""`ti.sparse`: the original's sparse-grid helpers, over bitmasked SNodes."""
from __future__ import annotations

import numpy as np

from fluxion.lang import runtime, snode as SN, sparse, sparse_counts
from fluxion.lang.struct import struct_field


def grid(field_dict, shape):
    """A 2-D or 3-D struct field (members `name: type` of `field_dict`) placed on a
    bitmasked node of `shape`: cells become active when written."""
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise ValueError("Only 2D and 3D sparse grids are supported")
    x = struct_field(field_dict)
    SN.root.bitmasked(SN.ij if len(shape) == 2 else SN.ijk, shape).place(x)
    return x


def usage(x):
    """The fraction (an f32, in [0, 1]) of the cells of sparse grid `x` that are active."""
    node = sparse._node_of(x)
    active = sparse.active_array(next(iter(x._leaves())) if hasattr(x, "_leaves") else x)
    count = int(active.sum()) if active is not None else int(np.prod(node.shape))
    return (np.float32(count) / np.float32(np.prod(node.shape))).item()


def memory_in_use(x=None):
    """Bytes of host memory that the SNode tree of field or SNode `x` holds now (its buffer's
    pages that were written and not given back, and its sparse levels' state fields); of
    every tree when `x` is None. A tree with a pointer or dynamic level on the CPU holds the
    pages of its active cells only (lang/sparse_memory.py); any other tree, its dense size.
    (fluxion's own query: the original prints its allocator's figures instead,
    `ti.profiler.memory_profiler.print_memory_profiler_info()`.)"""
    if x is None:
        trees = [t for t in runtime.state().trees if not t.destroyed]
        masks = {id(m._snode.tree) for t in trees for m in sparse_counts.state_fields(t)}
        return sum(sparse_counts.tree_bytes(t)[1] for t in trees if id(t) not in masks)
    node = x if hasattr(x, "tree") else x.snode
    tree = node.tree
    tree.materialize()
    return sparse_counts.tree_bytes(tree)[1]


__all__ = ["grid", "usage", "memory_in_use"]
