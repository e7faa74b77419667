"""The host memory of an SNode tree: one zeroed buffer, aligned to 64 bytes, with a free row
after its end and one before its start.

Without bounds checks (`debug=False`) a kernel that writes one index past a field's end (`x[n]`
of a field of n rows: differential_evolution does, and Taichi's memory pool hides it) would
otherwise overwrite the allocator's own data and abort the process later ("malloc(): unaligned
tcache chunk"). One step past the end along every axis of the tree's first levels lands in the
free row instead (at most the buffer's size and 1 MiB). The row before the start does the
same for one step below the first index: a stencil reading `c[i - 1, j]` at i = 0
(Taichi's eulerfluid2d example) read memory below the buffer and could crash the process;
it reads zeros there, as the original reads whatever its pool holds.

Memory that follows the active cells. A tree that holds a `pointer` or `dynamic` level keeps
its dense layout (every cell has a fixed address: code generation and the numpy views stay
those of a dense tree, and dense code pays nothing), but its buffer is *reserved* rather
than allocated: anonymous private virtual memory (mmap with MAP_NORESERVE), which the
operating system backs with a page only when the page is first written. The OS page
allocator is the pool, and a page is its slot:
* an inactive cell is never written (a write activates it), so it costs no memory, and a
  read of it sees the kernel's shared zero page (0, as the original's inactive cells read);
* deactivating a pointer cell or a list (lang/sparse.py) gives the whole pages inside its
  bytes back with madvise(MADV_DONTNEED), after which they read zero again, and zeroes only
  the partial pages at its two ends, so repeated activate/deactivate cycles do not grow the
  process;
* a tree of 1 TiB of cells (Taichi's particle-list test) is only address space.
Why pages rather than a pool of blocks with a slot table per pointer level, as the original
does: every access through a pointer level then loads its cell's slot first, which costs
dense-looking code under a pointer level its plain address arithmetic. The price of pages: a
block smaller than a page commits its whole page when any cell of that page is active (with
blocks of 16 KiB, 1% of the blocks active costs 1% of the dense size), a block activated anew
takes a page fault for each page it touches (a program that activates other blocks each
round pays them every round), and transparent huge pages are refused for a reserved tree
(one write would commit 2 MiB). lang/sparse_pool.py gives a pointer level such a pool
instead (`FLUXION_SPARSE_POOL=1`, while it is measured against this layout); its blocks lie
in the same reserved buffer, after the dense layout, and are committed once.

Trees without such a level, and every tree on CUDA (its device memory is allocated densely,
and the host copy mirrors it whole), keep an ordinary zeroed numpy buffer: `release` then
writes zeros. The reservation is unmapped when the last numpy array over it is collected
(the buffer's views keep the mmap object alive), so no view can outlive its memory.
"""
from __future__ import annotations

import ctypes
import mmap
import weakref

import numpy as np

PAGE = mmap.PAGESIZE
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)   # (Python < 3.12 lacks the name)


def slack(root, size):
    """Bytes kept free after a tree of `size` bytes whose top node is `root`."""
    step = 0
    for c in root.children:
        extents = getattr(c, "extents", None)      # a level (a Place has none)
        if extents:
            step = max(step, 2 * c.cell_size * int(np.prod(extents[1:])))
    return (min(step, size, 1 << 20) + 63) // 64 * 64


