"""ti.GUI: shapes land on the pixels they should (positions in [0, 1]^2 with y up, images
indexed [x, y]); frames go to files; a headless GUI never opens a window and never fails."""
import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402

RED, GREEN, BLUE, WHITE, BLACK = 0xFF0000, 0x00FF00, 0x0000FF, 0xFFFFFF, 0x000000


def rgb(c):
    return ((c >> 16) & 255, (c >> 8) & 255, c & 255)


def px(img, x, y):
    """Pixel [x, y] (y up) of a get_image() frame (RGBA) as a 0..255 RGB triple."""
    return tuple(int(round(v * 255)) for v in img[x, y, :3])


def mask(img, color):
    """Where the frame has exactly `color`: a boolean (w, h) array indexed [x, y]."""
    return np.all(np.round(img[..., :3] * 255).astype(int) == rgb(color), axis=-1)


def new_gui(res=(200, 100), bg=BLACK):
    return ti.GUI("test", res=res, background_color=bg, show_gui=False)


# -- construction and headless behaviour --------------------------------------------------------
def test_resolution_background_and_image_layout():
    gui = new_gui((40, 30), bg=0x123456)
    assert gui.res == (40, 30)
    img = gui.get_image()
    # RGBA, as the original's frame (alpha 1 after a clear)
    assert img.shape == (40, 30, 4) and img.dtype == np.float32
    assert mask(img, 0x123456).all() and (img[..., 3] == 1).all()
    assert ti.GUI("square", res=16, show_gui=False).res == (16, 16)


