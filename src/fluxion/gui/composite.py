"""Blending shapes into `ti.GUI`'s frame, as the original system does.

The frame is float32 RGBA, the four values of a pixel side by side (a disc's blend then
touches one cache line per pixel, not one per channel's plane), flattened so that pixel
(i, j) of a w x h frame is row i * h + j. A shape yields the pixels of its bounding box (`box_chunks`,
in bounded pieces); its rasterizer (fluxion/gui/shapes.py) gives each a coverage alpha, and
`composite` blends them in drawing order: frame = (1 - alpha) * frame + alpha * colour.
"""
from __future__ import annotations

import numpy as np

# Candidate pixels (box pixels of shapes) examined at once: bounds the memory a call needs
# (about 50 MB of temporaries, padding included) however long its segments or large its
# discs are; a 4x larger chunk was no faster and tripled that.
_CHUNK = 1 << 18

_F32 = np.float32


class Chunk:
    """Candidate pixels (i, j) of some shapes' boxes, in one of two forms:
      * a grid, when the boxes are of similar sizes (the common case: particles, short
        segments): every box padded to the largest, pixel (s, k) = (i0[s] + di[k],
        j0[s] + dj[k]), `valid` (or None: all) marking those really in the box;
      * flat: one entry per pixel, (i0, j0) the pixel itself.
    Per-shape values then broadcast without a gather per pixel in the grid form."""

    def __init__(self, shapes, i0, j0, di=None, dj=None, valid=None):
        self.shapes, self.i0, self.j0, self.valid = shapes, i0, j0, valid
        self.grid = di is not None
        self.di, self.dj = di, dj

    def per(self, v):
        """A per-shape value at every candidate."""
        v = v[self.shapes]
        return v[:, None] if self.grid else v

    def rel(self, v, axis, shift=0.0):
        """float32 (i + shift) - v (axis 0) or (j + shift) - v (axis 1), v per shape: the
        base's difference is taken first (exact for pixels near v, as the original's
        single-rounded difference), then the offset added."""
        base = (self.i0 if axis == 0 else self.j0).astype(_F32)
        if shift:
            base = base + _F32(shift)
        d = base - v[self.shapes]
        if not self.grid:
            return d
        return d[:, None] + (self.di if axis == 0 else self.dj).astype(_F32)

    def lit(self, alpha, h):
        """The candidates with positive coverage: (pixel index i * h + j, alpha clamped to
        1, shape), in drawing order."""
        on = alpha > 0
        if self.valid is not None:
            on &= self.valid
        if not self.grid:
            k = np.flatnonzero(on)
            return (self.i0[k] * h + self.j0[k], np.minimum(alpha[k], 1), self.shapes[k])
        rows, cols = np.nonzero(on)
        pix = (self.i0 * h + self.j0)[rows] + (self.di * h + self.dj)[cols]
        return pix, np.minimum(alpha[on], 1), self.shapes[rows]


