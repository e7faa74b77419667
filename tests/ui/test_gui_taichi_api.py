"""The rest of the original GUI's public members: has_key_event/get_key_event, GUI.EventFilter,
GUI.WidgetValue, cook_image and the fps_limit property. Headless, with events fed to the queue
the way the window's callbacks feed it (gui._push_event)."""
import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402

G = ti.GUI


def new_gui(res=(6, 4), **kw):
    return ti.GUI("test", res=res, show_gui=False, **kw)


# -- has_key_event / get_key_event ----------------------------------------------------------------
def test_has_key_event_and_get_key_event_take_events_oldest_first():
    gui = new_gui()
    assert gui.has_key_event() is False
    gui._push_event(G.PRESS, "a")
    gui._push_event(G.PRESS, G.LMB, (0.25, 0.75))
    gui._push_event(G.RELEASE, "a")
    assert gui.has_key_event() is True
    e = gui.get_key_event()
    assert isinstance(e, G.Event) and (e.type, e.key) == (G.PRESS, "a")
    e = gui.get_key_event()
    assert (e.type, e.key, e.pos) == (G.PRESS, G.LMB, (0.25, 0.75))
    assert gui.has_key_event()
    e = gui.get_key_event()
    assert (e.type, e.key) == (G.RELEASE, "a")
    assert gui.has_key_event() is False
    assert gui.event is None                     # get_key_event does not set gui.event
    # the event loop Taichi programs write with them
    gui._push_event(G.PRESS, G.ESCAPE)
    seen = []
    while gui.has_key_event():
        seen.append(gui.get_key_event().key)
    assert seen == [G.ESCAPE] and gui.get_events() == []


def test_get_key_event_without_window_or_event_raises_instead_of_waiting_forever():
    with pytest.raises(RuntimeError, match="has_key_event"):
        new_gui().get_key_event()


class _Clock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def perf_counter(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


class _SlowWindow:
    """A window whose input arrives on the third pump."""

    def __init__(self, gui):
        self.gui, self.pumps, self.closed = gui, 0, False

    def pump(self):
        self.pumps += 1
        if self.pumps == 3:
            self.gui._push_event(G.PRESS, "q")

    def destroy(self):
        self.closed = True


def test_get_key_event_waits_for_the_window_s_input(monkeypatch):
    from fluxion.gui import gui as gui_mod
    clock = _Clock()
    monkeypatch.setattr(gui_mod, "time", clock)
    gui = new_gui()
    gui._window = _SlowWindow(gui)
    assert gui.has_key_event() is False          # one pump: nothing yet
    assert gui.get_key_event().key == "q"
    assert gui._window.pumps == 3 and len(clock.sleeps) == 1


# -- EventFilter ----------------------------------------------------------------------------------
def test_event_filter_matches_a_type_a_key_or_a_pair():
    press_a, release_a = G.Event(G.PRESS, "a"), G.Event(G.RELEASE, "a")
    press_b, wheel = G.Event(G.PRESS, "b"), G.Event(G.MOTION, G.WHEEL, delta=(0, 120))
    move = G.Event(G.MOTION, G.MOVE)
    by_type = G.EventFilter(G.PRESS)
    assert [by_type.match(e) for e in (press_a, release_a, press_b, wheel)] == \
        [True, False, True, False]
    by_key = G.EventFilter("a")
    assert [by_key.match(e) for e in (press_a, release_a, press_b)] == [True, True, False]
    by_pair = G.EventFilter((G.RELEASE, "a"), [G.PRESS, "b"])     # a list is a pair too
    assert [by_pair.match(e) for e in (press_a, release_a, press_b)] == [False, True, True]
    motion = G.EventFilter(G.MOTION)
    assert motion.match(wheel) and motion.match(move) and not motion.match(press_a)
    assert not G.EventFilter().match(press_a)     # no entries: selects nothing
    with pytest.raises(ValueError):
        G.EventFilter((G.PRESS, "a", "b"))


def test_get_event_and_get_events_select_with_event_filter_rules():
    gui = new_gui()
    for t, k in [(G.PRESS, "a"), (G.RELEASE, "a"), (G.PRESS, "b"), (G.MOTION, G.WHEEL),
                 (G.PRESS, G.ESCAPE)]:
        gui._push_event(t, k)
    # get_event drops what does not match, up to the first match, and leaves the rest
    assert gui.get_event([G.PRESS, "b"]) and gui.event.key == "b"
    assert [(e.type, e.key) for e in gui.get_events(G.MOTION, G.ESCAPE)] == \
        [(G.MOTION, G.WHEEL), (G.PRESS, G.ESCAPE)]
    assert not gui.has_key_event()
    events = [G.Event(G.PRESS, "a"), G.Event(G.RELEASE, "x"), G.Event(G.PRESS, "x")]
    for e in events:
        gui._push_event(e.type, e.key)
    f = G.EventFilter((G.PRESS, "x"), G.RELEASE)
    assert [(e.type, e.key) for e in gui.get_events((G.PRESS, "x"), G.RELEASE)] == \
        [(e.type, e.key) for e in events if f.match(e)]


# -- WidgetValue ----------------------------------------------------------------------------------
def test_slider_and_label_return_widget_values_that_round_trip():
    gui = new_gui()
    s, lab = gui.slider("speed", 2, 10, 1), gui.label("count")
    assert isinstance(s, G.WidgetValue) and isinstance(lab, G.WidgetValue)
    assert s.value == 2 and lab.value == 0         # a slider starts at its minimum
    s.value, lab.value = 7.5, 42
    assert s.value == 7.5 and lab.value == 42
    # floats, as the original's widgets hold doubles
    assert type(s.value) is float and type(lab.value) is float and repr(lab.value) == "42.0"
    assert type(gui.slider("n", 1, 10).value) is float
    shown = []
    w = G.WidgetValue(1, shown.append)             # a window's display hears every set
    w.value = np.int32(3)
    assert w.value == 3 and shown == [3.0] and type(shown[0]) is float


# -- cook_image -----------------------------------------------------------------------------------
def _cooked_reference(img):
    """What the original hands its canvas: float32 RGBA, unsigned scaled to [0, 1]."""
    if img.dtype.kind == "u":
        f = img.astype(np.float32) * (1 / np.iinfo(img.dtype).max)
    else:
        f = img.astype(np.float32)
    if f.ndim == 2:
        f = f[..., None]
    c = f.shape[2]
    out = np.zeros(f.shape[:2] + (4,), np.float32)
    if c == 1:
        out[...] = f
    else:
        out[..., :c] = f
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("channels", [None, 1, 2, 3, 4])
def test_cook_image_matches_a_numpy_reference(dtype, channels):
    gui = new_gui((6, 4))
    rng = np.random.default_rng(7)
    shape = (6, 4) if channels is None else (6, 4, channels)
    if np.dtype(dtype).kind == "u":
        top = np.iinfo(dtype).max
        img = rng.integers(0, top, shape, endpoint=True).astype(dtype)
        img.flat[0], img.flat[1] = 0, top
    else:
        img = (rng.random(shape) * 1.5 - 0.25).astype(dtype)   # not clamped to [0, 1]
    out = gui.cook_image(img)
    assert out.dtype == np.float32 and out.shape == (6, 4, 4) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, _cooked_reference(img))
    if np.dtype(dtype).kind == "u":
        assert out.min() == 0 and out.max() == 1
        if channels is None:
            assert out[..., 3].flat[1] == 1.0 and out[..., 3].flat[0] == 0.0
    else:
        assert out.min() < 0 and out.max() > 1
    assert not np.shares_memory(out, img)           # a copy, even of float32 RGBA


