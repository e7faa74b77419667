"""Taichi's GGUI examples (ggui_examples/*) run headless on fluxion and draw what they mean;
the examples come with the taichi package. Each of the seven runs for a frame or two (more
frames: `python -m tests.examples.taichi_examples ggui`). They run in a subprocess on the
CPU, whatever the backend of the test run: once."""
import os

import numpy as np
import pytest

pytest.importorskip("taichi")
pytest.importorskip("PIL")

from examples.taichi_examples import examples_dir, run_one  # noqa: E402

pytestmark = pytest.mark.cpu_only


def frame(name, tmp_path, frames=2):
    path = os.path.join(examples_dir(), "ggui_examples", name + ".py")
    r = run_one("fluxion", path, frames, 240, str(tmp_path))
    assert r["outcome"] == "ok", r["why"]
    img = np.load(r["frame"])
    assert img.shape[2] == 4 and np.isfinite(img).all()
    return img[:, :, :3]


def share(img, rgb, tol=0.02):
    return float((np.abs(img - np.asarray(rgb)).max(axis=2) < tol).mean())


def test_fem128_draws_the_ball_the_mesh_and_its_vertices(tmp_path):
    img = frame("fem128_ggui", tmp_path)
    assert img.shape[:2] == (512, 512)
    assert share(img, (0.4, 0.4, 0.4)) > 0.05          # the ball, grey, at the bottom
    assert share(img[:, :128], (0.4, 0.4, 0.4)) > share(img[:, 384:], (0.4, 0.4, 0.4))
    assert share(img, (1, 0.6, 0.2)) > 0.0005          # the orange vertex dots
    assert share(img, (0, 0, 0)) > 0.5                 # the background


def test_mass_spring_3d_draws_a_lit_ball_under_the_cloth(tmp_path):
    img = frame("mass_spring_3d_ggui", tmp_path)
    assert img.shape[:2] == (768, 768)
    ball = (img[:, :, 2] > img[:, :, 1] + 0.1) & (img[:, :, 0] > img[:, :, 1])   # violet
    assert 0.02 < ball.mean() < 0.1
    ys = np.nonzero(ball.any(axis=0))[0]
    assert 0.3 * 768 < ys.mean() < 0.7 * 768            # in the middle of the picture
    shade = img[:, :, 2][ball]
    assert shade.max() - shade.min() > 0.2              # lit: lighter towards the light
    assert share(img, (1, 1, 1)) > 0.5                  # the white background


def panel(under):
    """A widget sub-window's colour over `under` (fluxion/ui/imgui.py draws it translucent)."""
    a = 220 / 255
    return a * np.array([30, 30, 36]) / 255 + (1 - a) * np.asarray(under, float)


def test_mpm128_draws_three_blocks_of_their_colours_on_its_background(tmp_path):
    img = frame("mpm128_ggui", tmp_path, frames=1)
    assert img.shape[:2] == (512, 512)
    assert share(img, (0.067, 0.184, 0.255)) > 0.5
    heights = []
    for rgb in ((0, 0.5, 0.5), (0.93, 0.33, 0.23), (1, 1, 1)):     # water, jelly, snow
        m = (np.abs(img - np.asarray(rgb)).max(axis=2) < 0.02)
        assert m.mean() > 0.005, rgb
        heights.append(np.nonzero(m)[1].mean())
    assert heights[0] < heights[1] < heights[2]          # stacked: water low, snow high


def test_mass_spring_game_draws_springs_masses_and_its_widgets(tmp_path):
    img = frame("mass_spring_game_ggui", tmp_path, frames=1)
    assert img.shape[:2] == (768, 768)
    assert share(img, (1, 1, 1)) > 0.5                   # the white background
    assert share(img, (0, 0, 0)) > 0.001                 # the springs and masses
    top_left = img[:384, 384:]                           # (indexed [x, y], y up)
    assert share(top_left, panel((1, 1, 1))) > 0.05       # the sub-window


def test_stable_fluid_is_black_until_the_mouse_drags_dye(tmp_path):
    img = frame("stable_fluid_ggui", tmp_path, frames=1)
    assert img.shape[:2] == (512, 512) and img.max() < 0.01


def test_fractal3d_draws_its_coloured_fractal_on_black(tmp_path):
    img = frame("fractal3d_ggui", tmp_path, frames=1)
    assert img.shape[:2] == (1280, 720)
    assert share(img, (0, 0, 0)) > 0.3
    saturated = img.max(axis=2) - img.min(axis=2) > 0.3
    assert saturated.mean() > 0.1
    xs, ys = np.nonzero(saturated)
    assert 0.3 * 1280 < xs.mean() < 0.7 * 1280 and 0.3 * 720 < ys.mean() < 0.8 * 720


def test_mpm3d_draws_a_lit_block_of_particles_and_its_widgets(tmp_path):
    img = frame("mpm3d_ggui", tmp_path, frames=2)
    assert img.shape[:2] == (1080, 720)
    blue = (img[:, :, 2] > img[:, :, 0] + 0.2) & (img[:, :, 2] > 0.3)
    assert blue[270:, :].mean() > 0.02                   # the block, right of the panels
    shade = img[:, :, 2][blue]
    assert shade.max() - shade.min() > 0.2               # lit spheres, not flat discs
    assert share(img[:270, 360:], panel((0, 0, 0))) > 0.05     # the sub-windows
