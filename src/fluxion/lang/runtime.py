"""Process-wide state: the configuration of `ti.init`, the JIT, and what `ti.reset` discards."""
from __future__ import annotations

import os
import threading
import warnings
import weakref

from fluxion.lang import types as T


class Arch:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


cpu = Arch("cpu")
x64 = cpu
arm64 = cpu
cuda = Arch("cuda")
gpu = Arch("gpu")
vulkan = Arch("vulkan")
metal = Arch("metal")
opengl = Arch("opengl")
dx11 = Arch("dx11")
gles = Arch("gles")
amdgpu = Arch("amdgpu")  # named by test decorators (exclude=[ti.amdgpu]); never available


class Config:
    def __init__(self):
        self.arch = cpu
        self.default_fp = T.f32
        self.default_ip = T.i32
        self.debug = False
        self.cpu_max_num_threads = os.cpu_count() or 1
        self.print_ir = False
        self.random_seed = 0
        self.ad_stack_size = 512
        self.fast_math = True
        self.check_out_of_bound = False
        # False: no transforming passes (privatizations, atomic demotion, the CPU loop
        # transforms, LLVM's O3): a plain build to tell an optimization's bug from the program's
        self.advanced_optimization = True
        # the offline cache of compiled kernels (runtime/offline_cache.py); the path None is
        # the default directory
        self.offline_cache = True
        self.offline_cache_file_path = None
        self.offline_cache_max_size_of_files = 100 * 1024 * 1024
        self.offline_cache_cleaning_policy = "lru"
        self.offline_cache_cleaning_factor = 0.25


class _State:
    def __init__(self):
        self.config = Config()
        self.generation = 0      # bumped by reset: compiled instances and fields become stale
        self.jit = None
        self.initialized = False
        self.launch_counter = 0
        self.trees = []          # materialized SNode trees, kept alive until reset
        # every compiled instance of this generation: `reset` waits for their launches
        self.instances = weakref.WeakSet()


_state = _State()

# Compilation is one at a time in the process: the frontend, the pass pipeline and the JIT
# keep shared state (print tables, the engine that receives the module). `reset` takes it too,
# so it never tears the JIT down under a compilation. Reentrant: a thread that compiles may
# reach code that resets (an init inside a build) without deadlocking.
compile_lock = threading.RLock()


def config():
    return _state.config


def state():
    return _state


_KNOWN = {"arch", "default_fp", "default_ip", "debug", "cpu_max_num_threads", "print_ir",
          "random_seed", "ad_stack_size", "fast_math", "check_out_of_bound", "kernel_profiler",
          "offline_cache", "log_level", "device_memory_GB", "device_memory_fraction",
          "advanced_optimization", "dynamic_index", "packed", "verbose", "default_cpu_block_dim",
          "default_gpu_block_dim", "cpu_max_num_threads", "excepthook", "flatten_if",
          "short_circuit_operators", "real_matrix_scalarize", "debug_info", "offline_cache_file_path",
          "offline_cache_max_size_of_files", "offline_cache_cleaning_policy",
          "offline_cache_cleaning_factor"}


def init(arch=None, default_fp=None, default_ip=None, debug=None, cpu_max_num_threads=None,
         print_ir=None, random_seed=None, ad_stack_size=None, fast_math=None, **kwargs):
    """Start (or restart) fluxion. A second `init` discards kernels and fields, like `reset`."""
    with compile_lock:
        _init(arch, default_fp, default_ip, debug, cpu_max_num_threads, print_ir, random_seed,
              ad_stack_size, fast_math, kwargs)


def _init(arch, default_fp, default_ip, debug, cpu_max_num_threads, print_ir, random_seed,
          ad_stack_size, fast_math, kwargs):
    unknown = set(kwargs) - _KNOWN
    if unknown:
        raise TypeError(f"ti.init() got unexpected options: {', '.join(sorted(unknown))}")
    if _state.initialized:
        reset()
    cfg = Config()
    forced = os.environ.get("FLUXION_ARCH")
    if forced and (arch is None or arch is cpu):
        # run a CPU program (or the test suite) on another backend
        arch = {"cuda": cuda, "gpu": gpu, "cpu": cpu}[forced]
    if arch is not None:
        if isinstance(arch, (list, tuple)):
            arch = arch[0] if arch else cpu
        if arch in (cuda, gpu):
            from fluxion.runtime import cuda_driver
            if cuda_driver.available():
                arch = cuda
            else:
                warnings.warn(f"fluxion: arch={arch}: no CUDA device found; running on the CPU",
                              stacklevel=3)
                arch = cpu
        elif arch is not cpu:
            warnings.warn(f"fluxion: arch={arch} is not available; running on the CPU",
                          stacklevel=3)
            arch = cpu
        cfg.arch = arch
    if default_fp is not None:
        cfg.default_fp = T.normalize(default_fp)
    if default_ip is not None:
        cfg.default_ip = T.normalize(default_ip)
    if debug is not None:
        cfg.debug = bool(debug)
    cfg.check_out_of_bound = cfg.debug or bool(kwargs.get("check_out_of_bound", False))
    if cpu_max_num_threads is not None:
        cfg.cpu_max_num_threads = max(1, int(cpu_max_num_threads))
    if print_ir is not None:
        cfg.print_ir = bool(print_ir)
    if random_seed is not None:
        cfg.random_seed = int(random_seed)
    if ad_stack_size is not None:
        cfg.ad_stack_size = int(ad_stack_size)
    if fast_math is not None:
        cfg.fast_math = bool(fast_math)
    cfg.advanced_optimization = bool(kwargs.get("advanced_optimization", True))
    _offline_cache_options(cfg, kwargs)
    _state.config = cfg
    _state.initialized = True


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
        from fluxion.runtime import offline_cache
        offline_cache.store_for(cfg)


def ensure_initialized():
    if not _state.initialized:
        init()


def reset():
    """Discard every field, compiled kernel and the thread pool; `ti.init` starts afresh.

    Safe while other threads launch: the new generation is published first, so a launch that
    has not started yet raises (its instance and fields belong to the old one), and reset
    waits for the launches in flight before it frees the memory and code they use."""
    from fluxion.lang import snode
    with compile_lock:
        # the session's new offline-cache entries go to disk (and the cache is cleaned)
        from fluxion.runtime import offline_cache
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
        snode.reset_root()
        _state.config = Config()
        _state.initialized = False


def get_jit():
    jit = _state.jit
    if jit is None:
        with compile_lock:          # two threads' first uses must not make two JITs
            if _state.jit is None:
                ensure_initialized()
                if _state.config.arch is cuda:
                    from fluxion.codegen.cuda_jit import CudaJit
                    _state.jit = CudaJit(_state.config)
                else:
                    from fluxion.codegen.cpu_jit import CpuJit
                    _state.jit = CpuJit(_state.config)
            jit = _state.jit
    return jit


def on_cuda():
    return _state.config.arch is cuda
