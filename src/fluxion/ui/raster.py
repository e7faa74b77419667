"""The rasteriser of `ti.ui`: fluxion kernels that draw into a window's frame.

The frame is numpy memory passed to the kernels as ndarrays (not fields), so that every
window and every draw call of a program shares one compiled instance of each kernel, and the
frame is already the array that `get_image_buffer_as_numpy` hands out. It is indexed [x, y]
with y up; pixel (i, j) covers [i, i+1] x [j, j+1] and is sampled at its centre.

Primitives are drawn in two passes so that the picture does not depend on how the threads
interleave:
  * splat: each primitive, in parallel, finds the pixels it covers and writes a key there by
    an atomic: in 2-D the primitive's number (atomic max: the last one drawn wins, as a GPU
    draws them in order), in 3-D its depth in the high 32 bits above its number (atomic min:
    the nearest wins, ties by number);
  * resolve: each pixel, in parallel, colours itself from the primitive its key names
    (interpolating per-vertex colours, and in 3-D shading it), once per pixel.
"""
from __future__ import annotations

import fluxion as ti

_nd = ti.types.ndarray
_v2, _v3 = ti.math.vec2, ti.math.vec3
NO_ID = -1                       # ids: no 2-D primitive here
NO_KEY = (1 << 63) - 1           # keys: nothing in the 3-D scene here


# -- the frame -------------------------------------------------------------------------------
@ti.kernel
def fill(rgb: _nd(dtype=_v3, ndim=2), c: _v3):
    for i, j in rgb:
        rgb[i, j] = c


@ti.kernel
def fill_i32(a: _nd(dtype=ti.i32, ndim=2), v: ti.i32):
    for i, j in a:
        a[i, j] = v


@ti.kernel
def fill_i64(a: _nd(dtype=ti.i64, ndim=2), v: ti.i64):
    for i, j in a:
        a[i, j] = v


@ti.kernel
def blit(rgb: _nd(dtype=_v3, ndim=2), img: _nd(dtype=_v3, ndim=2)):
    """The image stretched over the whole frame, nearest texel (the window's size need not be
    the image's)."""
    w, h = rgb.shape[0], rgb.shape[1]
    iw, ih = img.shape[0], img.shape[1]
    for i, j in rgb:
        si = ti.min(ti.cast((i + 0.5) * iw / w, ti.i32), iw - 1)
        sj = ti.min(ti.cast((j + 0.5) * ih / h, ti.i32), ih - 1)
        rgb[i, j] = img[si, sj]


@ti.kernel
def blend(rgb: _nd(dtype=_v3, ndim=2), over: _nd(dtype=ti.math.vec4, ndim=2), x0: ti.i32,
          y0: ti.i32):
    """`over` (straight alpha) composited over the frame, its pixel [0, 0] on [x0, y0]."""
    w, h = rgb.shape[0], rgb.shape[1]
    for i, j in over:
        o = over[i, j]
        x, y = x0 + i, y0 + j
        if o.w > 0.0 and x >= 0 and x < w and y >= 0 and y < h:
            rgb[x, y] = rgb[x, y] * (1.0 - o.w) + ti.Vector([o.x, o.y, o.z]) * o.w


# -- 2-D: circles, triangles, thick lines (positions in pixels, y up) ------------------------
@ti.func
def _box(lo, hi, w, h):
    return (ti.max(ti.cast(ti.floor(lo.x), ti.i32), 0), ti.min(ti.cast(ti.ceil(hi.x), ti.i32), w),
            ti.max(ti.cast(ti.floor(lo.y), ti.i32), 0), ti.min(ti.cast(ti.ceil(hi.y), ti.i32), h))


@ti.kernel
def splat_circles(ids: _nd(dtype=ti.i32, ndim=2), centers: _nd(dtype=_v2, ndim=1),
                  radii: _nd(dtype=ti.f32, ndim=1), base: ti.i32):
    """A disc covers the pixels whose centres are within its radius, and at least the pixel
    its centre lies in (so that a particle smaller than a pixel still shows)."""
    w, h = ids.shape[0], ids.shape[1]
    for c in centers:
        p, r = centers[c], radii[c]
        x0, x1, y0, y1 = _box(p - r, p + r, w, h)
        for i in range(x0, x1):
            for j in range(y0, y1):
                d = ti.Vector([i + 0.5, j + 0.5]) - p
                if d.dot(d) <= r * r:
                    ti.atomic_max(ids[i, j], base + c)
        ci, cj = ti.cast(ti.floor(p.x), ti.i32), ti.cast(ti.floor(p.y), ti.i32)
        if ci >= 0 and ci < w and cj >= 0 and cj < h:
            ti.atomic_max(ids[ci, cj], base + c)


@ti.func
def _edge(a, b, p):
    return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)


