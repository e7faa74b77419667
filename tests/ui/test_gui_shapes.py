"""ti.GUI draws lines, rectangles, arrows, triangles and discs of any size as the original
system's canvas does, so that a program shows the same picture:

  * the frame is float32 RGBA, (w, h, 4) indexed [x, y] with y up;
  * a stroke a -> b of radius r: pixel (i, j) is the point (i + 0.5, j + 0.5); its distance
    to the segment (a capsule) gives coverage clamp(r - distance, 0, 1), over the box of the
    endpoints rounded (x + 0.5, truncated) and widened by ceil(r + 0.5);
  * a triangle covers, opaquely, the pixels whose centres are inside or on an edge, within
    floor(min)..ceil(max) - 1 of its corners;
  * a disc: pixel (i, j) at the integer point, coverage clamp(r - distance, 0, 1);
  * every shape is blended over the frame in drawing order: (1 - a) * old + a * colour;
  * `lines` nudges the i-th end right by 1e-6 * (i % 18 + 6) (normalized), `line` does not;
    an arrow is three strokes, the head turned by 180 - angle degrees, tip_scale of the shaft.

`reference` below is an independent per-pixel rendering of those rules (float64, a shape and
a pixel at a time); the oracle tests compare with the original itself when it is installed.
"""
import math

import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402

TOL = 1.0 / 255          # one 8-bit step


def hex_rgba(c):
    if isinstance(c, np.ndarray):          # float RGBA, as it is
        return c
    return np.array([(c >> 16) & 255, (c >> 8) & 255, c & 255, 255], float) / 255


class Reference:
    """A slow canvas: a pixel at a time, float64."""

    def __init__(self, res, bg):
        self.w, self.h = res
        self.img = np.empty((self.w, self.h, 4))
        self.img[:] = hex_rgba(bg)

    def _put(self, i, j, a, c):
        if 0 <= i < self.w and 0 <= j < self.h and a > 0:
            self.img[i, j] = (1 - a) * self.img[i, j] + a * c

    def stroke(self, a, b, r, color):
        """a, b normalized (already nudged if the call nudges)."""
        ax, ay = a[0] * self.w, a[1] * self.h
        bx, by = b[0] * self.w, b[1] * self.h
        length = math.hypot(bx - ax, by - ay)
        dx, dy = ((bx - ax) / length, (by - ay) / length) if length > 0 else (1.0, 0.0)
        ri = math.ceil(r + 0.5)
        rx = [math.trunc(ax + 0.5), math.trunc(bx + 0.5)]
        ry = [math.trunc(ay + 0.5), math.trunc(by + 0.5)]
        c = hex_rgba(color)
        for i in range(max(min(rx) - ri, 0), min(max(rx) + ri, self.w - 1) + 1):
            for j in range(max(min(ry) - ri, 0), min(max(ry) + ri, self.h - 1) + 1):
                px, py = i + 0.5 - ax, j + 0.5 - ay
                u = -dy * px + dx * py                   # across
                v = dx * px + dy * py                    # along, from a
                if v > 0:
                    v = max(0.0, v - length)             # past b: from b
                self._put(i, j, min(max(r - math.hypot(u, v), 0.0), 1.0), c)

    def disc(self, p, r, color):
        cx, cy = p[0] * self.w, p[1] * self.h
        c = hex_rgba(color)
        for i in range(math.ceil(cx - r), math.floor(cx + r) + 1):
            for j in range(math.ceil(cy - r), math.floor(cy + r) + 1):
                self._put(i, j, min(max(r - math.hypot(cx - i, cy - j), 0.0), 1.0), c)

    def triangle(self, a, b, c, color):
        pts = [(p[0] * self.w, p[1] * self.h) for p in (a, b, c)]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        col = hex_rgba(color)
        for i in range(math.floor(min(xs)), math.ceil(max(xs))):
            for j in range(math.floor(min(ys)), math.ceil(max(ys))):
                x, y = i + 0.5, j + 0.5
                side = [(x - p[0]) * (q[1] - p[1]) - (y - p[1]) * (q[0] - p[0]) <= 0
                        for p, q in zip(pts, pts[1:] + pts[:1])]
                if side[0] == side[1] == side[2]:
                    self._put(i, j, 1.0, col)

    def arrow_strokes(self, o, d, tip_scale=0.2, angle=45):
        t = math.radians(180 - angle)
        tip = (o[0] + d[0], o[1] + d[1])
        heads = []
        for s in (1, -1):                                # turned by +t, then by -t
            hx = d[0] * math.cos(t) - s * d[1] * math.sin(t)
            hy = s * d[0] * math.sin(t) + d[1] * math.cos(t)
            heads.append((tip, (tip[0] + tip_scale * hx, tip[1] + tip_scale * hy)))
        return [(o, tip)] + heads


