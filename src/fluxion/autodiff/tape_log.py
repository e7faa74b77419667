"""Instrumentation of kernels recorded by a Tape, so that programs overwriting what an
earlier recorded kernel read still get correct gradients (beyond the original system, which
forbids them and gives silently wrong gradients).

Every element read is marked in its field's read mask; every write first runs a TapeLogStmt,
which marks the write mask and, when the element was read before (or written, for a plain
store), logs its address and old value. The Tape restores logged values, newest first, before the
gradients of the kernels that ran earlier, zeroing the gradient of elements that a plain
store replaced; after the backward pass it puts the final values back (the log's memory and
the restoring are the runtime's: runtime/tape_log.py).
"""
from __future__ import annotations

import numpy as np

from fluxion.autodiff.access_check import (FIELD_PTRS, _insert_before, assert_unread,
                                           mark_read, mask_ptr)
from fluxion.ir import stmts as S


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
