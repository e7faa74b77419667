"""`import fluxion` stays light: what only compiling or running a kernel needs loads then.

LLVM's shared library (llvmlite.binding) is the largest part of the import after NumPy; it
is loaded on first use through `fluxion._llvm`. The JITs, and with them codegen/ and
llvmlite.ir, are loaded by runtime/jit.py when the first kernel is compiled or loaded. A fresh
interpreter is needed, since the test session has compiled kernels already.
"""
import os
import subprocess
import pathlib
import sys

import pytest

from fluxion.runtime import object_loader

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"


def _loaded_after(code, tmp_path):
    # a file, not `-c`: a kernel's source must be readable
    script = tmp_path / "script.py"
    script.write_text(code + "\nimport sys\nprint(' '.join(sys.modules))\n")
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


BACK_HALF = ("llvmlite.binding", "llvmlite.ir", "fluxion.codegen.lower", "fluxion.runtime.cpu_jit",
             "fluxion.runtime.cuda_jit", "fluxion.runtime.cuda_emulator")


def test_import_does_not_load_llvm_or_the_jits(tmp_path):
    loaded = _loaded_after("import fluxion", tmp_path)
    assert not [m for m in BACK_HALF if m in loaded]


def test_first_kernel_loads_llvm(tmp_path):
    # the lazy binding really is used: a kernel compiles and runs, and LLVM is then loaded
    mods = _loaded_after(
        "import fluxion as ti\nti.init(arch=ti.cpu, offline_cache=False)\n"
        "x = ti.field(ti.i32, 4)\n@ti.kernel\ndef k():\n    for i in x:\n        x[i] = i * 3\n"
        "k()\nassert list(x.to_numpy()) == [0, 3, 6, 9]", tmp_path)
    assert "llvmlite.binding" in mods


@pytest.mark.cpu_only
def test_kernels_from_the_offline_cache_load_no_compiler(tmp_path):
    # a process whose kernels all come from the cache only links their objects: neither the
    # CPU's compile side nor codegen's lowering is imported (the first process compiles)
    cache = tmp_path / "cache"
    code = (f"import fluxion as ti\nti.init(arch=ti.cpu, offline_cache_file_path={str(cache)!r})\n"
            "x = ti.field(ti.i32, 4)\n@ti.kernel\ndef k():\n    for i in x:\n        x[i] = i * 3\n"
            "k()\nassert list(x.to_numpy()) == [0, 3, 6, 9]")
    compiled = _loaded_after(code, tmp_path)
    loaded = _loaded_after(code, tmp_path)
    assert {"fluxion.runtime.cpu_build", "fluxion.codegen.lower"} <= compiled
    assert "fluxion.runtime.cpu_jit" in loaded
    assert not {"fluxion.runtime.cpu_build", "fluxion.codegen.lower",
                "fluxion.runtime.compile_worker"} & loaded
    if object_loader.available():
        # fluxion links the cached objects itself, and the cache key's facts of LLVM and the
        # CPU come from the file the first process wrote (runtime/host.py): no LLVM at all
        assert not {"llvmlite.binding", "llvmlite.ir", "fluxion.runtime.mcjit",
                    "fluxion.codegen.targets"} & loaded
        assert "llvmlite.binding" in compiled


@pytest.mark.cpu_only
@pytest.mark.skipif(not object_loader.available(), reason="the object loader links x86-64 Linux")
def test_a_sparse_program_from_the_offline_cache_loads_no_llvm(tmp_path):
    # the native deactivate_all of a pointer (runtime/block_sweep.py) is runtime code kept in
    # the cache's runtime file like the thread pool: a warm process compiles none of it
    cache = tmp_path / "cache"
    code = (f"import fluxion as ti\nti.init(arch=ti.cpu, offline_cache_file_path={str(cache)!r})\n"
            "x = ti.field(ti.f32)\nblk = ti.root.pointer(ti.ij, 16)\n"
            "blk.dense(ti.ij, 8).place(x)\n@ti.kernel\ndef fill(t: ti.i32):\n"
            "    for i, j in ti.ndrange(128, 128):\n        if (i + j + t) % 7 == 0:\n"
            "            x[i, j] = i + j\n"
            "sums = []\nfor t in range(3):\n    fill(t)\n    sums.append(float(x.to_numpy().sum()))\n"
            "    blk.deactivate_all()\n"
            "want = [sum(i + j for i in range(128) for j in range(128) if (i + j + t) % 7 == 0)\n"
            "        for t in range(3)]\nassert sums == want, (sums, want)\n")
    compiled = _loaded_after(code, tmp_path)
    loaded = _loaded_after(code, tmp_path)
    assert "llvmlite.binding" in compiled and "fluxion.runtime.block_sweep" in loaded
    assert "llvmlite.binding" not in loaded
