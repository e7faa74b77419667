"""Taichi's GGUI examples (ggui_examples/*) run headless on fluxion and draw what they mean;
the examples come with the taichi package. The slow ones (mpm3d, fractal3d, stable_fluid:
the simulation, not the drawing) are left to `python -m tests.examples.taichi_examples ggui`.
They run in a subprocess on the CPU, whatever the backend of the test run: once."""
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