def allocate(root, size, reserve=False):
    """(the tree's buffer of `size` bytes, the slack bytes after it; as many lie before it).
    `reserve`: virtual memory committed page by page as it is written (see above); the
    buffer's first byte is then page-aligned, so blocks of whole pages fill whole pages."""
    extra = slack(root, size)
    if not reserve:
        raw = np.zeros(extra + size + extra + 64, dtype=np.uint8)
        start = (-raw.ctypes.data) % 64 + extra       # (extra is a multiple of 64)
        return raw[start:start + size], extra
    front = (extra + PAGE - 1) // PAGE * PAGE
    end = (front + size + extra + PAGE - 1) // PAGE * PAGE
    mm = mmap.mmap(-1, end + PAGE, flags=mmap.MAP_PRIVATE | _MAP_NORESERVE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mm.madvise(mmap.MADV_NOHUGEPAGE)
    raw = np.frombuffer(mm, dtype=np.uint8)
    # a last page that cannot be accessed keeps the system from merging this mapping with
    # the next tree's (mappings are placed one below the other): then the mapping is one
    # entry of /proc/self/smaps, whose resident size is the memory in use (bytes_in_use)
    _libc_fn("mprotect", ctypes.c_int)(raw.ctypes.data + end, PAGE, 0)
    return raw[front:front + size], extra


def _mapping(buffer):
    """(the mmap a reserved buffer lies in, the buffer's offset in it), or None."""
    got = _mappings.get(id(buffer))
    if got is not None and got[0]() is buffer:
        mm = got[1]() if got[1] is not None else None
        if got[1] is None or mm is not None:
            return None if mm is None else (mm, got[2])
    m = _find_mapping(buffer)
    # (by weak references: an entry must neither keep a tree's memory alive after ti.reset
    # nor answer for another array that comes to have the same id)
    _mappings[id(buffer)] = (weakref.ref(buffer), None if m is None else weakref.ref(m[0]),
                             None if m is None else m[1])
    if len(_mappings) > 256:
        for k in [k for k, v in _mappings.items() if v[0]() is None]:
            del _mappings[k]
    return m


# id(buffer) -> (a weak reference to it, to its mmap or None, its offset there): _mapping
# is asked several times by each deactivation, and finding the mmap's address costs ~50 us
_mappings = {}


def _find_mapping(buffer):
    b = buffer
    while isinstance(b, np.ndarray):
        b = b.base
    if isinstance(b, memoryview):
        b = b.obj
    if not isinstance(b, mmap.mmap):
        return None
    return b, _address(buffer) - _address(np.frombuffer(b, dtype=np.uint8))


def _address(a):
    return a.__array_interface__["data"][0]      # (ndarray.ctypes builds an object: slower)


def is_reserved(buffer):
    return _mapping(buffer) is not None


def release(buffer, lo, hi):
    """Zero bytes [lo, hi) of a tree's buffer; in a reserved one, give the whole pages among
    them back to the system (they read zero afterwards)."""
    release_runs(buffer, np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))


def release_runs(buffer, lo, hi, written_only=False):
    """`release` of each range [lo[k], hi[k]) (arrays of byte offsets), adjacent ranges
    merged first so that a range of many blocks costs one system call. `written_only`: the
    ranges may be mostly unwritten (every cell of a node), so the bytes outside whole pages
    are zeroed only where they are not zero already (a write would commit their page)."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    if lo.size == 0:
        return
    starts, ends = merge_runs(lo, hi)
    m = _mapping(buffer)
    if m is None:
        _zero(buffer, starts, ends)
        return
    mm, off = m
    pa = -(-(starts + off) // PAGE) * PAGE - off     # first page boundary at or after a start
    pb = (ends + off) // PAGE * PAGE - off           # last one at or before an end
    whole = pb > pa
    # the bytes outside whole pages are zeroed in place (their pages hold other cells' bytes
    # too); the whole pages go back
    # (np.concatenate: np.r_ costs ~20 us a call, in each deactivation)
    za = np.concatenate([starts[~whole], starts[whole], pb[whole]])
    zb = np.concatenate([ends[~whole], pa[whole], ends[whole]])
    if written_only:
        dirty = [k for k, (a, b) in enumerate(zip(za.tolist(), zb.tolist()))
                 if b > a and buffer[a:b].any()]
        za, zb = za[dirty], zb[dirty]
    _zero(buffer, za, zb)
    for a, b in zip(pa[whole].tolist(), pb[whole].tolist()):
        mm.madvise(mmap.MADV_DONTNEED, a + off, b - a)


def release_pages(buffer, lo, hi):
    """Give back the whole pages among the ranges [lo[k], hi[k]) of a reserved buffer, whose
    bytes are zero already (the rest of those ranges is left as it is)."""
    m = _mapping(buffer)
    lo = np.asarray(lo, dtype=np.int64)
    if m is None or lo.size == 0:
        return
    mm, off = m
    pa = -(-(lo + off) // PAGE) * PAGE - off
    pb = (np.asarray(hi, dtype=np.int64) + off) // PAGE * PAGE - off
    whole = pb > pa
    if whole.any():
        a, b = merge_runs(pa[whole], pb[whole])
        for x, y in zip(a.tolist(), b.tolist()):
            mm.madvise(mmap.MADV_DONTNEED, x + off, y - x)


def merge_runs(lo, hi):
    """The ranges [lo[k], hi[k]) (int64 arrays, not empty) merged where they meet or
    overlap, in order."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    # a range starts a new run unless it begins where the runs so far end
    end = np.maximum.accumulate(hi)
    new = np.ones(lo.size, dtype=bool)
    new[1:] = lo[1:] > end[:-1]
    last = np.empty(int(np.count_nonzero(new)), dtype=np.int64)   # each run's last range
    last[:-1] = np.flatnonzero(new)[1:] - 1
    last[-1] = lo.size - 1
    return lo[new], end[last]


