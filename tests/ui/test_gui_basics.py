"""ti.GUI draws known shapes at known pixels; images and GIFs round-trip through files."""
import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def px(img, x, y):
    """The pixel at integer [x, y] (y up) of a get_image() frame, as 0..255 RGB ints."""
    return tuple(int(round(v * 255)) for v in img[x, y, :3])


def test_shapes_land_on_the_right_pixels():
    gui = ti.GUI("t", res=(200, 100), background_color=0x000000, show_gui=False)
    gui.circle([0.25, 0.5], color=0xFF0000, radius=10)        # centre (50, 50)
    gui.rect([0.6, 0.9], [0.9, 0.6], radius=2, color=0x00FF00)  # x 120..180, y 60..90
    gui.triangle([0.0, 0.0], [0.2, 0.0], [0.0, 0.4], color=0x0000FF)
    gui.line([0.5, 0.1], [0.5, 0.3], radius=1, color=0xFFFF00)
    img = gui.get_image()
    assert img.shape == (200, 100, 4)                          # RGBA, as the original
    assert px(img, 50, 50) == (255, 0, 0) and px(img, 50, 56) == (255, 0, 0)
    assert px(img, 50, 65) == (0, 0, 0)                        # outside the radius
    assert px(img, 120, 75) == (0, 255, 0) and px(img, 150, 75) == (0, 0, 0)   # outline only
    assert px(img, 5, 5) == (0, 0, 255) and px(img, 35, 35) == (0, 0, 0)
    # radius 1 along x = 100: half of columns 99 and 100 (pixel centres at i + 0.5)
    assert px(img, 100, 20) == px(img, 99, 20) == (128, 128, 0)


def test_many_particles_and_palette():
    gui = ti.GUI("p", res=64, show_gui=False)
    pos = np.array([[0.125, 0.125], [0.5, 0.5], [0.875, 0.875]])   # on pixels 8, 32, 56
    gui.circles(pos, radius=1, palette=[0x112233, 0x445566], palette_indices=[0, 1, 0])
    img = gui.get_image()
    assert px(img, 8, 8) == (0x11, 0x22, 0x33) and px(img, 56, 56) == (0x11, 0x22, 0x33)
    assert px(img, 32, 32) == (0x44, 0x55, 0x66)


def test_set_image_show_to_file_and_headless_events(tmp_path):
    field = ti.Vector.field(3, ti.f32, shape=(32, 16))

    @ti.kernel
    def paint():
        for i, j in field:
            field[i, j] = ti.Vector([i / 31, j / 15, 0.5])

    paint()
    gui = ti.GUI("img", res=(32, 16), show_gui=False)
    gui.set_image(field)
    np.testing.assert_allclose(gui.get_image()[..., :3], field.to_numpy(), atol=1 / 255)
    path = tmp_path / "frames" / "f0.png"
    gui.show(str(path))
    back = ti.tools.imread(str(path))
    np.testing.assert_allclose(back / 255.0, field.to_numpy(), atol=1 / 255)
    assert gui.running and gui.get_event() is False and gui.get_events() == []


def test_imwrite_imread_round_trip_and_gif(tmp_path):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (20, 10, 3)).astype(np.uint8)
    ti.tools.imwrite(img, str(tmp_path / "a.png"))
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "a.png")), img)
    gray = rng.integers(0, 256, (20, 10)).astype(np.uint8)
    ti.tools.imwrite(gray, str(tmp_path / "g.png"))
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "g.png"), channels=1), gray)
    vm = ti.tools.VideoManager(str(tmp_path), video_filename="v", framerate=10)
    for k in range(5):
        vm.write_frame(np.full((16, 8, 3), k / 4.0))
    vm.make_video(gif=True, mp4=False)
    from PIL import Image
    gif = Image.open(vm.get_output_filename(".gif"))
    assert gif.n_frames == 5


