"""The memory of a Tape's overwrite log and the restoring of what it logged: a kernel recorded
by a Tape (instrumented by autodiff/tape_log.py) logs the address and old value of each field
element it overwrites into a LogBuffer; before the gradients of the kernels recorded earlier,
`restore` puts the old values back into the trees' memory, and `redo` the new ones after.
"""
from __future__ import annotations

import numpy as np

from fluxion.ir.errors import FluxionRuntimeError
from fluxion.runtime import jit, program


class LogBuffer:
    """The log a recorded launch writes into, reused across launches (grown when needed).
    On CUDA it lives in device memory and is copied back after the launch."""

    def __init__(self):
        self.cap = 0
        self.arrays = None
        self.counter = np.zeros(1, dtype=np.int64)
        self.device = jit.get_jit().device if program.on_cuda() else None
        self.dev_arrays = None
        self.dev_counter = self.device.alloc(8) if self.device else None

    def prepare(self, ctx_i, slot, cap):
        if cap > self.cap:
            self.cap = max(cap, 2 * self.cap)
            self.arrays = [np.empty(self.cap, dtype=np.int64) for _ in range(4)]
            if self.device:
                if self.dev_arrays:
                    for p in self.dev_arrays:
                        self.device.free(p)
                self.dev_arrays = [self.device.alloc(8 * self.cap) for _ in range(4)]
                self.ptrs = self.dev_arrays + [self.dev_counter]
            else:
                # addresses taken once: `.ctypes.data` costs about a microsecond per call,
                # and a Tape prepares a log for every recorded launch
                self.ptrs = [a.ctypes.data for a in self.arrays] + [self.counter.ctypes.data]
            self.counter_ptr = self.counter.ctypes.data
        self.counter[0] = 0
        if self.device:
            self.device.to_device(self.dev_counter, self.counter_ptr, 8)
        p = self.ptrs
        ctx_i[slot] = p[0]
        ctx_i[slot + 1] = p[1]
        ctx_i[slot + 2] = p[2]
        ctx_i[slot + 3] = p[3]
        ctx_i[slot + 4] = p[4]
        ctx_i[slot + 5] = cap

    def take(self, kernel_name):
        if self.device:
            self.device.to_host(self.counter_ptr, self.dev_counter, 8)
        n = int(self.counter[0])
        if n == 0:
            return None
        if n > self.cap:
            raise FluxionRuntimeError(
                f"kernel '{kernel_name}' overwrote more recorded field elements than the Tape "
                f"can log; its gradient would be wrong")
        if self.device:
            for a, p in zip(self.arrays, self.dev_arrays):
                self.device.to_host(a.ctypes.data, p, 8 * n)
        return [a[:n].copy() for a in self.arrays]


def _by_tree(addrs):
    """(buffer, offsets, selection) for each field tree holding some of `addrs` (device
    addresses on CUDA: the tree's host copy is brought up to date and marked as newer)."""
    out = []
    for t in program.state().trees:
        base = t.device_ptr if t.device_ptr is not None else t.buffer.ctypes.data
        sel = np.nonzero((addrs >= base) & (addrs < base + t.buffer.nbytes))[0]
        if sel.size:
            if t.device_ptr is not None:
                t.pull()
                t.host_newer = True
            out.append((t, addrs[sel] - base, sel))
    return out


def _bytes_at(offsets, size):
    return offsets[:, None] + np.arange(size)


def restore(log):
    """Put back the logged old values (for an element logged twice, the older one); zero the
    gradients of elements that plain stores replaced. Returns what is needed to redo."""
    addrs, vals, meta, grads = log
    # the first entry of each address holds the value from before the launch
    addrs, first = np.unique(addrs, return_index=True)
    vals, meta, grads = vals[first], meta[first], grads[first]
    sizes = meta & 0xFF
    raw = vals.astype("<i8").view(np.uint8).reshape(-1, 8)
    redo = []
    for tree, offs, sel in _by_tree(addrs):
        buf = tree.buffer
        for size in np.unique(sizes[sel]):
            pick = sizes[sel] == size
            idx = _bytes_at(offs[pick], int(size))
            redo.append((tree, idx, buf[idx].copy()))
            buf[idx] = raw[sel[pick], :int(size)]
    stores = ((meta >> 8) & 1).astype(bool) & (grads != 0)
    if stores.any():
        gaddrs, gsizes = grads[stores], sizes[stores]
        for tree, offs, sel in _by_tree(gaddrs):
            for size in np.unique(gsizes[sel]):
                pick = gsizes[sel] == size
                tree.buffer[_bytes_at(offs[pick], int(size))] = 0
    return redo


def redo(entries):
    for tree, idx, data in entries:
        if tree.device_ptr is not None:
            tree.pull()
            tree.host_newer = True
        tree.buffer[idx] = data
