"""`ti.ui.Camera`: where the scene is seen from, and its matrices.

Conventions (OpenGL's, right-handed): the view matrix takes world coordinates to the eye's,
where the eye looks down -z with y up; the perspective projection has a vertical field of
view `fov` (degrees); the orthographic one shows [left, right] across and, up the screen, the
span between `bottom` and `top` (either order: the original's defaults put top below bottom).
The rasteriser works with these matrices acting on column vectors (p' = M @ p), depth from
z_near to z_far mapped to [-1, 1] (`_view`, `_projection`).

`get_view_matrix` and `get_projection_matrix` return what the original returns: its GLM
matrices' memory read row by row, that is the transposes (p' = p @ M), and a projection
with reversed depth in [0, 1] (z_near at 1, z_far at 0), the convention of its depth
buffer (see Window.get_depth_buffer_as_numpy); float32.
"""
from __future__ import annotations

import math
import time

import numpy as np

from fluxion.ui.constants import PERSPECTIVE, ORTHOGONAL


def _unit(v):
    v = np.asarray(v, np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def look_at(eye, center, up):
    """The view matrix of an eye at `eye` looking at `center`, `up` roughly up."""
    eye = np.asarray(eye, np.float64)
    f = _unit(np.asarray(center, np.float64) - eye)
    s = _unit(np.cross(f, up))
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fov, aspect, near, far):
    t = math.tan(math.radians(fov) / 2)
    m = np.zeros((4, 4))
    m[0, 0], m[1, 1] = 1 / (aspect * t), 1 / t
    m[2, 2], m[2, 3] = (far + near) / (near - far), 2 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def orthographic(left, right, bottom, top, near, far):
    m = np.eye(4)
    m[0, 0], m[0, 3] = 2 / (right - left), -(right + left) / (right - left)
    m[1, 1], m[1, 3] = 2 / (top - bottom), -(top + bottom) / (top - bottom)
    m[2, 2], m[2, 3] = -2 / (far - near), -(far + near) / (far - near)
    return m


def _euler(v):
    """(yaw, pitch) of direction v: yaw about y from +z towards +x, pitch up from the xz
    plane."""
    v = _unit(v)
    return math.atan2(v[0], v[2]), math.asin(max(-1.0, min(1.0, v[1])))


def _direction(yaw, pitch):
    return np.array([math.sin(yaw) * math.cos(pitch), math.sin(pitch),
                     math.cos(yaw) * math.cos(pitch)])


