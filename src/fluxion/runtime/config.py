"""The options of `ti.init`: every option of the original system's `ti.init` (its
CompileConfig, plus the few that belong to other parts of it), what each one does in fluxion,
and the `TI_<OPTION>` environment variables that set them.

An option fluxion implements takes effect. An option of the original system that fluxion has
no use for (a knob of its own compiler, of a backend fluxion does not have...) is accepted:
set to its default it is silent, set to anything else it warns once per process that it has
no effect. A name that is no option at all raises `InitOptionError` (a KeyError, as in the
original system, and a TypeError) naming it.
"""
from __future__ import annotations

import os
import warnings


class InitOptionError(KeyError, TypeError):
    """`ti.init` got an option that does not exist."""

    def __str__(self):                  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


# -- the options fluxion implements --------------------------------------------------------
# name: default. (arch, default_fp and default_ip are handled by init itself.)
IMPLEMENTED = {
    "debug": False,                     # bound checks everywhere, Tape validation
    # True (or debug): field, ndarray and local vector indices are checked; None (not given):
    # program.py's DEFAULT_ACCESS_CHECKS decides for fields and ndarrays; False: no checks
    "check_out_of_bound": None,
    "cpu_max_num_threads": os.cpu_count() or 1,
    "print_ir": False,                  # each kernel's IR after the main passes
    "print_preprocessed_ir": False,     # each kernel's IR as the frontend made it
    "random_seed": 0,
    "ad_stack_size": 0,                 # 0: fluxion's default size (see Config.ad_stack_size)
    "fast_math": True,
    "advanced_optimization": True,      # False: no transforming passes (see pipeline.py)
    "kernel_profiler": False,           # time every launch (ti.profiler)
    # the offline cache of compiled kernels (runtime/offline_cache.py; FLUXION_OFFLINE_CACHE=0
    # turns it off); the path None is the default directory
    "offline_cache": True,
    "offline_cache_file_path": None,
    "offline_cache_max_size_of_files": 100 * 1024 * 1024,
    "offline_cache_cleaning_policy": "lru",
    "offline_cache_cleaning_factor": 0.25,
    # options of other parts of the original system (its "special" config)
    "log_level": "info",                # ti.set_logging_level
    "short_circuit_operators": True,    # False: `and`/`or` are bitwise on kernel values
    "print_full_traceback": False,      # compiler frames in the tracebacks of kernel errors
}

# -- options of the original system with no effect in fluxion ------------------------------
# name: the original's default. They tune its compiler passes, its code generators for
# backends fluxion lacks, its mesh and quantized types, its caches and memory pools: none
# changes what a program computes.
NO_EFFECT = {
    "allow_nv_shader_extension": True,
    "auto_mesh_local_default_occupacy": 4,
    "cache_loop_invariant_global_vars": True,
    "cfg_optimization": True,
    "cpu_block_dim_adaptive": True,
    "cuda_stack_limit": 0,
    "default_cpu_block_dim": 32,
    "default_gpu_block_dim": 128,
    "demote_dense_struct_fors": True,
    "demote_no_access_mesh_fors": True,
    "detect_read_only": True,
    "device_memory_GB": 1.0,
    "device_memory_fraction": 0.0,
    "experimental_auto_mesh_local": False,
    "flatten_if": False,
    "force_scalarize_matrix": False,
    "gpu_max_reg": 0,
    "half2_vectorization": False,
    "lower_access": True,
    "make_block_local": True,
    "make_cpu_multithreading_loop": True,
    "make_mesh_block_local": True,
    "make_thread_local": True,
    "max_block_dim": 0,
    "mesh_localize_all_attr_mappings": False,
    "mesh_localize_from_end_mapping": False,
    "mesh_localize_to_end_mapping": True,
    "move_loop_invariant_outside_if": False,
    "num_compile_threads": 4,
    "opt_level": 1,
    "optimize_mesh_reordered_mapping": True,
    "print_accessor_ir": False,
    "print_ir_dbg_info": False,
    "print_kernel_amdgcn": False,
    "print_kernel_asm": False,
    "print_kernel_llvm_ir": False,
    "print_kernel_llvm_ir_optimized": False,
    "print_struct_llvm_ir": False,
    "quant_opt_atomic_demotion": True,
    "quant_opt_store_fusion": True,
    "real_matrix_scalarize": True,
    "saturating_grid_dim": 0,
    "simplify_after_lower_access": True,
    "simplify_before_lower_access": True,
    "timeline": False,
    "use_llvm": True,
    "verbose_kernel_launches": False,
    "vk_api_version": "",
    "verbose": True,
    "gdb_trigger": False,               # no native crash handler to hand to gdb
    "unrolling_limit": 32,              # the original only warns past it
}

# options that older versions of the original system had (removed before 1.7): old programs
# pass them; they have no effect
LEGACY = {"dynamic_index": False, "packed": False, "excepthook": False, "debug_info": False}

# the options of the original's "special" config: `ti.init(_test_mode=True)` returns them
SPECIAL = ("log_level", "gdb_trigger", "short_circuit_operators", "print_full_traceback",
           "unrolling_limit")

ALL = {**IMPLEMENTED, **NO_EFFECT, **LEGACY}

_warned = set()


def _env_value(name, default):
    """The value of TI_<NAME>, cast like the original system does (booleans as 0/1), or None."""
    text = os.environ.get("TI_" + name.upper(), "")
    if not text:
        return None
    if isinstance(default, bool) or (default is None and name == "check_out_of_bound"):
        return bool(int(text))
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    return text


def resolve(kwargs):
    """The value of every option from `kwargs` and the environment, and the options given
    that have no effect here (with values other than their defaults). Raises
    InitOptionError for names that are no option."""
    if "default_up" in kwargs:
        raise InitOptionError("'default_up' is always the unsigned type of 'default_ip'. "
                              "Please set 'default_ip' instead.")
    unknown = sorted(k for k in kwargs if k not in ALL)
    if unknown:
        raise InitOptionError(f"ti.init() got unknown option(s): {', '.join(unknown)} "
                              f"(not options of fluxion nor of the original system)")
    values, ignored = {}, []
    for name, default in ALL.items():
        env = _env_value(name, default)
        if name in kwargs:
            value = kwargs[name]
            if env is not None:
                warnings.warn(f'environment variable TI_{name.upper()} overridden by ti.init '
                              f'argument "{name}"', stacklevel=4)
        elif env is not None:
            value = env
        else:
            value = default
        values[name] = value
        if name not in IMPLEMENTED and (name in kwargs or env is not None) and \
                value != default:
            ignored.append(name)
    return values, ignored


def warn_ignored(names, values, stacklevel):
    """One warning per option per process: a test suite calls ti.init for every test."""
    fresh = [n for n in names if n not in _warned]
    if not fresh:
        return
    _warned.update(fresh)
    shown = ", ".join(f"{n}={values[n]!r}" for n in fresh)
    warnings.warn(f"fluxion: ti.init option(s) {shown} have no effect in fluxion (they tune "
                  f"parts of the original system that fluxion does not have); accepted and "
                  f"ignored", stacklevel=stacklevel)


def warn_once(key, message, stacklevel):
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, stacklevel=stacklevel)
