"""`python -m fluxion.examples NAME --frames N --out DIR`: every example of the classic
simulations runs headless with small settings and writes images that show what it claims."""
import ast
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")  # fluxion itself (a src/ layout)

CLASSICS = ["autodiff_gravity", "mpm88", "mpm_materials", "fem", "nbody", "julia",
            "stable_fluids", "game_of_life", "diff_mass_spring"]


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    out = subprocess.run([sys.executable, "-m", "fluxion.examples", *args], capture_output=True,
                         text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def frames(out_dir):
    """The PNGs an example wrote, in order, read as [x, y] uint8 RGB arrays."""
    names = sorted(f for f in os.listdir(out_dir) if f.endswith(".png"))
    return names, [ti.tools.imread(os.path.join(out_dir, f), channels=3) for f in names]


def count(img, color):
    """How many pixels have exactly the 0xRRGGBB `color`."""
    rgb = np.array([(color >> 16) & 255, (color >> 8) & 255, color & 255])
    return int(np.all(img == rgb, axis=-1).sum())


def test_the_command_lists_every_classic_example():
    out = run("list")
    listed = re.findall(r"^\s+(\w+)\s", out, re.M)
    for name in CLASSICS:
        assert name in listed
    err = subprocess.run([sys.executable, "-m", "fluxion.examples", "no_such_example"],
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + SRC))
    assert err.returncode != 0 and "julia" in err.stderr


def test_autodiff_gravity_frames(tmp_path):
    out = run("autodiff_gravity", "--steps", "300", "--frames", "3", "--out", str(tmp_path))
    rel = [float(r) for r in re.findall(r"\(([\d.e+-]+) relative\)", out)]
    assert len(rel) == 3 and max(rel) < 1e-3
    names, imgs = frames(tmp_path)
    assert len(names) == 3
    pos = np.array(ast.literal_eval(re.search(r"positions: (.*)", out).group(1)))
    inside = pos[((pos > 0.02) & (pos < 0.98)).all(axis=1)]
    assert len(inside) >= 4
    img = imgs[-1]
    w, h = img.shape[:2]
    for x, y in inside:            # a body is drawn (radius 5) where its final position is
        assert count(img[int(x * w) - 1:int(x * w) + 2, int(y * h) - 1:int(y * h) + 2],
                     0xFFD080) > 0


def test_mpm88_frames_show_the_fluid_falling(tmp_path):
    run("mpm88", "--frames", "4", "--substeps", "40", "--particles", "2048", "--n-grid", "64",
        "--out", str(tmp_path))
    names, imgs = frames(tmp_path)
    assert len(names) == 4 and imgs[0].shape == (512, 512, 3)
    heights = []
    for img in imgs:
        particles = np.all(img == [0x06, 0x85, 0x87], axis=-1)
        assert particles.sum() > 1000                     # 2048 discs, many overlapping
        heights.append(np.nonzero(particles)[1].mean())   # mean y (up) of particle pixels
    assert all(b < a for a, b in zip(heights, heights[1:]))


def test_mpm_materials_frames_show_three_materials(tmp_path):
    out = run("mpm_materials", "--frames", "3", "--substeps", "10", "--particles", "900",
              "--out", str(tmp_path))
    masses = re.findall(r"grid mass ([\d.]+) \(particles ([\d.]+)\)", out)
    assert len(masses) == 3 and all(abs(float(a) - float(b)) < 1e-5 for a, b in masses)
    names, imgs = frames(tmp_path)
    assert len(names) == 3
    for color in (0x068587, 0xED553B, 0xEEEEF0):          # fluid, jelly, snow
        assert count(imgs[-1], color) > 200


def test_fem_frames_show_the_mesh(tmp_path):
    out = run("fem", "--n", "6", "--frames", "3", "--steps", "10", "--out", str(tmp_path))
    drift = [float(d) for d in re.findall(r"drift ([+-][\d.e+-]+)", out)]
    assert len(drift) == 3 and max(abs(d) for d in drift) < 1e-2
    names, imgs = frames(tmp_path)
    assert len(names) == 3
    for img in imgs:
        area = count(img, 0x4FB99F) / (img.shape[0] * img.shape[1])
        assert 0.01 < area < 0.5                          # a filled mesh, not the whole frame