def nudge(e, k):
    """The end of the k-th segment of a `lines` call, as the original nudges it."""
    return (float(np.float32(e[0])) + 1e-6 * (k % 18 + 6), e[1])


def scene():
    rng = np.random.default_rng(7)
    n = 25
    b = rng.random((n, 2)) * 1.2 - 0.1                  # some ends off the frame
    e = b + 0.3 * (rng.random((n, 2)) - 0.5)
    e[3] = b[3]                                          # zero length
    return dict(
        b=b, e=e, lr=rng.choice([0.3, 0.5, 1.0, 1.5, 2.5, 4.0], n),
        lc=rng.integers(0, 1 << 24, n),
        ta=rng.random((6, 2)) * 1.4 - 0.2, tb=rng.random((6, 2)), tc=rng.random((6, 2)),
        tcol=rng.integers(0, 1 << 24, 6),
        ao=rng.random((5, 2)), ad=0.3 * (rng.random((5, 2)) - 0.5),
        cp=rng.random((8, 2)), cr=rng.choice([2.0, 4.5, 9.0], 8),
        cc=rng.integers(0, 1 << 24, 8))


RES, BG = (48, 40), 0x203040


def draw(mod, s):
    gui = mod.GUI("s", res=RES, background_color=BG, show_gui=False)
    gui.lines(s["b"], s["e"], radius=s["lr"], color=s["lc"].astype(np.uint32))
    gui.line((0.1, 0.9), (0.8, 0.55), radius=1.5, color=0xFF8000)
    gui.rect((0.2, 0.8), (0.7, 0.3), radius=1, color=0x00FF00)
    gui.triangles(s["ta"], s["tb"], s["tc"], color=s["tcol"].astype(np.uint32))
    gui.triangle((0.05, 0.05), (0.4, 0.1), (0.2, 0.5), color=0x123456)
    gui.arrows(s["ao"], s["ad"], radius=1.2, color=0xFFFF00)
    gui.arrows(s["ao"][:2], s["ad"][:2], radius=0.8, color=0x00FFFF, tip_scale=0.4, angle=30)
    gui.arrow((0.5, 0.5), (0.3, -0.2), radius=1, color=0xFF00FF)
    gui.circles(s["cp"], radius=s["cr"].astype(np.float32), color=s["cc"].astype(np.uint32))
    return np.asarray(gui.get_image())


