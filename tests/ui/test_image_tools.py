"""ti.tools: imwrite / imread round trips in the [x, y] (y up) convention, imresize, a headless
imshow, and VideoManager's GIF and MP4."""
import warnings

import numpy as np
import pytest

pytest.importorskip("PIL")

from PIL import Image  # noqa: E402

import fluxion as ti  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("shape", [(20, 10), (20, 10, 3), (20, 10, 4), (20, 10, 2)])
def test_uint8_round_trip_is_exact(tmp_path, rng, shape):
    img = rng.integers(0, 256, shape).astype(np.uint8)
    fn = str(tmp_path / "img.png")
    ti.tools.imwrite(img, fn)
    back = ti.tools.imread(fn)
    assert back.dtype == np.uint8 and back.shape == shape
    np.testing.assert_array_equal(back, img)


def test_float_round_trip_within_half_a_level(tmp_path, rng):
    for shape in [(16, 9), (16, 9, 3)]:
        img = rng.random(shape).astype(np.float32)
        fn = str(tmp_path / f"f{len(shape)}.png")
        ti.tools.imwrite(img, fn)
        back = ti.tools.imread(fn)
        assert back.shape == shape
        np.testing.assert_allclose(back / 255.0, img, atol=0.5 / 255 + 1e-6)
    # k / 255 comes back as exactly k (rounding, not truncation)
    levels = (np.arange(256, dtype=np.float64) / 255).reshape(16, 16)
    ti.tools.imwrite(levels, str(tmp_path / "levels.png"))
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "levels.png")),
                                  np.arange(256).reshape(16, 16))


def test_axis_convention_matches_pillow_rows(tmp_path):
    img = np.zeros((30, 20, 3), np.uint8)
    img[0, 0] = (255, 0, 0)          # x = 0, y = 0: bottom-left
    img[29, 19] = (0, 255, 0)        # top-right
    img[3, 19] = (0, 0, 255)         # top, near the left
    fn = tmp_path / "axes.png"
    ti.tools.imwrite(img, str(fn))
    rows = np.asarray(Image.open(fn))
    assert rows.shape == (20, 30, 3)
    assert tuple(rows[19, 0]) == (255, 0, 0)          # last row (bottom), first column
    assert tuple(rows[0, 29]) == (0, 255, 0)
    assert tuple(rows[0, 3]) == (0, 0, 255)


def test_imread_channels_conversion(tmp_path, rng):
    rgb = rng.integers(0, 256, (8, 6, 3)).astype(np.uint8)
    fn = str(tmp_path / "rgb.png")
    ti.tools.imwrite(rgb, fn)
    grey = ti.tools.imread(fn, channels=1)
    assert grey.shape == (8, 6)
    expected = np.asarray(Image.open(fn).convert("L"))[::-1].T
    np.testing.assert_array_equal(grey, expected)
    rgba = ti.tools.imread(fn, channels=4)
    assert rgba.shape == (8, 6, 4) and (rgba[..., 3] == 255).all()
    np.testing.assert_array_equal(rgba[..., :3], rgb)
    g = rng.integers(0, 256, (8, 6)).astype(np.uint8)
    ti.tools.imwrite(g, str(tmp_path / "g.png"))
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "g.png"), channels=3),
                                  np.repeat(g[..., None], 3, -1))
    with pytest.raises(ValueError):
        ti.tools.imread(fn, channels=5)


def test_imwrite_fields_jpeg_and_new_directories(tmp_path):
    field = ti.field(ti.f32, shape=(12, 8))
    field.fill(0.5)
    fn = tmp_path / "a" / "b" / "field.png"
    ti.tools.imwrite(field, str(fn))
    assert (ti.tools.imread(str(fn)) == 128).all()
    # JPEG drops alpha instead of failing, and is lossy but close
    img = np.full((16, 16, 4), 200, np.uint8)
    ti.tools.imwrite(img, str(tmp_path / "x.jpg"))
    back = ti.tools.imread(str(tmp_path / "x.jpg"))
    assert back.shape == (16, 16, 3) and np.abs(back.astype(int) - 200).max() <= 3


def test_gui_set_image_imwrite_and_imread_agree(tmp_path, rng):
    img = rng.integers(0, 256, (32, 24, 3)).astype(np.uint8)
    gui = ti.GUI("agree", res=(32, 24), show_gui=False)
    gui.set_image(img)
    gui.show(str(tmp_path / "shown.png"))
    ti.tools.imwrite(img, str(tmp_path / "written.png"))
    np.testing.assert_array_equal(ti.tools.imread(str(tmp_path / "shown.png")), img)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "shown.png")),
                                  np.asarray(Image.open(tmp_path / "written.png")))


