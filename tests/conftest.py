"""Shared test setup: every test starts from a fresh runtime and leaves nothing behind, and runs
once per backend: `[cpu]` and `[cuda]`.

The `[cuda]` run sets FLUXION_ARCH=cuda, so every `ti.init` of the test (the fixture's, or
the test's own `ti.init(arch=ti.cpu)`) opens the CUDA backend: the GPU where one exists, else
the CPU emulator of `src/fluxion/runtime/cuda_emulator.py`, which runs the very LLVM IR the CUDA
lowering produces. FLUXION_TEST_ARCHS=cpu (or cuda) runs one of them only. Tests marked
`cpu_only` inspect the CPU backend itself (its LLVM IR, its per-thread copies, its fallback
warnings) and run once; `cuda_only` tests need the CUDA backend.

`ti.init` only records the configuration (the JIT is created lazily on the first launch), so the
fixture is cheap; `ti.reset` drops the fields and compiled kernels of the test.
"""
import atexit
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import settings

# The README's test command gives the same result on every run: hypothesis draws its examples
# from a fixed seed and keeps no database of past failures between runs. Random exploration
# is tests/fuzz's long runs' job, or `HYPOTHESIS_PROFILE=explore pytest ...` (new examples
# each run, failures remembered in .hypothesis/).
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

# The offline cache of compiled kernels stays on (so the whole suite runs through it: a stale
# hit would fail some test), in a directory of this run's own: nothing is written to the
# user's cache, and every run starts cold. Subprocesses of tests inherit it.
_CACHE_DIR = tempfile.mkdtemp(prefix="fluxion-test-cache-")
os.environ["FLUXION_OFFLINE_CACHE_FILE_PATH"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, True)

# The suite starts many Python processes (its workers, fluxion's compile worker, examples,
# command lines, the ranks of distributed runs) that import fluxion afresh. Where the
# environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), each of them compiled
# fluxion's modules from source, about 0.6 s a process on a 2-core machine: they share
# bytecode in a directory of this run's own instead (the workers inherit the controller's),
# removed at exit, so nothing is still written beside the sources.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in os.environ:
    _PYCACHE_DIR = tempfile.mkdtemp(prefix="fluxion-test-pycache-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE_DIR
    atexit.register(shutil.rmtree, _PYCACHE_DIR, True)

import fluxion as ti  # noqa: E402

# the [cuda] run needs a GPU or the emulator, which runs on Linux
_default = "cpu,cuda" if sys.platform.startswith("linux") else "cpu"
ARCHS = [a for a in os.environ.get("FLUXION_TEST_ARCHS", _default).split(",") if a]


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only: inspects the CPU backend; runs once")
    config.addinivalue_line("markers", "cuda_only: needs the CUDA backend (or its emulator)")


def pytest_generate_tests(metafunc):
    if "fluxion_arch" not in metafunc.fixturenames:
        return
    archs = ARCHS
    if metafunc.definition.get_closest_marker("cpu_only"):
        archs = [a for a in archs if a == "cpu"]
    elif metafunc.definition.get_closest_marker("cuda_only"):
        archs = [a for a in archs if a == "cuda"]
    metafunc.parametrize("fluxion_arch", archs, indirect=True)


_gpu = []


def _real_gpu():
    if not _gpu:
        from fluxion.runtime import cuda_driver, cuda_emulator
        _gpu.append(not cuda_emulator.enabled() and cuda_driver.available())
    return _gpu[0]


@pytest.fixture
def fluxion_arch(request, monkeypatch):
    if request.param == "cuda":
        monkeypatch.setenv("FLUXION_ARCH", "cuda")
        if not _real_gpu():
            monkeypatch.setenv("FLUXION_CUDA_EMULATOR", "1")
    else:
        monkeypatch.delenv("FLUXION_ARCH", raising=False)
    return request.param


@pytest.fixture(autouse=True)
def _keep_floating_point_mode():
    """Taichi's ti.init sets flush-to-zero on the calling thread and leaves it there (tests that
    compare with taichi run it in this process): each test gives the thread back the
    floating-point mode it found, so no test sees another's (x86-64; elsewhere a no-op)."""
    from fuzz.oracles import _mxcsr
    keeper = _mxcsr()
    saved = keeper[0]() if keeper else None
    yield
    if keeper:
        keeper[1](saved)


@pytest.fixture
def no_offline_cache(monkeypatch):
    """For a test that counts compilations or reads a compiled kernel's LLVM IR: an instance
    loaded from the offline cache (made by an earlier test with the same kernel) is not
    compiled and has no IR. The session, and every `ti.init` of the test, runs without it."""
    monkeypatch.setenv("FLUXION_OFFLINE_CACHE", "0")
    ti.init(arch=ti.cpu)


@pytest.fixture(autouse=True)
def _fluxion_runtime(fluxion_arch):
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


# FLUXION_PTX_CHECK=1 python -m pytest tests: without a GPU, every kernel the suite compiles
# (primal, grad, record, dual...) is also lowered for CUDA and assembled by ptxas; a kernel
# that fails fails its test. (Every kernel is then built twice, so the three tests that count
# builds or their static_print output fail in this mode: test_static_print_once_per_instance,
# test_types_and_python_values_in_kernels and test_svd_3x3_stays_small.) With
# FLUXION_TEST_ARCHS=cpu the suite runs once, which is enough for this check.
if os.environ.get("FLUXION_PTX_CHECK") and shutil.which("ptxas"):
    from fluxion.lang import kernel as _kernel

    _plain_compile = _kernel.Kernel._compile

    def _compile_and_check_ptx(self, key, args, specs, mode=_kernel.PRIMAL, build_only=False):
        from fluxion.runtime.cuda_jit import assemble_ptx, kernel_to_ptx
        from fluxion.lang import runtime
        inst = _plain_compile(self, key, args, specs, mode, build_only)
        if build_only:
            return inst
        ir = _plain_compile(self, key, args, specs, mode, True)
        ptx, _ = kernel_to_ptx(ir, 90, runtime.config().fast_math,
                               address_of=lambda place: place.addr)
        err = assemble_ptx(ptx)
        assert not err, f"ptxas rejects kernel '{self.name}' ({mode.value}):\n{err}"
        return inst

    _kernel.Kernel._compile = _compile_and_check_ptx
