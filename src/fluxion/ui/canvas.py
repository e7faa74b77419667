"""`ti.ui.Canvas`: a window's 2-D drawing surface, and how a frame is drawn.

Positions on the canvas are normalized, [0, 1]^2 with y up; a circle's radius and a line's
width are fractions of the window's height (as the original's). Colours
are RGB floats in [0, 1].

Draw calls are recorded with their data (read at the call) and drawn in order when the frame
is needed (`show`, `save_image`, `get_image_buffer_as_numpy`), because the background colour
applies to the whole frame whenever it is set during it (Taichi's mpm128_ggui sets it after
drawing a circle).
"""
from __future__ import annotations

import numpy as np

from fluxion.ui import clip, raster, raster3d, staging
from fluxion.ui.scene import Scene

_F32 = np.float32
_ID_LIMIT = (1 << 31) - 1


def _nonempty(a, width):
    """The rasteriser's array arguments may not be empty: one unused row stands in."""
    return a if len(a) else np.zeros((1,) + tuple(width), a.dtype)


class Canvas:
    """See the module docstring; `window.get_canvas()` gives it."""

    def __init__(self, window):
        self._window = window
        self._ops = []
        self._background = np.zeros(3, _F32)

    def set_background_color(self, color):
        self._background = staging.color(color, "background color")
        self._window._dirty = True

    def _add(self, *op):
        self._ops.append(op)
        self._window._dirty = True

    def set_image(self, img):
        """The image (a field, ndarray or numpy array indexed [x, y], y up; a 2-D one grey,
        one channel red, two red and green, as the original's; floats in [0, 1] or integers
        0..255) stretched over the window."""
        self._add("image", staging.image(img))

    def circles(self, centers, radius, color=(0.5, 0.5, 0.5), per_vertex_color=None,
                per_vertex_radius=None):
        c = staging.vectors(centers, 2, "circles' centers")
        w, h = self._window.res
        n = len(c)
        # (a fraction of the height: Taichi's Circles_vk.vert spans radius * 2 of clip
        # space's height, and the same number of pixels across)
        r = (np.full(n, radius * h, _F32) if per_vertex_radius is None else
             np.ascontiguousarray(staging.as_array(per_vertex_radius, "per_vertex_radius")
                                  .reshape(-1)[:n] * h, _F32))
        col = (np.broadcast_to(staging.color(color), (n, 3)) if per_vertex_color is None else
               staging.colors(per_vertex_color, n, "per_vertex_color"))
        self._add("circles", c * np.array([w, h], _F32), r, np.ascontiguousarray(col))

    def triangles(self, vertices, color=(0.5, 0.5, 0.5), indices=None, per_vertex_color=None):
        v = staging.vectors(vertices, 2, "triangles' vertices")
        idx = (np.arange(len(v) // 3 * 3) if indices is None else
               staging.indices(indices, 3, len(v), "triangles' indices"))
        col = (np.broadcast_to(staging.color(color), (len(v), 3)) if per_vertex_color is None
               else staging.colors(per_vertex_color, len(v), "per_vertex_color"))
        self._add("triangles", v[idx] * np.array(self._window.res, _F32),
                  np.ascontiguousarray(col[idx]))

    def lines(self, vertices, width, indices=None, color=(0.5, 0.5, 0.5),
              per_vertex_color=None):
        """Segments between vertices 2k and 2k+1 (or of `indices`), `width` (a fraction of
        the window's height) wide."""
        v = staging.vectors(vertices, 2, "lines' vertices")
        idx = (np.arange(len(v) // 2 * 2) if indices is None else
               _drop_repeats(staging.indices(indices, 2, len(v), "lines' indices")))
        col = (np.broadcast_to(staging.color(color), (len(v), 3)) if per_vertex_color is None
               else staging.colors(per_vertex_color, len(v), "per_vertex_color"))
        self._add("lines", v[idx] * np.array(self._window.res, _F32),
                  np.ascontiguousarray(col[idx]), 0.5 * float(width) * self._window.res[1])

    def contour(self, scalar_field, cmap_name="plasma", normalize=False):
        """A 2-D scalar field as an image through Matplotlib's colormap `cmap_name`, first
        stretched to [0, 1] if `normalize` (as the original: (x - min) / (max - min + 1e-16),
        in the field's dtype)."""
        a = staging.as_array(scalar_field, "contour's scalar_field")
        if a.ndim != 2:
            raise ValueError(f"ti.ui: contour() takes a 2-D scalar field, got shape {a.shape}")
        try:
            import matplotlib
        except ImportError:
            raise RuntimeError("ti.ui: contour() needs Matplotlib (pip install matplotlib)") \
                from None
        if normalize:
            lo, hi = np.min(a), np.max(a)
            a = (a - lo) / (hi - lo + 1e-16)
        rgba = matplotlib.colormaps[cmap_name](a)
        self.set_image(np.ascontiguousarray(rgba.astype(_F32)[:, :, :3]))

    def vector_field(self, vector_field, arrow_spacing=5, scale=0.1, width=0.002,
                     color=(0, 0, 0)):
        """Arrows of a 2-D field of 2-vectors, drawn as `lines` of `width`: one every
        `arrow_spacing` cells along each axis and one at the last cell, from the cell's
        place (i / (nx - 1), j / (ny - 1)) along its vector times scale / (the longest
        vector's length), with two tip strokes a fifth as long, as the original draws them."""
        v = staging.as_array(vector_field, "vector_field").astype(np.float64)
        if v.ndim != 3 or v.shape[2] != 2:
            raise ValueError(f"ti.ui: vector_field() takes a 2-D field of 2-vectors, got "
                             f"shape {v.shape}")
        nx, ny = v.shape[:2]
        self.lines(_arrow_points(v, nx, ny, int(arrow_spacing), float(scale)), width=width,
                   color=color)

    def scene(self, scene):
        """Draw the scene (its contents now; the scene is emptied for the next frame)."""
        if not isinstance(scene, Scene):
            raise TypeError(f"Canvas.scene takes a ti.ui.Scene, got {type(scene).__name__}")
        self._add("scene", scene._take())

    # -- drawing ---------------------------------------------------------------------------
    def _draw(self, frame):
        """Draw the recorded calls into `frame` (fluxion/ui/window.py's buffers)."""
        raster.fill(frame.rgb, self._background)
        frame.depth.fill(1.0)
        base = 0
        ids_clear = False       # (a frame of images and scenes never reads them)
        for op in self._ops:
            kind, data = op[0], op[1:]
            n = 0 if kind in ("image", "scene") else len(data[0]) // {"circles": 1,
                                                                     "triangles": 3,
                                                                     "lines": 2}[kind]
            if n and (not ids_clear or base + n > _ID_LIMIT):
                raster.fill_i32(frame.ids, raster.NO_ID)
                ids_clear = True
                base = 0
            if kind == "image":
                raster.blit(frame.rgb, data[0])
            elif kind == "scene":
                _draw_scene(frame, *data[0])
            elif n == 0:
                continue
            elif kind == "circles":
                raster.splat_circles(frame.ids, data[0], data[1], base)
                raster.resolve_flat(frame.rgb, frame.ids, data[2], base)
            elif kind == "triangles":
                raster.splat_triangles(frame.ids, data[0], base)
                raster.resolve_triangles(frame.rgb, frame.ids, data[0], data[1], base)
            else:
                raster.splat_lines(frame.ids, data[0], data[2], base)
                raster.resolve_lines(frame.rgb, frame.ids, data[0], data[1], base)
            base += n

    def _end_frame(self):
        self._ops = []


def _drop_repeats(idx):
    """Index pairs without those the next pair repeats: drawn again, a segment covers the same
    pixels in the same colours, so the picture is the same (an index buffer sized for the most
    springs there may be, its unused tail all (0, 0) as in Taichi's mass_spring_game_ggui,
    becomes one segment)."""
    pairs = np.ascontiguousarray(idx, np.int32).view(np.int64)    # a pair as one number
    if len(pairs) < 2:
        return idx
    keep = np.ones(len(pairs), bool)
    np.not_equal(pairs[1:], pairs[:-1], out=keep[:-1])
    return idx if keep.all() else pairs[keep].view(np.int32)


def _arrow_points(v, nx, ny, spacing, scale):
    """The six ends (three segments) of vector_field's arrows, (6 * arrows, 2)."""
    def samples(n):
        k = np.arange(n // spacing + 1)
        return np.where(k < n // spacing, k * spacing, n - 1)

    i, j = np.meshgrid(samples(nx), samples(ny), indexing="ij")
    i, j = i.reshape(-1), j.reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x, y = i / (nx - 1), j / (ny - 1)
        d = v[i, j] * (scale / np.linalg.norm(v, axis=-1).max())
    ex, ey = x + d[:, 0], y + d[:, 1]
    # (the original's pi is 3.14, and its tips turn by 30 degrees of it)
    angle = np.arctan2(d[:, 1], d[:, 0])
    tip = 0.2 * np.hypot(d[:, 0], d[:, 1])
    turn = 30 / 180 * 3.14
    a1, a2 = angle + 3.14 - turn, angle - 3.14 + turn
    pts = [(x, y), (ex, ey), (ex, ey), (ex + tip * np.cos(a1), ey + tip * np.sin(a1)),
           (ex, ey), (ex + tip * np.cos(a2), ey + tip * np.sin(a2))]
    return np.stack([np.stack(p, axis=-1) for p in pts], axis=1).reshape(-1, 2).astype(_F32)


def _cat(parts, k, shape, dtype=_F32):
    if len(parts) == 1:         # (most scenes: one mesh, one set of particles; the kernels
        return np.ascontiguousarray(parts[0][k], dtype)     # only read it: no copy)
    return (np.ascontiguousarray(np.concatenate([p[k] for p in parts]), dtype) if parts else
            np.zeros((0,) + shape, dtype))


def _draw_scene(frame, tris, parts, lines, lights, ambient, camera):
    """One scene over the frame, with its own depth test (see fluxion/ui/raster3d.py)."""
    w, h = frame.res
    vp, rb, cam = camera._frame(w, h)
    keys = frame.keys
    raster.fill_i64(keys, raster.NO_KEY)
    # the meshes' vertices one after another, and their indices shifted to match
    tp, tn, tc = (_cat(tris, k, (3,)) for k in range(3))
    start = np.cumsum([0] + [len(t[0]) for t in tris])
    tidx = (tris[0][3] if len(tris) == 1 else
            np.concatenate([t[3] + np.int32(s) for t, s in zip(tris, start)]) if tris else
            np.zeros(0, np.int32))
    sided = (np.concatenate([np.full(len(t[3]) // 3, t[4], np.int32) for t in tris])
             if tris else np.zeros(0, np.int32))
    persp = bool(cam[8])
    if persp:       # (an orthographic view has no eye to pass behind)
        tp, tn, tc, tidx, sided = clip.indexed(tp, tn, tc, tidx, sided, vp)
    pc, pr, pcol = _cat(parts, 0, (3,)), _cat(parts, 1, ()), _cat(parts, 2, (3,))
    nt, npart = len(tidx) // 3, len(pc)
    tp, tn, tc, pc, pcol = (_nonempty(a, (3,)) for a in (tp, tn, tc, pc, pcol))
    pr, sided, tidx = _nonempty(pr, ()), _nonempty(sided, ()), _nonempty(tidx, ())
    ts = np.zeros((len(tp), 4), _F32)
    if nt:
        raster3d.project(tp, vp, ts, w, h)
        raster3d.splat_triangles(keys, ts, tidx, 0)
    if npart:
        ps = np.zeros((len(pc), 4), _F32)
        raster3d.project(pc, vp, ps, w, h)
        nx, ny = -(-w // raster3d.TILE), -(-h // raster3d.TILE)
        occ = np.empty((nx, ny), np.int64)
        raster.fill_i64(occ, raster.NO_KEY)
        occ2 = np.empty((-(-nx // 2), -(-ny // 2)), np.int64)
        first = np.zeros(len(pc), np.int8)
        raster3d.splat_particles(keys, pc, pr, ps, rb, cam, nt, first, occ2, occ)
    base = nt + npart
    line_runs = []
    for ends, col, width in lines:
        if len(ends) < 2:
            continue
        if persp:
            ends, col = clip.segments(ends, col, vp)
        ls = np.zeros((len(ends), 4), _F32)
        raster3d.project(ends, vp, ls, w, h)
        raster3d.splat_lines(keys, ls, 0.5 * width, base)
        line_runs.append((ls, col, base))
        base += len(ends) // 2
    lcol = _nonempty(_cat([(c,) for _, c, _ in line_runs], 0, (3,)), (3,))
    light = np.array(lights, _F32).reshape(-1, 6) if lights else np.zeros((1, 6), _F32)
    eye = camera.curr_position.astype(_F32)
    raster3d.resolve(frame.rgb, frame.depth, keys, rb, ts, tp, tn, tc, tidx, sided, nt, pc, pr,
                     pcol, npart, lcol, light, len(lights), ambient, eye, int(cam[8]), cam[3:6])
    for ls, col, first in line_runs:
        raster3d.line_colors(frame.rgb, keys, ls, col, first)
