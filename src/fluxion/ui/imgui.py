"""`window.get_gui()`: widgets in sub-windows, drawn into the frame and driven by the mouse.

A widget is laid out when it is declared (rows down its sub-window), so a press of the left
button that arrived during the frame, at a point inside it, acts on it at once: a button
returns True, a checkbox flips, a slider (and each channel of a colour) takes the cursor's
value and follows it while the button is held. Without input (headless) every widget
returns the value it was given. The sub-windows are drawn over the frame with Pillow (boxes
and its small default font) and blended in by a kernel (fluxion/ui/raster.py).
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from fluxion.ui import raster
from fluxion.ui.constants import LMB, PRESS

ROW, PAD, TITLE = 18, 4, 18          # pixels
_BG, _TITLE_BG = (30, 30, 36, 220), (41, 74, 122, 255)
_BOX, _FILL, _TEXT = (60, 64, 74, 255), (66, 150, 250, 255), (235, 235, 235, 255)


class _Panel:
    def __init__(self, name, x, y, w, h):
        self.name, self.x, self.y, self.w, self.h = name, x, y, w, h
        self.row = y + TITLE + PAD
        self.items = []             # (kind, rect, payload) in the panel's pixels, y down

    def next_row(self):
        r = (self.x + PAD, self.row, self.w - 2 * PAD, ROW - 2)
        self.row += ROW + 2
        return r


class Gui:
    """See the module docstring; the methods are the original's."""

    def __init__(self, window):
        self._window = window
        self._panels = []
        self._panel = None
        self._default = None         # the sub-window of widgets declared outside one
        self._active = None          # the slider being dragged: (panel, label, channel)
        self._font = None
        self._cache = {}             # what the last frame's sub-windows looked like -> pixels

    # -- sub-windows -------------------------------------------------------------------------
    @contextmanager
    def sub_window(self, name, x, y, width, height):
        """A sub-window with its top-left corner at (x, y) (fractions of the window, y down)
        and width x height (fractions too)."""
        self.begin(name, x, y, width, height)
        try:
            yield self
        finally:
            self.end()

    def begin(self, name, x, y, width, height):
        if self._panel is not None:
            raise RuntimeError("ti.ui gui: begin() inside a sub-window (call end() first)")
        w, h = self._window.res
        self._panel = _Panel(str(name), int(x * w), int(y * h), max(int(width * w), 2 * PAD + 8),
                             max(int(height * h), TITLE + 2 * PAD))
        self._panel.items.append(("title", None, str(name)))
        self._window._dirty = True

    def end(self):
        if self._panel is None:
            raise RuntimeError("ti.ui gui: end() without begin()")
        self._panels.append(self._panel)
        self._panel = None

    def _current(self):
        if self._panel is not None:
            return self._panel
        if self._default is None:   # widgets outside begin/end: a sub-window of their own
            self.begin("Debug", 0.02, 0.02, 0.3, 0.3)
            self._default, self._panel = self._panel, None
            self._panels.append(self._default)
        return self._default

    # -- input -------------------------------------------------------------------------------
    def _press_in(self, rect):
        """The pixel x of this frame's last press of the left button inside `rect` (y down),
        or None."""
        w, h = self._window.res
        x0, y0, rw, rh = rect
        found = None
        for e in self._window._clicks:
            if e.type == PRESS:
                px, py = e.pos[0] * w, (1.0 - e.pos[1]) * h
                if x0 <= px < x0 + rw and y0 <= py < y0 + rh:
                    found = px
        return found

    def _pressed_in(self, rect):
        return self._press_in(rect) is not None

    def _drag(self, rect, ident):
        """Where across `rect` (a fraction) it was pressed this frame, or the cursor is while
        the button stays held after pressing it; else None."""
        x = self._press_in(rect)
        if x is not None:
            self._active = ident
        if self._active != ident:
            return None
        if LMB in self._window._pressed:
            x = self._window._cursor[0] * self._window.res[0]
        elif x is None:
            return None
        return min(max((x - rect[0]) / max(rect[2], 1), 0.0), 1.0)

    # -- widgets -----------------------------------------------------------------------------
    def text(self, text, color=None):
        p = self._current()
        col = _TEXT if color is None else tuple(int(255 * c + 0.5) for c in color[:3]) + (255,)
        p.items.append(("text", p.next_row(), (str(text), col)))

    def button(self, text):
        p = self._current()
        x, y, w, h = p.next_row()
        rect = (x, y, min(w, 8 * len(str(text)) + 12), h)
        p.items.append(("button", rect, str(text)))
        return self._pressed_in(rect)

    def checkbox(self, text, old_value):
        p = self._current()
        x, y, w, h = p.next_row()
        value = bool(old_value)
        if self._pressed_in((x, y, w, h)):
            value = not value
        p.items.append(("checkbox", (x, y, h, h), (str(text), value)))
        return value

    def _slider(self, text, old_value, minimum, maximum, as_int):
        p = self._current()
        x, y, w, h = p.next_row()
        track = (x, y, int(w * 0.62), h)
        frac = self._drag(track, (p.name, str(text), 0))
        value = old_value
        if frac is not None:
            value = minimum + frac * (maximum - minimum)
            value = int(round(value)) if as_int else float(value)
        shown = f"{value}" if as_int else f"{value:.3f}"
        span = (maximum - minimum) or 1
        p.items.append(("slider", track, (str(text), (value - minimum) / span, shown)))
        return value

    def slider_int(self, text, old_value, minimum, maximum):
        return self._slider(text, int(old_value), int(minimum), int(maximum), True)

    def slider_float(self, text, old_value, minimum, maximum):
        return self._slider(text, float(old_value), float(minimum), float(maximum), False)

    def color_edit_3(self, text, old_value):
        p = self._current()
        x, y, w, h = p.next_row()
        cw = int(w * 0.62) // 3
        value = [float(c) for c in old_value][:3]
        for c in range(3):
            frac = self._drag((x + c * cw, y, cw - 2, h), (p.name, str(text), c))
            if frac is not None:
                value[c] = frac
        p.items.append(("color", (x, y, cw, h), (str(text), tuple(value))))
        return tuple(value)

    # -- drawing -----------------------------------------------------------------------------
    def _end_frame(self):
        self._panels = []
        self._panel = self._default = None
        if LMB not in self._window._pressed:
            self._active = None

    def _draw(self, frame):
        if not self._panels:
            return
        from PIL import Image, ImageDraw, ImageFont   # Pillow: the window requires it
        if self._font is None:
            self._font = ImageFont.load_default()
        w, h = frame.res
        cache = {}
        for p in self._panels:
            # a sub-window is mostly the same from frame to frame: drawn again only when not
            look = (p.w, p.h, repr(p.items))
            over = self._cache.get(look)
            if over is None:
                img = Image.new("RGBA", (p.w, p.h), _BG)
                _draw_panel(ImageDraw.Draw(img), p, self._font)
                over = np.ascontiguousarray(np.asarray(img, np.float32)[::-1].transpose(1, 0, 2)
                                            * np.float32(1 / 255))
            cache[look] = over
            raster.blend(frame.rgb, over, p.x, h - p.y - p.h)
        self._cache = cache


