"""Compiled versions of the hottest `ti.GUI` rasterizers, as fluxion kernels.

A frame full of small particles is thousands of tiny boxes: the NumPy rasterizers in
fluxion/gui/shapes.py spend most of their time on array bookkeeping for them (a dozen passes
over every candidate pixel and the rounds that keep overlapping blends in order), which made
`circles` of 8,192 particles ~15x slower than the original's compiled loop. Here the same rule
runs as one serial loop, disc after disc and pixel after pixel, so blends happen in drawing
order with no bookkeeping.

The frame and the shapes are NumPy arrays passed as ndarrays (no copy on the CPU, one compiled
instance for every GUI). The kernels are used only on a program already initialized for the
CPU: on a GPU every call would copy the frame both ways and run the serial loop on one GPU
thread, and a GUI drawn before `ti.init` must not initialize the program behind its back. The
NumPy path stays for those cases and gives the same picture up to float rounding (under
fast_math the compiler may fuse a multiply and an add).

Every value is float32 or int32 whatever the program's default_fp / default_ip, so that the
arithmetic is the original's.

`set_image` of a field reads it in place the same way (to_numpy would gather a vector
field's components into a fresh (w, h, n) array, which then had to be copied again into the
frame: two passes over a 1920x1080 image where one is needed).
"""
from __future__ import annotations

import numpy as np

import fluxion as ti
from fluxion.lang.field import Field, MatrixField, ScalarField
from fluxion.runtime import program
from fluxion.types import ndarray

_F32, _I32 = ti.f32, ti.i32
_F32_MAX = 3.4028234663852886e38
_INV255 = float(np.float32(1.0 / 255.0))   # shapes.INV255, exactly


def usable():
    """Whether the kernels may run now (see the module docstring)."""
    return program._state.initialized and not program.on_cuda()


# _box_writes: a program's writes into ndarrays are index-checked by default
# (passes/write_checks.py). The shapes' loops store to every pixel of their box, unconditionally
# (a pixel a shape does not cover is written back as it was: 1 * x + 0 * c, or x selected),
# because a check at the top of a range loop's body, affine in its index, is moved in front of
# the loop as one check of both ends (passes/bounds.py): one per box, not one per pixel and
# channel (those cost 10-30% of a frame of small shapes).


@ti.func
def _color(codes, colors, k, packed: ti.template()):
    """Shape k's colour as float32 RGBA: codes[k], 0xRRGGBB (low 24 bits; each byte times
    float32(1/255), alpha 1, as shapes.rgba converts it) when `packed`, else the row
    colors[k]."""
    one = ti.cast(1, _F32)
    rgba = ti.Vector([one, one, one, one], dt=_F32)
    if ti.static(packed):
        code = codes[k]
        for ch in ti.static(range(3)):
            rgba[ch] = ti.cast((code >> (16 - 8 * ch)) & 255, _F32) * ti.cast(_INV255, _F32)
    else:
        for ch in ti.static(range(4)):
            rgba[ch] = colors[k, ch]
    return rgba


@ti.func
def _finite(x):
    """Whether float32 x is finite (comparisons, false for NaN: fast_math here never assumes
    values finite)."""
    return ti.abs(x) <= ti.cast(_F32_MAX, _F32)


@ti.func
def _span(lo, hi, n):
    """The pixels [lo, hi] (float64, inclusive) clipped to 0..n - 1 as int32 (clipped as
    floats first, so that a far-away shape does not overflow the cast; empty: hi < lo)."""
    return (ti.cast(ti.min(ti.max(lo, 0.0), ti.cast(n, ti.f64)), _I32),
            ti.cast(ti.min(ti.max(hi, -1.0), ti.cast(n - 1, ti.f64)), _I32))


