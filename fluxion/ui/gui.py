"""`ti.GUI`: a 2-D canvas for particles, lines, triangles, text and images.

Conventions of the original system, kept here so that its scripts run unchanged:
  * positions are normalized, in [0, 1]^2, with y *up*; radii and line radii are in pixels;
  * images are indexed [x, y] (y up), float in [0, 1] or uint8 (see fluxion/tools/image.py);
  * colors are 0xRRGGBB integers (one, or one per element), or float RGB in [0, 1].

The frame is an RGB image held either as a numpy array (for vectorized particle stamping)
or as a Pillow image (for ImageDraw's lines, polygons and text); it moves between the two
only when the kind of drawing changes. `show()` puts it in a tkinter window where a display
exists and writes it to a file when asked; without a display, with show_gui=False, or
without tkinter, there is simply no window: drawing, files and `running` work the same, and
`get_event` returns False.
"""
from __future__ import annotations

import collections
import math
import os
import sys
import time
import warnings

import numpy as np

from fluxion.tools.image import (as_numpy, from_rows, has_display, require_pillow,
                                 to_rgb_rows)

# Discs up to this radius (pixels) are blended with numpy, antialiased as the original system
# draws them (small discs are where that shows); larger ones are drawn by Pillow, whose edges
# differ by at most a pixel. Blending costs ~ (2r + 3)^2 writes per disc, Pillow ~1 us of
# Python per disc.
_STAMP_MAX_RADIUS = 3.0

_FONTS = {}     # Pillow fonts by size, loaded once


def _blend(out, pix, alpha, colors):
    """out[pix] = lerp(out[pix], colors, alpha) in 8 bits, for distinct pixels."""
    full = alpha >= 1.0
    out[pix[full]] = colors[full]
    part = ~full
    if part.any():
        old = out[pix[part]].astype(np.float32)
        new = old + alpha[part, None] * (colors[part].astype(np.float32) - old)
        out[pix[part]] = np.rint(new).astype(np.uint8)


def _rgb_array(color, n=None):
    """Colors -> uint8 array (k, 3), k = 1 (one color for all) or n (one per element; any
    number when n is None, as for a palette).

    Integers (a scalar or one per element) are 0xRRGGBB; floats whose last axis is 3 are RGB
    in [0, 1] (a triple, or one triple per element)."""
    c = as_numpy(color)
    if np.issubdtype(c.dtype, np.floating):
        if c.shape[-1:] != (3,):
            raise ValueError(f"float colors must be RGB triples, got shape {c.shape}")
        rgb = np.floor(np.clip(c.reshape(-1, 3), 0, 1) * 255 + 0.5).astype(np.uint8)
    else:
        c = c.reshape(-1).astype(np.int64)
        rgb = np.stack([(c >> 16) & 0xFF, (c >> 8) & 0xFF, c & 0xFF], axis=1).astype(np.uint8)
    if n is not None and len(rgb) not in (1, n):
        raise ValueError(f"{len(rgb)} colors for {n} elements")
    return rgb


def _per_item(value, n, what):
    v = np.asarray(as_numpy(value), dtype=np.float64).reshape(-1)
    if len(v) not in (1, n):
        raise ValueError(f"{len(v)} {what} values for {n} elements")
    return v


