"""`ti.GUI`: a 2-D canvas for particles, lines, triangles, text and images.

Conventions of the original system, kept here so that its scripts run unchanged:
  * positions are normalized, in [0, 1]^2, with y *up*; radii are in pixels;
  * the frame is float32 RGBA indexed [x, y] (y up), which `get_image()` returns; images for
    `set_image` are indexed the same way, float in [0, 1] or unsigned integers;
  * colors are 0xRRGGBB integers (one, or one per element), or float RGB in [0, 1].

Shapes are rasterized by the original system's rules, so that a program draws the same
picture (to float32 rounding): each shape visits the pixels of a bounding box and blends its
colour over the frame with a coverage alpha, frame = (1 - alpha) * frame + alpha * colour,
shape after shape (see `_composite`). Discs and strokes are antialiased, triangles are not.
Positions and radii are converted to float32 first, as the original does. Text is rendered
by Pillow (the original's font is not at hand), blended the same way.

`show()` puts the frame in a tkinter window where a display exists and writes it to a file
when asked; without a display, with show_gui=False, or without tkinter, there is simply no
window: drawing, files and `running` work the same, and `get_event` returns False.
"""
from __future__ import annotations

import collections
import math
import os
import sys
import time
import warnings

import numpy as np

from fluxion.tools.image import as_numpy, has_display, require_pillow

# Candidate pixels (box pixels of shapes) examined at once: bounds the memory a call needs
# (about 50 MB of temporaries, padding included) however long its segments or large its
# discs are; a 4x larger chunk was no faster and tripled that.
_CHUNK = 1 << 18

_FONTS = {}     # Pillow fonts by size, loaded once

_F32 = np.float32
_INV255 = _F32(1.0 / 255.0)


def _rgba(color, n=None):
    """Colors -> float32 RGBA (k, 4) with alpha 1; k = 1 (one color for all) or n (one per
    element; any number when n is None, as for a palette).

    Integers (a scalar or one per element) are 0xRRGGBB, each byte times float32(1/255) as
    the original converts them; floats whose last axis is 3 are RGB in [0, 1], other floats
    0xRRGGBB values."""
    c = as_numpy(color)
    if np.issubdtype(c.dtype, np.floating) and c.shape[-1:] == (3,):
        rgb = np.clip(c.reshape(-1, 3), 0, 1).astype(_F32)
    else:
        # other floats hold 0xRRGGBB values, converted to integers as the original does
        if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
            raise ValueError(f"colors must be 0xRRGGBB integers or RGB floats, got {c.dtype}")
        c = np.nan_to_num(c).reshape(-1).astype(np.int64)
        rgb = np.stack([(c >> 16) & 0xFF, (c >> 8) & 0xFF, c & 0xFF], axis=1).astype(_F32)
        rgb *= _INV255
    if n is not None and len(rgb) not in (1, n):
        raise ValueError(f"{len(rgb)} colors for {n} elements")
    return np.concatenate([rgb, np.ones((len(rgb), 1), _F32)], axis=1)


def _per_item(value, n, what):
    """One value or one per element -> float32 (n,) (radii are float32 in the original)."""
    v = np.asarray(as_numpy(value), dtype=np.float64).reshape(-1)
    if len(v) not in (1, n):
        raise ValueError(f"{len(v)} {what} values for {n} elements")
    return np.broadcast_to(v.astype(_F32), (n,))


def _points(pos):
    """Positions -> float64 (n, 2); a single point may be given as (x, y). (float64 here:
    arrows compute their heads before the conversion to float32, as the original does.)"""
    p = np.asarray(as_numpy(pos), dtype=np.float64)
    if p.shape == (2,):
        p = p[None]
    if p.ndim == 3 and p.shape[2] == 1:
        p = p[:, :, 0]
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"positions must have shape (n, 2), got {p.shape}")
    return p


class _Chunk:
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


