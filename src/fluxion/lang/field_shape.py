"""The shape arguments of `ti.field` and `ti.Matrix.field` (shape, offset, order) and the
chain of dense levels that `shape=` places a field in."""
from __future__ import annotations

import numpy as np

from fluxion.ir.errors import FluxionCompilationError
from fluxion.lang import snode as SN


def _shape_tuple(shape):
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _dense_chain(root, shape, order):
    """The node a field of `shape` is placed in: one dense level over all axes, or with
    `order` one level per axis, outermost first (order="ji": column-major)."""
    if not shape:
        return root
    if order is None:
        return root.dense(SN.axes(*range(len(shape))), shape)
    node = root
    for ch in order:
        k = "ijklmnop".index(ch)
        node = node.dense(SN.axes(k), shape[k])
    return node


def check_offset(shape, offset):
    """An offset needs a shape of as many dimensions."""
    if offset is not None:
        if shape is None:
            # (it was dropped silently: placed later, the field had no offset)
            raise FluxionCompilationError("shape cannot be None when offset is set")
        n_off = 1 if isinstance(offset, (int, np.integer)) else len(tuple(offset))
        if n_off != len(shape):
            raise FluxionCompilationError(
                f"The dimensionality of shape and offset must be the same: shape {shape}, "
                f"offset {offset}")


def _check_order(shape, order):
    """`order="jik"`: the axes' order in memory (values are indexed the same either way), as
    the original system checks it."""
    if order is None:
        return
    if shape is None:
        raise FluxionCompilationError("shape cannot be None when order is set")
    shape = _shape_tuple(shape)
    if len(shape) != len(order):
        raise FluxionCompilationError(f"The dimensionality of shape and order must be the same: "
                                      f"shape {shape}, order {order!r}")
    if len(set(order)) != len(order):
        raise FluxionCompilationError(f"The axes in order must be different: {order!r}")
    axes = "ijklmnop"[:len(shape)]
    for a in order:
        if a not in axes:
            raise FluxionCompilationError(f"Invalid axis {a!r} in order {order!r}: the axes "
                                          f"of a {len(shape)}-D field are {', '.join(axes)}")
