"""The distributed examples on 2 processes (gloo over loopback) and on a local Ray cluster,
each against its own independent oracle: NumPy's stencil and adjoint, a one-process torch
training run, a random walk's variance (see each example's docstring)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.cpu_only


def run_example(name, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "fluxion.examples", name, *args],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_diffusion_and_its_gradient_on_two_processes_are_numpys():
    pytest.importorskip("torch")
    out = run_example("distributed_diffusion", "--procs", "2", "--n", "24", "--steps", "6",
                      "--grad", "--dirichlet")
    line = next(x for x in out.splitlines() if x.startswith("2 process"))
    assert "field identical to NumPy's" in line, out
    diff = float(re.search(r"2 process.*gradient.*from NumPy's adjoint ([\d.e+-]+)",
                           out).group(1))
    assert diff < 1e-12, out


def test_ddp_with_a_fluxion_layer_matches_one_process():
    pytest.importorskip("torch")
    out = run_example("distributed_ddp", "--procs", "2", "--batch", "8", "--iters", "2")
    assert "gradients and parameters match" in out, out


def test_ray_sweep_workers_load_kernels_from_the_offline_cache():
    pytest.importorskip("ray")
    out = run_example("ray_sweep", "--points", "4", "--n", "32", "--steps", "20")
    loaded, compiled = map(int, re.search(r"(\d+) loaded from the offline cache, (\d+) "
                                          r"compiled", out).groups())
    assert compiled == 0 and loaded >= 2, out
    assert float(re.search(r"4 k steps.*difference ([\d.e+-]+)", out).group(1)) < 1e-3