def box_chunks(i0, i1, j0, j1, limit=_CHUNK):
    """The pixels of inclusive boxes [i0, i1] x [j0, j1] (int64, one per shape, clipped to
    the frame; empty where i1 < i0 or j1 < j0), shape after shape, as _Chunks of about
    `limit` pixels. A box larger than `limit` is cut into strips of columns, so that one
    long segment never needs a box-sized array."""
    shape = np.arange(len(i0))
    nx = np.maximum(i1 - i0 + 1, 0)
    ny = np.maximum(j1 - j0 + 1, 0)
    big = nx * ny > limit
    if big.any():
        cols = np.where(big, np.maximum(limit // np.maximum(ny, 1), 1), np.maximum(nx, 1))
        pieces = -(-np.maximum(nx, 1) // cols)
        shape = np.repeat(shape, pieces)
        k = np.arange(len(shape)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        i0 = i0[shape] + k * cols[shape]
        i1 = np.minimum(i0 + cols[shape] - 1, i1[shape])
        j0, ny = j0[shape], ny[shape]
        nx = np.maximum(i1 - i0 + 1, 0)
    area = nx * ny
    ends = np.cumsum(area)
    s, m = 0, len(area)
    while s < m:
        before = int(ends[s - 1]) if s else 0
        e = max(s + 1, int(np.searchsorted(ends, before + limit, side="right")))
        s0, s = s, e
        total = int(ends[e - 1]) - before
        if total == 0:
            continue
        cx, cy = nx[s0:e], ny[s0:e]
        mx, my = int(cx.max()), int(cy.max())
        if mx * my * (e - s0) <= 4 * total + 16 * (e - s0):
            di, dj = np.divmod(np.arange(mx * my), my)
            uniform = cx.min() == mx and cy.min() == my
            valid = None if uniform else (di < cx[:, None]) & (dj < cy[:, None])
            yield Chunk(shape[s0:e], i0[s0:e], j0[s0:e], di, dj, valid)
            continue
        a = area[s0:e]
        off = np.arange(total, dtype=np.int64) - np.repeat(ends[s0:e] - a - before, a)
        rny = np.repeat(cy, a)
        di = off // rny
        yield Chunk(np.repeat(shape[s0:e], a), np.repeat(i0[s0:e], a) + di,
                     np.repeat(j0[s0:e], a) + (off - di * rny))


_NONE = np.iinfo(np.int64).max
_SCRATCH = {}       # (size, fill) -> an int64 array of `fill`, restored after each use


def _scratch(size, fill):
    """A per-pixel int64 array full of `fill`; callers put back what they change (a fresh
    one per call cost more than the compositing of a few thousand particles)."""
    a = _SCRATCH.get((size, fill))
    if a is None:
        a = _SCRATCH[(size, fill)] = np.full(size, fill, np.int64)
    return a


def composite(frame, pix, alpha, shape, colors):
    """Blend entries over `frame` (float32 (w * h, 4), a row per pixel) as the original
    does, one shape after another: frame[p] = (1 - a) * frame[p] + a * colour.
    Entries are in drawing order (shape non-decreasing) and a shape covers a pixel at most
    once; `colors` is (1, 4) or one row per shape; `alpha` None means opaque (the colour
    replaces the pixel).

    A pixel covered once (most of them) is blended directly: through whole-frame passes
    when there are many entries (bincount is much cheaper than gathers), else by gathering
    it. The others are blended in rounds, round k blending each pixel's k-th entry."""
    n = len(pix)
    if n == 0:
        return
    size = frame.shape[0]
    one = len(colors) == 1

    def blend(sel):
        p, a = pix[sel], alpha[sel]
        c = colors[0] if one else colors[shape[sel]]
        frame[p] = (1 - a)[:, None] * frame[p] + a[:, None] * c

    if alpha is None:                       # opaque: the last shape over a pixel wins
        last = _scratch(size, -1)
        np.maximum.at(last, pix, np.arange(n))
        sel = np.flatnonzero(last[pix] == np.arange(n))
        last[pix] = -1
        frame[pix[sel]] = colors[0] if one else colors[shape[sel]]
        return
    counts = np.bincount(pix, minlength=size)
    covered = counts[pix]
    full = np.flatnonzero((alpha >= 1) & (covered > 1))
    if len(full):
        # What a pixel was before an opaque entry does not matter (0 * old + 1 * colour):
        # its earlier entries are dropped. (A non-finite old value would give NaN there.)
        last = _scratch(size, -1)
        np.maximum.at(last, pix[full], full)
        kept = np.flatnonzero(np.arange(n) >= last[pix])
        last[pix] = -1
        if len(kept) < n:
            pix, alpha = pix[kept], alpha[kept]
            shape = shape[kept] if shape is not None else None
            n = len(pix)
            counts = np.bincount(pix, minlength=size)
            covered = counts[pix]
    once = np.flatnonzero(covered == 1)
    if len(once) * 4 > size:
        po, ao = pix[once], alpha[once]
        cover = np.bincount(po, weights=ao, minlength=size).astype(_F32)
        keep = 1 - cover                    # an uncovered pixel: 1 * x + 0, unchanged
        for ch in range(4):                 # (a channel at a time: no (w * h, 4) temporary)
            plane = frame[:, ch]
            plane *= keep
            if one:
                plane += cover * colors[0, ch]
            else:
                plane += np.bincount(po, weights=ao * colors[shape[once], ch],
                                     minlength=size).astype(_F32)
    elif len(once):
        blend(once)
    if len(once) == n:
        return
    # The rest, in rounds: each round blends, for every pixel still to do, its earliest
    # entry (found by a scatter-min of entry numbers), so a round touches distinct pixels.
    rest = np.flatnonzero(covered > 1)
    first = _scratch(size, _NONE)
    while len(rest):
        p = pix[rest]
        np.minimum.at(first, p, rest)
        now = first[p] == rest
        blend(rest[now])
        first[p] = _NONE
        rest = rest[~now]


def fill(frame, color):
    """Set every pixel of `frame` (float32 (..., 4), a view of whole pixels) to `color`
    (float32 RGBA): each pixel's 16 bytes written as one value, which NumPy does as fast as
    filling a plane (broadcasting the 4 channels over the pixels took ten times as long)."""
    px = frame.view("V16")
    px[...] = np.ascontiguousarray(color, _F32).view("V16")[0]


def to_rows(frame):
    """float32 (w, h, 4) frame -> uint8 RGBA rows (h, w, 4), top row first, converted as the
    original writes screenshots: 255 * clamp(x, 0, 1), truncated (k / 255 gives back k),
    NaN as 0. (Reordered as one 32-bit word per pixel: moving single bytes cost twice as
    much.)"""
    x = np.nan_to_num(frame, nan=0.0)
    np.clip(x, 0, 1, out=x)
    x *= _F32(255)
    words = x.astype(np.uint8).view(np.uint32)[..., 0]           # (w, h)
    rows = np.ascontiguousarray(np.swapaxes(words, 0, 1)[::-1])
    return rows.view(np.uint8).reshape(rows.shape + (4,))
