"""Torch tensors over the memory of what a halo exchange may be given: a fluxion field, a
ti.ndarray, a numpy array or a torch tensor.

The exchange works on torch tensors, since those are what torch.distributed sends. Where
the memory is the host's (the CPU backend), the tensors are views of it: nothing is copied
in or out, and a slab that is contiguous in memory (a block of whole rows, axis 0) is sent
and received in place. Where it is not (a field on the CUDA backend, whose kernels read the
device copy; a sparse or bit-packed field; an unusual layout), the data goes through a host
copy that is written back afterwards, which costs a copy of the whole array each way.
"""
from __future__ import annotations

import numpy as np

from fluxion.lang.field import Field, MatrixField, ScalarField
from fluxion.lang.ndarray import Ndarray


def _torch():
    import torch
    return torch


def _host_view(field):
    """The numpy views of a field's components in its tree's host buffer, when they are the
    memory its kernels use; else None. (The field's own views, which Python-scope indexing
    reads through, are what is reused here.)"""
    if type(field) not in (ScalarField, MatrixField) or field._quant:
        return None
    if field._sparse_levels():
        return None
    views = field._views()
    if field._snode.tree.device_ptr is not None:
        return None
    out = []
    for view, _ in views:
        if view is None or any(s < 0 or s % view.itemsize for s in view.strides):
            return None
        out.append(view)
    return out


class Tensors:
    """The torch tensors to exchange for one object (one per field component), and how to
    write them back (`commit`) where they are copies."""

    def __init__(self, tensors, commit=None, zero_copy=True):
        self.tensors = tensors
        self._commit = commit
        self.zero_copy = zero_copy

    def commit(self):
        if self._commit is not None:
            self._commit()


def tensors_of(x, shape):
    """`Tensors` over `x`, whose leading dimensions must be `shape` (the padded block); any
    further dimensions are the elements' (a vector field's components, a tensor's
    channels) and travel with their cell."""
    torch = _torch()
    if isinstance(x, Field):
        if tuple(x.shape) != tuple(shape):
            raise ValueError(f"the field has shape {tuple(x.shape)} but this rank's padded "
                             f"block is {tuple(shape)}")
        views = _host_view(x)
        if views is not None:
            return Tensors([torch.from_numpy(v) for v in views])
        host = np.ascontiguousarray(x.to_numpy())
        return Tensors([torch.from_numpy(host)], lambda: x.from_numpy(host), zero_copy=False)
    if isinstance(x, Ndarray):
        x = x.arr
    if isinstance(x, np.ndarray):
        if not x.flags.writeable:
            raise ValueError("the halo exchange writes the array: it must be writable")
        t = torch.from_numpy(x) if all(s >= 0 for s in x.strides) else None
        if t is None:
            host = np.ascontiguousarray(x)

            def back():
                x[...] = host
            t, commit = torch.from_numpy(host), back
        else:
            commit = None
        x_t = Tensors([t], commit, zero_copy=commit is None)
    elif isinstance(x, torch.Tensor):
        x_t = Tensors([x.detach()])
    else:
        raise TypeError(f"expected a fluxion field, a ti.ndarray, a numpy array or a torch "
                        f"tensor, got {type(x).__name__}")
    t = x_t.tensors[0]
    if tuple(t.shape[:len(shape)]) != tuple(shape):
        raise ValueError(f"the array has shape {tuple(t.shape)} but this rank's padded block "
                         f"is {tuple(shape)} (element dimensions may follow)")
    return x_t
