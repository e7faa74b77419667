"""The 3-D half of `ti.ui`'s rasteriser: a scene's triangles, sphere particles and lines, with
a depth test, shaded once per pixel (see fluxion/ui/raster.py for the frame and the two
passes).

Positions are projected by the camera's view-projection matrix to (x, y in pixels, depth in
[0, 1], 1 / w); depth and 1 / w are affine in screen space, so a triangle's are interpolated
with screen barycentrics and its attributes perspective-correctly. A particle is a sphere, not
a flat disc: each pixel of its screen box casts its own ray, `o + t d`, whose origin and
direction are affine in the pixel's coordinates (the camera's `ray basis`, with `d` scaled so
that `t` is the view depth), and the sphere's nearest intersection gives the pixel's depth
and normal.

A key is depth bits << 32 | primitive number; primitives are numbered triangles first, then
particles, then lines.
"""
from __future__ import annotations

import fluxion as ti
from fluxion.ui.raster import _box, _edge, _oriented, _segment_t

_nd = ti.types.ndarray
_v3, _v4 = ti.math.vec3, ti.math.vec4
_m4 = ti.math.mat4


@ti.func
def _key(z, n):
    return (ti.cast(ti.bit_cast(z, ti.i32), ti.i64) << 32) | ti.cast(n, ti.i64)


@ti.kernel
def project(pos: _nd(dtype=_v3, ndim=1), vp: _m4, out: _nd(dtype=_v4, ndim=1),
            w: ti.i32, h: ti.i32):
    """(x, y in pixels, depth in [0, 1], 1 / w); 1 / w < 0 marks a point behind the eye."""
    for k in pos:
        c = vp @ ti.Vector([pos[k].x, pos[k].y, pos[k].z, 1.0])
        inv_w = -1.0
        if c.w > 1e-7:
            inv_w = 1.0 / c.w
        out[k] = ti.Vector([(c.x * inv_w + 1.0) * 0.5 * w, (c.y * inv_w + 1.0) * 0.5 * h,
                            (c.z * inv_w + 1.0) * 0.5, inv_w])


