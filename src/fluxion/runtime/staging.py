"""Host memory (numpy arrays, ti.ndarrays, CPU tensors) passed to a kernel in a CUDA session:
copied to the device around the launch (runtime/launch.py)."""
from __future__ import annotations


def host_span(ptr, shape, strides, itemsize):
    """(lowest address, byte count) of the memory that an array view addresses."""
    if 0 in tuple(shape):
        return ptr, 0
    lo = hi = ptr
    for n, st in zip(shape, strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi - lo + itemsize


class HostStaging:
    """A host array (numpy, ti.ndarray, CPU tensor) passed to a kernel in a CUDA session: the
    bytes it spans are copied into device memory before the launch, the kernel addresses that
    copy with the array's own strides, and `finish` copies them back (when the kernel writes
    the array) and frees the copy. Copies are synchronous, like the original system's; pass
    CUDA tensors to avoid them."""
    __slots__ = ("dev", "lo", "nbytes", "dbuf", "back")

    def __init__(self, dev, ptr, shape, strides, itemsize, back):
        self.dev, self.back = dev, back
        self.lo, self.nbytes = host_span(ptr, shape, strides, itemsize)
        self.dbuf = dev.alloc(self.nbytes)
        if self.nbytes:
            dev.to_device(self.dbuf, self.lo, self.nbytes)

    def device_pointer(self, ptr):
        """Where host address `ptr` (inside the span) lives in the copy."""
        return self.dbuf + (ptr - self.lo)

    def finish(self):
        try:
            if self.back and self.nbytes:
                self.dev.to_host(self.lo, self.dbuf, self.nbytes)
        finally:
            self.dev.free(self.dbuf)
            self.dbuf = None

    def __del__(self):
        # a launch that failed while packing its arguments never finishes its stagings
        if getattr(self, "dbuf", None) is not None:
            try:
                self.dev.free(self.dbuf)
            except Exception:
                pass
