"""The program's JIT: the CPU's or the CUDA device's, as `ti.init` chose, made on first use and
dropped by `ti.reset` (lang/runtime.py)."""
from __future__ import annotations

from fluxion.runtime import program
from fluxion.runtime.cpu_jit import CpuJit
from fluxion.runtime.cuda_jit import CudaJit
from fluxion.runtime.program import compile_lock, cuda


def get_jit():
    st = program.state()
    jit = st.jit
    if jit is None:
        with compile_lock:          # two threads' first uses must not make two JITs
            if st.jit is None:
                program.ensure_initialized()
                if st.config.arch is cuda:
                    st.jit = CudaJit(st.config)
                else:
                    st.jit = CpuJit(st.config)
            jit = st.jit
    return jit