@ti.func
def _oriented(a, b, s):
    """Edge a -> b of a triangle whose area has sign s, as (from, to, sign): from the edge's
    lexicographically lower end, so that two triangles sharing an edge evaluate the same
    _edge(from, to, p) there, with opposite signs, and a pixel centre on it is covered by
    one of them at least (each from its own end, rounding could leave it to neither: holes
    along a mesh's diagonals). Covered: sign * _edge(from, to, p) >= 0 for the three."""
    lo, hi, sg = a, b, s
    if b.x < a.x or (b.x == a.x and b.y < a.y):
        lo, hi, sg = b, a, -s
    return lo, hi, sg


@ti.kernel
def splat_triangles(ids: _nd(dtype=ti.i32, ndim=2), v: _nd(dtype=_v2, ndim=1), base: ti.i32):
    """Triangle t is v[3t], v[3t+1], v[3t+2], either winding; it covers the pixels whose
    centres are inside or on its edges."""
    w, h = ids.shape[0], ids.shape[1]
    for t in range(v.shape[0] // 3):
        a, b, c = v[3 * t], v[3 * t + 1], v[3 * t + 2]
        area = _edge(a, b, c)
        if area != 0.0:
            s = 1.0 if area > 0.0 else -1.0
            p0, q0, s0 = _oriented(b, c, s)
            p1, q1, s1 = _oriented(c, a, s)
            p2, q2, s2 = _oriented(a, b, s)
            x0, x1, y0, y1 = _box(ti.min(ti.min(a, b), c), ti.max(ti.max(a, b), c), w, h)
            for i in range(x0, x1):
                for j in range(y0, y1):
                    p = ti.Vector([i + 0.5, j + 0.5])
                    if s0 * _edge(p0, q0, p) >= 0.0 and s1 * _edge(p1, q1, p) >= 0.0 \
                            and s2 * _edge(p2, q2, p) >= 0.0:
                        ti.atomic_max(ids[i, j], base + t)


@ti.func
def _segment_t(a, b, p):
    d = b - a
    n = d.dot(d)
    t = 0.0
    if n > 0.0:
        t = ti.min(ti.max((p - a).dot(d) / n, 0.0), 1.0)
    return t


@ti.kernel
def splat_lines(ids: _nd(dtype=ti.i32, ndim=2), v: _nd(dtype=_v2, ndim=1),
                half_width: ti.f32, base: ti.i32):
    """Segment s is v[2s] to v[2s+1]; it covers the pixels whose centres are within half its
    width of it (round ends)."""
    w, h = ids.shape[0], ids.shape[1]
    r = ti.max(half_width, 0.5)
    for s in range(v.shape[0] // 2):
        a, b = v[2 * s], v[2 * s + 1]
        x0, x1, y0, y1 = _box(ti.min(a, b) - r, ti.max(a, b) + r, w, h)
        for i in range(x0, x1):
            for j in range(y0, y1):
                p = ti.Vector([i + 0.5, j + 0.5])
                q = a + _segment_t(a, b, p) * (b - a)
                if (p - q).dot(p - q) <= r * r:
                    ti.atomic_max(ids[i, j], base + s)


@ti.kernel
def resolve_flat(rgb: _nd(dtype=_v3, ndim=2), ids: _nd(dtype=ti.i32, ndim=2),
                 colors: _nd(dtype=_v3, ndim=1), base: ti.i32):
    """Pixels won by this draw call take their primitive's colour."""
    for i, j in ids:
        k = ids[i, j] - base
        if k >= 0:
            rgb[i, j] = colors[k]


@ti.kernel
def resolve_triangles(rgb: _nd(dtype=_v3, ndim=2), ids: _nd(dtype=ti.i32, ndim=2),
                      v: _nd(dtype=_v2, ndim=1), colors: _nd(dtype=_v3, ndim=1), base: ti.i32):
    """Per-vertex colours interpolated at the pixel's centre (barycentric)."""
    for i, j in ids:
        t = ids[i, j] - base
        if t >= 0:
            a, b, c = v[3 * t], v[3 * t + 1], v[3 * t + 2]
            p = ti.Vector([i + 0.5, j + 0.5])
            area = _edge(a, b, c)
            wa, wb = _edge(b, c, p) / area, _edge(c, a, p) / area
            # from the third vertex's colour: a triangle of one colour gets it exactly
            c3 = colors[3 * t + 2]
            rgb[i, j] = c3 + wa * (colors[3 * t] - c3) + wb * (colors[3 * t + 1] - c3)


@ti.kernel
def resolve_lines(rgb: _nd(dtype=_v3, ndim=2), ids: _nd(dtype=ti.i32, ndim=2),
                  v: _nd(dtype=_v2, ndim=1), colors: _nd(dtype=_v3, ndim=1), base: ti.i32):
    """Per-vertex colours interpolated along the segment."""
    for i, j in ids:
        s = ids[i, j] - base
        if s >= 0:
            a, b = v[2 * s], v[2 * s + 1]
            t = _segment_t(a, b, ti.Vector([i + 0.5, j + 0.5]))
            rgb[i, j] = colors[2 * s] + t * (colors[2 * s + 1] - colors[2 * s])
