"""The original system as the oracle of a test: a program written once as `def prog(ti)`
(returning a dict of values) runs on taichi, where it is installed, and on fluxion.

Taichi runs in a child process (one per call, for all the programs given): it changes the
floating-point mode of the threads it runs on, and its runtime would otherwise share this
process with every later test. Without taichi the test is skipped (CI installs it).
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

_SCRIPT = """
import pickle, sys, warnings
import numpy as np
import taichi as ti

def _plain(v):
    if isinstance(v, dict):
        return {{k: _plain(x) for k, x in v.items()}}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "to_numpy"):
        return np.asarray(v.to_numpy())
    if isinstance(v, np.generic):
        return v.item()
    return v

out = []
{programs}
sys.stdout.flush()
sys.stdout.buffer.write(b"@@RESULT@@" + pickle.dumps(out))
"""

_ONE = """
{src}
ti.init(arch=ti.cpu, log_level=ti.ERROR, {init})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        out.append(("ok", _plain({name}(ti))))
    except Exception as e:
        out.append(("error", type(e).__name__ + ": " + str(e).strip().splitlines()[-1:][0]
                    if str(e).strip() else type(e).__name__))
ti.reset()
"""


def taichi_values(*progs, helpers=(), **init):
    """The values of each program on taichi: a list of ("ok", values) or ("error", text).
    `helpers`: functions the programs call, defined in the child before them."""
    if importlib.util.find_spec("taichi") is None:
        pytest.skip("taichi is not installed: no oracle")
    # (an option "ti.NAME" is the package's attribute: default_fp="ti.f64")
    opts = ", ".join(f"{k}={v}" if _is_attr(v) else f"{k}={v!r}" for k, v in init.items())
    parts = [_ONE.format(src=textwrap.dedent(inspect.getsource(p)), init=opts, name=p.__name__)
             for p in progs]
    parts = [textwrap.dedent(inspect.getsource(h)) for h in helpers] + parts
    script = _SCRIPT.format(programs="\n".join(parts))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "taichi_program.py")     # kernels need a source file
        with open(path, "w") as f:
            f.write(script)
        r = subprocess.run([sys.executable, path], capture_output=True, timeout=600, cwd=d)
    data = r.stdout.split(b"@@RESULT@@")
    assert r.returncode == 0 and len(data) == 2, r.stderr.decode()[-3000:]
    return pickle.loads(data[1])


def _is_attr(v):
    return isinstance(v, str) and v.startswith("ti.")


def plain(v):
    """fluxion's values in the form the child process gives taichi's."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "to_numpy"):
        return np.asarray(v.to_numpy())
    if isinstance(v, np.generic):
        return v.item()
    return v


def assert_same(got, want, path="", rtol=1e-5):
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{path}: {got} != {want}"
        for k in want:
            assert_same(got[k], want[k], f"{path}.{k}", rtol)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{path}: {got} != {want}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]", rtol)
    elif isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape, f"{path}: shape {g.shape} != {w.shape}"
        if w.dtype.kind == "f" or g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6 if rtol else 0, err_msg=path)
        else:
            np.testing.assert_array_equal(g, w, err_msg=path)
    elif isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=rtol, abs=1e-6 if rtol else 0), \
            f"{path}: {got} != {want}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def check_against_taichi(*progs, rtol=1e-5, **init):
    """Run each program on taichi and on fluxion (this process, already initialized by the
    test fixture, re-initialized with `init`) and compare their values (floats within `rtol`;
    0 asks for the same numbers)."""
    import fluxion as ti
    ref = taichi_values(*progs, **init)
    for p, (status, want) in zip(progs, ref):
        assert status == "ok", f"{p.__name__} fails on taichi: {want}"
        ti.init(arch=ti.cpu, **{k: getattr(ti, v[3:]) if _is_attr(v) else v
                                for k, v in init.items()})
        assert_same(plain(p(ti)), want, p.__name__, rtol)