def _box_chunks(i0, i1, j0, j1, limit=_CHUNK):
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
            yield _Chunk(shape[s0:e], i0[s0:e], j0[s0:e], di, dj, valid)
            continue
        a = area[s0:e]
        off = np.arange(total, dtype=np.int64) - np.repeat(ends[s0:e] - a - before, a)
        rny = np.repeat(cy, a)
        di = off // rny
        yield _Chunk(np.repeat(shape[s0:e], a), np.repeat(i0[s0:e], a) + di,
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


def _composite(frame, pix, alpha, shape, colors):
    """Blend entries over `frame` (float32 (4, w * h), a plane per channel) as the original
    does, one shape after another: frame[:, p] = (1 - a) * frame[:, p] + a * colour.
    Entries are in drawing order (shape non-decreasing) and a shape covers a pixel at most
    once; `colors` is (1, 4) or one row per shape; `alpha` None means opaque (the colour
    replaces the pixel).

    A pixel covered once (most of them) is blended directly: through whole-plane passes
    when there are many entries (bincount is much cheaper than gathers), else by gathering
    it. The others are blended in rounds, round k blending each pixel's k-th entry."""
    n = len(pix)
    if n == 0:
        return
    size = frame.shape[1]
    one = len(colors) == 1

    def blend(sel):
        p, a = pix[sel], alpha[sel]
        keep = 1 - a
        for ch in range(4):
            c = colors[0, ch] if one else colors[shape[sel], ch]
            plane = frame[ch]
            plane[p] = keep * plane[p] + a * c

    if alpha is None:                       # opaque: the last shape over a pixel wins
        last = _scratch(size, -1)
        np.maximum.at(last, pix, np.arange(n))
        sel = np.flatnonzero(last[pix] == np.arange(n))
        last[pix] = -1
        for ch in range(4):
            frame[ch][pix[sel]] = colors[0, ch] if one else colors[shape[sel], ch]
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
        for ch in range(4):
            frame[ch] *= keep
            if one:
                frame[ch] += cover * colors[0, ch]
            else:
                frame[ch] += np.bincount(po, weights=ao * colors[shape[once], ch],
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


def _to_bytes(frame):
    """float32 (4, w, h) frame -> uint8 RGB rows (h, w, 3), top row first, converted as the
    original writes screenshots: 255 * clamp(x, 0, 1), truncated (k / 255 gives back k)."""
    rgb = np.nan_to_num(np.moveaxis(frame[:3], 0, -1), nan=0.0)     # (w, h, 3)
    rows = np.swapaxes(rgb, 0, 1)[::-1]
    return (np.clip(rows, 0, 1) * _F32(255)).astype(np.uint8)


def _load_font(size):
    """A Pillow font whose ascent + descent is `size` pixels (the original's font size is
    that height, not the em), loaded once per size."""
    font = _FONTS.get(size)
    if font is None:
        from PIL import ImageFont
        try:                      # a scalable font (Pillow >= 10.1 with FreeType)
            font = ImageFont.load_default(size=size)
            ascent, descent = font.getmetrics()
            if ascent + descent > 0:
                font = ImageFont.load_default(size=size * size / (ascent + descent))
        except (TypeError, OSError, ImportError, AttributeError, ValueError):
            font = ImageFont.load_default()          # the fixed bitmap font
        _FONTS[size] = font
    return font


class _WidgetValue:
    """What `slider` and `label` return: `.value`, shown in the window's side panel if any."""

    def __init__(self, value, on_set=None):
        self._value = value
        self._on_set = on_set

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        self._value = v
        if self._on_set is not None:
            self._on_set(v)


class GUI:
    """A window (or a headless canvas) of `res` pixels; see the module docstring."""

    # Keys and buttons, as they appear in `event.key` and in `is_pressed`.
    ESCAPE, SHIFT, ALT, CTRL = "Escape", "Shift", "Alt", "Control"
    BACKSPACE, RETURN, TAB, CAPSLOCK, SPACE = "BackSpace", "Return", "Tab", "Caps_Lock", " "
    UP, DOWN, LEFT, RIGHT = "Up", "Down", "Left", "Right"
    LMB, MMB, RMB = "LMB", "MMB", "RMB"
    EXIT, WHEEL, MOVE = "WMClose", "Wheel", "Motion"
    # Event types, in `event.type`.
    PRESS, RELEASE, MOTION = "Press", "Release", "Motion"

    class Event:
        """One input event: `type` (PRESS, RELEASE, MOTION), `key`, `pos` (normalized, y up),
        `modifier` (held modifier keys) and `delta` (wheel steps)."""

        def __init__(self, type, key, pos=(0.0, 0.0), modifier=(), delta=(0, 0)):
            self.type, self.key, self.pos = type, key, pos
            self.modifier, self.delta = list(modifier), delta

        def __repr__(self):
            return f"GUI.Event({self.type!r}, {self.key!r}, pos={self.pos})"

    def __init__(self, name="Fluxion", res=512, background_color=0x000000, show_gui=True,
                 fullscreen=False, fast_gui=False):
        self._Image = require_pillow()
        self.name = name
        w, h = (res, res) if np.isscalar(res) else tuple(res)
        if int(w) <= 0 or int(h) <= 0:
            raise ValueError(f"GUI resolution must be positive, got {res}")
        self.res = (int(w), int(h))
        self.background_color = background_color
        self.fast_gui = fast_gui      # accepted for compatibility; set_image is always a copy
        self.fps_limit = 60           # frames per second while a window is shown; None: no cap
        self.frame = 0
        self.event = None
        self._running = True
        self._events = collections.deque(maxlen=4096)   # unread input is dropped, oldest first
        self._pressed = set()
        self._cursor = (0.0, 0.0)    # until the mouse moves, as the original's (mciso_advanced)
        self._last_show = None
        # the frame: a float32 plane per channel (RGBA), each indexed [x, y] with y up
        self._img = np.zeros((4,) + self.res, _F32)
        self._staged_alpha = _F32(0)    # set_image's alpha for a field (see there)
        self._window = None
        self.clear()
        if show_gui and has_display():
            self._window = _open_window(self, fullscreen)

    # -- the frame ----------------------------------------------------------------------------
    def _flat(self):
        """The frame as (4, w * h): pixel (i, j) is column i * h + j."""
        return self._img.reshape(4, -1)

    def _pil_image(self):
        return self._Image.fromarray(_to_bytes(self._img), "RGB")

    def _to_px(self, p):
        """Normalized positions (n, 2) -> float32 pixel coordinates (x right, y up), as the
        original: converted to float32, then times the resolution."""
        return p.astype(_F32) * np.array(self.res, _F32)

    def clear(self, color=None):
        """Fill the frame with `color` (the background color by default)."""
        color = self.background_color if color is None else color
        self._img[...] = _rgba(color, 1)[0][:, None, None]

    def set_image(self, img):
        """Replace the frame by an image of the GUI's resolution, indexed [x, y] (y up):
        shape (w, h) (grey), (w, h, 1) (grey), (w, h, 2) (red, green), (w, h, 3) (RGB) or
        (w, h, 4) (RGBA); float (kept as float32, not clamped) or unsigned integers (divided
        by their largest value). A grey image fills all four channels and RGB has alpha 0,
        as in the original."""
        from_field = hasattr(img, "to_numpy") and not isinstance(img, np.ndarray) and \
            not type(img).__module__.startswith("torch")
        a = as_numpy(img)
        if a.dtype == np.bool_:
            a = a.astype(np.uint8) * 255
        if a.dtype.kind == "u":
            a = a.astype(_F32) * _F32(1.0 / np.iinfo(a.dtype).max)
        elif a.dtype.kind == "i":     # signed integers: taken as 0..255 (the original refuses)
            a = np.clip(a, 0, 255).astype(_F32) * _INV255
        elif a.dtype.kind == "f":
            a = a.astype(_F32)
        else:
            raise ValueError(f"GUI.set_image: images of dtype {a.dtype} are not supported")
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
            raise ValueError(f"GUI.set_image: an image must have shape (w, h) or (w, h, 1..4),"
                             f" got {a.shape}")
        if a.shape[:2] != self.res:
            raise ValueError(f"image of shape {a.shape} does not match the GUI's resolution "
                             f"{self.res} (images are indexed [x, y])")
        c = a.shape[2]
        if from_field:
            # a field's values go to red, green and blue (grey: all three); alpha is what the
            # last array image or get_image left in the staging buffer (0 at first), as in
            # the original
            self._img[:3] = np.moveaxis(a, -1, 0)[:3] if c >= 3 else \
                np.moveaxis(a, -1, 0)[[0, 0, 0]] if c == 1 else \
                np.concatenate([np.moveaxis(a, -1, 0), np.zeros((1,) + self.res, _F32)])
            self._img[3] = self._staged_alpha
            return
        if c == 1:
            self._img[...] = a[None, :, :, 0]
        else:
            self._img[:c] = np.moveaxis(a, -1, 0)       # never a view of the caller's array
            self._img[c:] = 0
        self._staged_alpha = self._img[3].copy()

    def get_image(self):
        """The frame: float32 (w, h, 4) RGBA, indexed [x, y] with y up (a copy)."""
        # the original reads the frame back through set_image's staging buffer
        self._staged_alpha = self._img[3].copy()
        return np.ascontiguousarray(np.moveaxis(self._img, 0, -1))

    # -- drawing ------------------------------------------------------------------------------
    def circles(self, pos, radius=1, color=0xFFFFFF, palette=None, palette_indices=None):
        """Filled discs at `pos` (n, 2). `radius` (pixels) and `color` are one value or one
        per disc; or `palette` (colors) with `palette_indices` (one index per disc)."""
        p = _points(pos)
        n = len(p)
        if palette is not None:
            if palette_indices is None:
                raise ValueError("circles: palette needs palette_indices")
            idx = np.asarray(as_numpy(palette_indices)).reshape(-1).astype(np.int64)
            if len(idx) != n:
                raise ValueError(f"{len(idx)} palette indices for {n} circles")
            pal = _rgba(palette)
            if n and (idx.min() < 0 or idx.max() >= len(pal)):
                raise ValueError(f"circles: palette indices must be in [0, {len(pal)})")
            rgba = pal[idx]
        else:
            rgba = _rgba(color, n)
        self._discs(self._to_px(p), _per_item(radius, n, "radius"), rgba)

    def _discs(self, c, r, rgba):
        """Discs as the original draws them: centre c (pixels), pixel (i, j) at the integer
        point (i, j), coverage clamp(r - distance, 0, 1), over the box
        [ceil(c - r), floor(c + r)]. So a disc of radius 0.5 is a faint dot."""
        w, h = self.res
        ok = np.isfinite(c).all(axis=1) & np.isfinite(r) & (r > 0)
        ids = np.flatnonzero(ok)
        if len(ids) == 0:
            return
        c, r = c[ids], r[ids]
        colors = rgba if len(rgba) == 1 else rgba[ids]
        lo, hi = c - r[:, None], c + r[:, None]          # float32, as the original
        i0 = np.clip(np.ceil(lo[:, 0]), 0, w).astype(np.int64)
        j0 = np.clip(np.ceil(lo[:, 1]), 0, h).astype(np.int64)
        i1 = np.clip(np.floor(hi[:, 0]), -1, w - 1).astype(np.int64)
        j1 = np.clip(np.floor(hi[:, 1]), -1, h - 1).astype(np.int64)
        frame = self._flat()
        cx, cy = c[:, 0].copy(), c[:, 1].copy()
        for ch in _box_chunks(i0, i1, j0, j1):
            dx, dy = ch.rel(cx, 0), ch.rel(cy, 1)      # pixel minus centre: same length
            alpha = ch.per(r) - np.sqrt(dx * dx + dy * dy)
            _composite(frame, *ch.lit(alpha, h), colors)

    def _strokes(self, a, b, r, rgba):
        """Segments a -> b (float32 pixels) as the original strokes them: pixel (i, j) is
        the point (i + 0.5, j + 0.5); its distance to the segment is taken in the frame of
        the segment (u across, v along from a, v beyond the end shortened by the length:
        a capsule); coverage clamp(r - distance, 0, 1) over the box of the endpoints rounded
        (x + 0.5, truncated) and widened by ceil(r + 0.5)."""
        w, h = self.res
        ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1) & np.isfinite(r) & (r > 0)
        ids = np.flatnonzero(ok)
        if len(ids) == 0:
            return
        a, b, r = a[ids], b[ids], r[ids]
        colors = rgba if len(rgba) == 1 else rgba[ids]
        d = b - a
        length = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            u = (_F32(1) / length)[:, None] * d
        # A zero-length segment: the original's direction is NaN and it paints NaN over the
        # whole box; drawn here as the capsule's limit, a disc around a.
        u[length == 0] = (1, 0)
        ai, bi = np.trunc(a.astype(np.float64) + 0.5), np.trunc(b.astype(np.float64) + 0.5)
        ri = np.ceil(r.astype(np.float64) + 0.5)
        lo, hi = np.minimum(ai, bi) - ri[:, None], np.maximum(ai, bi) + ri[:, None]
        i0 = np.clip(lo[:, 0], 0, w).astype(np.int64)
        j0 = np.clip(lo[:, 1], 0, h).astype(np.int64)
        i1 = np.clip(hi[:, 0], -1, w - 1).astype(np.int64)
        j1 = np.clip(hi[:, 1], -1, h - 1).astype(np.int64)
        frame = self._flat()
        ax, ay, ux, uy = a[:, 0].copy(), a[:, 1].copy(), u[:, 0].copy(), u[:, 1].copy()
        for ch in _box_chunks(i0, i1, j0, j1):
            px, py = ch.rel(ax, 0, 0.5), ch.rel(ay, 1, 0.5)
            sx, sy = ch.per(ux), ch.per(uy)
            across = sx * py - sy * px
            along = sx * px + sy * py
            along = np.where(along > 0, np.maximum(along - ch.per(length), 0), along)
            alpha = ch.per(r) - np.sqrt(across * across + along * along)
            _composite(frame, *ch.lit(alpha, h), colors)

    def circle(self, pos, color=0xFFFFFF, radius=1):
        self.circles(_points(pos), radius=radius, color=color)

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        """Segments from begin[i] to end[i] (n, 2), `radius` pixels thick on each side."""
        b, e = _points(begin), _points(end)
        n = len(b)
        if len(e) != n:
            raise ValueError(f"{n} line beginnings for {len(e)} ends")
        # The original nudges the i-th end right by 1e-6 * (i % 18 + 6) (normalized units,
        # after the conversion to float32), which also keeps zero-length segments finite.
        e = e.astype(_F32).astype(np.float64)
        e[:, 0] += 1e-6 * (np.arange(n) % 18 + 6)
        self._strokes(self._to_px(b), self._to_px(e), _per_item(radius, n, "radius"),
                      _rgba(color, n))

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        """One segment (not nudged, unlike `lines`)."""
        b, e = _points(begin), _points(end)
        if len(b) != 1 or len(e) != 1:
            raise ValueError("line: begin and end must be single points; use lines()")
        self._strokes(self._to_px(b), self._to_px(e), _per_item(radius, 1, "radius"),
                      _rgba(color, 1))

    def triangles(self, a, b, c, color=0xFFFFFF):
        """Filled triangles with corners a[i], b[i], c[i] (n, 2): the pixels whose centres
        (i + 0.5, j + 0.5) are inside or on an edge, in the box floor(min)..ceil(max) - 1 of
        the corners, opaque (no antialiasing), as the original fills them."""
        pa, pb, pc = _points(a), _points(b), _points(c)
        n = len(pa)
        if not len(pb) == len(pc) == n:
            raise ValueError("triangles: a, b and c must have the same length")
        rgba = _rgba(color, n)
        w, h = self.res
        pa, pb, pc = self._to_px(pa), self._to_px(pb), self._to_px(pc)
        ok = np.isfinite(pa).all(axis=1) & np.isfinite(pb).all(axis=1) & \
            np.isfinite(pc).all(axis=1)
        ids = np.flatnonzero(ok)
        if len(ids) == 0:
            return
        pa, pb, pc = pa[ids], pb[ids], pc[ids]
        colors = rgba if len(rgba) == 1 else rgba[ids]
        lo = np.minimum(np.minimum(pa, pb), pc).astype(np.float64)
        hi = np.maximum(np.maximum(pa, pb), pc).astype(np.float64)
        i0 = np.clip(np.floor(lo[:, 0]), 0, w).astype(np.int64)
        j0 = np.clip(np.floor(lo[:, 1]), 0, h).astype(np.int64)
        i1 = np.clip(np.ceil(hi[:, 0]) - 1, -1, w - 1).astype(np.int64)
        j1 = np.clip(np.ceil(hi[:, 1]) - 1, -1, h - 1).astype(np.int64)
        edges = [(o[:, 0].copy(), o[:, 1].copy(), e[:, 0].copy(), e[:, 1].copy())
                 for o, e in ((pa, pb - pa), (pb, pc - pb), (pc, pa - pc))]
        frame = self._flat()
        for ch in _box_chunks(i0, i1, j0, j1):
            # on the inner side of each edge (cross product <= 0), for either orientation
            s = [ch.rel(ox, 0, 0.5) * ch.per(ey) - ch.rel(oy, 1, 0.5) * ch.per(ex) <= 0
                 for ox, oy, ex, ey in edges]
            inside = ((s[0] == s[1]) & (s[0] == s[2])).astype(_F32)
            pix, _, k = ch.lit(inside, h)
            _composite(frame, pix, None, k, colors)

    def triangle(self, a, b, c, color=0xFFFFFF):
        self.triangles(_points(a), _points(b), _points(c), color=color)

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        """The outline of an axis-aligned rectangle: four strokes, `radius` pixels thick on
        each side (the corners, covered twice, blend twice, as in the original)."""
        (x0, y0), (x1, y1) = _points(topleft)[0], _points(bottomright)[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self._strokes(self._to_px(corners), self._to_px(np.roll(corners, -1, axis=0)),
                      _per_item(radius, 1, "radius").repeat(4), _rgba(color, 1))

    @staticmethod
    def _arrow_heads(orig, direction, tip_scale=0.2, angle=45):
        """The three strokes of arrows, in normalized units: the shaft, then two head strokes
        from the tip along the direction turned by +-(180 - angle) degrees, tip_scale times
        as long as the shaft (in normalized units, so heads skew in non-square windows)."""
        t = math.radians(180 - angle)
        cs, sn = math.cos(t), math.sin(t)
        dx, dy = direction[:, 0], direction[:, 1]
        tip = orig + direction
        left = np.stack([dx * cs - dy * sn, dx * sn + dy * cs], axis=1)
        right = np.stack([dx * cs + dy * sn, dy * cs - dx * sn], axis=1)
        return [(orig, tip), (tip, tip + left * tip_scale), (tip, tip + right * tip_scale)]

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF, tip_scale=0.2, angle=45):
        """Arrows from orig[i] along direction[i] (normalized units): all shafts, then all
        first head strokes, then all second ones (three calls of `lines`, as the original)."""
        o = _points(orig)
        d = np.broadcast_to(_points(direction), o.shape)
        for b, e in self._arrow_heads(o, d, tip_scale, angle):
            self.lines(b, e, radius=radius, color=color)

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF, tip_scale=0.2, angle=45):
        """One arrow: its three strokes drawn with `line`."""
        o, d = _points(orig)[:1], _points(direction)[:1]
        for b, e in self._arrow_heads(o, d, tip_scale, angle):
            self.line(b, e, radius=radius, color=color)

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        """Text whose top-left corner is at `pos` (normalized, y up): the line's ascent
        starts there, 2 pixels to the right, as in the original; `font_size` is the height
        from descent to ascent in pixels. Rendered by Pillow, blended by its coverage."""
        Image = self._Image
        from PIL import ImageDraw
        font = _load_font(float(font_size))
        w, h = self.res
        x, y = self._to_px(_points(pos))[0].astype(np.float64)
        if not (np.isfinite(x) and np.isfinite(y)):
            return
        mask = Image.new("L", (w, h), 0)
        # the original places the text at the truncated position
        ImageDraw.Draw(mask).text((int(x) + 2, h - int(y)), str(content), fill=255, font=font)
        m = np.swapaxes(np.asarray(mask), 0, 1)[:, ::-1].reshape(-1)     # [x, y], y up
        pix = np.flatnonzero(m)
        _composite(self._flat(), pix, m[pix].astype(_F32) * _INV255, None, _rgba(color, 1))

    def contour(self, scalar_field, normalize=False):
        """Show a scalar image (w, h) in grey, optionally stretched to [0, 1] first. (The
        original maps it through matplotlib's 'plasma' colormap.)"""
        a = np.asarray(as_numpy(scalar_field), dtype=np.float32)
        if normalize:
            lo, hi = float(a.min()), float(a.max())
            a = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
        self.set_image(a)

    def vector_field(self, vector_field, arrow_spacing=5, color=0xFFFFFF):
        """Arrows of a (w, h, 2) field, every `arrow_spacing` cells, scaled so that the
        longest is a tenth of the window, as the original draws them."""
        v = np.asarray(as_numpy(vector_field), dtype=np.float64)
        nx, ny = v.shape[:2]
        scale = 0.1 / (np.linalg.norm(v, axis=-1).max() + 1e-16)
        xs = np.arange(0, 1, arrow_spacing / nx)
        ys = np.arange(0, 1, arrow_spacing / ny)
        # origins run over y fastest for each x (x-major), the vectors in [x, y] order
        orig = np.stack(np.meshgrid(xs, ys, indexing="ij"), axis=-1).reshape(-1, 2)
        d = (v[::arrow_spacing, ::arrow_spacing] * scale).reshape(-1, 2)
        self.arrows(orig, d, radius=1, color=color)

    @staticmethod
    def _field_base(w, h, bound):
        """Cell positions of a w x h pattern, `bound` cells in from the edges, x-major."""
        x = np.linspace(bound / w, 1 - bound / w, w)
        y = np.linspace(bound / h, 1 - bound / h, h)
        return np.stack(np.meshgrid(x, y, indexing="ij"), axis=-1).reshape(w * h, 2)

    def point_field(self, radius, color=0xFFFFFF, bound=0.5):
        """Discs on a grid with one radius per cell: `radius` (w, h)."""
        r = np.asarray(as_numpy(radius))
        if r.ndim != 2:
            raise ValueError(f"point_field: radius must be a 2-D array, got shape {r.shape}")
        self.circles(self._field_base(*r.shape, bound), radius=r.reshape(-1), color=color)

    def arrow_field(self, direction, radius=1, color=0xFFFFFF, bound=0.5, **kwargs):
        """Arrows on a grid, one direction (normalized units) per cell: `direction` (w, h, 2)."""
        d = np.asarray(as_numpy(direction))
        if d.ndim != 3 or d.shape[2] != 2:
            raise ValueError(f"arrow_field: direction must have shape (w, h, 2), got {d.shape}")
        self.arrows(self._field_base(*d.shape[:2], bound), d.reshape(-1, 2), radius=radius,
                    color=color, **kwargs)

    # -- widgets (a side panel in the window; plain values when headless) -----------------------
    def slider(self, text, minimum, maximum, step=1):
        w = _WidgetValue(minimum)
        if self._window is not None:
            self._window.add_slider(w, text, minimum, maximum, step)
        return w

    def label(self, text):
        w = _WidgetValue(0)
        if self._window is not None:
            self._window.add_label(w, text)
        return w

    def button(self, text, event_name=None):
        """A button that, when clicked, queues a PRESS event whose key is `event_name`."""
        name = event_name or text
        if self._window is not None:
            self._window.add_button(text, lambda: self._push_event(GUI.PRESS, name))
        return name

    # -- showing ------------------------------------------------------------------------------
    @property
    def has_window(self):
        """Whether the frame is shown in a window (False once the user closed it)."""
        return self._window is not None and not self._window.closed

    def show(self, file=None):
        """Present the frame (window, if any), write it to `file` if given (directories are
        created), then start the next frame from the background color."""
        if file:
            d = os.path.dirname(os.fspath(file))
            if d:
                os.makedirs(d, exist_ok=True)
            self._pil_image().save(file)
        if self._window is not None:
            self._window.present(self._pil_image())
            self._limit_fps()
        self.frame += 1
        self.clear()

    def _limit_fps(self):
        now = time.perf_counter()
        if self.fps_limit and self._last_show is not None:
            wait = 1.0 / self.fps_limit - (now - self._last_show)
            if wait > 0:
                time.sleep(wait)
                now = time.perf_counter()
        self._last_show = now

    @property
    def running(self):
        return self._running

    @running.setter
    def running(self, value):
        self._running = bool(value)

    def close(self):
        if self._window is not None:
            self._window.destroy()
            self._window = None
        self._running = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- events -------------------------------------------------------------------------------
    def _push_event(self, type, key, pos=None, modifier=(), delta=(0, 0)):
        """Queue an input event (the window's callbacks call this) and track held keys."""
        if pos is not None:
            self._cursor = pos
        if type == GUI.PRESS:
            self._pressed.add(key)
        elif type == GUI.RELEASE:
            self._pressed.discard(key)
        self._events.append(GUI.Event(type, key, self._cursor, modifier, delta))

    @staticmethod
    def _matches(e, filters):
        if not filters:
            return True
        for f in filters:
            if isinstance(f, tuple):
                if e.type == f[0] and e.key == f[1]:
                    return True
            elif f in (GUI.PRESS, GUI.RELEASE, GUI.MOTION):
                if e.type == f:
                    return True
            elif e.key == f:
                return True
        return False

    def get_event(self, *filters):
        """Take queued events until one matches a filter (an event type, a key, or a
        (type, key) pair; none: any event); set `self.event` to it and return True. Events
        that do not match are dropped. False when none is left (always, when headless)."""
        if self._window is not None:
            self._window.pump()
        while self._events:
            e = self._events.popleft()
            if self._matches(e, filters):
                self.event = e
                return True
        return False

    def get_events(self, *filters):
        """All queued events that match (see get_event), oldest first; the queue is emptied."""
        if self._window is not None:
            self._window.pump()
        events = [e for e in self._events if self._matches(e, filters)]
        self._events.clear()
        return events

    def is_pressed(self, *keys):
        """Whether any of `keys` (keys or mouse buttons) is held down."""
        if self._window is not None:
            self._window.pump()
        return any(_normalize_key(k) in self._pressed for k in keys)

    def get_cursor_pos(self):
        """The mouse position, normalized with y up ((0, 0) until the mouse moves)."""
        if self._window is not None:
            self._window.pump()
        return self._cursor


