"""`ti.init` takes every option of the original system's `ti.init`: fluxion's own take
effect, the others are accepted (one warning when set to a non-default value), unknown
names raise a KeyError naming them; `ti.lang.impl.current_cfg()`, `ti.cfg`, the TI_*
environment variables and `_test_mode` behave as in the original."""
import json
import subprocess
import sys
import warnings

import pytest

import fluxion as ti
from fluxion.runtime import config as C


def _taichi_options():
    """The option names of the installed taichi's ti.init (its CompileConfig attributes and
    its special config), read in a subprocess: importing taichi here would change the
    process's floating-point mode for later tests."""
    code = ("import json, taichi\n"
            "from taichi.lang import impl, misc\n"
            "cfg = impl.default_cfg()\n"
            "names = [k for k in dir(cfg) if not k.startswith('_')]\n"
            "names += list(vars(misc._SpecialConfig()))\n"
            "print(json.dumps(names))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        pytest.skip("taichi is not installed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_option_of_the_original_is_accepted():
    names = _taichi_options()
    assert len(names) > 60
    for name in names:
        if name in ("arch", "default_fp", "default_ip", "default_up"):
            continue
        assert name in C.ALL, name
    # all at once, each at its default: silent
    kwargs = {n: C.ALL[n] for n in names if n in C.ALL}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ti.init(arch=ti.cpu, **kwargs)


def test_unknown_option_raises_a_key_error_naming_it():
    with pytest.raises(KeyError, match="foo_bar"):
        ti.init(arch=ti.cpu, foo_bar=233)
    with pytest.raises(TypeError, match="foo_bar"):     # also a TypeError
        ti.init(arch=ti.cpu, foo_bar=233)
    with pytest.raises(KeyError, match="default_ip"):   # as the original
        ti.init(arch=ti.cpu, default_up=ti.u64)


def test_an_ignored_option_warns_once_and_only_off_its_default():
    C._warned.discard("cuda_stack_limit")
    with pytest.warns(UserWarning, match="cuda_stack_limit=8192"):
        ti.init(arch=ti.cpu, cuda_stack_limit=8192)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ti.init(arch=ti.cpu, cuda_stack_limit=8192)      # said once per process
        assert ti.lang.impl.current_cfg().cuda_stack_limit == 8192
        ti.init(arch=ti.cpu, cfg_optimization=True, opt_level=1)   # defaults: silent


def test_current_cfg_has_the_options_and_their_values():
    ti.init(arch=ti.cpu, debug=True, default_fp=ti.f64, default_ip=ti.i64, fast_math=False,
            advanced_optimization=False, flatten_if=True)
    cfg = ti.lang.impl.current_cfg()
    assert cfg is ti.cfg
    assert cfg.debug and cfg.check_out_of_bound
    assert cfg.default_fp is ti.f64 and cfg.default_ip is ti.i64 and cfg.default_up is ti.u64
    assert cfg.fast_math is False and cfg.advanced_optimization is False
    assert cfg.flatten_if is True and cfg.verbose is True
    assert ti.lang.impl.get_runtime().prog.config() is cfg
    ti.reset()
    assert ti.cfg is None and ti.lang.impl.get_runtime().prog is None


def test_default_types_take_effect():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def third() -> float:
        return 1 / 3

    assert third() == 1 / 3                     # f64: exact, an f32 would differ
    ti.lang.impl.get_runtime().default_ip = ti.i64
    assert ti.lang.impl.current_cfg().default_ip is ti.i64


def test_environment_variables_set_options(monkeypatch):
    monkeypatch.setenv("TI_DEBUG", "1")
    monkeypatch.setenv("TI_LOG_LEVEL", "warn")
    monkeypatch.setenv("TI_DEFAULT_FP", "64")
    ti.init(arch=ti.cpu)
    cfg = ti.lang.impl.current_cfg()
    assert cfg.debug is True and cfg.default_fp is ti.f64
    assert not ti.is_logging_effective("info") and ti.is_logging_effective("warn")
    with pytest.warns(UserWarning, match="TI_DEBUG"):
        ti.init(arch=ti.cpu, debug=False)            # an argument overrides the variable
    assert ti.lang.impl.current_cfg().debug is False
    monkeypatch.setenv("TI_DEFAULT_FP", "16")
    with pytest.raises(ValueError, match="TI_DEFAULT_FP"):
        ti.init(arch=ti.cpu)


def test_test_mode_returns_the_special_config_and_starts_nothing():
    spec = ti.init(_test_mode=True, log_level=ti.DEBUG, gdb_trigger=True)
    assert spec.log_level == "debug" and spec.gdb_trigger is True
    assert spec.short_circuit_operators is True and spec.unrolling_limit == 32
    assert ti.cfg is None


@pytest.mark.parametrize("level", [ti.TRACE, ti.DEBUG, ti.INFO, ti.WARN, ti.ERROR, ti.CRITICAL])
def test_logging_levels(level):
    order = [ti.TRACE, ti.DEBUG, ti.INFO, ti.WARN, ti.ERROR, ti.CRITICAL]
    ti.set_logging_level(level)
    try:
        for other in order:
            assert ti.is_logging_effective(other) == (order.index(other) >= order.index(level))
    finally:
        ti.set_logging_level(ti.INFO)
    with pytest.raises(ValueError):
        ti.set_logging_level("loud")


def test_enable_fallback_false_raises_for_a_missing_backend():
    with pytest.raises(RuntimeError, match="enable_fallback"):
        ti.init(arch=ti.vulkan, enable_fallback=False)
    with pytest.warns(UserWarning, match="vulkan"):
        ti.init(arch=ti.vulkan)
    assert ti.lang.impl.current_cfg().arch in (ti.cpu, ti.cuda)


def test_require_version():
    ti.init(arch=ti.cpu, require_version="1.7.4")
    with pytest.raises(RuntimeError, match="1.7.4"):
        ti.init(arch=ti.cpu, require_version="1.8.0")


def test_print_preprocessed_ir_prints_the_frontend_ir(capfd):
    ti.init(arch=ti.cpu, print_preprocessed_ir=True)

    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a + 1

    assert k(1) == 2
    out = capfd.readouterr().out
    assert "IR of kernel 'k' from the frontend" in out
    assert "after offload" not in out                # only the frontend's


@pytest.mark.parametrize("short_circuit", [True, False])
def test_short_circuit_operators(short_circuit):
    ti.init(arch=ti.cpu, short_circuit_operators=short_circuit)

    @ti.kernel
    def k(a: ti.i32, b: ti.i32) -> ti.types.vector(2, ti.i32):
        return ti.Vector([a and b, a or b])

    for a, b in [(2, 3), (0, 3), (2, 0), (6, 5)]:
        want = [a and b, a or b] if short_circuit else [a & b, a | b]
        assert list(k(a, b)) == want


def test_print_full_traceback_keeps_compiler_frames():
    @ti.kernel
    def broken():
        print(undefined_name)  # noqa: F821

    with pytest.raises(ti.FluxionNameError) as short:
        broken()
    ti.init(arch=ti.cpu, print_full_traceback=True)

    @ti.kernel
    def broken2():
        print(undefined_name)  # noqa: F821

    with pytest.raises(ti.FluxionNameError) as full:
        broken2()
    assert len(full.traceback) > len(short.traceback)


def test_num_compiled_functions_counts_instances():
    rt = ti.lang.impl.get_runtime()
    assert rt.get_num_compiled_functions() == 0

    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in a:
            a[i] = i

    import numpy as np
    fill(np.zeros(4, np.int32))
    fill(np.zeros(9, np.int32))                       # another shape: same instance
    assert rt.get_num_compiled_functions() == 1
    fill(np.zeros(4, np.float32))                     # another dtype: a new one
    assert rt.get_num_compiled_functions() == 2
    ti.reset()
    assert rt.get_num_compiled_functions() == 0


def test_arch_names():
    for name in ("cpu", "x64", "x86_64", "arm64", "cuda", "gpu", "vulkan", "metal", "opengl",
                 "dx11", "dx12", "gles", "amdgpu"):
        assert hasattr(ti, name)
    for ext in ("sparse", "quant", "mesh", "quant_basic", "data64", "adstack", "bls",
                "assertion", "extfunc"):
        assert hasattr(ti.extension, ext)
