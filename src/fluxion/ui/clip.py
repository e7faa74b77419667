"""Clipping a scene's triangles and lines at the camera's near plane, before projection.

A corner behind the near plane has no meaningful screen position (behind the eye its w is
negative and the projection flips it through the centre), so the rasteriser drops a triangle
or line with one there. A large triangle that passes beside the camera (a floor under it)
would then vanish whole. Here such a triangle is cut to the part in front of the plane (one
triangle, or two for the quad left when one corner is cut off), and a segment is shortened
to its part in front, with positions, normals and colours interpolated along the cut edges.
Interpolating linearly in world space is exact: the projection is linear in homogeneous
coordinates, and the resolve pass interpolates perspective-correctly.

In clip space the near plane is z + w = 0 (depth 0); a point is in front where z + w >= 0.
"""
from __future__ import annotations

import numpy as np

_F32 = np.float32


def _front(p, vp):
    """z + w of points p (n, 3) under the view-projection vp: >= 0 in front of the plane."""
    row = vp[2].astype(np.float64) + vp[3].astype(np.float64)
    return p.astype(np.float64) @ row[:3] + row[3]


def _lerp(a, b, t):
    return a + t[:, None] * (b - a)


def triangles(tp, tn, tc, sided, vp):
    """(tp, tn, tc, sided) with every triangle (corners 3t..3t+2 of positions, normals and
    colours; `sided` one per triangle) cut to its part in front of the near plane: those
    wholly in front stay, first and in order, those wholly behind go, and the pieces of
    the others follow, each with its triangle's `sided`. Windings are kept."""
    n = len(tp) // 3
    if n == 0:
        return tp, tn, tc, sided
    # the common case (all in front) decided in float32, the cuts computed in float64
    row = (vp[2] + vp[3]).astype(_F32)
    if (tp @ row[:3] + row[3] >= 0).all():
        return tp, tn, tc, sided
    d = _front(tp, vp).reshape(n, 3)
    behind = d < 0
    count = behind.sum(axis=1)
    whole = count == 0
    pieces_p, pieces_n, pieces_c, pieces_s = [tp.reshape(n, 3, 3)[whole]], \
        [tn.reshape(n, 3, 3)[whole]], [tc.reshape(n, 3, 3)[whole]], [sided[whole]]
    for cut in (1, 2):
        tri = np.flatnonzero(count == cut)
        if len(tri) == 0:
            continue
        # rotate each triangle's corners (keeping its winding) so that corner A is the one
        # alone on its side: behind (one cut off) or in front (two cut off)
        first = np.argmax(behind[tri], axis=1) if cut == 1 else np.argmin(behind[tri], axis=1)
        order = (first[:, None] + np.arange(3)) % 3
        corners = 3 * tri[:, None] + order
        dA, dB, dC = (d[tri, order[:, k]] for k in range(3))
        tAB, tAC = dA / (dA - dB), dA / (dA - dC)
        made = []
        for arr in (tp, tn, tc):
            A, B, C = (arr[corners[:, k]].astype(np.float64) for k in range(3))
            AB, AC = _lerp(A, B, tAB), _lerp(A, C, tAC)
            if cut == 1:     # the quad B, C, AC, AB in two triangles
                made.append(np.concatenate([np.stack([AB, B, C], 1), np.stack([AB, C, AC], 1)]))
            else:
                made.append(np.stack([A, AB, AC], 1))
        s = sided[tri]
        pieces_p.append(made[0])
        pieces_n.append(made[1])
        pieces_c.append(made[2])
        pieces_s.append(np.concatenate([s, s]) if cut == 1 else s)

    def flat(parts):
        return np.ascontiguousarray(np.concatenate(parts).reshape(-1, 3), _F32)

    return flat(pieces_p), flat(pieces_n), flat(pieces_c), np.concatenate(pieces_s)


def segments(ends, colors, vp):
    """(ends, colors): segments 2k -> 2k+1 with one end behind the near plane shortened to
    the part in front (that end moved to the plane, its colour interpolated); the others
    as they were (one wholly behind is still dropped by the rasteriser)."""
    m = len(ends) // 2
    if m == 0:
        return ends, colors
    d = _front(ends[:2 * m], vp).reshape(m, 2)
    one = np.flatnonzero((d[:, 0] < 0) != (d[:, 1] < 0))
    if len(one) == 0:
        return ends, colors
    ends, colors = ends.copy(), colors.copy()
    back = np.where(d[one, 0] < 0, 0, 1)          # which end is behind
    out, keep = 2 * one + back, 2 * one + 1 - back
    t = d[one, back] / (d[one, back] - d[one, 1 - back])   # from the end behind
    for arr in (ends, colors):
        arr[out] = _lerp(arr[out].astype(np.float64), arr[keep].astype(np.float64), t)
    return ends, colors


def indexed(tp, tn, tc, idx, sided, vp):
    """`triangles` for triangles given by an index buffer (idx[3t..3t+2] into the vertices
    tp, tn, tc): (tp, tn, tc, idx, sided) where the triangles wholly in front keep their
    indices, first and in order, and the pieces of those cut follow, on vertices appended
    to the arrays (the arrays are returned as they were when nothing is cut)."""
    n = len(idx) // 3
    if n == 0:
        return tp, tn, tc, idx, sided
    row = (vp[2] + vp[3]).astype(_F32)
    if (tp @ row[:3] + row[3] >= 0).all():
        return tp, tn, tc, idx, sided
    tri = idx[:3 * n].reshape(n, 3)
    cut = (_front(tp, vp)[tri] < 0).any(axis=1)
    if not cut.any():
        return tp, tn, tc, idx, sided
    corners = tri[cut].reshape(-1)
    pp, pn, pc, ps = triangles(tp[corners], tn[corners], tc[corners], sided[cut], vp)
    made = np.arange(len(tp), len(tp) + len(pp), dtype=np.int32)
    return (np.concatenate([tp, pp]), np.concatenate([tn, pn]), np.concatenate([tc, pc]),
            np.concatenate([tri[~cut].reshape(-1), made]), np.concatenate([sided[~cut], ps]))