@ti.kernel
def strokes(frame: ndarray(dtype=ti.f32, ndim=2), w: ti.i32, h: ti.i32,
            a: ndarray(dtype=ti.f32, ndim=2), b: ndarray(dtype=ti.f32, ndim=2),
            radius: ndarray(dtype=ti.f32, ndim=1), per_radius: ti.i32,
            codes: ndarray(dtype=ti.i32, ndim=1), colors: ndarray(dtype=ti.f32, ndim=2),
            per_shape: ti.i32, packed: ti.template()):
    """Segment s, a[s] -> b[s] (float32 pixels), radius radius[s * per_radius], in drawing
    order over the frame (float32 (w * h, 4), pixel (i, j) at row i * h + j), coloured as in
    `discs`: shapes.strokes' rule (the distance of the point (i + 0.5, j + 0.5) taken in the
    segment's frame, a capsule; the box of the ends rounded and widened by ceil(r + 0.5),
    in float64). A segment with a non-finite value or r <= 0 is not drawn; one of zero
    length is a disc around a."""
    one = ti.cast(1, _F32)
    zero = ti.cast(0, _F32)
    half = ti.cast(0.5, _F32)
    ti.loop_config(serialize=True)
    for s in range(a.shape[0]):
        ax, ay, bx, by = a[s, 0], a[s, 1], b[s, 0], b[s, 1]
        r = radius[s * per_radius]
        if not (r > zero and _finite(r) and _finite(ax) and _finite(ay) and _finite(bx)
                and _finite(by)):
            continue
        dx, dy = bx - ax, by - ay
        length = ti.sqrt(dx * dx + dy * dy)
        ux, uy = one, zero
        if length != zero:
            inv = one / length
            ux, uy = inv * dx, inv * dy
        ri = ti.ceil(ti.cast(r, ti.f64) + 0.5)
        xa, xb = ti.floor(ti.cast(ax, ti.f64) + 0.5), ti.floor(ti.cast(bx, ti.f64) + 0.5)
        ya, yb = ti.floor(ti.cast(ay, ti.f64) + 0.5), ti.floor(ti.cast(by, ti.f64) + 0.5)
        # (numpy truncates towards zero: for x + 0.5 < 0 that is the ceiling)
        if ti.cast(ax, ti.f64) + 0.5 < 0.0:
            xa = ti.ceil(ti.cast(ax, ti.f64) + 0.5)
        if ti.cast(bx, ti.f64) + 0.5 < 0.0:
            xb = ti.ceil(ti.cast(bx, ti.f64) + 0.5)
        if ti.cast(ay, ti.f64) + 0.5 < 0.0:
            ya = ti.ceil(ti.cast(ay, ti.f64) + 0.5)
        if ti.cast(by, ti.f64) + 0.5 < 0.0:
            yb = ti.ceil(ti.cast(by, ti.f64) + 0.5)
        i0, i1 = _span(ti.min(xa, xb) - ri, ti.max(xa, xb) + ri, w)
        j0, j1 = _span(ti.min(ya, yb) - ri, ti.max(ya, yb) + ri, h)
        rgba = _color(codes, colors, s * per_shape, packed)
        for i in range(i0, i1 + 1):
            px = (ti.cast(i, _F32) + half) - ax
            for j in range(j0, j1 + 1):
                py = (ti.cast(j, _F32) + half) - ay
                across = ux * py - uy * px
                along = ux * px + uy * py
                if along > zero:
                    along = ti.max(along - length, zero)
                cover = r - ti.sqrt(across * across + along * along)
                # (blended where it is 0 too, to no effect, so that the stores are not
                # under an `if`: see _box_writes)
                cover = ti.min(ti.max(cover, zero), one)
                keep = one - cover
                p = i * h + j
                for ch in ti.static(range(4)):
                    frame[p, ch] = keep * frame[p, ch] + cover * rgba[ch]


@ti.kernel
def triangles(frame: ndarray(dtype=ti.f32, ndim=2), w: ti.i32, h: ti.i32,
              pa: ndarray(dtype=ti.f32, ndim=2), pb: ndarray(dtype=ti.f32, ndim=2),
              pc: ndarray(dtype=ti.f32, ndim=2), codes: ndarray(dtype=ti.i32, ndim=1),
              colors: ndarray(dtype=ti.f32, ndim=2), per_shape: ti.i32,
              packed: ti.template()):
    """Triangle s, corners pa[s], pb[s], pc[s] (float32 pixels), fills in drawing order the
    pixels whose centres are inside or on an edge (the same side of the three edges, either
    winding), in the box floor(min)..ceil(max) - 1 of its corners: opaque, the colour
    replaces the pixel (shapes.triangles' rule). A triangle with a non-finite corner is not
    drawn."""
    zero = ti.cast(0, _F32)
    half = ti.cast(0.5, _F32)
    ti.loop_config(serialize=True)
    for s in range(pa.shape[0]):
        ax, ay, bx, by, cx, cy = pa[s, 0], pa[s, 1], pb[s, 0], pb[s, 1], pc[s, 0], pc[s, 1]
        if not (_finite(ax) and _finite(ay) and _finite(bx) and _finite(by) and _finite(cx)
                and _finite(cy)):
            continue
        i0, i1 = _span(ti.floor(ti.cast(ti.min(ti.min(ax, bx), cx), ti.f64)),
                       ti.ceil(ti.cast(ti.max(ti.max(ax, bx), cx), ti.f64)) - 1.0, w)
        j0, j1 = _span(ti.floor(ti.cast(ti.min(ti.min(ay, by), cy), ti.f64)),
                       ti.ceil(ti.cast(ti.max(ti.max(ay, by), cy), ti.f64)) - 1.0, h)
        e0x, e0y = bx - ax, by - ay
        e1x, e1y = cx - bx, cy - by
        e2x, e2y = ax - cx, ay - cy
        rgba = _color(codes, colors, s * per_shape, packed)
        for i in range(i0, i1 + 1):
            x = ti.cast(i, _F32) + half
            for j in range(j0, j1 + 1):
                y = ti.cast(j, _F32) + half
                s0 = (x - ax) * e0y - (y - ay) * e0x <= zero
                s1 = (x - bx) * e1y - (y - by) * e1x <= zero
                s2 = (x - cx) * e2y - (y - cy) * e2x <= zero
                inside = s0 == s1 and s1 == s2
                p = i * h + j
                for ch in ti.static(range(4)):      # (not under an `if`: see _box_writes)
                    frame[p, ch] = ti.select(inside, rgba[ch], frame[p, ch])


