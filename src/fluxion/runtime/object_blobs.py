"""Several ELF objects as one bytes value: the machine code of a kernel compiled in two halves
(runtime/compile_worker.py) is stored in the offline cache and loaded into one engine as one
Artifact. A module of its own, since loading a cached kernel (runtime/cpu_jit.py) must not
import the compile worker's side (subprocess, the module splitter)."""
from __future__ import annotations

import struct

_MAGIC = b"FXOBJS\0\0"      # (an ELF object starts with b"\x7fELF")


def join_objects(objs):
    """One bytes value holding the objects `objs` (a single object is itself)."""
    if len(objs) == 1:
        return objs[0]
    head = struct.pack(f"<I{len(objs)}Q", len(objs), *(len(o) for o in objs))
    return _MAGIC + head + b"".join(objs)


def split_objects(blob):
    """The objects of `join_objects`'s value."""
    if not blob.startswith(_MAGIC):
        return [blob]
    n, = struct.unpack_from("<I", blob, len(_MAGIC))
    sizes = struct.unpack_from(f"<{n}Q", blob, len(_MAGIC) + 4)
    pos = len(_MAGIC) + 4 + 8 * n
    out = []
    for size in sizes:
        out.append(blob[pos:pos + size])
        pos += size
    if pos != len(blob):
        raise ValueError("joined objects: sizes do not add up")
    return out
