"""`ti.GUI`: draw particles, lines, triangles, text and images into an RGB frame, show it in a
window where a display exists, and write frames to files (`show('frame.png')`) anywhere.

Coordinates follow the original system: positions in [0, 1]^2 with y up; images are indexed
[x, y] (x to the right, y up). Drawing is done by Pillow (the `gui` extra); a headless machine
never opens a window and never fails.
"""
from __future__ import annotations

import os

import numpy as np


def _rgb(color):
    color = int(color)
    return (color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF


def _to_image_array(img):
    """A field or array indexed [x, y] (y up), float in [0, 1] or uint8 -> uint8 (h, w, 3)."""
    if hasattr(img, "to_numpy"):
        img = img.to_numpy()
    a = np.asarray(img)
    if a.dtype != np.uint8:
        a = (np.clip(a, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    a = a[:, :, :3]
    return np.ascontiguousarray(a.transpose(1, 0, 2)[::-1])     # [x, y] -> rows top-down


class GUI:
    ESCAPE, SHIFT, ALT, CTRL, SPACE = "Escape", "Shift_L", "Alt_L", "Control_L", " "
    LEFT, RIGHT, UP, DOWN = "Left", "Right", "Up", "Down"
    LMB, RMB, MOVE, WHEEL = "LMB", "RMB", "Motion", "Wheel"
    PRESS, RELEASE, EXIT = "Press", "Release", "WMClose"

    def __init__(self, name="fluxion", res=512, background_color=0x000000, show_gui=True,
                 fullscreen=False, fast_gui=False):
        from PIL import Image, ImageDraw
        self._Image, self._ImageDraw = Image, ImageDraw
        self.name = name
        self.res = (res, res) if isinstance(res, int) else tuple(res)
        self.background_color = background_color
        self.running = True
        self.fps_limit = 60
        self.frame = 0
        self._window = None
        self._want_window = show_gui and bool(os.environ.get("DISPLAY"))
        self.clear(background_color)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self, color=None):
        color = self.background_color if color is None else color
        self._img = self._Image.new("RGB", self.res, _rgb(color))
        self._draw = self._ImageDraw.Draw(self._img)

    def _px(self, pos):
        """[0, 1]^2 with y up -> pixel coordinates (x right, y down)."""
        p = np.asarray(pos, dtype=np.float64).reshape(-1, 2)
        w, h = self.res
        return np.stack([p[:, 0] * w, (1.0 - p[:, 1]) * h], axis=1)

    def set_image(self, img):
        a = _to_image_array(img)
        if a.shape[1::-1] != self.res:
            self.res = (a.shape[1], a.shape[0])
        self._img = self._Image.fromarray(a, "RGB")
        self._draw = self._ImageDraw.Draw(self._img)

    def circles(self, pos, radius=1, color=0xFFFFFF, palette=None, palette_indices=None):
        p = self._px(pos)
        n = len(p)
        if palette is not None and palette_indices is not None:
            colors = np.asarray(palette)[np.asarray(palette_indices).reshape(-1)]
        else:
            colors = np.broadcast_to(np.asarray(color), (n,))
        radii = np.broadcast_to(np.asarray(radius, dtype=np.float64), (n,))
        if np.all(radii <= 1.5):
            # small dots: write the pixels directly, vectorized
            a = np.asarray(self._img).copy()
            h, w = a.shape[:2]
            x = np.clip(p[:, 0].astype(np.int64), 0, w - 1)
            y = np.clip(p[:, 1].astype(np.int64), 0, h - 1)
            rgb = np.stack([(colors >> 16) & 0xFF, (colors >> 8) & 0xFF, colors & 0xFF], 1)
            a[y, x] = rgb.astype(np.uint8)
            self._img = self._Image.fromarray(a, "RGB")
            self._draw = self._ImageDraw.Draw(self._img)
            return
        for (x, y), r, c in zip(p, radii, colors):
            self._draw.ellipse([x - r, y - r, x + r, y + r], fill=_rgb(c))

    def circle(self, pos, color=0xFFFFFF, radius=1):
        self.circles([pos], radius=radius, color=color)

    def lines(self, begin, end, radius=1, color=0xFFFFFF):
        b, e = self._px(begin), self._px(end)
        colors = np.broadcast_to(np.asarray(color), (len(b),))
        width = max(1, int(round(2 * float(np.max(radius)))))
        for p0, p1, c in zip(b, e, colors):
            self._draw.line([tuple(p0), tuple(p1)], fill=_rgb(c), width=width)

    def line(self, begin, end, radius=1, color=0xFFFFFF):
        self.lines([begin], [end], radius, color)

    def triangles(self, a, b, c, color=0xFFFFFF):
        pa, pb, pc = self._px(a), self._px(b), self._px(c)
        colors = np.broadcast_to(np.asarray(color), (len(pa),))
        for x, y, z, col in zip(pa, pb, pc, colors):
            self._draw.polygon([tuple(x), tuple(y), tuple(z)], fill=_rgb(col))

    def triangle(self, a, b, c, color=0xFFFFFF):
        self.triangles([a], [b], [c], color)

    def rect(self, topleft, bottomright, radius=1, color=0xFFFFFF):
        (x0, y0), (x1, y1) = self._px([topleft, bottomright])
        self._draw.rectangle([min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)],
                             outline=_rgb(color), width=max(1, int(round(radius))))

    def text(self, content, pos, font_size=15, color=0xFFFFFF):
        (x, y), = self._px([pos])
        try:
            from PIL import ImageFont
            font = ImageFont.load_default(size=font_size)
        except TypeError:
            font = None
        self._draw.text((x, y), str(content), fill=_rgb(color), font=font)

    def arrows(self, orig, direction, radius=1, color=0xFFFFFF):
        o = np.asarray(orig, dtype=np.float64).reshape(-1, 2)
        self.lines(o, o + np.asarray(direction).reshape(-1, 2), radius, color)

    # -- output -------------------------------------------------------------------------------
    def get_image(self):
        """The frame as float [0, 1], indexed [x, y] with y up (shape (w, h, 3))."""
        a = np.asarray(self._img, dtype=np.float32) / 255.0
        return np.ascontiguousarray(a[::-1].transpose(1, 0, 2))

    def show(self, file=None):
        if file:
            d = os.path.dirname(file)
            if d:
                os.makedirs(d, exist_ok=True)
            self._img.save(file)
        if self._want_window:
            self._show_window()
        self.frame += 1
        self.clear()

    def _show_window(self):
        try:
            import tkinter
            from PIL import ImageTk
            if self._window is None:
                root = tkinter.Tk()
                root.title(self.name)
                root.protocol("WM_DELETE_WINDOW", lambda: setattr(self, "running", False))
                label = tkinter.Label(root)
                label.pack()
                self._window = (root, label)
            root, label = self._window
            photo = ImageTk.PhotoImage(self._img)
            label.configure(image=photo)
            label.image = photo
            root.update()
        except Exception:
            self._want_window = False   # no usable display after all: stay headless

    # -- events (none without a window) ---------------------------------------------------------
    def get_event(self, *filters):
        return False

    def get_events(self, *filters):
        return []

    def is_pressed(self, *keys):
        return False

    def get_cursor_pos(self):
        return (0.5, 0.5)

    def close(self):
        if self._window is not None:
            self._window[0].destroy()
            self._window = None
        self.running = False