def test_nbody_frames_show_the_bodies(tmp_path):
    out = run("nbody", "--n", "128", "--frames", "3", "--steps", "5", "--out", str(tmp_path))
    p = [tuple(map(float, m)) for m in re.findall(r"momentum \(\s*([\d.e+-]+),\s*([\d.e+-]+)\)",
                                                  out)]
    assert len(p) == 3 and np.allclose(p, p[0], atol=1e-9)    # momentum is conserved
    names, imgs = frames(tmp_path)
    assert len(names) == 3
    # 128 bodies of radius 1.5: discs are antialiased as in the original system, so count
    # the pixels a body covers at least half (red channel past half-way from the background)
    assert int((imgs[-1][..., 0] >= 128).sum()) > 128


def test_julia_frames_match_numpy(tmp_path):
    from fluxion.examples.julia import numpy_iterations
    n = 48
    run("julia", "--n", str(n), "--frames", "2", "--out", str(tmp_path))
    names, imgs = frames(tmp_path)
    assert len(names) == 2
    for frame, img in enumerate(imgs):
        assert img.shape == (2 * n, n, 3)
        ref = np.round((1 - numpy_iterations(n, frame * 0.03) * 0.02) * 255)
        close = np.abs(img[..., 0].astype(float) - ref) <= 1
        assert close.mean() > 0.99
        assert (img[..., 0] == img[..., 1]).all()        # grey


def test_stable_fluids_frames_show_dye(tmp_path):
    out = run("stable_fluids", "--n", "48", "--frames", "6", "--out", str(tmp_path))
    drops = [(float(a), float(b)) for a, b in re.findall(r"divergence\s+([\d.]+) ->\s+([\d.]+)",
                                                        out)]
    assert len(drops) == 6 and all(b < a for a, b in drops[1:])
    names, imgs = frames(tmp_path)
    assert len(names) == 6
    dyed = [(img.max(axis=-1) > 64).mean() for img in imgs]
    assert 0 < dyed[0] < 0.5 and dyed[-1] > dyed[0]      # the dye spreads from its source


def test_game_of_life_frames_match_numpy(tmp_path):
    from fluxion.examples.game_of_life import numpy_step
    n = 32
    run("game_of_life", "--n", str(n), "--frames", "12", "--out", str(tmp_path))
    names, imgs = frames(tmp_path)
    assert names == ["life_0000.png", "life_0010.png", "life_0011.png"]
    a = (np.random.default_rng(0).random((n, n)) < 0.3).astype(np.int32)
    saved = dict(zip(names, imgs))
    for frame in range(12):
        a = numpy_step(a)
        name = f"life_{frame:04d}.png"
        if name in saved:
            cells = np.kron(a, np.ones((4, 4), int))
            np.testing.assert_array_equal(saved[name][..., 0] > 127, cells == 1)


def test_diff_mass_spring_frames(tmp_path):
    out = run("diff_mass_spring", "--iters", "4", "--steps", "40", "--frames", "3",
              "--out", str(tmp_path))
    losses = [float(v) for v in re.findall(r"loss ([\d.e+-]+)", out)]
    assert len(losses) == 4 and losses[-1] < losses[0]
    names, imgs = frames(tmp_path)
    assert len(names) == 3
    for img in imgs:
        assert count(img, 0xE04040) > 50                  # the target
        assert count(img, 0xF0F0F0) > 16 * 10             # 16 masses, radius 3


@pytest.mark.parametrize("name", CLASSICS)
def test_every_example_takes_arch(name):
    # `--arch cuda` runs on the GPU, or on the CPU after ti.init's warning: never a crash
    out = subprocess.run([sys.executable, "-m", "fluxion.examples", name, "--help"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + SRC))
    assert out.returncode == 0 and "--arch" in out.stdout


def test_an_example_on_arch_cuda_runs(tmp_path):
    n = 64
    run("julia", "--n", str(n), "--frames", "1", "--arch", "cuda", "--out", str(tmp_path))
    names, imgs = frames(tmp_path)
    assert len(names) == 1 and imgs[0].shape[:2] == (2 * n, n)
