"""The user's side of the program's state: `ti.init`, `ti.reset` and the arch names. The state
itself (configuration, JIT, trees, instances) is runtime/program.py's, re-exported here."""
from __future__ import annotations

import os
import types
import warnings
import weakref

from fluxion import _logging, profiler
from fluxion.ir import types as T


from fluxion.runtime import config as C
from fluxion.runtime import cuda_driver, offline_cache
from fluxion.runtime import jit, program
from fluxion.runtime.program import Arch, Config, _state, compile_lock, cpu, cuda, gpu

# the program's state, which the language reads through this module
config, state, on_cuda = program.config, program.state, program.on_cuda
ensure_initialized = program.ensure_initialized
get_jit = jit.get_jit

x64 = cpu
arm64 = cpu
vulkan = Arch("vulkan")
metal = Arch("metal")
opengl = Arch("opengl")
dx11 = Arch("dx11")
dx12 = Arch("dx12")
gles = Arch("gles")
amdgpu = Arch("amdgpu")  # named by test decorators (exclude=[ti.amdgpu]); never available
opencl = Arch("opencl")
js = Arch("js")
x86_64 = x64


def _default_types():
    cfg = _state.config
    return cfg.default_fp, cfg.default_ip


T._hooks.defaults = _default_types   # `float`/`int` annotations follow ti.init's defaults


def init(arch=None, default_fp=None, default_ip=None, _test_mode=False, enable_fallback=True,
         require_version=None, **kwargs):
    """Start (or restart) fluxion. A second `init` discards kernels and fields, like `reset`.

    Takes every option of the original system's `ti.init` (see config.py): fluxion's own take
    effect, the others are accepted (with one warning when set to a value other than their
    default); an unknown name raises a KeyError naming it. `TI_<OPTION>` environment
    variables set options too (`TI_ARCH=cuda`, `TI_DEBUG=1`, `TI_DEFAULT_FP=64`...), and an
    argument overrides them."""
    with compile_lock:
        return _init(arch, default_fp, default_ip, _test_mode, enable_fallback,
                     require_version, kwargs)


def _env_type(name, bits_to_type):
    text = os.environ.get(name)
    if not text:
        return None
    if text not in bits_to_type:
        raise ValueError(f"Invalid {name}={text}, should be 32 or 64")
    return bits_to_type[text]


def checks_accesses(cfg, arch):
    """Whether kernels for `arch` check field and ndarray indices (program.py: with
    check_out_of_bound=True or debug, and by default if DEFAULT_ACCESS_CHECKS). On CUDA the
    result of such checks comes back with a synchronization after each launch, which costs
    every launch its overlap with the host: there only an explicit request checks every
    access (the default checks of writes are read lazily: checks_writes)."""
    return cfg.check_accesses and (arch is cpu or cfg.check_out_of_bound)


def checks_writes(cfg, arch):
    """Whether kernels for `arch` check the indices of their writes only (the default: see
    program.py); on CUDA too, whose launches read the result lazily (runtime/cuda_jit.py)."""
    return cfg.check_writes

def _init(arch, default_fp, default_ip, test_mode, enable_fallback, require_version, kwargs):
    values, ignored = C.resolve(kwargs)
    env_fp = _env_type("TI_DEFAULT_FP", {"32": T.f32, "64": T.f64})
    env_ip = _env_type("TI_DEFAULT_IP", {"32": T.i32, "64": T.i64})
    default_fp = default_fp if default_fp is not None else env_fp
    default_ip = default_ip if default_ip is not None else env_ip
    if require_version is not None:
        _check_require_version(require_version)
    if _state.initialized:
        reset()
    cfg = Config(values)
    arch = _select_arch(arch, enable_fallback)
    cfg.arch = arch
    cfg.check_accesses = checks_accesses(cfg, arch)
    cfg.check_writes = checks_writes(cfg, arch)
    if test_mode:
        # as the original: the options of its "special" config, and no runtime started
        return types.SimpleNamespace(**{k: values[k] for k in C.SPECIAL})
    if ignored:
        C.warn_ignored(ignored, values, stacklevel=4)
    if default_fp is not None:
        cfg.default_fp = T.normalize(default_fp)
    if default_ip is not None:
        cfg.default_ip = T.normalize(default_ip)
    _logging.set_logging_level(values["log_level"])
    _offline_cache_options(cfg, kwargs)
    _state.config = cfg
    _state.initialized = True
    profiler._enable(bool(cfg.kernel_profiler))
    return None


