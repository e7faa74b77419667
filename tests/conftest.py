"""Shared test setup: every test starts from a fresh CPU runtime and leaves nothing behind.

`ti.init` only records the configuration (the JIT is created lazily on the first launch), so the
fixture is cheap; `ti.reset` drops the fields and compiled kernels of the test.
"""
import os
import shutil

import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _fluxion_runtime():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


# FLUXION_PTX_CHECK=1 python -m pytest tests: without a GPU, every kernel the suite compiles
# (primal, grad, record, dual...) is also lowered for CUDA and assembled by ptxas; a kernel
# that fails fails its test. (Every kernel is then built twice, so the three tests that count
# builds or their static_print output fail in this mode: test_static_print_once_per_instance,
# test_types_and_python_values_in_kernels and test_svd_3x3_stays_small.)
if os.environ.get("FLUXION_PTX_CHECK") and shutil.which("ptxas"):
    from fluxion.lang import kernel as _kernel

    _plain_compile = _kernel.Kernel._compile

    def _compile_and_check_ptx(self, key, args, specs, mode="primal", build_only=False):
        from fluxion.codegen.cuda_jit import assemble_ptx, kernel_to_ptx
        from fluxion.lang import runtime
        inst = _plain_compile(self, key, args, specs, mode, build_only)
        if build_only:
            return inst
        ir = _plain_compile(self, key, args, specs, mode, True)
        ptx, _ = kernel_to_ptx(ir, 90, runtime.config().fast_math,
                               address_of=lambda place: place.addr)
        err = assemble_ptx(ptx)
        assert not err, f"ptxas rejects kernel '{self.name}' ({mode}):\n{err}"
        return inst

    _kernel.Kernel._compile = _compile_and_check_ptx
