"""The shapes of `ti.GUI`: its arguments made arrays, and the pixels each shape covers.

Conventions of the original system, kept so that its scripts draw the same picture (to
float32 rounding): positions are normalized, in [0, 1]^2, with y up, and converted to float32
pixels before anything else; radii are float32 pixels; colors are 0xRRGGBB integers (one, or
one per element) or float RGB in [0, 1]. Each rasterizer visits the pixels of the shapes'
bounding boxes and hands their coverage to `composite` (fluxion/gui/composite.py). Discs and
strokes are antialiased, triangles are not; text is rendered by Pillow (the original's font is
not at hand).
"""
from __future__ import annotations

import math

import numpy as np

from fluxion.tools.image import as_numpy
from fluxion.gui.composite import box_chunks, composite

_FONTS = {}     # Pillow fonts by size, loaded once

_F32 = np.float32
INV255 = _F32(1.0 / 255.0)
_I64 = 1 << 63


def rgba(color, n=None):
    """Colors -> float32 RGBA (k, 4) with alpha 1; k = 1 (one color for all) or n (one per
    element; any number when n is None, as for a palette).

    Integers (a scalar or one per element) are 0xRRGGBB, each byte times float32(1/255) as
    the original converts them; floats whose last axis is 3 are RGB in [0, 1], other floats
    0xRRGGBB values."""
    if type(color) is int and -_I64 <= color < _I64:
        # one 0xRRGGBB integer (the common case, and every frame's background): the general
        # path below costs more than a small shape's drawing
        rgb = np.array([(color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF], _F32)
        rgb *= INV255
        return np.append(rgb, _F32(1))[None]
    c = as_numpy(color)
    if np.issubdtype(c.dtype, np.floating) and c.shape[-1:] == (3,):
        rgb = np.clip(c.reshape(-1, 3), 0, 1).astype(_F32)
    else:
        # other floats hold 0xRRGGBB values, converted to integers as the original does
        if not (np.issubdtype(c.dtype, np.integer) or np.issubdtype(c.dtype, np.floating)):
            raise ValueError(f"colors must be 0xRRGGBB integers or RGB floats, got {c.dtype}")
        c = np.nan_to_num(c).reshape(-1).astype(np.int64)
        # bytes 2, 1, 0 of each integer are (c >> 16) & 0xFF, (c >> 8) & 0xFF and c & 0xFF
        lsb = c.astype("<i8", copy=False).view(np.uint8).reshape(-1, 8)
        out = np.empty((len(c), 4), _F32)
        out[:, :3] = lsb[:, 2::-1]
        out[:, :3] *= INV255
        out[:, 3] = 1
        rgb = out
    if n is not None and len(rgb) not in (1, n):
        raise ValueError(f"{len(rgb)} colors for {n} elements")
    if rgb.shape[1] == 4:
        return rgb
    return np.concatenate([rgb, np.ones((len(rgb), 1), _F32)], axis=1)


def codes(color, n):
    """Integer colors (one 0xRRGGBB, or one per element) as int32 (k,), k = 1 or n, holding
    each value's low 32 bits (the low 24 are the color, as `rgba` reads them); None for
    colors that are not integers (floats: `rgba` converts those)."""
    if type(color) is int and -_I64 <= color < _I64:
        return np.array([color & 0xFFFFFF], np.int32)
    c = as_numpy(color)
    if c.dtype.kind not in "iu":
        return None
    c = c.reshape(-1)
    if len(c) not in (1, n):
        raise ValueError(f"{len(c)} colors for {n} elements")
    if c.dtype.itemsize == 4:       # (u)int32 as they are: the same low 32 bits
        return np.ascontiguousarray(c).view(np.int32)
    if c.dtype.itemsize < 4:        # sign-extended, as int64 extends them
        return c.astype(np.int32)
    return (c & 0xFFFFFF).astype(np.int32)


def per_item(value, n, what):
    """One value or one per element -> float32 (n,) (radii are float32 in the original)."""
    v = np.asarray(as_numpy(value), dtype=np.float64).reshape(-1)
    if len(v) not in (1, n):
        raise ValueError(f"{len(v)} {what} values for {n} elements")
    return np.broadcast_to(v.astype(_F32), (n,))


def points(pos):
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


def load_font(size):
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


# -- rasterizers: `frame` is the flattened frame (w * h, 4), `res` its (w, h) ----------------
def discs(frame, res, c, r, rgba):
    """Discs as the original draws them: centre c (pixels), pixel (i, j) at the integer
    point (i, j), coverage clamp(r - distance, 0, 1), over the box
    [ceil(c - r), floor(c + r)]. So a disc of radius 0.5 is a faint dot. (On a CPU program
    GUI.circles runs the same rule as a kernel: fluxion/gui/kernels.py.)"""
    w, h = res
    if len(c) == 0:
        return
    ok = np.isfinite(c).all(axis=1) & np.isfinite(r) & (r > 0)
    colors = rgba
    if not ok.all():
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
    cx, cy = c[:, 0].copy(), c[:, 1].copy()
    for ch in box_chunks(i0, i1, j0, j1):
        dx, dy = ch.rel(cx, 0), ch.rel(cy, 1)      # pixel minus centre: same length
        alpha = ch.per(r) - np.sqrt(dx * dx + dy * dy)
        composite(frame, *ch.lit(alpha, h), colors)


def strokes(frame, res, a, b, r, rgba):
    """Segments a -> b (float32 pixels) as the original strokes them: pixel (i, j) is
    the point (i + 0.5, j + 0.5); its distance to the segment is taken in the frame of
    the segment (u across, v along from a, v beyond the end shortened by the length:
    a capsule); coverage clamp(r - distance, 0, 1) over the box of the endpoints rounded
    (x + 0.5, truncated) and widened by ceil(r + 0.5)."""
    w, h = res
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
    ax, ay, ux, uy = a[:, 0].copy(), a[:, 1].copy(), u[:, 0].copy(), u[:, 1].copy()
    for ch in box_chunks(i0, i1, j0, j1):
        px, py = ch.rel(ax, 0, 0.5), ch.rel(ay, 1, 0.5)
        sx, sy = ch.per(ux), ch.per(uy)
        across = sx * py - sy * px
        along = sx * px + sy * py
        along = np.where(along > 0, np.maximum(along - ch.per(length), 0), along)
        alpha = ch.per(r) - np.sqrt(across * across + along * along)
        composite(frame, *ch.lit(alpha, h), colors)


def triangles(frame, res, pa, pb, pc, rgba):
    """Filled triangles with corners pa[i], pb[i], pc[i] (float32 pixels): the pixels whose
    centres (i + 0.5, j + 0.5) are inside or on an edge, in the box floor(min)..ceil(max) - 1
    of the corners, opaque (no antialiasing), as the original fills them."""
    w, h = res
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
    for ch in box_chunks(i0, i1, j0, j1):
        # on the inner side of each edge (cross product <= 0), for either orientation
        s = [ch.rel(ox, 0, 0.5) * ch.per(ey) - ch.rel(oy, 1, 0.5) * ch.per(ex) <= 0
             for ox, oy, ex, ey in edges]
        inside = ((s[0] == s[1]) & (s[0] == s[2])).astype(_F32)
        pix, _, k = ch.lit(inside, h)
        composite(frame, pix, None, k, colors)


def arrow_heads(orig, direction, tip_scale=0.2, angle=45):
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


def text(frame, res, Image, content, x, y, font_size, rgba):
    """Text whose top-left corner is at pixel (x, y) (y up): the line's ascent starts there,
    2 pixels to the right, as in the original; `font_size` is the height from descent to
    ascent in pixels. Rendered by Pillow (`Image` is PIL.Image), blended by its coverage."""
    from PIL import ImageDraw
    font = load_font(float(font_size))
    w, h = res
    mask = Image.new("L", (w, h), 0)
    # the original places the text at the truncated position
    ImageDraw.Draw(mask).text((int(x) + 2, h - int(y)), str(content), fill=255, font=font)
    m = np.swapaxes(np.asarray(mask), 0, 1)[:, ::-1].reshape(-1)     # [x, y], y up
    pix = np.flatnonzero(m)
    composite(frame, pix, m[pix].astype(_F32) * INV255, None, rgba)
