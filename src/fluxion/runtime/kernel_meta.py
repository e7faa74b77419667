"""A compiled kernel's launch metadata, apart from the JIT: the offline cache rebuilds it from
disk (lang/kernel_cache.py) without loading the code generator or LLVM."""
from __future__ import annotations

from fluxion.ir.evaluate import host_expr


class KernelMeta:
    """What launching a compiled kernel takes besides its machine code: plain data (and the
    ArrayArgs of its array arguments, the hidden fields of its per-thread copies), made from
    the IR at compile time, so that a kernel loaded from the offline cache needs no IR."""
    __slots__ = ("name", "entry", "errors", "ret_types", "layout", "uses_random", "prints",
                 "private_arrays", "private_trips", "private_threads", "private_copies",
                 "private_fields", "tape_log_capacity")

    @classmethod
    def of(cls, kernel, ml, entry, prints):
        m = cls()
        m.name = kernel.name
        m.entry = entry
        m.errors = list(kernel.errors)
        m.ret_types = tuple(kernel.ret_types)
        m.layout = ml.layout
        m.uses_random = ml.uses_random
        m.prints = [(tuple(pieces), tuple(kinds)) for pieces, kinds in prints]
        m.private_arrays = list(getattr(kernel, "private_arrays", ()))
        m.private_trips = [(host_expr(b, kernel.body), host_expr(e, kernel.body), adds)
                           for b, e, adds in getattr(kernel, "private_trips", ())]
        m.private_threads = getattr(kernel, "private_threads", 1)
        m.private_copies = bool(getattr(kernel, "private_copies", False))
        m.private_fields = list(getattr(kernel, "private_fields", ()))
        m.tape_log_capacity = getattr(kernel, "tape_log_capacity", 0)
        return m