def test_cook_image_refuses_other_dtypes_shapes_and_resolutions():
    gui = new_gui((6, 4))
    for bad in (np.zeros((6, 4), np.int32), np.zeros((6, 4), bool),
                np.zeros((6, 4, 5), np.float32), np.zeros(24, np.float32),
                np.zeros((4, 6, 3), np.uint8)):
        with pytest.raises(ValueError):
            gui.cook_image(bad)


# -- fps_limit ------------------------------------------------------------------------------------
def test_fps_limit_property_and_constructor_argument():
    assert new_gui().fps_limit == 60
    assert new_gui(fps_limit=30).fps_limit == 30
    assert new_gui(fps_limit=None).fps_limit is None
    gui = new_gui()
    gui.fps_limit = 120
    assert gui.fps_limit == 120
    gui.fps_limit = 0                               # 0: no limit, reported as None
    assert gui.fps_limit is None
    gui.fps_limit = None
    assert gui.fps_limit is None
    with pytest.raises(ValueError):
        gui.fps_limit = -1


class _Window:
    closed = False

    def present(self, image):
        pass

    def destroy(self):
        self.closed = True


@pytest.mark.parametrize("limit, waits", [(25, [0.04] * 3), (0, []), (None, [])])
def test_fps_limit_from_the_constructor_paces_a_window(monkeypatch, limit, waits):
    from fluxion.gui import gui as gui_mod
    clock = _Clock()
    monkeypatch.setattr(gui_mod, "time", clock)
    gui = new_gui(fps_limit=limit)
    gui._window = _Window()
    for _ in range(4):
        gui.show()
    assert clock.sleeps == pytest.approx(waits)


@pytest.mark.parametrize("dtype", [ti.u8, ti.f32, ti.f64])
@pytest.mark.parametrize("fast", [False, True])
def test_img_is_the_frame_and_packs_pixels_for_fast_gui(dtype, fast):
    w, h = 6, 4
    rng = np.random.default_rng(3)
    levels = rng.integers(0, 256, (w, h, 3))
    img = ti.Vector.field(3, dtype, shape=(w, h))
    img.from_numpy(levels.astype(np.uint8) if dtype == ti.u8 else
                   (levels / 255).astype(np.float32 if dtype == ti.f32 else np.float64))
    gui = ti.GUI("img", res=(w, h), show_gui=False, fast_gui=fast)
    gui.set_image(img)
    if not fast:
        np.testing.assert_allclose(gui.img[..., :3], levels / 255, atol=1e-6)
        return
    # one 0xRRGGBB word per pixel: row j from the top holds y = h - 1 - j, x fastest
    want = np.empty(w * h, np.uint32)
    for j in range(h):
        for i in range(w):
            r, g, b = levels[i, h - 1 - j]
            want[j * w + i] = (r << 16) + (g << 8) + b
    np.testing.assert_array_equal(gui.img, want)
