"""The examples run, with small settings, and show what they claim."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")  # fluxion itself (a src/ layout)


def run_example(name, *args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "fluxion.examples", name.removesuffix(".py"),
                          *args],
                         capture_output=True, text=True, timeout=300, env=env, cwd=cwd or ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_demo_conserves_nothing_but_heats_up_and_saves(tmp_path):
    out = run_example("demo.py", "--steps", "40", "--n", "64", "--particles", "256",
                      "--out", str(tmp_path))
    heats = [float(h) for h in re.findall(r"total heat\s+([\d.]+)", out)]
    assert len(heats) >= 2 and all(b > a for a, b in zip(heats, heats[1:]))  # a heat source
    t = np.load(tmp_path / "temperature.npy")
    assert t.shape == (64, 64) and t.max() > 0 and np.isfinite(t).all()
    # the saved field is the plate the last report measured
    assert abs(t.sum() - heats[-1]) / heats[-1] < 1e-3


def test_autodiff_gravity_energy_drift_is_small(tmp_path):
    out = run_example("autodiff_gravity.py", "--steps", "500", "--out", str(tmp_path))
    rel = [float(r) for r in re.findall(r"\(([\d.e+-]+) relative\)", out)]
    assert rel and max(rel) < 1e-3


def test_mass_spring_optimisation_loss_falls(tmp_path):
    out = run_example("diff_mass_spring.py", "--iters", "8", "--steps", "60", "--out",
                      str(tmp_path))
    losses = [float(v) for v in re.findall(r"loss ([\d.e+-]+)", out)]
    assert len(losses) == 8
    assert losses[-1] < 0.7 * losses[0]
    assert all(b <= a * 1.0001 for a, b in zip(losses, losses[1:]))


def test_checkpointing_gives_the_same_gradient_with_less_memory():
    out = run_example("checkpointing.py", "--steps", "64", "--k", "8", "--n", "512")
    plain, ckpt = re.findall(r"loss ([\d.e+-]+)\s+field memory\s+([\d.]+) MiB", out)
    assert plain[0] == ckpt[0]
    assert float(ckpt[1]) < float(plain[1]) / 3
    diff = float(re.search(r"max relative difference ([\d.e+-]+)", out).group(1))
    assert diff < 1e-12


def test_newton_with_hessian_vector_products_converges_fast():
    out = run_example("newton_hvp.py", "--n", "5")
    norms = [float(v) for v in re.findall(r"\|grad\| ([\d.e+-]+)", out)]
    assert "converged" in out.splitlines()[-1] and not out.splitlines()[-1].startswith("not")
    assert len(norms) <= 8 and norms[-1] < 1e-8


def test_pytorch_pad_matches_the_torch_version():
    pytest.importorskip("torch")
    out = run_example("pytorch_pad.py", "--height", "96", "--width", "160", "--repeat", "2")
    assert "outputs identical" in out


def test_rwkv_convolution_forward_and_backward_match_conv1d():
    pytest.importorskip("torch")
    out = run_example("rwkv_conv.py", "--B", "2", "--C", "8", "--T", "64", "--repeat", "1")
    assert "forward and backward match F.conv1d" in out
    # the four-outputs-per-iteration variant, forward and its adjoint
    out = run_example("rwkv_conv.py", "--B", "2", "--C", "3", "--T", "36", "--repeat", "1",
                      "--variant", "v1")
    assert "forward and backward match F.conv1d" in out
