"""Instrumentation of kernels recorded by a Tape, so that programs overwriting what an
earlier recorded kernel read still get correct gradients (beyond the original system, which
forbids them and gives silently wrong gradients).

Every element read is marked in its field's read mask; every write first runs a TapeLogStmt,
which marks the write mask and, when the element was read before (or written, for a plain
store), logs its address and old value. The Tape restores logged values, newest first, before the
gradients of the kernels that ran earlier, zeroing the gradient of elements that a plain
store replaced; after the backward pass it puts the final values back.
"""
from __future__ import annotations

import numpy as np

from fluxion.autodiff.access_check import (FIELD_PTRS, _insert_before, assert_unread,
                                           mark_read, mask_ptr)
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionRuntimeError


def run(kernel, cfg=None):
    written = set()
    # the real functions the kernel calls access fields too (and their bodies are the
    # kernel's own copies: instrumenting them changes no other kernel)
    for s in list(S.walk_all(kernel)):
        if isinstance(s, S.GlobalLoadStmt) and isinstance(s.ptr, FIELD_PTRS):
            # a plain store of 1: cheap, and repeated marks of one element merge
            mark_read(s)
        elif isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                isinstance(s.ptr, S.QuantPtrStmt):
            # a quantized element shares its word with others: its old value is not logged,
            # so overwriting one that an earlier recorded kernel read is an error rather than
            # a wrong gradient for that kernel
            assert_unread(kernel, s, (
                f"kernel '{kernel.name}' overwrites an element of the quantized field "
                f"{s.ptr.place!r} that a kernel recorded by the Tape (an earlier one, or this "
                f"one) read: the Tape cannot restore quantized values, so that kernel's "
                f"gradient would be wrong (write it in a kernel outside the Tape, or read a "
                f"copy in a field of a primitive type)"))
        elif isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                isinstance(s.ptr, S.GlobalPtrStmt) and not s.ptr.place.field.is_grad:
            place = s.ptr.place
            rptr = _insert_before(s, mask_ptr(s.ptr, s.loc, "read"))
            wptr = _insert_before(s, mask_ptr(s.ptr, s.loc, "write"))
            gptr = None
            gp = place.grad_place()
            if gp is not None:
                gptr = _insert_before(s, S.GlobalPtrStmt(list(s.ptr.indices), gp,
                                                         ret_type=gp.dtype, loc=s.loc))
            kind = "store" if isinstance(s, S.GlobalStoreStmt) else "atomic"
            _insert_before(s, S.TapeLogStmt(s.ptr, rptr, wptr, gptr, kind, loc=s.loc))
            written.add(place)
    # room for every written element once, twice over (several writes to one element in a
    # launch are a race anyway)
    kernel.tape_log_capacity = 2 * sum(int(np.prod(p.field.shape or (1,))) for p in written) + 16
    return True


class LogBuffer:
    """The log a recorded launch writes into, reused across launches (grown when needed).
    On CUDA it lives in device memory and is copied back after the launch."""

    def __init__(self):
        from fluxion.lang import runtime
        self.cap = 0
        self.arrays = None
        self.counter = np.zeros(1, dtype=np.int64)
        self.device = runtime.get_jit().device if runtime.on_cuda() else None
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
    from fluxion.lang import runtime
    out = []
    for t in runtime.state().trees:
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