def _select_arch(arch, enable_fallback):
    """The backend to run on: the one asked for where fluxion has it, else the CPU (with a
    warning), or an error with enable_fallback=False, as in the original system."""
    env = os.environ.get("TI_ARCH")
    if env:
        names = {"cpu": cpu, "x64": cpu, "arm64": cpu, "cuda": cuda, "gpu": gpu,
                 "vulkan": vulkan, "metal": metal, "opengl": opengl, "dx11": dx11,
                 "dx12": dx12, "gles": gles, "amdgpu": amdgpu}
        if env not in names:
            raise ValueError(f"TI_ARCH={env}: no such arch (one of {', '.join(names)})")
        arch = names[env]
    forced = os.environ.get("FLUXION_ARCH")
    if forced and (arch is None or arch is cpu):
        # run a CPU program (or the test suite) on another backend
        arch = {"cuda": cuda, "gpu": gpu, "cpu": cpu}[forced]
    if arch is None:
        return cpu
    if isinstance(arch, (list, tuple)):
        # the original picks the first available of the list
        for a in arch:
            if a is cpu or (a in (cuda, gpu) and _cuda_available()):
                return cuda if a is gpu else a
        wanted = ", ".join(map(str, arch))
        if not enable_fallback and arch:
            raise RuntimeError(f"ti.init(arch=[{wanted}]): none of these is available, and "
                               f"enable_fallback=False")
        if arch:
            warnings.warn(f"fluxion: arch=[{wanted}]: none available; running on the CPU",
                          stacklevel=4)
        return cpu
    if not isinstance(arch, Arch):
        raise TypeError(f"ti.init(arch={arch!r}): not an arch (ti.cpu, ti.cuda, ti.gpu, ...)")
    if arch is cpu:
        return cpu
    if arch in (cuda, gpu) and _cuda_available():
        return cuda
    if not enable_fallback:
        raise RuntimeError(f"ti.init(arch={arch}): {arch} is not available here, and "
                           f"enable_fallback=False")
    what = "no CUDA device found" if arch in (cuda, gpu) else "not available in fluxion"
    warnings.warn(f"fluxion: arch={arch}: {what}; running on the CPU", stacklevel=4)
    return cpu


def _cuda_available():
    return cuda_driver.available()


def _check_require_version(version):
    """The original checks its own version; fluxion implements the API of version 1.7.4 of
    it, so a program that requires a later version may use what fluxion lacks."""
    try:
        wanted = tuple(int(x) for x in str(version).lstrip("v").split("."))
    except ValueError:
        raise ValueError(f"ti.init(require_version={version!r}): not a version "
                         f"(major.minor.patch)") from None
    if wanted > API_VERSION[:len(wanted)]:
        raise RuntimeError(f"ti.init(require_version={version!r}): fluxion implements the API "
                           f"of Taichi {'.'.join(map(str, API_VERSION))}")


# the version of the original system whose API fluxion implements
API_VERSION = (1, 7, 4)


def _offline_cache_options(cfg, kwargs):
    """The offline cache's options: an argument of ti.init, else the environment variable
    FLUXION_<NAME> (FLUXION_OFFLINE_CACHE=0 turns the cache off), else the default."""
    def opt(name, convert):
        if name in kwargs:
            v = kwargs[name]
        else:
            env = os.environ.get("FLUXION_" + name.upper())
            if env is None:
                return
            v = env
        try:
            setattr(cfg, name, convert(v))
        except (TypeError, ValueError):
            raise ValueError(f"ti.init({name}={v!r}): {convert.__doc__}") from None

    def flag(v):
        """expects True or False"""
        if isinstance(v, str):
            if v.strip().lower() in ("0", "false", "no", "off", ""):
                return False
            if v.strip().lower() in ("1", "true", "yes", "on"):
                return True
            raise ValueError(v)
        return bool(v)

    def path(v):
        """expects a directory path"""
        return None if v is None else os.fspath(v)

    def size(v):
        """expects a size in bytes (an integer >= 0)"""
        n = int(v)
        if n < 0 or (isinstance(v, float) and v != n):
            raise ValueError(v)
        return n

    def policy(v):
        """expects one of 'never', 'version', 'lru', 'fifo'"""
        if v not in ("never", "version", "lru", "fifo"):
            raise ValueError(v)
        return v

    def factor(v):
        """expects a fraction between 0 and 1"""
        f = float(v)
        if not 0.0 <= f <= 1.0:
            raise ValueError(v)
        return f

    opt("offline_cache", flag)
    opt("offline_cache_file_path", path)
    opt("offline_cache_max_size_of_files", size)
    opt("offline_cache_cleaning_policy", policy)
    opt("offline_cache_cleaning_factor", factor)
    if cfg.offline_cache:
        offline_cache.store_for(cfg)


# What the modules above this one clear on reset (ti.root's trees, the package's `ti.root`):
# they sit above it, so they register here rather than being imported
_on_reset = []


def on_reset(fn):
    """Call `fn()` on every ti.reset(), after the trees are freed."""
    _on_reset.append(fn)
    return fn


def reset():
    """Discard every field, compiled kernel and the thread pool; `ti.init` starts afresh.

    Safe while other threads launch: the new generation is published first, so a launch that
    has not started yet raises (its instance and fields belong to the old one), and reset
    waits for the launches in flight before it frees the memory and code they use."""
    with compile_lock:
        # the session's new offline-cache entries go to disk (and the cache is cleaned)
        offline_cache.end_session()
        _state.generation += 1
        for inst in list(_state.instances):
            inst.retire()
            # device buffers of a compiled CUDA kernel: now, not when the collector finds it
            # (a finalizer, so it runs once whichever comes first)
            release = getattr(inst.compiled, "release", None)
            if release is not None:
                release()
        _state.instances = weakref.WeakSet()
        if _state.jit is not None:
            device = getattr(_state.jit, "device", None)
            for tree in _state.trees:       # no launch is in flight now (retired above)
                if device is not None and tree.device_ptr:
                    device.free(tree.device_ptr)
                    tree.device_ptr = None
            _state.jit.shutdown()
        _state.jit = None
        _state.trees = []
        _state.launch_counter = 0
        _state.compiled_count = 0
        for fn in _on_reset:
            fn()
        profiler._enable(False)
        _state.config = Config()
        _state.initialized = False


program.hooks.init = init   # the first use of the JIT starts the program with the defaults