def test_the_next_frame_starts_from_the_background_of_show_time():
    # show() starts the next frame from the background colour it had then (the fill may
    # be deferred, never its colour), and set_image replaces all of it
    gui = ti.GUI("bg", res=(8, 6), background_color=0x112233, show_gui=False)
    gui.circle((0.5, 0.5), radius=3, color=0xFFFFFF)
    gui.show()
    gui.background_color = 0x445566
    img = gui.get_image()
    assert px(img, 4, 3) == (0x11, 0x22, 0x33) and img[..., 3].min() == 1
    gui.show()
    gui.clear(0x0000FF)
    assert px(gui.get_image(), 0, 0) == (0, 0, 255)
    gui.show()
    gui.set_image(np.full((8, 6, 3), 0.5, np.float32))   # RGB: alpha 0, no background left
    img = gui.get_image()
    np.testing.assert_array_equal(img[..., :3], 0.5)
    np.testing.assert_array_equal(img[..., 3], 0)
    f = ti.field(ti.f32, (8, 6))
    f.fill(0.25)
    gui.show()
    gui.set_image(f)        # a field: alpha is what the last get_image read (the RGB image's)
    img = gui.get_image()
    np.testing.assert_array_equal(img[..., :3], 0.25)
    np.testing.assert_array_equal(img[..., 3], 0)
    gui.show()
    gui.get_image()         # the background, alpha 1
    gui.set_image(f)
    img = gui.get_image()
    np.testing.assert_array_equal(img[..., :3], 0.25)
    np.testing.assert_array_equal(img[..., 3], 1)


def test_each_frame_is_what_a_fresh_gui_draws():
    # show() refills only what the frame's few shapes covered when it can: no frame may
    # keep anything of the ones before (small discs moving, off the frame, NaN, many discs,
    # other shapes, set_image, background and clear colours changing)
    many = np.random.default_rng(2).random((200, 2))
    frames = [
        lambda g: g.circle((0.5, 0.5), radius=10, color=0xFF8800),
        lambda g: g.circle((0.02, 0.97), radius=6, color=0x00FF00),
        lambda g: g.circles(np.array([[1.05, 0.5], [np.nan, 0.2], [0.3, -0.1]]), radius=8),
        lambda g: None,
        lambda g: g.circles(many, radius=2.5, color=0x3355FF),
        lambda g: g.circle((0.7, 0.2), radius=3),
        lambda g: g.line((0.1, 0.1), (0.9, 0.8), radius=2),
        lambda g: g.circle((0.2, 0.8), radius=4),
        lambda g: g.set_image(np.full((40, 30, 3), 0.3, np.float32)),
        lambda g: g.circle((0.4, 0.4), radius=5),
        lambda g: g.text("hi", (0.1, 0.9), font_size=12),
        lambda g: g.circle((0.6, 0.6), radius=1.5),
    ]
    def bg(k):      # (the background a frame starts from is the one show() had)
        return 0x101820 if k < 7 else 0x202020

    gui = ti.GUI("f", res=(40, 30), background_color=bg(0), show_gui=False)
    for k, draw in enumerate(frames):
        if k == 9:
            gui.clear(0x0000FF)
        draw(gui)
        fresh = ti.GUI("f", res=(40, 30), background_color=bg(k), show_gui=False)
        if k == 9:
            fresh.clear(0x0000FF)
        draw(fresh)
        np.testing.assert_array_equal(gui.get_image(), fresh.get_image(), err_msg=f"frame {k}")
        gui.background_color = bg(k + 1)
        gui.show()


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [ti.f32, ti.f64])
def test_set_image_of_a_field_follows_the_channel_rule(n, dtype):
    # read in place by a kernel on a CPU program, through to_numpy elsewhere: red, green,
    # blue from the field (grey for one channel, blue 0 for two), alpha the staged one
    res = (13, 7)
    vals = np.random.default_rng(n).random(res + (max(n, 1),)) * 1.5 - 0.25
    vals[3, 4] = np.nan
    f = ti.field(dtype, res) if n == 0 else ti.Vector.field(n, dtype, res)
    f.from_numpy(vals[..., 0] if n == 0 else vals)
    a = vals.astype(np.float32)
    want = np.zeros(res + (4,), np.float32)
    want[..., :3] = a[..., :1] if n <= 1 else a[..., :3] if n >= 3 else \
        np.concatenate([a, np.zeros(res + (1,), np.float32)], axis=-1)
    gui = ti.GUI("f", res=res, background_color=0x336699, show_gui=False)
    gui.get_image()                            # stages the background's alpha, 1
    want[..., 3] = 1
    gui.set_image(f)
    np.testing.assert_array_equal(gui.get_image(), want)
    off = ti.field(dtype, res, offset=(-2, 3))   # (an offset field goes through to_numpy)
    off.fill(0.5)
    gui.set_image(off)
    np.testing.assert_array_equal(gui.get_image()[..., :3], 0.5)