@ti.kernel
def discs(frame: ndarray(dtype=ti.f32, ndim=2), w: ti.i32, h: ti.i32,
          pos: ndarray(dtype=ti.f32, ndim=2), radius: ndarray(dtype=ti.f32, ndim=1),
          per_radius: ti.i32, codes: ndarray(dtype=ti.i32, ndim=1),
          colors: ndarray(dtype=ti.f32, ndim=2), per_shape: ti.i32, packed: ti.template()):
    """Disc s, centre pos[s] * (w, h) (float32, as GUI._to_px) and radius
    radius[s * per_radius] (pixels), covers the pixels (i, j) of its box
    [ceil(c - r), floor(c + r)] (clipped to the frame) with coverage min(r - |(i, j) - c|, 1)
    where that is positive, blended over the frame (float32 (w * h, 4), pixel (i, j) at
    row i * h + j) in drawing order: shapes.discs' rule. Its colour is
    codes[s * per_shape], 0xRRGGBB (low 24 bits; each byte times float32(1/255), alpha 1,
    as shapes.rgba converts it) when `packed`, else the RGBA row colors[s * per_shape].
    Taking positions and colours as the caller has them spares the NumPy passes that made
    them pixels and float rows (most of a frame of particles besides this loop). A disc
    with a non-finite value or r <= 0 is not drawn."""
    one = ti.cast(1, _F32)
    zero = ti.cast(0, _F32)
    big = ti.cast(_F32_MAX, _F32)
    fw, fh = ti.cast(w, _F32), ti.cast(h, _F32)
    ti.loop_config(serialize=True)
    for s in range(pos.shape[0]):
        cx, cy, r = pos[s, 0] * fw, pos[s, 1] * fh, radius[s * per_radius]
        # comparisons, false for NaN (fast_math here never assumes values finite)
        if not (r > zero and r <= big and ti.abs(cx) <= big and ti.abs(cy) <= big):
            continue
        # clipped as floats first, so that a far-away disc does not overflow the cast
        i0 = ti.cast(ti.min(ti.max(ti.ceil(cx - r), zero), fw), _I32)
        i1 = ti.cast(ti.min(ti.max(ti.floor(cx + r), -one), ti.cast(w - 1, _F32)), _I32)
        j0 = ti.cast(ti.min(ti.max(ti.ceil(cy - r), zero), fh), _I32)
        j1 = ti.cast(ti.min(ti.max(ti.floor(cy + r), -one), ti.cast(h - 1, _F32)), _I32)
        rgba = _color(codes, colors, s * per_shape, packed)
        for i in range(i0, i1 + 1):
            dx = ti.cast(i, _F32) - cx
            for j in range(j0, j1 + 1):
                dy = ti.cast(j, _F32) - cy
                a = r - ti.sqrt(dx * dx + dy * dy)
                # (blended where it is 0 too, to no effect, so that the stores are not
                # under an `if`: see _box_writes)
                a = ti.min(ti.max(a, zero), one)
                keep = one - a
                p = i * h + j
                for ch in ti.static(range(4)):
                    frame[p, ch] = keep * frame[p, ch] + a * rgba[ch]


@ti.kernel
def field_to_frame(f: ti.template(), n: ti.template(), frame: ndarray(dtype=ti.f32, ndim=3),
                   alpha: ti.f32, set_alpha: ti.i32):
    """A float field's values into the frame's red, green and blue (frame (w, h, 4), the
    field w x h without offset), read where they are: `n` is 0 for a scalar field (grey),
    else the vector field's size (1: grey; 2: blue 0), set_image's rule; alpha becomes
    `alpha` where set_alpha is 1 (else the caller writes it)."""
    for i, j in ti.ndrange(frame.shape[0], frame.shape[1]):
        if ti.static(n == 0):
            for k in ti.static(range(3)):
                frame[i, j, k] = ti.cast(f[i, j], _F32)
        elif ti.static(n == 1):
            for k in ti.static(range(3)):
                frame[i, j, k] = ti.cast(f[i, j][0], _F32)
        else:
            v = f[i, j]
            for k in ti.static(range(3)):
                if ti.static(k < n):
                    frame[i, j, k] = ti.cast(v[k], _F32)
                else:
                    frame[i, j, k] = ti.cast(0, _F32)
        if set_alpha:
            frame[i, j, 3] = alpha


def field_channels(f, res):
    """field_to_frame's `n` for a field it can copy into a frame of `res` (w, h), else None:
    a scalar or vector (up to 4) field of f32 or f64, of that shape, without offset."""
    if not isinstance(f, Field) or tuple(f.shape) != tuple(res) or f.dtype not in (ti.f32,
                                                                                   ti.f64):
        return None
    if f.offset is not None and any(f.offset):
        return None
    if isinstance(f, ScalarField):
        return 0
    if isinstance(f, MatrixField) and f.ndim == 1 and 1 <= f.n <= 4:
        return f.n
    return None