def intersect_runs(a_lo, a_hi, b_lo, b_hi):
    """The bytes in both the ranges [a_lo[k], a_hi[k]) and [b_lo[k], b_hi[k]) (each set
    disjoint), as sorted runs (lo, hi)."""
    pts = np.concatenate([a_lo, a_hi, b_lo, b_hi]).astype(np.int64)
    na, nb = len(a_lo), len(b_lo)
    step = np.concatenate([np.ones(na, np.int64), -np.ones(na, np.int64),
                           np.ones(nb, np.int64), -np.ones(nb, np.int64)])
    order = np.lexsort((step, pts))          # (at one point, ends before starts)
    pts, depth = pts[order], np.cumsum(step[order])
    both = np.flatnonzero((depth[:-1] == 2) & (pts[1:] > pts[:-1]))
    return pts[both], pts[both + 1]


def zero(buffer, starts, ends):
    """buffer[a:b] = 0 for each range [starts[k], ends[k]) (int64 arrays), in place: the
    pages stay committed."""
    _zero(buffer, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))


def _zero(buffer, starts, ends):
    """buffer[a:b] = 0 for each range (one numpy operation for many tiny ranges)."""
    n = ends - starts
    keep = n > 0
    starts, n = starts[keep], n[keep]
    if n.size == 0:
        return
    if n.size < 1024 or n.sum() > 256 * n.size:
        for a, k in zip(starts.tolist(), n.tolist()):
            buffer[a:a + k] = 0
        return
    # many short ranges (the lists of a grid's cells): index them in the widest word that
    # divides every start and length
    w = next(w for w in (8, 4, 2, 1) if not ((starts | n) % w).any() and
             _address(buffer) % w == 0)
    starts, n = starts // w, n // w
    first = np.cumsum(n) - n
    words = buffer[:buffer.nbytes // w * w].view(np.dtype(f"u{w}"))
    words[np.repeat(starts - first, n) + np.arange(int(n.sum()))] = 0


_libc = None


def _libc_fn(name, restype):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(_libc, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int if name == "mprotect"
                   else ctypes.c_void_p]
    fn.restype = restype
    return fn


def _mapped_rss(lo, hi):
    """The resident bytes of the mappings that make up [lo, hi) exactly, by
    /proc/self/smaps (written pages; the shared zero page that reads map is not counted);
    None when it cannot tell (unreadable, or a mapping reaching outside the range)."""
    try:
        with open("/proc/self/smaps") as f:
            text = f.read()
    except OSError:
        return None
    total = covered = 0
    inside = False
    for line in text.split("\n"):
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            a, _, b = head.partition("-")
            a, b = int(a, 16), int(b, 16)
            inside = a < hi and b > lo
            if inside and (a < lo or b > hi):
                return None
            covered += (b - a) if inside else 0
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total if covered == hi - lo else None


def _pages_in_use(addr, nbytes):
    """Pages of [addr, addr + nbytes) (page-aligned) that hold memory of their own: present
    and mapped by this process alone (/proc/self/pagemap, which tells a written page from
    the shared zero page that reads map); by mincore where pagemap cannot be read (it counts
    pages only read as well)."""
    n = nbytes // PAGE
    try:
        with open("/proc/self/pagemap", "rb") as f:
            out, first, step = 0, addr // PAGE, 1 << 20
            for k in range(0, n, step):
                f.seek((first + k) * 8)
                e = np.frombuffer(f.read(min(step, n - k) * 8), dtype=np.uint64)
                out += int(np.count_nonzero((e >> np.uint64(63)) & (e >> np.uint64(56))
                                            & np.uint64(1)))
            return out
    except OSError:
        pass
    vec = np.zeros(n, dtype=np.uint8)
    if _libc_fn("mincore", ctypes.c_int)(addr, nbytes, vec.ctypes.data) != 0:
        return n
    return int(np.count_nonzero(vec & 1))


def bytes_in_use(buffer):
    """The memory a tree's buffer holds: its size, or for a reserved buffer the bytes of the
    pages that were written and not given back since (from /proc/self/smaps: the kernel
    walks only the page tables that exist; by pagemap, page by page, where it cannot)."""
    m = _mapping(buffer)
    if m is None:
        return buffer.nbytes
    mm, _ = m
    base = _address(np.frombuffer(mm, dtype=np.uint8))
    rss = _mapped_rss(base, base + len(mm))
    return rss if rss is not None else _pages_in_use(base, len(mm) - PAGE) * PAGE