def test_headless_has_no_window_no_events_and_running_is_settable(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    gui = ti.GUI("headless", res=32)                 # show_gui=True, but no display
    assert not gui.has_window
    for _ in range(3):
        assert gui.running
        gui.circle((0.5, 0.5), RED, 2)
        gui.show()
    assert gui.frame == 3
    assert gui.get_event() is False
    assert gui.get_event(ti.GUI.ESCAPE, ti.GUI.PRESS) is False
    assert gui.get_events() == []
    assert not gui.is_pressed(ti.GUI.LMB, "a")
    assert gui.get_cursor_pos() == _taichi_headless_cursor()
    gui.running = False
    assert not gui.running
    gui.running = True
    assert gui.running
    gui.close()
    assert not gui.running


def test_show_gui_false_never_opens_a_window_even_with_a_display(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":0")
    gui = ti.GUI("off", res=8, show_gui=False)
    assert not gui.has_window
    gui.show()


class _FakeClock:
    """Stands for the `time` module of the GUI: a clock that moves only when the GUI sleeps
    (or the test says so), and a record of the sleeps. Pacing is checked without timing."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def perf_counter(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def clock(monkeypatch):
    from fluxion.gui import gui as gui_mod
    c = _FakeClock()
    monkeypatch.setattr(gui_mod, "time", c)
    return c


def test_headless_show_is_not_throttled_by_fps_limit(clock):
    gui = new_gui((16, 16))
    gui.fps_limit = 1                                # would be 1 s a frame with a window
    for _ in range(5):
        gui.show()
    assert clock.sleeps == []


class _FakeWindow:
    """Stands for the window a display would give: records the frames presented."""

    def __init__(self):
        self.frames = []
        self.closed = False

    def present(self, image):
        self.frames.append(np.array(image))

    def destroy(self):
        self.closed = True


def test_fps_limit_paces_frames_shown_in_a_window(clock):
    gui = new_gui((16, 8))
    gui._window = _FakeWindow()
    gui.fps_limit = 20                               # 50 ms a frame
    for k in range(6):
        gui.circle((0.5, 0.5), RED if k % 2 else GREEN, 3)
        gui.show()
    assert clock.sleeps == pytest.approx([0.05] * 5)  # five waits between six frames
    assert len(gui._window.frames) == 6
    assert gui._window.frames[0].shape == (8, 16, 3)  # rows of the window image
    assert tuple(gui._window.frames[1][4, 8]) == rgb(RED)
    assert tuple(gui._window.frames[0][4, 8]) == rgb(GREEN)
    clock.sleeps.clear()
    clock.now += 0.03                                # a frame that took 30 ms to draw
    gui.show()
    assert clock.sleeps == pytest.approx([0.02])     # waits only for the rest of its 50 ms
    clock.sleeps.clear()
    clock.now += 0.2                                 # a slow frame: no wait at all
    gui.show()
    assert clock.sleeps == []
    gui.fps_limit = None                             # no cap
    for _ in range(6):
        gui.show()
    assert clock.sleeps == []
    gui.close()
    assert not gui.running and not gui.has_window


def test_key_constants():
    G = ti.GUI
    assert (G.ESCAPE, G.SHIFT, G.CTRL, G.ALT, G.SPACE) == ("Escape", "Shift", "Control", "Alt",
                                                           " ")
    assert (G.LMB, G.RMB, G.MMB, G.WHEEL, G.EXIT) == ("LMB", "RMB", "MMB", "Wheel", "WMClose")
    assert (G.PRESS, G.RELEASE, G.MOTION, G.MOVE) == ("Press", "Release", "Motion", "Motion")
    assert (G.UP, G.DOWN, G.LEFT, G.RIGHT) == ("Up", "Down", "Left", "Right")


def test_event_filters_and_held_keys():
    # The window's callbacks feed this queue; here we feed it directly.
    gui = new_gui((10, 10))
    gui._push_event(ti.GUI.MOTION, ti.GUI.MOVE, (0.25, 0.75))
    gui._push_event(ti.GUI.PRESS, "a")
    gui._push_event(ti.GUI.PRESS, ti.GUI.LMB, (0.5, 0.5))
    assert gui.is_pressed("a") and gui.is_pressed("z", ti.GUI.LMB) and not gui.is_pressed("z")
    gui._push_event(ti.GUI.RELEASE, "a")
    gui._push_event(ti.GUI.PRESS, ti.GUI.ESCAPE)
    assert not gui.is_pressed("a")
    # get_event skips (and drops) events that do not match
    assert gui.get_event((ti.GUI.PRESS, ti.GUI.LMB))
    assert gui.event.key == ti.GUI.LMB and gui.event.pos == (0.5, 0.5)
    assert gui.get_event(ti.GUI.ESCAPE) and gui.event.type == ti.GUI.PRESS
    assert gui.get_event() is False
    gui._push_event(ti.GUI.PRESS, "x")
    gui._push_event(ti.GUI.RELEASE, "x")
    assert [e.type for e in gui.get_events(ti.GUI.RELEASE)] == [ti.GUI.RELEASE]
    assert gui.get_events() == []
    assert gui.get_cursor_pos() == (0.5, 0.5)


def test_widgets_are_plain_values_headless():
    gui = new_gui((10, 10))
    s = gui.slider("speed", 1, 10, 1)
    assert s.value == 1
    s.value = 5
    assert s.value == 5
    lab = gui.label("count")
    lab.value = 3
    assert lab.value == 3
    assert gui.button("Reset") == "Reset" and gui.button("Go", "go") == "go"


# -- drawing ------------------------------------------------------------------------------------
def test_circle_inside_outside_and_color():
    gui = new_gui((200, 100))
    gui.circle([0.25, 0.5], color=RED, radius=10)    # centre at pixel (50, 50)
    img = gui.get_image()
    for x, y in [(50, 50), (50, 57), (43, 50), (56, 44)]:
        assert px(img, x, y) == rgb(RED), (x, y)
    for x, y in [(50, 62), (38, 50), (60, 60), (150, 50)]:
        assert px(img, x, y) == (0, 0, 0), (x, y)
    # coverage clamp(r - distance): pixels within r - 1 of the centre are fully red, those
    # within r partly (the edge is antialiased, as in the original)
    assert abs(mask(img, RED).sum() - np.pi * 81) < 0.1 * np.pi * 81
    assert abs((img[..., 0] > 0).sum() - np.pi * 100) < 0.1 * np.pi * 100


def test_large_discs_have_their_area():
    # large discs follow the small discs' rule (they went through Pillow, whose plain
    # discs are not the original's antialiased ones): full within r - 1, partial to r
    gui = new_gui((64, 64))
    gui.circles(np.array([[0.25, 0.25], [0.75, 0.75]]), radius=5, color=GREEN)
    img = gui.get_image()
    m = mask(img, GREEN)
    assert m[16, 16] and m[48, 48] and not m[32, 32]
    assert abs(m.sum() / 2 - np.pi * 16) <= 0.2 * np.pi * 16
    assert abs((img[..., 1] > 0).sum() / 2 - np.pi * 25) <= 0.2 * np.pi * 25


def test_circles_per_point_colors_palette_and_draw_order():
    gui = new_gui((64, 64))
    pos = np.array([[0.1, 0.1], [0.5, 0.5], [0.9, 0.9]])
    gui.circles(pos, radius=2, palette=[0x112233, 0x445566], palette_indices=[0, 1, 0])
    img = gui.get_image()
    assert px(img, 6, 6) == (0x11, 0x22, 0x33) and px(img, 57, 57) == (0x11, 0x22, 0x33)
    assert px(img, 32, 32) == (0x44, 0x55, 0x66)
    # per-point colors; overlapping discs: the later one covers the earlier
    gui.clear()
    gui.circles(np.array([[0.5, 0.5], [0.5, 0.5], [0.2, 0.2]]), radius=3,
                color=np.array([RED, BLUE, GREEN]))
    img = gui.get_image()
    assert px(img, 32, 32) == rgb(BLUE) and px(img, 12, 12) == rgb(GREEN)
    assert not mask(img, RED).any()


def test_circles_accept_fields_and_float_rgb_and_skip_off_canvas_points():
    pos = ti.Vector.field(2, ti.f32, shape=3)
    pos.from_numpy(np.array([[0.5, 0.5], [-0.5, 0.5], [np.nan, 0.2]], np.float32))
    gui = new_gui((32, 32))
    gui.circles(pos, radius=1, color=(1.0, 0.5, 0.0))
    img = gui.get_image()
    assert px(img, 16, 16) == (255, 128, 0)
    # radius 1 centred on a pixel: that pixel alone is covered (its neighbours, one pixel
    # away, get coverage 1 - 1 = 0); the other points are off the canvas
    assert mask(img, 0xFF8000).sum() == 1 and mask(img, BLACK).sum() == 32 * 32 - 1


def test_many_particles_are_all_drawn():
    # (how fast is the benchmarks' business: tests assert no times)
    rng = np.random.default_rng(0)
    pos = rng.random((10_000, 2))
    gui = new_gui((512, 512))
    gui.circles(pos, radius=1.5, color=WHITE)
    img = gui.get_image()
    # the pixel nearest each centre is at most 0.71 away: covered at least 1.5 - 0.71
    centre = np.rint(pos * 512).astype(int)
    centre = centre[(centre < 512).all(axis=1)]          # nearest pixel on the frame
    assert (img[centre[:, 0], centre[:, 1]] >= 0.78).all()


def test_lines_cover_the_segment_and_only_it():
    # As in the original, pixel centres are at (i + 0.5, j + 0.5) and coverage is
    # clamp(r - distance): a radius-1 line along x = 100 is 0.5 from the centres of columns
    # 99 and 100, which it covers by half (it used to paint them fully).
    gui = new_gui((200, 100))
    gui.line([0.5, 0.1], [0.5, 0.3], radius=1, color=WHITE)     # x = 100, y 10..30
    gui.lines(np.array([[0.1, 0.8]]), np.array([[0.4, 0.8]]), radius=2, color=RED)
    img = gui.get_image()
    w = img[..., 1]
    assert w[99, 20] == w[100, 20] == w[100, 11] == w[100, 28] == 0.5
    assert w[97, 20] == w[101, 20] == w[100, 35] == w[100, 5] == 0
    r = mask(img, RED)                                  # y = 80, x 20..80, rows 79-80 full
    assert r[50, 79] and r[50, 80] and not r[50, 77] and not r[50, 82]
    assert img[50, 78, 0] == img[50, 81, 0] == 0.5                   # 1.5 from the axis
    assert r[25, 80] and r[75, 80] and not r[90, 80] and not r[10, 80]


def test_filled_triangle():
    gui = new_gui((200, 100))
    gui.triangle([0.0, 0.0], [0.2, 0.0], [0.0, 0.4], color=BLUE)   # legs 40 px, 40 px
    gui.triangles(np.array([[0.6, 0.6]]), np.array([[0.9, 0.6]]), np.array([[0.6, 0.9]]),
                  color=np.array([GREEN]))
    img = gui.get_image()
    b = mask(img, BLUE)
    assert b[5, 5] and b[30, 5] and b[5, 30] and b[18, 18]
    assert not b[25, 25] and not b[35, 35] and not b[45, 2]
    assert abs(b.sum() - 800) < 60
    g = mask(img, GREEN)
    assert g[125, 65] and not g[170, 85]


def test_rect_is_an_outline():
    gui = new_gui((200, 100))
    gui.rect([0.6, 0.9], [0.9, 0.6], radius=2, color=GREEN)       # x 120..180, y 60..90
    m = mask(gui.get_image(), GREEN)
    for x, y in [(120, 75), (179, 75), (150, 60), (150, 89), (120, 60), (180, 90)]:
        assert m[x, y], (x, y)
    assert not m[150, 75] and not m[125, 75] and not m[150, 80] and not m[110, 75]


def test_arrow_has_a_shaft_and_a_head():
    gui = new_gui((100, 100))
    gui.arrow([0.1, 0.5], [0.8, 0.0], radius=1, color=WHITE)      # to the right, y = 50
    m = gui.get_image()[..., 0] > 0                 # lit (the shaft is 2 half-covered rows)
    assert m[30, 50] and m[89, 50]
    assert m[80:90, 53:60].any() and m[80:90, 40:47].any()          # the two head strokes
    assert not m[20:40, 55:].any()


def test_text_appears_at_its_position():
    gui = new_gui((200, 100))
    gui.text("Hello", pos=(0.1, 0.9), font_size=24, color=WHITE)
    m = gui.get_image()[..., :3].sum(-1) > 0
    xs, ys = np.nonzero(m)
    assert len(xs) > 30
    # below and to the right of its top-left corner (20, 90)
    assert xs.min() >= 18 and ys.max() <= 92 and ys.min() > 50 and xs.max() < 150


def test_clear_and_show_start_a_new_frame():
    gui = new_gui((20, 20), bg=0x0000FF)
    gui.circle((0.5, 0.5), RED, 3)
    gui.clear(0x00FF00)
    assert mask(gui.get_image(), GREEN).all()
    gui.circle((0.5, 0.5), RED, 3)
    gui.show()                                        # presents, then back to background
    assert mask(gui.get_image(), BLUE).all()


# -- images -------------------------------------------------------------------------------------
def test_set_image_round_trip_uint8_float_grey_and_rgba():
    rng = np.random.default_rng(1)
    gui = new_gui((24, 12))
    u8 = rng.integers(0, 256, (24, 12, 3)).astype(np.uint8)
    gui.set_image(u8)
    np.testing.assert_array_equal(np.round(gui.get_image()[..., :3] * 255).astype(np.uint8), u8)
    # the frame is float32, as the original's: floats are kept exactly; RGB gets alpha 0
    f = rng.random((24, 12, 3)).astype(np.float32)
    gui.set_image(f)
    np.testing.assert_array_equal(gui.get_image()[..., :3], f)
    assert (gui.get_image()[..., 3] == 0).all()
    grey = rng.random((24, 12))                       # grey fills all four channels
    gui.set_image(grey)
    np.testing.assert_allclose(gui.get_image(), np.repeat(grey[..., None], 4, -1), atol=1e-7)
    rgba = rng.integers(0, 256, (24, 12, 4)).astype(np.uint8)
    gui.set_image(rgba)
    np.testing.assert_array_equal(np.round(gui.get_image() * 255).astype(np.uint8), rgba)
    # out-of-range floats are kept in the frame (as the original: it clamps only to show or
    # write the frame; they used to be clipped here)
    gui.set_image(np.full((24, 12), 7.0))
    assert (gui.get_image() == 7.0).all()
    with pytest.raises(ValueError):
        gui.set_image(np.zeros((12, 24, 3)))          # transposed: (h, w) is not (w, h)


def test_set_image_axis_convention_x_right_y_up():
    img = np.zeros((20, 10, 3), np.float32)
    img[0, 0] = (1, 0, 0)        # bottom-left
    img[19, 9] = (0, 1, 0)       # top-right
    gui = new_gui((20, 10))
    gui.set_image(img)
    gui.circle((0.0, 0.9), color=BLUE, radius=1)    # centred on the top-left pixel (0, 9)
    out = gui.get_image()
    assert px(out, 0, 0) == rgb(RED) and px(out, 19, 9) == rgb(GREEN)
    assert px(out, 0, 9) == rgb(BLUE)


def test_set_image_from_a_field_and_the_caller_array_is_not_drawn_on():
    field = ti.Vector.field(3, ti.f32, shape=(16, 8))

    @ti.kernel
    def paint():
        for i, j in field:
            field[i, j] = ti.Vector([i / 15, j / 7, 0.25])

    paint()
    gui = new_gui((16, 8))
    gui.set_image(field)
    np.testing.assert_allclose(gui.get_image()[..., :3], field.to_numpy(), atol=1e-7)
    mine = np.zeros((16, 8, 3), np.uint8)
    gui.set_image(mine)
    gui.circle((0.5, 0.5), WHITE, 3)
    assert not mine.any()


def test_show_writes_the_frame_to_a_file_creating_directories(tmp_path):
    from PIL import Image
    gui = new_gui((40, 20), bg=0x202020)
    gui.circle((0.25, 0.5), RED, 4)
    expected = gui.get_image()
    path = tmp_path / "deep" / "er" / "frame.png"
    gui.show(str(path))
    assert path.exists()
    rows = np.asarray(Image.open(path).convert("RGB"))
    assert rows.shape == (20, 40, 3)                  # Pillow: rows top-down
    back = ti.tools.imread(str(path))
    # 255 * clamp(x, 0, 1), truncated, as the original writes screenshots (the disc's
    # antialiased edge has values between bytes)
    truncated = (np.clip(expected[..., :3], 0, 1) * np.float32(255)).astype(np.uint8)
    np.testing.assert_array_equal(back, truncated)
    gui.show(str(tmp_path / "next.png"))              # next frame: background only
    assert (ti.tools.imread(str(tmp_path / "next.png")) == 0x20).all()


def test_contour_normalizes():
    gui = new_gui((8, 4))
    gui.contour(np.arange(32, dtype=np.float32).reshape(8, 4) + 100, normalize=True)
    img = gui.get_image()
    assert img[0, 0, 0] == 0 and img[7, 3, 0] == 1


def test_context_manager_closes():
    with ti.GUI("ctx", res=8, show_gui=False) as gui:
        assert gui.running
    assert not gui.running


def _set_image_sequence(mod, read_every=True):
    mod.init(arch=mod.cpu)
    f = mod.field(mod.f32, shape=(4, 3))
    f.fill(0.5)
    v = mod.Vector.field(3, mod.f32, shape=(4, 3))
    v.fill(0.25)
    g = mod.GUI("x", res=(4, 3), show_gui=False)
    out = []
    for img in (f, "clear", f, v, np.full((4, 3), 0.75, np.float32), f,
                np.full((4, 3, 3), 0.5, np.float32), f):
        if isinstance(img, str):
            g.clear(0x112F41)
        else:
            g.set_image(img)
        if read_every or img is f:
            out.append(np.asarray(g.get_image()).copy())
    return out


def test_set_image_of_a_field_keeps_the_staged_alpha_as_taichi_does():
    """A field fills red, green and blue; its alpha is what the last array image left (0 at
    first): the frames of a sequence of set_image calls equal Taichi's, channel by channel."""
    taichi = pytest.importorskip("taichi")
    for read_every in (True, False):      # get_image itself refills the staging buffer
        want = _set_image_sequence(taichi, read_every)
        got = _set_image_sequence(ti, read_every)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(a, b, err_msg=f"step {k}")


def _taichi_headless_cursor():
    """What the original's GUI reports before the mouse moves, headless (taichi is the
    oracle where installed; (0.0, 0.0) in taichi 1.7.4)."""
    import importlib.util
    import subprocess
    import sys
    if importlib.util.find_spec("taichi") is None:
        return (0.0, 0.0)
    r = subprocess.run([sys.executable, "-c",
                        "import taichi as ti; ti.init(arch=ti.cpu, log_level=ti.ERROR); "
                        "g = ti.GUI('x', res=32, show_gui=False); print(repr(g.get_cursor_pos()))"],
                       capture_output=True, text=True, timeout=300)
    return eval(r.stdout.strip().splitlines()[-1])


def test_a_saved_frame_clamps_and_zeroes_what_is_not_a_colour(tmp_path):
    # NaN is written as 0, infinities and values out of [0, 1] clamped, in every channel
    rng = np.random.default_rng(2)
    img = rng.uniform(-0.5, 1.5, (13, 7, 3)).astype(np.float32)
    img[2, 3] = [np.nan, np.inf, -np.inf]
    img[5, 1] = [0.5, np.nan, 1.0]
    gui = new_gui((13, 7))
    gui.set_image(img)
    gui.show(str(tmp_path / "f.png"))
    want = np.nan_to_num(img, nan=0.0, posinf=1.0, neginf=0.0)
    want = (np.clip(want, 0, 1) * np.float32(255)).astype(np.uint8)
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "f.png")), want)