def reference(s):
    ref = Reference(RES, BG)
    for k, (b, e, r, c) in enumerate(zip(s["b"], s["e"], s["lr"], s["lc"])):
        ref.stroke(b, nudge(e, k), r, int(c))
    ref.stroke((0.1, 0.9), (0.8, 0.55), 1.5, 0xFF8000)
    (x0, y0), (x1, y1) = (0.2, 0.8), (0.7, 0.3)
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    for a, b in zip(corners, corners[1:] + corners[:1]):
        ref.stroke(a, b, 1, 0x00FF00)
    for a, b, c, col in zip(s["ta"], s["tb"], s["tc"], s["tcol"]):
        ref.triangle(a, b, c, int(col))
    ref.triangle((0.05, 0.05), (0.4, 0.1), (0.2, 0.5), 0x123456)
    for calls in ([(o, d, {}) for o, d in zip(s["ao"], s["ad"])],
                  [(o, d, dict(tip_scale=0.4, angle=30)) for o, d in zip(s["ao"][:2],
                                                                         s["ad"][:2])]):
        strokes = [ref.arrow_strokes(o, d, **kw) for o, d, kw in calls]
        r, c = (1.2, 0xFFFF00) if not calls[0][2] else (0.8, 0x00FFFF)
        for part in range(3):                            # all shafts, then each head stroke
            for k, st in enumerate(strokes):
                a, b = st[part]
                ref.stroke(a, nudge(b, k), r, c)
    for a, b in ref.arrow_strokes((0.5, 0.5), (0.3, -0.2)):
        ref.stroke(a, b, 1, 0xFF00FF)                    # `arrow`: `line`, not nudged
    for p, r, c in zip(s["cp"], s["cr"], s["cc"]):
        ref.disc(p, r, int(c))
    return ref.img


def test_every_shape_follows_the_reference_rules():
    s = scene()
    got = draw(ti, s)
    assert got.shape == RES + (4,) and got.dtype == np.float32
    ref = reference(s)
    assert np.abs(got - ref).max() <= TOL
    assert np.abs(got - ref).mean() < 1e-4


def test_same_frame_as_the_original_system():
    taichi = pytest.importorskip("taichi")
    taichi.init(arch=taichi.cpu)
    s = scene()
    s["e"][3] = s["b"][3] + 1e-3       # the original paints NaN for a zero-length `line`
    theirs, ours = draw(taichi, s), draw(ti, s)
    assert np.abs(ours - theirs).max() <= TOL


@pytest.mark.parametrize("primitive", ["lines", "line", "rect", "triangles", "arrows",
                                       "arrow", "big_discs", "vector_field", "set_image",
                                       "point_field", "arrow_field"])
def test_each_primitive_as_the_original_draws_it(primitive):
    taichi = pytest.importorskip("taichi")
    taichi.init(arch=taichi.cpu)
    rng = np.random.default_rng(11)
    b, e = rng.random((40, 2)), rng.random((40, 2))

    def run(mod):
        gui = mod.GUI("p", res=(37, 29), background_color=0x0A1B2C, show_gui=False)
        if primitive == "lines":
            gui.lines(b, b + 0.1 * (e - 0.5), radius=1.3, color=0xFFEEDD)
        elif primitive == "line":
            gui.line((0.13, 0.21), (0.77, 0.64), radius=2.2, color=0x80FF20)
            gui.line((0.5, 0.05), (0.5, 0.95), radius=0.5, color=0xFFFFFF)
        elif primitive == "rect":
            gui.rect((0.15, 0.85), (0.8, 0.2), radius=1.5, color=0x3366FF)
        elif primitive == "triangles":
            gui.triangles(b[:10] * 1.4 - 0.2, e[:10], b[10:20], color=0x55AA11)
        elif primitive == "arrows":
            gui.arrows(b[:12], 0.3 * (e[:12] - 0.5), radius=1, color=0xFFFFFF)
            gui.arrows(b[12:14], 0.3 * (e[12:14] - 0.5), radius=0.7, color=0xFF0000,
                       tip_scale=0.5, angle=20)
        elif primitive == "arrow":
            gui.arrow((0.2, 0.3), (0.5, 0.4), radius=1.5, color=0x00FF80)
        elif primitive == "big_discs":
            gui.circles(b[:6], radius=7.5, color=0xFF00FF)
            gui.circle((0.5, 0.5), color=0x00FFFF, radius=12.2)
        elif primitive == "vector_field":
            f = mod.Vector.field(2, mod.f32, shape=(20, 15))
            f.from_numpy((rng.random((20, 15, 2)) - 0.5).astype(np.float32))
            gui = mod.GUI("v", res=(20, 15), show_gui=False)
            gui.vector_field(f, arrow_spacing=4)
        elif primitive == "point_field":
            gui.point_field(3 * b[:35, 0].reshape(7, 5), color=0xFFAA00)
        elif primitive == "arrow_field":
            gui.arrow_field(0.1 * (e[:35].reshape(7, 5, 2) - b[:35].reshape(7, 5, 2)),
                            radius=1.2, color=0x00FFAA, bound=1.5, tip_scale=0.3)
        elif primitive == "set_image":
            gui.set_image(np.linspace(0, 1, 37 * 29 * 3).reshape(37, 29, 3))
            gui.circle((0.4, 0.6), color=0xFFFFFF, radius=3.3)
        return np.asarray(gui.get_image())

    theirs = run(taichi)
    rng = np.random.default_rng(11)
    b, e = rng.random((40, 2)), rng.random((40, 2))
    ours = run(ti)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= TOL