# -- the window ---------------------------------------------------------------------------------
_MODIFIER_KEYS = {"Shift_L": "Shift", "Shift_R": "Shift", "Control_L": "Control",
                  "Control_R": "Control", "Alt_L": "Alt", "Alt_R": "Alt", "Meta_L": "Alt",
                  "Meta_R": "Alt", "Option_L": "Alt", "Option_R": "Alt", "space": " "}


def _normalize_key(key):
    """Tk's key names -> ours: one name per modifier, ' ' for space, letters in lower case."""
    key = _MODIFIER_KEYS.get(key, key)
    return key.lower() if len(key) == 1 else key


_tk_root = None
_warned_no_window = False


def _open_window(gui, fullscreen):
    """A _TkWindow for `gui`, or None (with one warning per process) if Tk cannot start."""
    global _warned_no_window
    try:
        return _TkWindow(gui, fullscreen)
    except Exception as e:  # no tkinter, no ImageTk, or the display refused us
        if not _warned_no_window:
            _warned_no_window = True
            warnings.warn(f"ti.GUI: no window ({type(e).__name__}: {e}); drawing and "
                          f"show(file) still work", stacklevel=3)
        return None


class _TkWindow:
    """A Toplevel showing the frame, forwarding input to the GUI's event queue. All windows
    share one hidden Tk root, since Tk wants one interpreter per thread."""

    def __init__(self, gui, fullscreen):
        global _tk_root
        import tkinter
        from PIL import ImageTk
        self._tkinter, self._ImageTk = tkinter, ImageTk
        if _tk_root is None:
            root = tkinter.Tk()
            root.withdraw()
            _tk_root = root
        self.gui = gui
        top = self.top = tkinter.Toplevel(_tk_root)
        top.title(gui.name)
        top.resizable(False, False)
        if fullscreen:
            top.attributes("-fullscreen", True)
        top.protocol("WM_DELETE_WINDOW", self._on_close)
        top.bind("<Destroy>", self._on_destroy)
        self.view = tkinter.Label(top, bd=0, highlightthickness=0, bg="black")
        self.view.pack(side="left")
        self.panel = None
        self.photo = None
        self.closed = False
        top.bind("<KeyPress>", lambda e: self._key(GUI.PRESS, e))
        top.bind("<KeyRelease>", lambda e: self._key(GUI.RELEASE, e))
        self.view.bind("<ButtonPress>", lambda e: self._button(GUI.PRESS, e))
        self.view.bind("<ButtonRelease>", lambda e: self._button(GUI.RELEASE, e))
        self.view.bind("<Motion>", self._motion)
        self.view.bind("<MouseWheel>", self._wheel)          # Windows and macOS
        self.present(gui._pil_image())
        top.focus_force()

    # input ----------------------------------------------------------------------------------
    def _pos(self, e):
        w, h = self.gui.res
        return (e.x + 0.5) / w, 1.0 - (e.y + 0.5) / h

    @staticmethod
    def _modifiers(e):
        state = int(e.state) if isinstance(e.state, int) else 0
        return [name for bit, name in ((0x1, GUI.SHIFT), (0x4, GUI.CTRL), (0x8, GUI.ALT))
                if state & bit]

    def _key(self, type, e):
        # A printable character names itself (',' rather than Tk's 'comma'); other keys,
        # Return and Escape included, go by Tk's key symbol.
        key = e.char if len(e.char) == 1 and e.char.isprintable() else e.keysym
        self.gui._push_event(type, _normalize_key(key), modifier=self._modifiers(e))

    def _button(self, type, e):
        if e.num in (4, 5):                                  # X11 sends the wheel as buttons
            if type == GUI.PRESS:
                self.gui._push_event(GUI.MOTION, GUI.WHEEL, self._pos(e), self._modifiers(e),
                                     (0, 120 if e.num == 4 else -120))
            return
        names = {1: GUI.LMB, 2: GUI.MMB, 3: GUI.RMB}
        if sys.platform == "darwin":                         # Tk on macOS: 2 is the right one
            names = {1: GUI.LMB, 2: GUI.RMB, 3: GUI.MMB}
        if e.num in names:
            self.gui._push_event(type, names[e.num], self._pos(e), self._modifiers(e))

    def _motion(self, e):
        self.gui._push_event(GUI.MOTION, GUI.MOVE, self._pos(e), self._modifiers(e))

    def _wheel(self, e):
        self.gui._push_event(GUI.MOTION, GUI.WHEEL, self._pos(e), self._modifiers(e),
                             (0, int(e.delta)))

    def _on_close(self):
        self.gui._push_event(GUI.PRESS, GUI.EXIT)
        self.gui.running = False
        self.destroy()

    def _on_destroy(self, e):
        # The window went away without the close button (the window manager, or Tk being
        # torn down): a `while gui.running` loop must still end.
        if e.widget is self.top and not self.closed:
            self.closed = True
            self.gui._push_event(GUI.PRESS, GUI.EXIT)
            self.gui.running = False

    # output ---------------------------------------------------------------------------------
    def present(self, image):
        if self.closed:
            return
        if self.photo is None or (self.photo.width(), self.photo.height()) != image.size:
            self.photo = self._ImageTk.PhotoImage(image)
            self.view.configure(image=self.photo)
        else:
            self.photo.paste(image)                          # reuse the Tk image: faster
        self.pump()

    def pump(self):
        """Let Tk redraw and run our input callbacks."""
        if self.closed:
            return
        try:
            _tk_root.update()
        except self._tkinter.TclError:                      # the window went away under us
            self.closed = True

    # widgets --------------------------------------------------------------------------------
    def _side_panel(self):
        if self.panel is None:
            self.panel = self._tkinter.Frame(self.top)
            self.panel.pack(side="right", fill="y")
        return self.panel

    def add_slider(self, widget, text, minimum, maximum, step):
        tk = self._tkinter

        whole = all(isinstance(v, int) for v in (minimum, maximum, step))

        def moved(s):
            widget._value = int(round(float(s))) if whole else float(s)

        scale = tk.Scale(self._side_panel(), label=text, from_=minimum, to=maximum,
                         resolution=step, orient="horizontal", command=moved)
        scale.set(minimum)
        scale.pack(fill="x")
        widget._on_set = scale.set

    def add_label(self, widget, text):
        var = self._tkinter.StringVar(value=f"{text}: {widget.value}")
        self._tkinter.Label(self._side_panel(), textvariable=var, anchor="w").pack(fill="x")
        widget._on_set = lambda v: var.set(f"{text}: {v}")

    def add_button(self, text, command):
        self._tkinter.Button(self._side_panel(), text=text, command=command).pack(fill="x")

    def destroy(self):
        if not self.closed:
            self.closed = True
            try:
                self.top.destroy()
                _tk_root.update()
            except self._tkinter.TclError:
                pass
