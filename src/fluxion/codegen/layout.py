"""Where a kernel's context array keeps what is not an argument: plain numbers, computed from
the IR by the lowering and stored with a compiled kernel in the offline cache, which reads
them back (lang/kernel_cache.py) without loading the code generator."""
from __future__ import annotations


# Slots of the context array after the arguments and return values.
class CtxLayout:
    def __init__(self, kernel):
        self.nargs = len(kernel.arg_types)
        self.ret0 = self.nargs
        self.err = self.ret0 + len(kernel.ret_types)
        self.err_args = self.err + 1
        self.seed = self.err_args + 8
        # the Tape's overwrite log: addresses, old values, kinds/sizes, grad addresses,
        # the counter's address and the capacity
        self.log = self.seed + 1
        # per private array (passes/scatter.py): its threads' copies, and the bytes of one
        self.private = self.log + 6
        # (CPU) the index of the kernel's first `print` in the process's table: print ids in
        # the code are the kernel's own, so its machine code does not depend on the process
        self.print_base = self.private + 2 * len(getattr(kernel, "private_arrays", ()))
        self.size = self.print_base + 1

    FIELDS = ("nargs", "ret0", "err", "err_args", "seed", "log", "private", "print_base", "size")

    def to_list(self):
        return [getattr(self, k) for k in self.FIELDS]

    @classmethod
    def from_list(cls, values):
        lay = cls.__new__(cls)
        for k, v in zip(cls.FIELDS, values, strict=True):
            setattr(lay, k, int(v))
        return lay
