"""`ti.sparse`: the original's sparse-grid helpers, over bitmasked SNodes."""
from __future__ import annotations

import numpy as np

from fluxion.lang import snode as SN, sparse
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


__all__ = ["grid", "usage"]