def test_a_thin_vertical_line_covers_two_columns_by_half():
    # pixel centres are at i + 0.5: a radius-1 stroke along x = 10 is 0.5 away from the
    # centres of columns 9 and 10, which are half covered; columns 8 and 11 not at all
    gui = ti.GUI("v", res=(20, 20), show_gui=False)
    gui.line((0.5, 0.25), (0.5, 0.75), radius=1, color=0xFFFFFF)
    img = gui.get_image()[..., 0]
    np.testing.assert_allclose(img[9:11, 6:14], 0.5, atol=1e-6)
    assert not img[8].any() and not img[11].any()
    assert img[10, 3] == 0 and img[10, 17] == 0


def test_long_segments_in_a_large_frame_stay_in_bounded_memory():
    # a box of 1500 x 1500 candidate pixels per segment (more than a chunk) is cut into
    # strips; the picture is the rule's, here evaluated for the whole frame at once
    n = 1500
    gui = ti.GUI("l", res=(n, n), show_gui=False)
    gui.lines(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 1.0], [1.0, 0.0]]),
              radius=1, color=0xFFFFFF)
    img = gui.get_image()[..., 0]
    x, y = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
    # both diagonals run corner to corner: the distance is the one across
    first = np.clip(1 - np.abs(y - x) / math.sqrt(2), 0, 1)
    second = np.clip(1 - np.abs(x + y - n) / math.sqrt(2), 0, 1)
    expected = (1 - second) * first + second
    assert np.abs(img - expected).max() < 1e-2