def test_imresize_nearest_keeps_dtype_and_channels(rng):
    img = rng.random((4, 2, 3)).astype(np.float32)
    big = ti.tools.imresize(img, 8, 6)
    assert big.shape == (8, 6, 3) and big.dtype == np.float32
    np.testing.assert_array_equal(big[0, 0], img[0, 0])
    np.testing.assert_array_equal(big[7, 5], img[3, 1])
    np.testing.assert_array_equal(big[2:4, 3:6], np.broadcast_to(img[1, 1], (2, 3, 3)))
    sq = ti.tools.imresize(np.arange(16, dtype=np.uint8).reshape(4, 4), 2)
    assert sq.shape == (2, 2) and sq.dtype == np.uint8


def test_imshow_headless_is_a_no_op(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("FLUXION_HEADLESS", "1")
    ti.tools.imshow(np.zeros((8, 8, 3)), "nothing to see")


def _frames(n, w=16, h=10):
    """n frames that differ from each other (a GIF merges identical neighbours)."""
    out = []
    for k in range(n):
        img = np.zeros((w, h, 3), np.float32)
        img[:, :, 0] = k / max(n - 1, 1)
        img[k % w, :, 1] = 1.0
        out.append(img)
    return out


def test_video_manager_gif(tmp_path):
    vm = ti.tools.VideoManager(str(tmp_path / "out"), video_filename="clip", framerate=10,
                               automatic_build=False)
    vm.write_frames(_frames(6))
    assert vm.frame_counter == 6 and len(vm.frame_fns) == 6
    assert vm.get_output_filename(".gif") == str(tmp_path / "out" / "clip.gif")
    paths = vm.make_video(gif=True, mp4=False)
    assert paths == [vm.get_output_filename(".gif")]
    with Image.open(paths[0]) as gif:
        assert gif.n_frames == 6 and gif.size == (16, 10)
        assert gif.info["duration"] == 100
        gif.seek(5)
        last = np.asarray(gif.convert("RGB"))
    assert last[0, 5, 1] == 255 and last[0, 0, 0] > 200          # column x = 5 green; red


def test_video_manager_frames_are_files_resized_and_cleaned(tmp_path):
    vm = ti.tools.VideoManager(str(tmp_path), width=8, height=6, automatic_build=False)
    fn = vm.write_frame(np.zeros((16, 12), np.uint8))
    assert ti.tools.imread(fn).shape == (8, 6)
    assert vm.get_frame_directory() == str(tmp_path / "frames")
    vm.clean_frames()
    assert vm.frame_fns == [] and not (tmp_path / "frames" / "000000.png").exists()
    with pytest.raises(ValueError):
        vm.make_video()


def test_video_manager_builds_automatically(tmp_path):
    vm = ti.tools.VideoManager(str(tmp_path), framerate=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # no MP4 support is fine here
        vm.write_frames(_frames(5))
    with Image.open(vm.get_output_filename(".gif")) as gif:
        assert gif.n_frames == 4                      # built at the 4th frame


def test_video_manager_post_processor(tmp_path):
    class Invert:
        def process(self, img):
            return 1.0 - img

    vm = ti.tools.VideoManager(str(tmp_path), post_processor=Invert(), automatic_build=False)
    fn = vm.write_frame(np.zeros((4, 4, 3)))
    assert (ti.tools.imread(fn) == 255).all()


def test_video_manager_mp4(tmp_path):
    pytest.importorskip("imageio")
    pytest.importorskip("imageio_ffmpeg")
    from fluxion.tools.video import mp4_support
    if mp4_support() is not None:
        pytest.skip(f"no ffmpeg: {mp4_support()}")
    import imageio.v2 as imageio
    vm = ti.tools.VideoManager(str(tmp_path), video_filename="movie.mp4", framerate=12,
                               automatic_build=False)
    vm.write_frames(_frames(7, w=33, h=21))           # odd sides: cropped to 32 x 20
    paths = vm.make_video(mp4=True, gif=False)
    assert paths == [str(tmp_path / "movie.mp4")]
    reader = imageio.get_reader(paths[0])
    frames = [f for f in reader]
    reader.close()
    assert len(frames) == 7 and frames[0].shape == (20, 32, 3)
    assert frames[-1][:, :, 0].mean() > 200 and frames[0][:, :, 0].mean() < 50


def test_video_manager_without_imageio_warns_and_writes_the_gif(tmp_path, monkeypatch):
    import fluxion.tools.video as video
    monkeypatch.setattr(video, "mp4_support", lambda: ImportError("no imageio"))
    vm = ti.tools.VideoManager(str(tmp_path), automatic_build=False)
    vm.write_frames(_frames(3))
    with pytest.warns(UserWarning, match="no MP4"):
        paths = vm.make_video()
    assert paths == [vm.get_output_filename(".gif")]
    assert not (tmp_path / "video.mp4").exists()
