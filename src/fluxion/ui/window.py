"""`ti.ui.Window`: a frame drawn by fluxion's kernels (fluxion/ui/canvas.py), shown in a window
where a display exists, and otherwise (no display, `show_window=False`, no tkinter) kept
headless: it still renders, to `save_image`, to numpy and inline in a notebook.

The window is ti.GUI's Tk window (fluxion/gui/tk_window.py). Input arrives as events
(`Event`: `key`, `type`, `pos`): keys are strings (fluxion/ui/constants.py), the cursor is
normalized with y up. Headless, no input arrives; `_push_event` is where a window, or a test
replaying input, delivers it.
"""
from __future__ import annotations

import io
import time

import numpy as np

from fluxion.gui.events import Input, normalize_key
from fluxion.gui.tk_window import open_window
from fluxion.tools.image import has_display, imwrite, require_pillow
from fluxion.ui.canvas import Canvas
from fluxion.ui.constants import CAPSLOCK, LMB, PRESS, RELEASE
from fluxion.ui.imgui import Gui
from fluxion.ui.scene import Scene


# Tk's names for keys whose ti.ui name differs
_TK_KEYS = {"Caps_Lock": CAPSLOCK}


class Event:
    """One input event: `type` (PRESS or RELEASE; a move of the mouse is no event), `key`,
    and `pos`, the cursor when it happened."""

    def __init__(self, type, key, pos):
        self.type, self.key, self.pos = type, key, pos

    def __repr__(self):
        return f"ti.ui.Event({self.type!r}, {self.key!r})"


class _Frame:
    """A window's buffers, indexed [x, y] with y up: colour, the 2-D draw calls' winners, the
    scene's keys and depth."""

    def __init__(self, res):
        w, h = self.res = res
        self.rgb = np.zeros((w, h, 3), np.float32)
        self.ids = np.zeros((w, h), np.int32)
        self.keys = np.zeros((w, h), np.int64)
        self.depth = np.ones((w, h), np.float32)