def _points(pos):
    """Positions -> float64 (n, 2); a single point may be given as (x, y)."""
    p = np.asarray(as_numpy(pos), dtype=np.float64)
    if p.shape == (2,):
        p = p[None]
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"positions must have shape (n, 2), got {p.shape}")
    return p


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
        Image = require_pillow()
        from PIL import ImageDraw
        self._Image, self._ImageDraw = Image, ImageDraw
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
        self._cursor = (0.5, 0.5)
        self._last_show = None
        self._arr = None          # the frame as uint8 rows (h, w, 3), top row first, or
        self._pil = None          # as a Pillow image; exactly one of the two is set
        self._drawer = None
        self._window = None
        self.clear()
        if show_gui and has_display():
            self._window = _open_window(self, fullscreen)

    # -- the frame ----------------------------------------------------------------------------
    def _pixels(self):
        """The frame as a writable numpy array (h, w, 3), top row first."""
        if self._arr is None:
            self._arr = np.array(self._pil)
            self._pil = self._drawer = None
        return self._arr

    def _draw(self):
        """An ImageDraw on the frame."""
        if self._pil is None:
            self._pil = self._Image.fromarray(self._arr, "RGB")
            self._drawer = self._ImageDraw.Draw(self._pil)
            self._arr = None
        return self._drawer

    def _pil_image(self):
        return self._pil if self._pil is not None else self._Image.fromarray(self._arr, "RGB")

    def _to_px(self, p):
        """Normalized positions (n, 2), y up -> Pillow's coordinates, in which pixel (c, r)
        is centred on the integers (c, r) and r counts down from the top."""
        w, h = self.res
        return np.stack([p[:, 0] * w - 0.5, (1.0 - p[:, 1]) * h - 0.5], axis=1)

    def clear(self, color=None):
        """Fill the frame with `color` (the background color by default)."""
        color = self.background_color if color is None else color
        self._arr = np.empty((self.res[1], self.res[0], 3), np.uint8)
        self._arr[...] = _rgb_array(color, 1)[0]
        self._pil = self._drawer = None

    def set_image(self, img):
        """Replace the frame by an image of the GUI's resolution: array or field indexed
        [x, y] (y up), shape (w, h) or (w, h, 1..4), float in [0, 1] or uint8."""
        a = as_numpy(img)
        if a.shape[:2] != self.res:
            raise ValueError(f"image of shape {a.shape} does not match the GUI's resolution "
                             f"{self.res} (images are indexed [x, y])")
        self._arr = np.array(to_rgb_rows(a), copy=True)   # never a view of the caller's array
        self._pil = self._drawer = None

    def get_image(self):
        """The frame as float32 in [0, 1], indexed [x, y] with y up: shape (w, h, 3)."""
        rows = self._arr if self._arr is not None else np.asarray(self._pil)
        return from_rows(rows).astype(np.float32) / 255.0

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
            rgb = _rgb_array(palette)[idx]
        else:
            rgb = _rgb_array(color, n)
        r = _per_item(radius, n, "radius")
        if n == 0:
            return
        keep = np.isfinite(p).all(axis=1)
        if not keep.all():
            p, rgb = p[keep], (rgb[keep] if len(rgb) > 1 else rgb)
            r = r[keep] if len(r) > 1 else r
        if float(r.max()) <= _STAMP_MAX_RADIUS:
            self._blend_discs(p, np.broadcast_to(r, (len(p),)).astype(np.float64), rgb)
        else:
            self._pillow_discs(self._to_px(p), np.broadcast_to(r, (len(p),)), rgb)

    def _blend_discs(self, p, r, rgb):
        """Discs as the original system's GUI draws them: the disc's centre is `pos` times the
        resolution (not snapped to a pixel), and the pixel at integer coordinates (i, j), x to
        the right and y up, takes the colour with coverage alpha = clamp(r - distance, 0, 1),
        blended over what is there, disc after disc. So a disc of radius 0.5 is a faint dot,
        not a whole pixel, and edges are antialiased."""
        a = self._pixels()
        h, w = a.shape[:2]
        n = len(p)
        p = np.clip(p, -1.0, 2.0)                      # far-off points: no int overflow
        cx, cy = p[:, 0] * w, p[:, 1] * h
        # the pixels of a disc: integer coordinates in [c - r, c + r], at most 2r + 1 per axis
        k = int(math.floor(2 * float(r.max()))) + 1
        oy, ox = np.mgrid[0:k, 0:k]
        i0, j0 = np.ceil(cx - r), np.ceil(cy - r)
        fx = (cx - i0).astype(np.float32)[:, None] - ox.reshape(-1)   # centre minus pixel
        fy = (cy - j0).astype(np.float32)[:, None] - oy.reshape(-1)
        alpha = np.minimum(r.astype(np.float32)[:, None] - np.sqrt(fx * fx + fy * fy), 1.0)
        on = alpha > 0
        i0, j0 = i0.astype(np.int64), j0.astype(np.int64)
        # discs clear of the border (most of them) need no bounds check per pixel
        inside = (i0 >= 0) & (i0 + k <= w) & (j0 >= 0) & (j0 + k <= h)
        if not inside.all():
            edge = ~inside
            ie = i0[edge, None] + ox.reshape(-1)
            je = j0[edge, None] + oy.reshape(-1)
            on[edge] &= (ie >= 0) & (ie < w) & (je >= 0) & (je < h)
        disc = np.broadcast_to(np.arange(n)[:, None], on.shape)[on]    # disc-major order
        pix = (((h - 1 - j0) * w + i0)[:, None] + (ox - oy * w).reshape(-1))[on]
        alpha = alpha[on].astype(np.float32)
        colors = rgb[disc] if len(rgb) > 1 else np.broadcast_to(rgb[0], (len(disc), 3))
        out = a.reshape(-1, 3)
        # a pixel written once (most of them) blends directly; the others in drawing order
        once = np.bincount(pix, minlength=h * w)[pix] == 1
        _blend(out, pix[once], alpha[once], colors[once])
        many = np.flatnonzero(~once)
        if len(many) == 0:
            return
        order = many[np.argsort(pix[many], kind="stable")]     # by pixel, then drawing order
        pix, alpha, colors = pix[order], alpha[order], colors[order]
        first = np.empty(len(pix), bool)
        first[0], first[1:] = True, pix[1:] != pix[:-1]
        group = np.cumsum(first) - 1
        starts = np.flatnonzero(first)
        rank = np.arange(len(pix)) - starts[group]
        base = out[pix[starts]].astype(np.float32)
        # round k blends every pixel's k-th write: a pixel appears once per round
        by_rank = np.argsort(rank.astype(np.int16 if rank[-1:].max() < 32767 else np.int64),
                             kind="stable")
        cuts = np.flatnonzero(np.diff(rank[by_rank])) + 1
        for sel in np.split(by_rank, cuts):
            g = group[sel]
            base[g] += alpha[sel, None] * (colors[sel].astype(np.float32) - base[g])
        out[pix[starts]] = np.rint(base).astype(np.uint8)

    @staticmethod
    def _disc_boxes(px, radii):
        """Pillow bounding boxes for discs: Pillow fills a box inclusively (2r + 1 pixels
        across for integer corners) and truncates corners, so a box narrowed by half a pixel
        and rounded gives discs of the right area, centred where they should be."""
        rr = np.maximum(radii - 0.5, 0.0)
        return np.floor(np.stack([px[:, 0] - rr, px[:, 1] - rr, px[:, 0] + rr, px[:, 1] + rr],
                                 axis=1) + 0.5).astype(np.int64).tolist()

    def _pillow_discs(self, px, radii, rgb):
        draw = self._draw()
        boxes = self._disc_boxes(px, radii)
        fills = [tuple(c) for c in rgb.tolist()]
        if len(fills) == 1:
            fill = fills[0]
            for box in boxes:
                draw.ellipse(box, fill=fill)
        else:
            for box, fill in zip(boxes, fills):
                draw.ellipse(box, fill=fill)

    def circle(self, pos, color=0xFFFFFF, radius=1):
        self.circles(_points(pos), radius=radius, color=color)

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        """Segments from begin[i] to end[i] (n, 2), `radius` pixels thick on each side."""
        b, e = _points(begin), _points(end)
        if len(b) != len(e):
            raise ValueError(f"{len(b)} line beginnings for {len(e)} ends")
        self._lines_px(self._to_px(b), self._to_px(e), _per_item(radius, len(b), "radius"),
                       _rgb_array(color, len(b)))

    def _lines_px(self, b, e, radius, rgb):
        """Segments in Pillow's pixel coordinates, `radius` (half the width) per segment.

        Pillow truncates vertex coordinates and fills polygons including their outline, so a
        shape comes out about half a pixel fatter and shifted. To land on the pixels whose
        centres are inside the true band, a thick segment is drawn as the rectangle of the
        band narrowed (and shortened) by half a pixel, with vertices rounded (not truncated).
        """
        n = len(b)
        if n == 0:
            return
        draw = self._draw()
        hw = np.broadcast_to(np.asarray(radius, dtype=np.float64), (n,))
        fills = [tuple(c) for c in np.broadcast_to(rgb, (n, 3)).tolist()]
        v = e - b
        length = np.hypot(v[:, 0], v[:, 1])
        u = np.where(length[:, None] > 1e-9, v / np.maximum(length, 1e-9)[:, None], [1.0, 0.0])
        side = np.stack([-u[:, 1], u[:, 0]], axis=1) * np.maximum(hw - 0.5, 0.0)[:, None]
        along = u * np.minimum(0.5, length / 2)[:, None]     # the ends too, by half a pixel
        b2, e2 = b + along, e - along
        quads = np.floor(np.concatenate([b2 + side, e2 + side, e2 - side, b2 - side], axis=1)
                         + 0.5).astype(np.int64).tolist()
        ends = np.floor(np.concatenate([b, e], axis=1) + 0.5).astype(np.int64).tolist()
        # Round caps on thick segments, so that polylines and rectangles join cleanly.
        caps_b, caps_e = self._disc_boxes(b, hw), self._disc_boxes(e, hw)
        thin, capped = (hw < 0.75).tolist(), (hw >= 1.25).tolist()
        for k in range(n):
            if thin[k]:                            # one pixel wide
                draw.line(ends[k], fill=fills[k], width=1)
                continue
            draw.polygon(quads[k], fill=fills[k])
            if capped[k]:
                draw.ellipse(caps_b[k], fill=fills[k])
                draw.ellipse(caps_e[k], fill=fills[k])

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        self.lines(_points(begin), _points(end), radius=radius, color=color)

    def triangles(self, a, b, c, color=0xFFFFFF):
        """Filled triangles with corners a[i], b[i], c[i] (n, 2)."""
        pa, pb, pc = _points(a), _points(b), _points(c)
        n = len(pa)
        if not len(pb) == len(pc) == n:
            raise ValueError("triangles: a, b and c must have the same length")
        rgb = np.broadcast_to(_rgb_array(color, n), (n, 3))
        draw = self._draw()
        corners = np.concatenate([self._to_px(pa), self._to_px(pb), self._to_px(pc)], axis=1)
        # Rounded, not truncated by Pillow, so that triangles are not shifted (see _lines_px).
        corners = np.floor(corners + 0.5).astype(np.int64)
        for xy, fill in zip(corners.tolist(), rgb.tolist()):
            draw.polygon(xy, fill=tuple(fill))

    def triangle(self, a, b, c, color=0xFFFFFF):
        self.triangles(_points(a), _points(b), _points(c), color=color)

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        """The outline of an axis-aligned rectangle, `radius` pixels thick on each side."""
        (x0, y0), (x1, y1) = _points(topleft)[0], _points(bottomright)[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self.lines(corners, np.roll(corners, -1, axis=0), radius=radius, color=color)

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF):
        """Arrows from orig[i] along direction[i] (normalized units), with a two-stroke head."""
        o = _points(orig)
        d = np.broadcast_to(_points(direction), o.shape)
        n = len(o)
        r = _per_item(radius, n, "radius")
        rgb = np.broadcast_to(_rgb_array(color, n), (n, 3))
        tail, tip = self._to_px(o), self._to_px(o + d)
        v = tip - tail
        length = np.maximum(np.hypot(v[:, 0], v[:, 1]), 1e-9)
        u = v / length[:, None]
        # The head: two strokes back from the tip at +-30 degrees, a third of the shaft long
        # but never shorter than the line is wide, nor longer than 20 pixels plus width.
        head = np.clip(length / 3, 3 * np.broadcast_to(r, (n,)), 20 + 4 * r)
        cs, sn = math.cos(math.pi / 6), math.sin(math.pi / 6)
        back = [np.stack([u[:, 0] * cs - s * u[:, 1], s * u[:, 0] + cs * u[:, 1]], axis=1)
                for s in (sn, -sn)]
        b = np.concatenate([tail, tip, tip])
        e = np.concatenate([tip, tip - back[0] * head[:, None], tip - back[1] * head[:, None]])
        self._lines_px(b, e, np.tile(np.broadcast_to(r, (n,)), 3), np.tile(rgb, (3, 1)))

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF):
        self.arrows(_points(orig), _points(direction), radius=radius, color=color)

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        """Text whose top-left corner is at `pos` (normalized, y up)."""
        font = _FONTS.get(font_size)
        if font is None:
            from PIL import ImageFont
            try:                      # a scalable font (Pillow >= 10.1 with FreeType)
                font = ImageFont.load_default(size=font_size)
            except (TypeError, OSError, ImportError):
                font = ImageFont.load_default()          # the fixed bitmap font
            _FONTS[font_size] = font
        (x, y), = self._to_px(_points(pos))
        self._draw().text((x, y), str(content), fill=tuple(_rgb_array(color, 1)[0].tolist()),
                          font=font)

    def contour(self, scalar_field, normalize=False):
        """Show a scalar image (w, h), optionally stretched to [0, 1] first."""
        a = np.asarray(as_numpy(scalar_field), dtype=np.float32)
        if normalize:
            lo, hi = float(a.min()), float(a.max())
            a = (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)
        self.set_image(a)

    def vector_field(self, vector_field, arrow_spacing=5, color=0xFFFFFF):
        """Arrows of a (w, h, 2) field, every `arrow_spacing` cells, in pixel units."""
        v = np.asarray(as_numpy(vector_field), dtype=np.float64)
        w, h = v.shape[:2]
        xs, ys = np.meshgrid(np.arange(0, w, arrow_spacing), np.arange(0, h, arrow_spacing),
                             indexing="ij")
        orig = np.stack([(xs + 0.5) / w, (ys + 0.5) / h], axis=-1).reshape(-1, 2)
        d = v[xs, ys].reshape(-1, 2) / np.array(self.res, dtype=np.float64)
        self.arrows(orig, d, radius=0.5, color=color)

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
        """The mouse position, normalized with y up (the centre until the mouse moves)."""
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