def _draw_panel(d, p, font):
    def local(r):
        x, y, rw, rh = r
        return x - p.x, y - p.y, x - p.x + rw, y - p.y + rh

    def label(x, y, s, col=_TEXT):
        d.text((x, y + 2), s, fill=col, font=font)

    for kind, rect, data in p.items:
        if kind == "title":
            d.rectangle((0, 0, p.w, TITLE), fill=_TITLE_BG)
            label(PAD, 1, data)
            continue
        x0, y0, x1, y1 = local(rect)
        if kind == "text":
            label(x0, y0, data[0], data[1])
        elif kind == "button":
            d.rectangle((x0, y0, x1, y1), fill=_BOX)
            label(x0 + 6, y0, data)
        elif kind == "checkbox":
            d.rectangle((x0, y0, x1, y1), fill=_BOX)
            if data[1]:
                d.rectangle((x0 + 3, y0 + 3, x1 - 3, y1 - 3), fill=_FILL)
            label(x1 + 6, y0, data[0])
        elif kind == "slider":
            d.rectangle((x0, y0, x1, y1), fill=_BOX)
            f = min(max(data[1], 0.0), 1.0)
            gx = x0 + int(f * (x1 - x0 - 6))
            d.rectangle((gx, y0 + 1, gx + 6, y1 - 1), fill=_FILL)
            label(x0 + 4, y0, data[2])
            label(x1 + 6, y0, data[0])
        elif kind == "color":
            for c in range(3):
                cx = x0 + c * (x1 - x0)
                d.rectangle((cx, y0, cx + (x1 - x0) - 2, y1), fill=_BOX)
                label(cx + 3, y0, "RGB"[c] + f"{int(255 * data[1][c] + 0.5)}")
            sx = x0 + 3 * (x1 - x0)
            d.rectangle((sx, y0, sx + (y1 - y0), y1),
                        fill=tuple(int(255 * min(max(c, 0.0), 1.0) + 0.5) for c in data[1]))
            label(sx + (y1 - y0) + 6, y0, data[0])
