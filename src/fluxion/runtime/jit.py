"""The program's JIT: the CPU's or the CUDA device's, as `ti.init` chose, made on first use and
dropped by `ti.reset` (lang/runtime.py).

The JIT modules (runtime/cpu_jit.py, runtime/cuda_jit.py) and what they bring (codegen/,
llvmlite.ir, the CUDA emulator) are loaded here, by name, when the first kernel is compiled
or loaded from the offline cache, so that `import fluxion` pays for none of it. This table is
the one place that loads fluxion modules lazily; the imports under TYPE_CHECKING keep the
edges visible to the layer contracts (import-linter reads them) and to readers.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from fluxion.runtime import program
from fluxion.runtime.program import compile_lock, cuda

if TYPE_CHECKING:
    from fluxion.runtime import cpu_build, cpu_jit, cuda_jit, mcjit  # noqa: F401

# what `jit_module` may load: the CPU's JIT, the CUDA device's (or emulator's), and the CPU's
# compile side and LLVM's other uses (which a process whose kernels all come from the offline
# cache never needs)
_MODULES = {"cpu": "fluxion.runtime.cpu_jit", "cuda": "fluxion.runtime.cuda_jit",
            "cpu_build": "fluxion.runtime.cpu_build", "mcjit": "fluxion.runtime.mcjit"}


def jit_module(kind):
    """runtime/cpu_jit.py (`kind` "cpu"), runtime/cuda_jit.py ("cuda"), runtime/cpu_build.py
    ("cpu_build") or runtime/mcjit.py ("mcjit"), imported on first use."""
    return importlib.import_module(_MODULES[kind])


def get_jit() -> cpu_jit.CpuJit | cuda_jit.CudaJit:
    st = program.state()
    jit = st.jit
    if jit is None:
        with compile_lock:          # two threads' first uses must not make two JITs
            if st.jit is None:
                program.ensure_initialized()
                if st.config.arch is cuda:
                    st.jit = jit_module("cuda").CudaJit(st.config)
                else:
                    st.jit = jit_module("cpu").CpuJit(st.config)
            jit = st.jit
    return jit


def start_compile_worker():
    """A CPU compile begins: start the process that shares LLVM's work (cpu_build)."""
    jit_module("cpu_build").start_worker()


def kernel_to_ptx(kernel, sm=90, fast_math=True, address_of=None):
    """The PTX of a kernel's IR (cuda_jit.kernel_to_ptx), on any machine: `Kernel.ptx`."""
    return jit_module("cuda").kernel_to_ptx(kernel, sm, fast_math, address_of)
