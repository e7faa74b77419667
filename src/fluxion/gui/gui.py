"""`ti.GUI`: a 2-D canvas for particles, lines, triangles, text and images.

Conventions of the original system, kept here so that its scripts run unchanged:
  * positions are normalized, in [0, 1]^2, with y *up*; radii are in pixels;
  * the frame is float32 RGBA indexed [x, y] (y up), which `get_image()` returns; images for
    `set_image` are indexed the same way, float in [0, 1] or unsigned integers;
  * colors are 0xRRGGBB integers (one, or one per element), or float RGB in [0, 1].

Shapes are rasterized by the original system's rules, so that a program draws the same
picture (to float32 rounding): fluxion/gui/shapes.py finds the pixels each shape covers and
fluxion/gui/composite.py blends them over the frame, shape after shape. Keys and events are
in fluxion/gui/events.py, the widgets' values in fluxion/gui/widgets.py.

`show()` puts the frame in a tkinter window (fluxion/gui/tk_window.py) where a display exists
and writes it to a file when asked; without a display, with show_gui=False, or without
tkinter, there is simply no window: drawing, files and `running` work the same, and no input
arrives (`get_event` returns False, `has_key_event` False).
"""
from __future__ import annotations

import os
import time

import numpy as np

from fluxion.tools.image import as_numpy, has_display, require_pillow
from fluxion.gui import kernels, shapes
from fluxion.gui.composite import fill, to_rows
from fluxion.gui.events import Event, EventFilter, Input, Keys
from fluxion.gui.shapes import INV255, per_item, points, rgba
from fluxion.gui.tk_window import open_window
from fluxion.gui.widgets import WidgetValue

_F32 = np.float32
_ALL = "all"        # the whole frame (GUI._dirty)
_FEW = 64           # circles: up to this many, the box they cover is tracked
_NO_CODES = np.zeros(1, np.int32)         # kernels.discs' argument it does not read
_NO_COLORS = np.ones((1, 4), _F32)