@ti.kernel
def splat_triangles(keys: _nd(dtype=ti.i64, ndim=2), s: _nd(dtype=_v4, ndim=1),
                    idx: _nd(dtype=ti.i32, ndim=1), base: ti.i32):
    """Triangle t is s[idx[3t]], s[idx[3t+1]], s[idx[3t+2]] (projected vertices, each once
    however many triangles share it); it covers the pixel centres inside or on its edges,
    either winding (a one-sided mesh is shaded, not culled, from behind)."""
    w, h = keys.shape[0], keys.shape[1]
    for t in range(idx.shape[0] // 3):
        a4, b4, c4 = s[idx[3 * t]], s[idx[3 * t + 1]], s[idx[3 * t + 2]]
        if a4.w > 0.0 and b4.w > 0.0 and c4.w > 0.0:
            a, b, c = a4.xy, b4.xy, c4.xy
            area = _edge(a, b, c)
            if area != 0.0:
                sg = 1.0 if area > 0.0 else -1.0
                # (coverage by raster._oriented's edges: no holes along shared edges)
                p0, q0, s0 = _oriented(b, c, sg)
                p1, q1, s1 = _oriented(c, a, sg)
                p2, q2, s2 = _oriented(a, b, sg)
                x0, x1, y0, y1 = _box(ti.min(ti.min(a, b), c), ti.max(ti.max(a, b), c), w, h)
                for i in range(x0, x1):
                    for j in range(y0, y1):
                        p = ti.Vector([i + 0.5, j + 0.5])
                        if s0 * _edge(p0, q0, p) >= 0.0 and s1 * _edge(p1, q1, p) >= 0.0 \
                                and s2 * _edge(p2, q2, p) >= 0.0:
                            wa, wb = _edge(b, c, p) / area, _edge(c, a, p) / area
                            wc = 1.0 - wa - wb
                            z = wa * a4.z + wb * b4.z + wc * c4.z
                            if z >= 0.0 and z <= 1.0:
                                key = _key(z, base + t)
                                if key < keys[i, j]:
                                    ti.atomic_min(keys[i, j], key)


@ti.func
def _ray(rb, i, j):
    """The ray through pixel (i, j)'s centre: origin, and direction scaled to unit depth."""
    x, y = i + 0.5, j + 0.5
    o = ti.Vector([rb[0, 0], rb[0, 1], rb[0, 2]]) + x * ti.Vector([rb[1, 0], rb[1, 1], rb[1, 2]]) \
        + y * ti.Vector([rb[2, 0], rb[2, 1], rb[2, 2]])
    d = ti.Vector([rb[3, 0], rb[3, 1], rb[3, 2]]) + x * ti.Vector([rb[4, 0], rb[4, 1], rb[4, 2]]) \
        + y * ti.Vector([rb[5, 0], rb[5, 1], rb[5, 2]])
    return o, d


@ti.func
def _hit(o, d, c, r):
    """View depth of the ray's nearest entry into the sphere, for a pixel that
    splat_particles found it covers; a ray that its arithmetic found to graze the sphere
    may miss it here by a rounding (the two are compiled apart), and gets the point of
    closest approach."""
    oc = o - c
    a = d.dot(d)
    b = oc.dot(d)
    q = b * b - a * (oc.dot(oc) - r * r)
    return (-b - ti.sqrt(ti.max(q, 0.0))) / a


TILE = 4    # pixels on a side of splat_particles' occlusion tiles
# Inside an ellipse of half-axes (ax, ay), rectangles of half-sides (fx ax, fy ay) with
# fx^2 + fy^2 <= 1. The inscribed square alone: with a cross as well the occluder pass cost
# twice as much for little more culling, and a tile range per column of tiles (the whole
# ellipse, with a square root each) three times as much (mpm3d, 2026-11-28)
_INSCRIBED = ((0.7071, 0.7071),)


@ti.kernel
def splat_particles(keys: _nd(dtype=ti.i64, ndim=2), centers: _nd(dtype=_v3, ndim=1),
                    radii: _nd(dtype=ti.f32, ndim=1), s: _nd(dtype=_v4, ndim=1),
                    rb: _nd(dtype=ti.f32, ndim=2), cam: _nd(dtype=ti.f32, ndim=1),
                    base: ti.i32, first: _nd(dtype=ti.i8, ndim=1),
                    occ2: _nd(dtype=ti.i64, ndim=2), occ: _nd(dtype=ti.i64, ndim=2)):
    """s[k] is centre k projected; rb the ray basis (see _ray); cam holds the eye, the
    forward axis, the pixels per unit at unit depth (x, y), whether the projection is
    perspective, near, the depth coefficients (depth = z0 + z1 w + z2 / w), then the
    screen's right and up axes. A pixel's ray and its hit are resolve's own arithmetic, so
    the depth a key holds is the one the pixel is shaded at. `first` (zeros on entry) marks
    the spheres drawn in the first phase; `occ` (TILE x TILE pixel tiles) and `occ2` (2 x 2
    of those) are all NO_KEY on entry.

    In a dense block of particles (mpm3d: 65,536, of which some 2,000 show) most spheres are
    hidden, and finding which is most of the work:
      * occluders: `occ` gets, for each tile, the least key that some sphere surely beats
        over the whole tile: the disc where a sphere's plane through its centre (across the
        view) cuts it projects to a circle, every pixel inside sees the sphere no deeper
        than its centre, and the tiles inside a square inscribed in it, a pixel in from its
        edge, take the centre's depth, with the sphere's number;
      * the spheres that own a tile (the front of the block) are drawn first;
      * then each tile's deepest key bounds it too (the depth buffer only gets nearer), and
        the others are drawn against that.
    A sphere is drawn against the tiles of a box that surely holds its outline: `occ2`'s
    tiles vouch for four at once, a tile holding a key below the sphere's nearest point
    there (_tile_front) is skipped, a sphere with all its tiles skipped is hidden whole, and
    a pixel holding a nearer key than that bound needs no ray. The picture is the same: a
    sphere could not have won a pixel it skips, and keys are taken by atomic min, in no
    order that matters."""
    w, h = keys.shape[0], keys.shape[1]
    eye = ti.Vector([cam[0], cam[1], cam[2]])
    fwd = ti.Vector([cam[3], cam[4], cam[5]])
    kx, ky, persp, near = cam[6], cam[7], cam[8], cam[9]
    z0, z1, z2 = cam[10], cam[11], cam[12]
    nx, ny = occ.shape[0], occ.shape[1]
    # the ray basis, read once (in the pixel loop a read could alias the keys written)
    o0 = ti.Vector([rb[0, 0], rb[0, 1], rb[0, 2]])
    ox = ti.Vector([rb[1, 0], rb[1, 1], rb[1, 2]])
    oy = ti.Vector([rb[2, 0], rb[2, 1], rb[2, 2]])
    d0 = ti.Vector([rb[3, 0], rb[3, 1], rb[3, 2]])
    dx = ti.Vector([rb[4, 0], rb[4, 1], rb[4, 2]])
    dy = ti.Vector([rb[5, 0], rb[5, 1], rb[5, 2]])
    for k in centers:
        c, r, p = centers[k], radii[k], s[k]
        depth = (c - eye).dot(fwd)
        # (perspective only: there the screen scale at the centre's depth is k / depth)
        if persp > 0.0 and p.w > 0.0 and r > 0.0 and depth - r > near:
            front = depth - r
            zc = z0 + z1 * depth + z2 / depth
            if z0 + z1 * front + z2 / front >= 0.0 and zc <= 1.0:
                # the disc's half-axes a pixel in (so that rounding cannot matter)
                rx = r * kx / depth - 1.0
                ry = r * ky / depth - 1.0
                if rx > 0.0 and ry > 0.0:
                    key = _key(zc, k)
                    for f in ti.static(_INSCRIBED):
                        # the tiles whose pixel centres all lie in the rectangle
                        hx, hy = rx * f[0], ry * f[1]
                        tx0 = ti.max(ti.cast(ti.ceil((p.x - hx - 0.5) / TILE), ti.i32), 0)
                        tx1 = ti.min(ti.cast(ti.floor((p.x + hx - TILE + 0.5) / TILE), ti.i32),
                                     nx - 1)
                        ty0 = ti.max(ti.cast(ti.ceil((p.y - hy - 0.5) / TILE), ti.i32), 0)
                        ty1 = ti.min(ti.cast(ti.floor((p.y + hy - TILE + 0.5) / TILE), ti.i32),
                                     ny - 1)
                        for tx in range(tx0, tx1 + 1):
                            for ty in range(ty0, ty1 + 1):
                                if key < occ[tx, ty]:
                                    ti.atomic_min(occ[tx, ty], key)
    # the spheres that own a tile (the front of a block) are drawn first; then each tile's
    # deepest key bounds it too, and the others (most of them) are drawn against that
    for tx, ty in occ:
        if occ[tx, ty] != NO_KEY_I:
            first[ti.cast(occ[tx, ty] & 0xFFFFFFFF, ti.i32)] = ti.i8(1)
    for phase in ti.static(range(2)):
        if ti.static(phase == 1):
            for tx, ty in occ:
                deepest = ti.i64(-1)
                for i in range(tx * TILE, ti.min(tx * TILE + TILE, w)):
                    for j in range(ty * TILE, ti.min(ty * TILE + TILE, h)):
                        deepest = ti.max(deepest, keys[i, j])
                if deepest < occ[tx, ty]:
                    occ[tx, ty] = deepest
        for tx2, ty2 in occ2:
            m = ti.i64(-1)
            for a in ti.static(range(2)):
                for b in ti.static(range(2)):
                    tx, ty = 2 * tx2 + a, 2 * ty2 + b
                    if tx < nx and ty < ny:
                        m = ti.max(m, occ[tx, ty])
            occ2[tx2, ty2] = m
        for k in centers:
            c, r, p = centers[k], radii[k], s[k]
            depth = (c - eye).dot(fwd)
            if first[k] == 1 - phase and p.w > 0.0 and r > 0.0 and depth - r > near * persp:
                rr = r * r
                # no point of the sphere is nearer than this: a pixel holding something nearer
                # needs no ray (most pixels, when the particles come front to back)
                front = depth - r
                nearest = _key(ti.max(z0 + z1 * front + z2 / front, 0.0), 0)
                lo = p.xy - ti.Vector([r * kx, r * ky]) - 0.5
                hi = p.xy + ti.Vector([r * kx, r * ky]) + 0.5
                hidden = 0
                reach, shift = -1.0, 0.0
                if persp > 0.0:
                    v = c - eye
                    e = ti.Vector([v.dot(ti.Vector([cam[13], cam[14], cam[15]])),
                                   v.dot(ti.Vector([cam[16], cam[17], cam[18]]))])
                    mid = ti.Vector([w * 0.5, h * 0.5])
                    k2 = ti.Vector([kx, ky])
                    # First a box that surely holds the outline (the sphere lies within r of its
                    # centre across and in depth: the extreme slopes of those bounds), a pixel
                    # wider: when its tiles all hold something nearer, the sphere is hidden and
                    # costs no more (most of a dense block's).
                    far = depth + r
                    clo = mid + ti.min((e - r) / front, (e - r) / far) * k2 - 1.5
                    chi = mid + ti.max((e + r) / front, (e + r) / far) * k2 + 1.5
                    cx0, cx1, cy0, cy1 = _box(clo, chi, w, h)
                    fx0, fx1 = cx0 // TILE, (cx1 + TILE - 1) // TILE
                    fy0, fy1 = cy0 // TILE, (cy1 + TILE - 1) // TILE
                    # (see _tile_front)
                    reach = r * ti.max(kx, ky) / front
                    shift = e.norm() * ti.max(kx, ky) * r / (depth * front) + 1.0
                    hidden = 1
                    for tx2 in range(fx0 // 2, (fx1 + 1) // 2):
                        for ty2 in range(fy0 // 2, (fy1 + 1) // 2):
                            if occ2[tx2, ty2] >= nearest:
                                for tx in range(ti.max(fx0, 2 * tx2), ti.min(fx1, 2 * tx2 + 2)):
                                    for ty in range(ti.max(fy0, 2 * ty2), ti.min(fy1, 2 * ty2 + 2)):
                                        held = occ[tx, ty]
                                        if held >= nearest:
                                            tb = _tile_front(tx, ty, p.xy, shift, reach, depth, r,
                                                             z0, z1, z2)
                                            if tb != NO_KEY_I and held >= tb:
                                                hidden = 0
                    if hidden == 0:
                        # the outline's extremes across the screen are where planes through the
                        # eye, holding the screen's vertical (horizontal), touch the sphere: the
                        # tangents from the eye to the circle (r, around the centre projected on
                        # the plane they turn in), of slopes tan(centre -+ turn), with
                        # tan(centre) = e / depth and tan(turn) = r / sqrt(e^2 + depth^2 - r^2);
                        # beyond +-1.5 radians a slope is held there
                        for a in ti.static(range(2)):
                            el = ti.sqrt(e[a] * e[a] + depth * depth - rr)
                            s_lo, s_hi = -_STEEP, _STEEP
                            den_lo = depth * el + e[a] * r
                            den_hi = depth * el - e[a] * r
                            if den_lo > 0.0:
                                s_lo = ti.max((e[a] * el - r * depth) / den_lo, -_STEEP)
                            if den_hi > 0.0:
                                s_hi = ti.min((e[a] * el + r * depth) / den_hi, _STEEP)
                            lo[a] = mid[a] + s_lo * k2[a] - 0.5
                            hi[a] = mid[a] + s_hi * k2[a] + 0.5
                x0, x1, y0, y1 = _box(lo, hi, w, h)
                if hidden == 1:
                    x1 = x0
                oc = o0 + 0.5 * ox + 0.5 * oy - c
                cc = oc.dot(oc) - rr
                for tx in range(x0 // TILE, (x1 + TILE - 1) // TILE):
                    for ty in range(y0 // TILE, (y1 + TILE - 1) // TILE):
                        bound = nearest
                        if occ[tx, ty] >= nearest and reach > 0.0:
                            bound = _tile_front(tx, ty, p.xy, shift, reach, depth, r, z0, z1, z2)
                        if bound != NO_KEY_I and occ[tx, ty] >= bound:
                            for i in range(ti.max(x0, tx * TILE), ti.min(x1, tx * TILE + TILE)):
                                for j in range(ti.max(y0, ty * TILE), ti.min(y1, ty * TILE + TILE)):
                                    held = keys[i, j]
                                    if bound < held:
                                        # _ray and _hit's arithmetic; in perspective every
                                        # ray starts at the eye, and oc and cc are the
                                        # particle's
                                        x, y = i + 0.5, j + 0.5
                                        d = d0 + x * dx + y * dy
                                        if persp == 0.0:
                                            oc = o0 + x * ox + y * oy - c
                                            cc = oc.dot(oc) - rr
                                        a = d.dot(d)
                                        b = oc.dot(d)
                                        q = b * b - a * cc
                                        if q >= 0.0:
                                            t = (-b - ti.sqrt(q)) / a
                                            if t > near:
                                                z = z0 + z1 * t + z2 / t
                                                if z >= 0.0 and z <= 1.0:
                                                    key = _key(z, base + k)
                                                    if key < held:
                                                        ti.atomic_min(keys[i, j], key)


_STEEP = 14.101419947171719     # tan(1.5)


@ti.func
def _tile_front(tx, ty, p, shift, reach, depth, r, z0, z1, z2):
    """A key no deeper than any point of the sphere (centre at view depth `depth`, projected
    to p) that the pixel centres of tile (tx, ty) see; NO_KEY where they cannot see it.
    The plane at view depth z cuts the sphere in a disc of radius sqrt(r^2 - (z - depth)^2)
    around a point that projects within `shift` pixels of p, at a scale of at most
    `reach` / r pixels a unit (that of the sphere's front, depth - r): a pixel u * reach
    beyond `shift` from p sees the sphere no nearer than depth - r sqrt(1 - u^2). (shift
    has a pixel to spare for rounding.)"""
    qx = ti.min(ti.max(p.x, tx * TILE + 0.5), tx * TILE + TILE - 0.5)
    qy = ti.min(ti.max(p.y, ty * TILE + 0.5), ty * TILE + TILE - 0.5)
    u = ti.max(ti.sqrt((p.x - qx) * (p.x - qx) + (p.y - qy) * (p.y - qy)) - shift, 0.0) / reach
    out = ti.i64(NO_KEY_I)
    if u < 1.0:
        z = depth - r * ti.sqrt(1.0 - u * u)
        out = _key(ti.max(z0 + z1 * z + z2 / z, 0.0), 0)
    return out


@ti.kernel
def splat_lines(keys: _nd(dtype=ti.i64, ndim=2), s: _nd(dtype=_v4, ndim=1), half_width: ti.f32,
                base: ti.i32):
    """Segment k is s[2k] to s[2k+1] (projected), half_width pixels either side; its depth
    is interpolated along it on the screen."""
    w, h = keys.shape[0], keys.shape[1]
    r = ti.max(half_width, 0.5)
    for k in range(s.shape[0] // 2):
        a4, b4 = s[2 * k], s[2 * k + 1]
        if a4.w > 0.0 and b4.w > 0.0:
            a, b = a4.xy, b4.xy
            x0, x1, y0, y1 = _box(ti.min(a, b) - r, ti.max(a, b) + r, w, h)
            for i in range(x0, x1):
                for j in range(y0, y1):
                    p = ti.Vector([i + 0.5, j + 0.5])
                    t = _segment_t(a, b, p)
                    q = a + t * (b - a)
                    if (p - q).dot(p - q) <= r * r:
                        z = a4.z + t * (b4.z - a4.z)
                        if z >= 0.0 and z <= 1.0:
                            ti.atomic_min(keys[i, j], _key(z, base + k))


@ti.func
def _shade(p, n, v, color, lights, nl, ambient, two_sided):
    """Ambient, then per light a Lambert term and a Blinn-Phong highlight. A two-sided
    surface is lit on whichever side the light is, |n . l| as the original's mesh shader,
    whichever side it is seen from; its highlight shows only on the side seen."""
    out = color * ambient
    for l in range(nl):
        lp = ti.Vector([lights[l, 0], lights[l, 1], lights[l, 2]])
        lc = ti.Vector([lights[l, 3], lights[l, 4], lights[l, 5]])
        ld = (lp - p).normalized()
        nf = n
        if two_sided != 0 and n.dot(ld) < 0.0:
            nf = -n
        ndl = nf.dot(ld)
        if ndl > 0.0:
            out += color * lc * ndl
            if two_sided == 0 or nf.dot(v) >= 0.0:
                hv = (ld + v).normalized()
                out += lc * SPECULAR_F * _pow32(ti.max(nf.dot(hv), 0.0))
    return out


SPECULAR_F = 0.25   # the highlight's share of a light's colour; its exponent is 32


@ti.func
def _pow32(x):
    """x ** 32 by squaring (a general power is a call per pixel and light)."""
    x2 = x * x
    x4 = x2 * x2
    x8 = x4 * x4
    x16 = x8 * x8
    return x16 * x16


@ti.kernel
def resolve(rgb: _nd(dtype=_v3, ndim=2), depth: _nd(dtype=ti.f32, ndim=2),
            keys: _nd(dtype=ti.i64, ndim=2), rb: _nd(dtype=ti.f32, ndim=2),
            ts: _nd(dtype=_v4, ndim=1), tp: _nd(dtype=_v3, ndim=1),
            tn: _nd(dtype=_v3, ndim=1), tc: _nd(dtype=_v3, ndim=1),
            tidx: _nd(dtype=ti.i32, ndim=1), two_sided: _nd(dtype=ti.i32, ndim=1),
            n_tri: ti.i32,
            pc: _nd(dtype=_v3, ndim=1), pr: _nd(dtype=ti.f32, ndim=1),
            pcol: _nd(dtype=_v3, ndim=1), n_part: ti.i32,
            lcol: _nd(dtype=_v3, ndim=1),
            lights: _nd(dtype=ti.f32, ndim=2), nl: ti.i32, ambient: _v3, eye: _v3,
            persp: ti.i32, fwd: _v3):
    """Each covered pixel shaded from the primitive its key names; depth gets its depth."""
    for i, j in keys:
        key = keys[i, j]
        if key != NO_KEY_I:
            n = ti.cast(key & 0xFFFFFFFF, ti.i32)
            depth[i, j] = ti.bit_cast(ti.cast(key >> 32, ti.i32), ti.f32)
            color = ti.Vector([0.0, 0.0, 0.0])
            if n < n_tri:
                ia, ib, ic = tidx[3 * n], tidx[3 * n + 1], tidx[3 * n + 2]
                a4, b4, c4 = ts[ia], ts[ib], ts[ic]
                q = ti.Vector([i + 0.5, j + 0.5])
                area = _edge(a4.xy, b4.xy, c4.xy)
                wa, wb = _edge(b4.xy, c4.xy, q) / area, _edge(c4.xy, a4.xy, q) / area
                wc = 1.0 - wa - wb
                # perspective-correct weights: screen weights over w, renormalized
                pa, pb, pcw = wa * a4.w, wb * b4.w, wc * c4.w
                sw = pa + pb + pcw
                pa, pb, pcw = pa / sw, pb / sw, pcw / sw
                p = pa * tp[ia] + pb * tp[ib] + pcw * tp[ic]
                nv = pa * tn[ia] + pb * tn[ib] + pcw * tn[ic]
                c3 = tc[ic]
                base = c3 + pa * (tc[ia] - c3) + pb * (tc[ib] - c3)
                v = _view_dir(p, eye, persp, fwd)
                color = _shade(p, nv.normalized(), v, base, lights, nl, ambient, two_sided[n])
            elif n < n_tri + n_part:
                k = n - n_tri
                o, d = _ray(rb, i, j)
                t = _hit(o, d, pc[k], pr[k])
                p = o + t * d
                nn = (p - pc[k]) / pr[k]
                v = _view_dir(p, eye, persp, fwd)
                color = _shade(p, nn, v, pcol[k], lights, nl, ambient, 0)
            else:
                k = n - n_tri - n_part
                # a line is not lit: its colour interpolated along it on the screen
                color = lcol[2 * k]
            rgb[i, j] = color


NO_KEY_I = (1 << 63) - 1


@ti.func
def _view_dir(p, eye, persp, fwd):
    v = -fwd
    if persp != 0:
        v = (eye - p).normalized()
    return v


@ti.kernel
def line_colors(rgb: _nd(dtype=_v3, ndim=2), keys: _nd(dtype=ti.i64, ndim=2),
                s: _nd(dtype=_v4, ndim=1), lcol: _nd(dtype=_v3, ndim=1), first: ti.i32):
    """Lines' per-vertex colours interpolated along them (after `resolve`)."""
    for i, j in keys:
        key = keys[i, j]
        if key != NO_KEY_I:
            k = ti.cast(key & 0xFFFFFFFF, ti.i32) - first
            if k >= 0 and k < s.shape[0] // 2:
                a, b = s[2 * k].xy, s[2 * k + 1].xy
                t = _segment_t(a, b, ti.Vector([i + 0.5, j + 0.5]))
                rgb[i, j] = lcol[2 * k] + t * (lcol[2 * k + 1] - lcol[2 * k])


@ti.kernel
def normals(pos: _nd(dtype=_v3, ndim=1), idx: _nd(dtype=ti.i32, ndim=1),
            out: _nd(dtype=_v3, ndim=1)):
    """Vertex normals: the area-weighted sum of the normals of the triangles around each
    vertex (out must be zero), normalized."""
    for t in range(idx.shape[0] // 3):
        a, b, c = idx[3 * t], idx[3 * t + 1], idx[3 * t + 2]
        n = (pos[b] - pos[a]).cross(pos[c] - pos[a])
        for m in ti.static(range(3)):
            out[idx[3 * t + m]] += n
    for k in out:
        out[k] = out[k] / ti.max(out[k].norm(), 1e-20)