def test_non_finite_shapes_are_skipped():
    gui = ti.GUI("n", res=(16, 16), show_gui=False)
    gui.lines(np.array([[np.nan, 0.5], [0.1, 0.1]]), np.array([[0.5, 0.5], [np.inf, 0.2]]))
    gui.triangles(np.array([[np.nan, 0.0]]), np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    gui.circles(np.array([[0.5, np.nan]]), radius=3)
    img = gui.get_image()
    assert np.isfinite(img).all() and (img[..., :3] == 0).all()


def test_float_arrays_of_hex_values_are_colors():
    # the original converts a color array to uint32: floats holding 0xRRGGBB values work
    gui = ti.GUI("c", res=(8, 8), show_gui=False)
    gui.circles(np.array([[0.5, 0.5], [0.25, 0.25]]), radius=1,
                color=np.array([float(0xFF8000), 255.0]))
    img = gui.get_image()
    np.testing.assert_allclose(img[4, 4], [1, 128 / 255, 0, 1], atol=1e-6)
    np.testing.assert_allclose(img[2, 2], [0, 0, 1, 1], atol=1e-6)
    with pytest.raises(ValueError, match="colors"):
        gui.circle((0.5, 0.5), color="red")


def test_text_lands_where_the_original_puts_it():
    # the original's font is not at hand, so not the same glyphs: the same place and size
    taichi = pytest.importorskip("taichi")
    taichi.init(arch=taichi.cpu)
    boxes = []
    for mod in (taichi, ti):
        gui = mod.GUI("t", res=(200, 100), show_gui=False)
        gui.text("Hello gj", pos=(0.1, 0.8), font_size=24, color=0xFFFFFF)
        xs, ys = np.nonzero(np.asarray(gui.get_image())[..., 0] > 0.1)
        boxes.append(np.array([xs.min(), xs.max(), ys.min(), ys.max()]))
    assert np.abs(boxes[0] - boxes[1]).max() <= 8, boxes


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "numpy"])
def test_both_shape_rasterizers_follow_the_reference_rules(compiled, monkeypatch):
    # strokes and triangles run as fluxion kernels on a CPU program, in NumPy elsewhere:
    # each is held to the reference, with per-shape integer and float colours, overlaps,
    # shapes off the frame and non-finite ones (skipped)
    from fluxion.gui import kernels
    if compiled and not kernels.usable():
        pytest.skip("the kernels are used on a CPU program only")
    monkeypatch.setattr(kernels, "usable", lambda: compiled)
    s = scene()
    got = draw(ti, s)
    ref = reference(s)
    assert np.abs(got - ref).max() <= TOL
    assert np.abs(got - ref).mean() < 1e-4
    # float RGB colours, one per segment and one for all; a NaN end and an inf radius
    rng = np.random.default_rng(5)
    b, e = rng.random((30, 2)), rng.random((30, 2))
    rgb = rng.random((30, 3))
    b[4, 1], e[9, 0] = np.nan, np.inf
    radii = rng.uniform(0.4, 3, 30)
    radii[12] = np.inf
    gui = ti.GUI("s", res=RES, background_color=BG, show_gui=False)
    gui.lines(b, e, radius=radii, color=rgb)
    gui.triangles(b[:10], e[:10], e[10:20], color=(0.25, 0.5, 0.75))
    ref = Reference(RES, BG)
    for k in range(30):
        if k not in (4, 9, 12):
            ref.stroke(b[k], nudge(e[k], k), radii[k], np.append(rgb[k], 1.0))
    for k in range(10):
        if k not in (4, 9):
            ref.triangle(b[k], e[k], e[10 + k], np.array([0.25, 0.5, 0.75, 1.0]))
    got = np.asarray(gui.get_image())
    assert np.abs(got - ref.img).max() <= TOL


def test_a_nan_colour_spoils_only_what_its_shape_covers(monkeypatch):
    # the kernels blend a shape's whole box (0 * colour outside the shape): not with a
    # colour that is not finite, which leaves the pixels the shape does not cover as they
    # were, as the NumPy rasterizers do
    from fluxion.gui import kernels

    def draw():
        gui = ti.GUI("n", res=(16, 16), background_color=0x336699, show_gui=False)
        gui.circles(np.array([[0.5, 0.5]]), radius=3, color=np.array([[np.nan, 0.5, 0.5]]))
        gui.lines(np.array([[0.2, 0.2]]), np.array([[0.8, 0.3]]), radius=1,
                  color=np.array([[0.5, np.nan, 0.5]]))
        gui.triangles(np.array([[0.1, 0.6]]), np.array([[0.4, 0.6]]),
                      np.array([[0.1, 0.9]]), color=np.array([[np.nan, 0.0, 0.0]]))
        return gui.get_image()

    got = draw()
    spoiled = np.isnan(got).any(axis=2)
    assert spoiled[8, 8] and spoiled[8, 4] and 10 < spoiled.sum() < 100
    np.testing.assert_allclose(got[~spoiled], np.tile(hex_rgba(0x336699), ((~spoiled).sum(), 1)),
                               atol=1e-6)
    monkeypatch.setattr(kernels, "usable", lambda: False)
    np.testing.assert_array_equal(np.isnan(draw()), np.isnan(got))