class GUI(Keys, Input):
    """A window (or a headless canvas) of `res` pixels; see the module docstring. The keys,
    buttons and event types (ESCAPE, LMB, PRESS, ...) are class attributes."""

    Event = Event
    EventFilter = EventFilter
    WidgetValue = WidgetValue

    def __init__(self, name="Fluxion", res=512, background_color=0x000000, show_gui=True,
                 fullscreen=False, fast_gui=False, fps_limit=60):
        self._Image = require_pillow()
        self.name = name
        w, h = (res, res) if np.isscalar(res) else tuple(res)
        if int(w) <= 0 or int(h) <= 0:
            raise ValueError(f"GUI resolution must be positive, got {res}")
        self.res = (int(w), int(h))
        self.background_color = background_color
        self.fast_gui = fast_gui      # accepted for compatibility; set_image is always a copy
        self.fps_limit = fps_limit    # frames per second while a window is shown
        self.frame = 0
        self._running = True
        # (the cursor is (0, 0) until the mouse moves, as the original's: mciso_advanced)
        self._init_input()
        self._last_show = None
        # the frame: float32 RGBA (w, h, 4), indexed [x, y] with y up
        self._img = np.zeros(self.res + (4,), _F32)
        self._clear_to = None           # the colour the frame is to be cleared to, if any
        # What the frame holds, so that a clear fills only what was drawn since the last:
        # the colour it has outside the box `_dirty` (None: not known to be uniform), and
        # `_dirty`, None (nothing drawn), a box (i0, i1, j0, j1), half-open, or _ALL.
        self._uniform = None
        self._dirty = _ALL
        self._staged_alpha = _F32(0)    # set_image's alpha for a field (see there)
        self._window = None
        self.clear()
        if show_gui and has_display():
            self._window = open_window(self, fullscreen)

    # -- the frame ----------------------------------------------------------------------------
    def _frame(self):
        """The frame (w, h, 4), cleared first if a clear is pending."""
        c = self._clear_to
        if c is not None:
            if self._uniform is None or self._dirty is _ALL or \
                    not np.array_equal(self._uniform, c):
                fill(self._img, c)
            elif self._dirty is not None:   # (a small shape's frame: most of it is kept)
                i0, i1, j0, j1 = self._dirty
                fill(self._img[i0:i1, j0:j1], c)
            self._uniform, self._dirty, self._clear_to = c, None, None
        return self._img

    def _flat(self, box=_ALL):
        """The frame as (w * h, 4), pixel (i, j) at row i * h + j, to be drawn on within
        `box` ((i0, i1, j0, j1), half-open; None: nowhere; _ALL: anywhere)."""
        frame = self._frame().reshape(-1, 4)
        d = self._dirty
        if box is _ALL or d is _ALL:
            self._dirty = _ALL
        elif d is None:
            self._dirty = box
        elif box is not None:
            self._dirty = (min(d[0], box[0]), max(d[1], box[1]), min(d[2], box[2]),
                           max(d[3], box[3]))
        return frame

    def _disc_box(self, c, r):
        """A box that holds every pixel the discs (pixel centres c, radii r) may cover, with
        a pixel to spare (None: none can cover any)."""
        c64, r64 = c.astype(np.float64), r.astype(np.float64)
        ok = np.isfinite(c64).all(axis=1) & np.isfinite(r64) & (r64 > 0)
        if not ok.any():
            return None
        lo = (c64[ok] - r64[ok, None]).min(axis=0) - 1
        hi = (c64[ok] + r64[ok, None]).max(axis=0) + 2
        w, h = self.res
        i0, j0 = (int(np.clip(np.floor(v), 0, m)) for v, m in zip(lo, (w, h)))
        i1, j1 = (int(np.clip(np.ceil(v), 0, m)) for v, m in zip(hi, (w, h)))
        return (i0, i1, j0, j1) if i0 < i1 and j0 < j1 else None

    def _pil_image(self):
        return self._Image.fromarray(to_rows(self._frame()), "RGBA").convert("RGB")

    def _to_px(self, p):
        """Normalized positions (n, 2) -> float32 pixel coordinates (x right, y up), as the
        original: converted to float32, then times the resolution."""
        return p.astype(_F32) * np.array(self.res, _F32)

    def clear(self, color=None):
        """Fill the frame with `color` (the background color by default)."""
        color = self.background_color if color is None else color
        # done when the frame is next read or drawn on: a frame that set_image replaces
        # whole (most programs that call it) is then never filled
        self._clear_to = rgba(color, 1)[0]

    def cook_image(self, img):
        """An image made ready for the frame, as the original prepares one: float32
        (w, h, 4), C-contiguous. Unsigned integers are divided by their dtype's largest
        value, floats only converted to float32 (not clamped); grey (w, h) or (w, h, 1)
        fills all four channels, RG and RGB get zero for the channels they lack. Other
        dtypes, shapes or a resolution other than the GUI's raise ValueError."""
        a = as_numpy(img)
        if a.dtype.kind == "u":
            a = a.astype(_F32) * _F32(1.0 / np.iinfo(a.dtype).max)
        elif a.dtype.kind == "f":
            a = a.astype(_F32)
        else:
            raise ValueError(f"Data type {a.dtype} not supported in GUI.set_image")
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
            raise ValueError(f"Image must be grayscale, RG, RGB or RGBA: shape (w, h) or "
                             f"(w, h, 1..4), got {a.shape}")
        if a.shape[:2] != self.res:
            raise ValueError(f"Image resolution {a.shape[:2]} does not match GUI resolution "
                             f"{self.res}")
        c = a.shape[2]
        if c == 1:
            a = np.repeat(a, 4, axis=2)
        elif c < 4:
            a = np.concatenate([a, np.zeros(self.res + (4 - c,), _F32)], axis=2)
        return np.ascontiguousarray(a)

    def set_image(self, img):
        """Replace the frame by an image of the GUI's resolution, indexed [x, y] (y up):
        shape (w, h) (grey), (w, h, 1) (grey), (w, h, 2) (red, green), (w, h, 3) (RGB) or
        (w, h, 4) (RGBA); float (kept as float32, not clamped) or unsigned integers (divided
        by their largest value). A grey image fills all four channels and RGB has alpha 0,
        as in the original."""
        from_field = hasattr(img, "to_numpy") and not isinstance(img, np.ndarray) and \
            not type(img).__module__.startswith("torch")
        n = kernels.field_channels(img, self.res) if from_field else None
        if n is not None and kernels.usable():
            self._clear_to, self._uniform, self._dirty = None, None, _ALL
            # as below: alpha is the staged alpha
            scalar = np.ndim(self._staged_alpha) == 0
            kernels.field_to_frame(img, n, self._img,
                                   float(self._staged_alpha) if scalar else 0.0, int(scalar))
            if not scalar:
                self._img[:, :, 3] = self._staged_alpha
            return
        a = as_numpy(img)
        if a.dtype == np.bool_:
            a = a.astype(np.uint8) * 255
        if a.dtype.kind == "u":
            a = a.astype(_F32) * _F32(1.0 / np.iinfo(a.dtype).max)
        elif a.dtype.kind == "i":     # signed integers: taken as 0..255 (the original refuses)
            a = np.clip(a, 0, 255).astype(_F32) * INV255
        elif a.dtype.kind == "f":
            # a field's values were just read into a fresh array, which need not be copied
            a = a.astype(_F32, copy=not from_field)
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
        # every branch below writes all four channels
        self._clear_to, self._uniform, self._dirty = None, None, _ALL
        if from_field:
            # a field's values go to red, green and blue (grey: all three); alpha is what the
            # last array image or get_image left in the staging buffer (0 at first), as in
            # the original
            # (a channel at a time: NumPy copies whole pixels of 3 or 1 values slowly)
            for ch in range(3):
                self._img[:, :, ch] = a[:, :, ch] if ch < c else a[:, :, 0] if c == 1 else 0
            self._img[:, :, 3] = self._staged_alpha
            return
        if c == 4:
            self._img[...] = a                          # never a view of the caller's array
        else:
            for ch in range(4):
                self._img[:, :, ch] = a[:, :, ch] if ch < c else a[:, :, 0] if c == 1 else 0
        # an image that is not a field's was converted (astype copies): no one else has `a`
        self._staged_alpha = a[:, :, 3] if c == 4 else a[:, :, 0] if c == 1 else _F32(0)

    def get_image(self):
        """The frame: float32 (w, h, 4) RGBA, indexed [x, y] with y up (a copy)."""
        # the original reads the frame back through set_image's staging buffer
        frame = self._frame()
        self._staged_alpha = frame[:, :, 3].copy()
        return frame.copy()

    @property
    def img(self):
        """The frame as the original exposes it: float32 (w, h, 4) RGBA, y up; with
        fast_gui=True, one uint32 0xRRGGBB per pixel, rows from the top, x fastest."""
        frame = self.get_image()
        if not self.fast_gui:
            return frame
        # (the original truncates c * 255; the epsilon keeps a stored k / 255 at k)
        rgb = np.clip(np.floor(frame[:, ::-1, :3].astype(np.float64) * 255 + 1e-3), 0, 255)
        rgb = rgb.astype(np.uint32)
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        return np.ascontiguousarray(packed.T).reshape(-1)

    # -- drawing ------------------------------------------------------------------------------
    def circles(self, pos, radius=1, color=0xFFFFFF, palette=None, palette_indices=None):
        """Filled discs at `pos` (n, 2). `radius` (pixels) and `color` are one value or one
        per disc; or `palette` (colors) with `palette_indices` (one index per disc)."""
        p = as_numpy(pos)
        if p.dtype != _F32 or p.ndim != 2 or p.shape[1] != 2:
            p = points(p).astype(_F32)        # (as _to_px converts them)
        n = len(p)
        code = None
        if palette is not None:
            if palette_indices is None:
                raise ValueError("circles: palette needs palette_indices")
            idx = np.asarray(as_numpy(palette_indices)).reshape(-1).astype(np.int64)
            if len(idx) != n:
                raise ValueError(f"{len(idx)} palette indices for {n} circles")
            pal = rgba(palette)
            if n and (idx.min() < 0 or idx.max() >= len(pal)):
                raise ValueError(f"circles: palette indices must be in [0, {len(pal)})")
            colors = pal[idx]
        else:
            code, colors = self._colors(color, n)
        r = per_item(radius, n, "radius")
        if n == 0:
            return
        # a few discs (a cursor, a ball) may leave most of the frame as it was; many cover
        # it anyway, and their box would cost more than it saves
        box = self._disc_box(self._to_px(p), r) if n <= _FEW else _ALL
        frame = self._flat(box)
        if not self._compiled(code, colors):
            shapes.discs(frame, self.res, self._to_px(p), r, colors)
            return
        radii = r[:1] if r.strides == (0,) else r       # one radius for all: not n copies
        kernels.discs(frame, *self.res, np.ascontiguousarray(p), np.ascontiguousarray(radii),
                      int(len(radii) > 1), *self._kernel_colors(code, colors))

    def _colors(self, color, n):
        """(codes, None) for integer colours where the kernels run (they take 0xRRGGBB as
        it is), else (None, float RGBA rows)."""
        code = shapes.codes(color, n) if kernels.usable() else None
        return code, (rgba(color, n) if code is None else None)

    @staticmethod
    def _compiled(code, colors):
        """Whether the kernels draw: on a CPU program, and with finite colours (a kernel
        blends every pixel of a shape's box, those it does not cover by 0 * colour)."""
        return kernels.usable() and (code is not None or bool(np.isfinite(colors).all()))

    @staticmethod
    def _kernel_colors(code, colors):
        """The colour arguments of the kernels: codes, rows, per shape, packed."""
        if code is None:
            return _NO_CODES, np.ascontiguousarray(colors), int(len(colors) > 1), False
        return code, _NO_COLORS, int(len(code) > 1), True

    def _strokes(self, a, b, r, color, ncolors=None):
        """Segments a -> b (normalized (n, 2), float64), radii r (float32 (n,) or a
        broadcast one), `color` one or `ncolors` (default n), drawn by the kernel where it
        runs, else by shapes.strokes."""
        code, colors = self._colors(color, len(a) if ncolors is None else ncolors)
        frame = self._flat()
        if len(a) == 0:
            return
        pa, pb = self._to_px(a), self._to_px(b)
        if not self._compiled(code, colors):
            shapes.strokes(frame, self.res, pa, pb, r, colors)
            return
        radii = r[:1] if r.strides == (0,) else r
        kernels.strokes(frame, *self.res, pa, pb, np.ascontiguousarray(radii),
                        int(len(radii) > 1), *self._kernel_colors(code, colors))

    def circle(self, pos, color=0xFFFFFF, radius=1):
        self.circles(points(pos), radius=radius, color=color)

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        """Segments from begin[i] to end[i] (n, 2), `radius` pixels thick on each side."""
        b, e = points(begin), points(end)
        n = len(b)
        if len(e) != n:
            raise ValueError(f"{n} line beginnings for {len(e)} ends")
        # The original nudges the i-th end right by 1e-6 * (i % 18 + 6) (normalized units,
        # after the conversion to float32), which also keeps zero-length segments finite.
        e = e.astype(_F32).astype(np.float64)
        e[:, 0] += 1e-6 * (np.arange(n) % 18 + 6)
        self._strokes(b, e, per_item(radius, n, "radius"), color)

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        """One segment (not nudged, unlike `lines`)."""
        b, e = points(begin), points(end)
        if len(b) != 1 or len(e) != 1:
            raise ValueError("line: begin and end must be single points; use lines()")
        self._strokes(b, e, per_item(radius, 1, "radius"), color, 1)

    def triangles(self, a, b, c, color=0xFFFFFF):
        """Filled triangles with corners a[i], b[i], c[i] (n, 2), opaque (see
        shapes.triangles for which pixels they cover)."""
        pa, pb, pc = points(a), points(b), points(c)
        n = len(pa)
        if not len(pb) == len(pc) == n:
            raise ValueError("triangles: a, b and c must have the same length")
        code, colors = self._colors(color, n)
        frame = self._flat()
        if n == 0:
            return
        pa, pb, pc = self._to_px(pa), self._to_px(pb), self._to_px(pc)
        if not self._compiled(code, colors):
            shapes.triangles(frame, self.res, pa, pb, pc, colors)
            return
        kernels.triangles(frame, *self.res, pa, pb, pc, *self._kernel_colors(code, colors))

    def triangle(self, a, b, c, color=0xFFFFFF):
        self.triangles(points(a), points(b), points(c), color=color)

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        """The outline of an axis-aligned rectangle: four strokes, `radius` pixels thick on
        each side (the corners, covered twice, blend twice, as in the original)."""
        (x0, y0), (x1, y1) = points(topleft)[0], points(bottomright)[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self._strokes(corners, np.roll(corners, -1, axis=0),
                      per_item(radius, 1, "radius").repeat(4), color, 1)

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF, tip_scale=0.2, angle=45):
        """Arrows from orig[i] along direction[i] (normalized units): all shafts, then all
        first head strokes, then all second ones (three calls of `lines`, as the original)."""
        o = points(orig)
        d = np.broadcast_to(points(direction), o.shape)
        for b, e in shapes.arrow_heads(o, d, tip_scale, angle):
            self.lines(b, e, radius=radius, color=color)

    def arrow(self, orig, direction, radius=1, color=0xFFFFFF, tip_scale=0.2, angle=45):
        """One arrow: its three strokes drawn with `line`."""
        o, d = points(orig)[:1], points(direction)[:1]
        for b, e in shapes.arrow_heads(o, d, tip_scale, angle):
            self.line(b, e, radius=radius, color=color)

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        """Text whose top-left corner is at `pos` (normalized, y up), `font_size` pixels
        from descent to ascent (see shapes.text)."""
        x, y = self._to_px(points(pos))[0].astype(np.float64)
        if not (np.isfinite(x) and np.isfinite(y)):
            return
        shapes.text(self._flat(), self.res, self._Image, content, x, y, font_size,
                    rgba(color, 1))

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
        """A slider from `minimum` to `maximum`: a GUI.WidgetValue starting at `minimum`."""
        w = WidgetValue(minimum)
        if self._window is not None:
            self._window.add_slider(w, text, minimum, maximum, step)
        return w

    def label(self, text):
        """A label showing `text: value`: a GUI.WidgetValue starting at 0."""
        w = WidgetValue(0)
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

    @property
    def fps_limit(self):
        """The most frames a second that `show` presents in a window (it sleeps to keep
        to it; a headless GUI never waits); None: no limit."""
        return self._fps_limit

    @fps_limit.setter
    def fps_limit(self, value):
        # 0 means no limit, as the original's zero frame delay (which it reports as None)
        if value is not None and value < 0:
            raise ValueError(f"GUI.fps_limit must be positive, 0 or None, got {value}")
        self._fps_limit = value if value else None

    def _limit_fps(self):
        now = time.perf_counter()
        if self._fps_limit and self._last_show is not None:
            wait = 1.0 / self._fps_limit - (now - self._last_show)
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
        self._hold(type, key)
        self._events.append(Event(type, key, self._cursor, modifier, delta))

    def has_key_event(self):
        """Whether an input event is queued (never, when headless)."""
        self._pump()
        return bool(self._events)

    def get_key_event(self):
        """Take the oldest queued event, waiting for one while a window is open; a GUI
        without a window has nothing to wait for and raises RuntimeError when none is
        queued (the original would wait forever)."""
        self._pump()
        while not self._events and self.has_window:
            time.sleep(0.005)
            self._pump()
        if not self._events:
            raise RuntimeError("GUI.get_key_event: no event is queued and there is no window "
                               "to wait for one (check has_key_event() first)")
        return self._events.popleft()

    def get_event(self, *filters):
        """Take queued events until one matches a filter (an event type, a key, or a
        (type, key) pair: see GUI.EventFilter; none: any event); set `self.event` to it and
        return True. Events that do not match are dropped. False when none is left (always,
        when headless)."""
        return self._take_event(EventFilter(*filters).match if filters else None)

    def get_events(self, *filters):
        """All queued events that match (see get_event), oldest first; the queue is emptied."""
        return self._take_events(EventFilter(*filters).match if filters else None)