class Window(Input):
    """A `res` = (width, height) window; see the module docstring."""

    def __init__(self, name, res, vsync=False, show_window=True, fps_limit=1000,
                 pos=(100, 100)):
        try:
            w, h = (int(res), int(res)) if np.isscalar(res) else (int(res[0]), int(res[1]))
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"ti.ui.Window: res is (width, height), got {res!r}") from None
        if w <= 0 or h <= 0:
            raise ValueError(f"ti.ui.Window: res must be positive, got {res!r}")
        self._Image = require_pillow()
        self.name, self.res, self.vsync, self.pos = name, (w, h), vsync, pos
        self.fps_limit = fps_limit
        self._frame = _Frame(self.res)
        self._canvas = Canvas(self)
        self._gui = Gui(self)
        self._scene = None
        self._dirty = True
        self._running = True
        self._init_input()
        self._clicks = []           # this frame's mouse button events, for the widgets
        self._last_show = None
        self._window = open_window(self, False) if show_window and has_display() else None

    # -- state -----------------------------------------------------------------------------
    @property
    def running(self):
        self._pump()
        return self._running

    @running.setter
    def running(self, value):
        self._running = bool(value)

    def get_window_shape(self):
        return self.res

    def get_canvas(self):
        return self._canvas

    def get_scene(self):
        if self._scene is None:
            self._scene = Scene()
        return self._scene

    def get_gui(self):
        return self._gui

    @property
    def GUI(self):
        return self._gui

    # -- the frame -------------------------------------------------------------------------
    def _render(self):
        """The frame of this frame's draw calls and widgets (drawn once, on first need)."""
        if self._dirty:
            self._canvas._draw(self._frame)
            self._gui._draw(self._frame)
            self._dirty = False
        return self._frame

    def get_image_buffer_as_numpy(self):
        """The frame as (width, height, 4) float32 RGBA in [0, 1], indexed [x, y], y up."""
        rgb = self._render().rgb
        out = np.ones(rgb.shape[:2] + (4,), np.float32)
        np.clip(rgb, 0.0, 1.0, out=out[:, :, :3])
        return out

    def get_depth_buffer_as_numpy(self):
        """The scene's depth, (width, height) float32, as the original's reversed depth
        buffer holds it: 1 at the camera's z_near, 0 at z_far and where nothing is drawn
        (Camera.get_projection_matrix's depth)."""
        # (the frame keeps 0 near and 1 far; 1 - d is exact for d in [0.5, 1])
        return np.float32(1.0) - self._render().depth

    def get_depth_buffer(self, depth):
        """Copy the scene's depth into a 2-D f32 field or ndarray of the window's shape."""
        d = self.get_depth_buffer_as_numpy()
        if tuple(depth.shape) != d.shape:
            raise ValueError(f"get_depth_buffer: shape {tuple(depth.shape)}, window {d.shape}")
        depth.from_numpy(d)

    def _pil_image(self):
        rgb = np.clip(self._render().rgb, 0.0, 1.0)
        data = (rgb.transpose(1, 0, 2)[::-1] * 255.0 + 0.5).astype(np.uint8)
        return self._Image.fromarray(np.ascontiguousarray(data), "RGB")

    def save_image(self, filename):
        """Write this frame (as drawn so far) to an image file (.png, .jpg, ...)."""
        imwrite(np.clip(self._render().rgb, 0.0, 1.0), filename)

    def _repr_png_(self):
        buf = io.BytesIO()
        self._pil_image().save(buf, "png")
        return buf.getvalue()

    def show(self):
        """End the frame: draw it, put it on the screen where there is a window, and start
        the next one."""
        self._render()
        if self._window is not None:
            if self.fps_limit and self._last_show is not None:
                wait = 1.0 / self.fps_limit - (time.perf_counter() - self._last_show)
                if wait > 0:
                    time.sleep(wait)
            self._window.present(self._pil_image())
        self._last_show = time.perf_counter()
        self._canvas._end_frame()
        self._gui._end_frame()
        self._clicks = []
        self._dirty = True

    def destroy(self):
        if self._window is not None:
            self._window.destroy()
            self._window = None
        self._running = False

    # -- input -----------------------------------------------------------------------------
    def _push_event(self, type, key, pos=None, modifier=(), delta=(0, 0)):
        """Deliver input: the window's callbacks call this (motion and wheel only move the
        cursor), and so may a test that replays input headless."""
        if pos is not None:
            self._cursor = (float(pos[0]), float(pos[1]))
        if type not in (PRESS, RELEASE):
            return
        key = normalize_key(key)
        key = _TK_KEYS.get(key, key)
        if key == "WMClose":
            self._running = False
            return
        self._hold(type, key)
        e = Event(type, key, self._cursor)
        self._events.append(e)
        if key == LMB:
            self._clicks.append(e)

    def _tag(self, tag):
        if tag not in (None, PRESS, RELEASE):
            raise ValueError(f"ti.ui: an event tag is ti.ui.PRESS, ti.ui.RELEASE or None, "
                             f"got {tag!r}")
        return tag

    def get_events(self, tag=None):
        """The queued events of type `tag` (all, if None), oldest first; they leave the queue,
        and events of other types stay in it (as the original's)."""
        tag = self._tag(tag)
        self._pump()
        taken = [e for e in self._events if tag is None or e.type == tag]
        kept = [e for e in self._events if tag is not None and e.type != tag]
        self._events.clear()
        self._events.extend(kept)
        return taken

    def get_event(self, tag=None):
        """Take the oldest queued event of type `tag` (any, if None) out of the queue: it
        becomes `window.event` and True is returned; False if there is none. Events of other
        types stay queued (as the original's: a program that polls for presses still sees
        the releases in get_events)."""
        tag = self._tag(tag)
        self._pump()
        for k, e in enumerate(self._events):
            if tag is None or e.type == tag:
                del self._events[k]
                self.event = e
                return True
        return False
