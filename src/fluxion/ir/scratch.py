"""Scratch memory that a pass asks for: recorded on the kernel IR (`kernel.scratch`), made by
the runtime when the program is loaded (runtime/scratch.py). Passes never allocate.

A request stands for the memory in the IR until then: a `GlobalPtrStmt` whose `place` is a
`ScratchBuffer` addresses an element of it, with one index per axis of `shape` (row-major,
`offset` subtracted as for a field). The runtime keeps the memory at zero between launches;
code that uses it must leave it at zero again (a merge loop that reads and clears it).
"""
from __future__ import annotations


class _Hooks:
    """What the language installs (lang/launch_values.py): `hidden_field(dtype, shape,
    name="", offset=None, copies_of=None)` makes a field of `shape` elements of `dtype` in a
    tree of its own, placed and materialized, that no user names (`copies_of`: the place
    whose per-thread copies it holds, whose layout the language may follow). The memory behind scratch requests
    (runtime/scratch.py) and the Tape's access masks (autodiff/access_check.py) are such
    fields, so the code addresses them as any field; the fields and their trees are the
    language's."""
    hidden_field = None


hooks = _Hooks()


class ScratchBuffer:
    """`shape` elements of `dtype`; `copy_of`: the place (field component) whose per-thread
    copies these are, which names the buffer (every kernel that privatizes a place shares
    its copies) and lets the offline cache find it again in another process."""
    __slots__ = ("shape", "dtype", "offset", "copy_of", "__weakref__")

    def __init__(self, shape, dtype, offset=None, copy_of=None):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype
        self.offset = None if offset is None else tuple(offset)
        self.copy_of = copy_of

    @property
    def nbytes(self):
        n = self.dtype.nbytes
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        what = f" (copies of {self.copy_of!r})" if self.copy_of is not None else ""
        return f"scratch<{self.dtype}{list(self.shape)}{what}>"


def per_thread_copies(place, nthreads):
    """The request for `nthreads` copies of field component `place`, thread first."""
    f = place.field
    off = f.offset
    return ScratchBuffer((nthreads,) + tuple(f.shape), place.dtype,
                         None if off is None else (0,) + tuple(off), copy_of=place)
