"""The program's state, which every layer that compiles or runs reads: the configuration of
`ti.init`, the JIT, the trees of fields and the compiled instances of this generation.

It lives here, below the language, because the compile driver, the JITs, the launch and the
offline cache read it; `lang/runtime.py` holds the user's side (`ti.init`, `ti.reset`, the
arch names) and writes it. The JIT itself is made by runtime/jit.py, which imports the JITs
(they read this state: it cannot import them).
"""
from __future__ import annotations

import threading
import weakref

from fluxion.ir import types as T
from fluxion.runtime import config as options


class Arch:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


cpu = Arch("cpu")
cuda = Arch("cuda")
gpu = Arch("gpu")


# index checks when ti.init does not say (see Config): of every access, or of writes only
DEFAULT_ACCESS_CHECKS = False
DEFAULT_WRITE_CHECKS = True


class Config:
    """The configuration of `ti.init`; `ti.lang.impl.current_cfg()` and `ti.cfg` return it.
    It has every option of the original system's `ti.init` as an attribute (see runtime/config.py)."""

    def __init__(self, values=None):
        values = dict(options.ALL, **(values or {}))
        for name, value in values.items():
            setattr(self, name, value)
        self.arch = cpu
        self.default_fp = T.f32
        self.default_ip = T.i32
        self.debug = bool(self.debug)
        # Whether an index outside a field or ndarray is an error after the kernel (checks
        # whose index provably stays in range are removed at compile time: passes/bounds.py).
        # Not by default (DEFAULT_ACCESS_CHECKS): valid programs of the original read past
        # a field where the value is discarded (`v[i - 1] if i > 0 else 0.0` evaluates both
        # sides; a dead load), which a check of every read turns into an error. By default
        # the writes are checked instead (`check_writes`, passes/write_checks.py): a store
        # past a field corrupts the process and is never part of a valid program.
        given = self.check_out_of_bound
        self.check_out_of_bound = self.debug or bool(given)
        self.check_accesses = self.check_out_of_bound or (given is None and
                                                          DEFAULT_ACCESS_CHECKS)
        self.check_writes = not self.check_accesses and given is None and DEFAULT_WRITE_CHECKS
        self.cpu_max_num_threads = max(1, int(self.cpu_max_num_threads))
        self.print_ir = bool(self.print_ir)
        self.print_preprocessed_ir = bool(self.print_preprocessed_ir)
        self.random_seed = int(self.random_seed)
        # the original's 0 means "sized automatically"; here a bounded stack of this depth
        self.ad_stack_size = int(self.ad_stack_size) or 512
        self.fast_math = bool(self.fast_math)
        # False: no transforming passes (privatizations, atomic demotion, the CPU loop
        # transforms, LLVM's O3): a plain build to tell an optimization's bug from the program's
        self.advanced_optimization = bool(self.advanced_optimization)
        self.short_circuit_operators = bool(self.short_circuit_operators)
        self.print_full_traceback = bool(self.print_full_traceback)

    @property
    def default_up(self):
        """The unsigned type of default_ip's width, as in the original system."""
        return {T.i8: T.u8, T.i16: T.u16, T.i32: T.u32, T.i64: T.u64}.get(self.default_ip,
                                                                          T.u32)

    def __repr__(self):
        return f"<fluxion config arch={self.arch} default_fp={self.default_fp} " \
               f"default_ip={self.default_ip} debug={self.debug}>"


class _State:
    def __init__(self):
        self.config = Config()
        self.generation = 0      # bumped by reset: compiled instances and fields become stale
        self.jit = None
        self.initialized = False
        self.launch_counter = 0
        self.compiled_count = 0  # kernel instances compiled in this generation
        self.trees = []          # materialized SNode trees, kept alive until reset
        # every compiled instance of this generation: `reset` waits for their launches
        self.instances = weakref.WeakSet()


_state = _State()

# Compilation is one at a time in the process: the frontend, the pass pipeline and the JIT
# keep shared state (print tables, the engine that receives the module). `reset` takes it too,
# so it never tears the JIT down under a compilation. Reentrant: a thread that compiles may
# reach code that resets (an init inside a build) without deadlocking.
compile_lock = threading.RLock()


class _Hooks:
    """Behaviour of the language that the program's state needs: `init()`, `ti.init` with its
    defaults (the first use of the JIT, or of a field, starts the program as ti.init() would).
    Installed by lang/runtime.py."""
    init = None


hooks = _Hooks()


def config():
    return _state.config


def state():
    return _state


def ensure_initialized():
    if not _state.initialized:
        hooks.init()


def on_cuda():
    return _state.config.arch is cuda