class Camera:
    """A camera at `position` looking at `lookat`; see the module docstring for its
    matrices."""

    def __init__(self):
        self.curr_position = np.array([0.0, 0.0, 0.0])
        self.curr_lookat = np.array([0.0, 0.0, 1.0])
        self.curr_up = np.array([0.0, 1.0, 0.0])
        self._mode = PERSPECTIVE
        self._fov = 45.0
        self._left, self._right, self._top, self._bottom = -1.0, 1.0, -1.0, 1.0
        self._near, self._far = 0.1, 1000.0
        self.last_mouse_x = self.last_mouse_y = self.last_time = None

    # -- setters, as the original's --------------------------------------------------------
    def position(self, x, y, z):
        self.curr_position = np.array([x, y, z], np.float64)

    def lookat(self, x, y, z):
        self.curr_lookat = np.array([x, y, z], np.float64)

    def up(self, x, y, z):
        self.curr_up = np.array([x, y, z], np.float64)

    def projection_mode(self, mode):
        """PERSPECTIVE (0) or ORTHOGONAL (1); ti.ui.ProjectionMode has both."""
        if int(mode) not in (PERSPECTIVE, ORTHOGONAL):
            raise ValueError(f"Camera.projection_mode: 0 (perspective) or 1 (orthogonal), "
                             f"got {mode!r}")
        self._mode = int(mode)

    def fov(self, fov):
        if not 0 < float(fov) < 180:
            raise ValueError(f"Camera.fov: an angle in (0, 180) degrees, got {fov!r}")
        self._fov = float(fov)

    def left(self, left):
        self._left = float(left)

    def right(self, right):
        self._right = float(right)

    def top(self, top):
        self._top = float(top)

    def bottom(self, bottom):
        self._bottom = float(bottom)

    def z_near(self, z_near):
        self._near = float(z_near)

    def z_far(self, z_far):
        self._far = float(z_far)

    # -- matrices --------------------------------------------------------------------------
    def _view(self):
        return look_at(self.curr_position, self.curr_lookat, self.curr_up)

    def _projection(self, aspect):
        if self._mode == PERSPECTIVE:
            return perspective(self._fov, aspect, self._near, self._far)
        lo, hi = sorted((self._top, self._bottom))
        return orthographic(self._left, self._right, lo, hi, self._near, self._far)

    def get_view_matrix(self):
        """The view matrix as the original returns it: transposed (see the module
        docstring), the eye's position in its last row."""
        return self._view().T.astype(np.float32)

    def get_projection_matrix(self, aspect):
        """The projection matrix for a frame `aspect` = width / height wide, as the original
        returns it: transposed, depth reversed into [0, 1] (see the module docstring)."""
        if self._mode == PERSPECTIVE:
            m = perspective(self._fov, aspect, self._near, self._far)
        else:   # (top and bottom as given: the original passes them to GLM in that order)
            m = orthographic(self._left, self._right, self._top, self._bottom, self._near,
                             self._far)
        # the same x, y and w; depth z / w in [-1, 1] (near -1) becomes (1 - z / w) / 2
        # (near 1): the clip vector's z row becomes (w row - z row) / 2
        m[2] = (m[3] - m[2]) / 2
        return m.T.astype(np.float32)

    def _frame(self, w, h):
        """What the rasteriser needs for a w x h frame: the view-projection matrix, the ray
        basis (rows: origin at pixel (0, 0) and its change per pixel in x and in y, then the
        same for the direction, scaled so that the ray parameter is the view depth), and the
        camera row of raster3d.splat_particles (then the screen's right and up axes)."""
        view = self._view()
        proj = self._projection(w / h)
        s, u, f = view[0, :3], view[1, :3], -view[2, :3]
        eye = np.asarray(self.curr_position, np.float64)
        rb = np.zeros((6, 3))
        n, far = self._near, self._far
        if self._mode == PERSPECTIVE:
            ty = math.tan(math.radians(self._fov) / 2)
            tx = ty * w / h
            rb[0] = eye
            rb[3] = f - s * tx - u * ty
            rb[4], rb[5] = s * (2 * tx / w), u * (2 * ty / h)
            kx, ky, persp = w / (2 * tx), h / (2 * ty), 1.0
            z = (far / (far - n), 0.0, -far * n / (far - n))
        else:
            lo, hi = sorted((self._top, self._bottom))
            rb[0] = eye + s * self._left + u * lo
            rb[1], rb[2] = s * ((self._right - self._left) / w), u * ((hi - lo) / h)
            rb[3] = f
            kx, ky, persp = w / (self._right - self._left), h / (hi - lo), 0.0
            z = (-n / (far - n), 1.0 / (far - n), 0.0)
        cam = np.array([*eye, *f, kx, ky, persp, n, *z, *s, *u], np.float32)
        return (proj @ view).astype(np.float32), rb.astype(np.float32), cam

    # -- input -----------------------------------------------------------------------------
    def track_user_inputs(self, window, movement_speed=1.0, yaw_speed=2.0, pitch_speed=2.0,
                          hold_key=None):
        """Move with w/s (forward, back), a/d (left, right), e/q (up, down), and turn with
        the mouse while `hold_key` is held (always, if None); speeds are per 1/60 s."""
        front = _unit(self.curr_lookat - self.curr_position)
        left = np.cross(self.curr_up, front)
        now = time.perf_counter()
        elapsed = 0.0 if self.last_time is None else now - self.last_time
        self.last_time = now
        step = movement_speed * elapsed * 60.0
        move = np.zeros(3)
        for key, d in (("w", front), ("s", -front), ("a", left), ("d", -left),
                       ("e", self.curr_up), ("q", -self.curr_up)):
            if window.is_pressed(key):
                move += d * step
        self.curr_position = self.curr_position + move
        x, y = window.get_cursor_pos()
        if hold_key is None or window.is_pressed(hold_key):
            if self.last_mouse_x is None:
                self.last_mouse_x, self.last_mouse_y = x, y
            yaw, pitch = _euler(front)
            yaw -= (x - self.last_mouse_x) * yaw_speed * elapsed * 60.0
            pitch += (y - self.last_mouse_y) * pitch_speed * elapsed * 60.0
            limit = math.pi / 2 * 0.99
            front = _direction(yaw, max(-limit, min(limit, pitch)))
        self.curr_lookat = self.curr_position + front
        self.last_mouse_x, self.last_mouse_y = x, y
