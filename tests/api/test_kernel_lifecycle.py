"""The life of a kernel: registration, compilation on first call, template instances and their
cache, compile-time constants, and the `ti.init` options that change how kernels are built.
"""
import inspect
import warnings

import numpy as np
import pytest

import fluxion as ti
from fluxion.runtime import cpu_jit
from fluxion.runtime import cuda_driver


@pytest.fixture(autouse=True)
def _session():
    # tests/conftest.py did not exist when this file was written; a second ti.init is harmless
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


@pytest.fixture
def compiles(monkeypatch, no_offline_cache):
    """Counts the kernels handed to the JIT: one per compiled instance (the offline cache is
    off: an instance it loads is not compiled)."""
    from fluxion.runtime import cuda_jit
    calls = []
    for jit in (cpu_jit.CpuJit, cuda_jit.CudaJit):
        def counting(self, kernel_ir, original=jit.compile):
            calls.append(kernel_ir.name)
            return original(self, kernel_ir)

        monkeypatch.setattr(jit, "compile", counting)
    return calls


def line_of(fn, text):
    """Absolute line number, in this file, of the first line of `fn` containing `text`."""
    fn = getattr(fn, "func", fn)
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in the source of {fn.__name__}")


@ti.kernel
def add(field: ti.template(), delta: ti.i32):
    for i in field:
        field[i] += delta


# -- registration and first compilation -----------------------------------------------------
def test_decorating_compiles_nothing(compiles):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a * 2

    assert len(k.instances) == 0
    assert compiles == []
    assert k(21) == 42
    assert len(k.instances) == 1
    assert compiles == ["k"]


def test_compile_error_is_raised_only_when_called(compiles):
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def broken():
        for i in x:
            x[i] = name_that_does_not_exist   # noqa: F821

    assert len(broken.instances) == 0          # defining it was fine
    with pytest.raises(ti.FluxionNameError):
        broken()
    assert len(broken.instances) == 0          # a failed compile leaves no instance
    assert compiles == []
    with pytest.raises(ti.FluxionNameError):   # and it fails again on the next call
        broken()


def test_seed_example_instances():
    x = ti.field(ti.f32, shape=128)
    y = ti.field(ti.f32, shape=16)
    add(x, 42)
    add(x, 1)
    assert len(add.instances) == 1             # same field, same scalar type: one instance
    add(y, 42)
    assert len(add.instances) == 2             # another field is another template signature
    np.testing.assert_array_equal(x.to_numpy(), np.full(128, 43, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(16, 42, np.float32))


def test_repeated_signature_never_recompiles(compiles):
    x = ti.field(ti.i32, shape=128)
    y = ti.field(ti.i32, shape=16)
    add(x, 1)
    assert compiles == ["add"]
    for d in range(2, 7):
        add(x, d)                              # scalar values change, the signature does not
    add(x, delta=3)                            # by keyword: same signature
    add(field=x, delta=np.int32(4))
    assert compiles == ["add"]
    add(y, 5)
    add(y, 6)
    assert compiles == ["add", "add"]
    np.testing.assert_array_equal(x.to_numpy(), np.full(128, sum(range(1, 7)) + 3 + 4))
    np.testing.assert_array_equal(y.to_numpy(), np.full(16, 11))


def test_instances_is_read_only():
    x = ti.field(ti.i32, shape=4)
    add(x, 1)
    with pytest.raises(TypeError):
        add.instances["fake"] = None
    assert len(add.instances) == 1


def test_scalar_arguments_of_every_kind(compiles):
    @ti.kernel
    def mix(a: ti.i32, b: ti.f32, c: ti.f64, d: ti.u8, e: ti.i64) -> ti.f64:
        return a + b + c + d + e

    assert mix(1, 0.5, 0.25, 200, 2 ** 40) == 1 + 0.5 + 0.25 + 200 + 2 ** 40
    assert mix(-3, 2, 1, 0, -5) == -3 + 2 + 1 + 0 - 5      # ints for float arguments
    assert compiles == ["mix"]


# -- template values as compile-time constants ---------------------------------------------
def test_template_python_values_are_compile_time_constants(compiles):
    x = ti.field(ti.i32, shape=6)

    @ti.kernel
    def k(scale: ti.template(), unroll: ti.template()):
        for i in x:
            acc = 0
            for r in ti.static(range(unroll)):     # needs a compile-time bound
                acc += r
            if ti.static(scale > 0):               # resolved while compiling
                x[i] = i * scale + acc
            else:
                x[i] = -1

    k(3, 4)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6) * 3 + sum(range(4)))
    k(0, 2)
    np.testing.assert_array_equal(x.to_numpy(), np.full(6, -1))
    assert len(k.instances) == 2
    k(3, 4)                                        # seen before: reused
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6) * 3 + sum(range(4)))
    assert compiles == ["k", "k"]
    k(3.0, 4)                                      # 3.0 is not 3: a new constant
    assert len(k.instances) == 3


def test_template_tuple_and_dtype_values():
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def k(coeffs: ti.template(), dt: ti.template()):
        for i in x:
            x[i] = ti.cast(coeffs[0] + coeffs[1] * i + 0.75, dt)

    k((1, 2), ti.f64)
    np.testing.assert_array_equal(x.to_numpy(), 1 + 2 * np.arange(3) + 0.75)
    k((1, 2), ti.i32)
    np.testing.assert_array_equal(x.to_numpy(), np.floor(1 + 2 * np.arange(3) + 0.75))
    assert len(k.instances) == 2


G_SCALE = 5


def test_globals_are_compile_time_constants():
    global G_SCALE
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            x[i] = i * G_SCALE

    saved = G_SCALE
    try:
        k()
        np.testing.assert_array_equal(x.to_numpy(), np.arange(4) * saved)
        G_SCALE = saved + 2                     # after the first compile: not seen
        k()
        np.testing.assert_array_equal(x.to_numpy(), np.arange(4) * saved)
        assert len(k.instances) == 1
    finally:
        G_SCALE = saved


def test_global_change_is_seen_by_a_new_session():
    global G_SCALE
    saved = G_SCALE
    try:
        @ti.kernel
        def k() -> ti.i32:
            return G_SCALE * 3

        assert k() == saved * 3
        G_SCALE = saved + 1
        assert k() == saved * 3                  # cached instance keeps the old constant
        ti.reset()
        ti.init(arch=ti.cpu)
        assert k() == (saved + 1) * 3            # recompiled in the new session
    finally:
        G_SCALE = saved


def test_closure_values_are_compile_time_constants():
    def make(c):
        @ti.kernel
        def k() -> ti.i32:
            return c * 10 + 1

        return k

    k7, k9 = make(7), make(9)
    assert k7() == 71 and k9() == 91

    value = 2

    @ti.kernel
    def reads_cell() -> ti.i32:
        return value + 100

    assert reads_cell() == 102
    value = 50                                   # noqa: F841 (the closure cell changes)
    assert reads_cell() == 102
    assert len(reads_cell.instances) == 1


def test_kernel_returns_and_ti_func():
    @ti.func
    def sq(v):
        return v * v

    @ti.kernel
    def k(a: ti.f32) -> ti.f32:
        return sq(a) + 1

    assert k(3.0) == 10.0
    assert k(0.5) == 1.25
    assert len(k.instances) == 1


# -- ti.init options --------------------------------------------------------------------------
def test_print_ir_prints_readable_ir(capsys):
    ti.init(arch=ti.cpu, print_ir=True)
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def scale(s: ti.f32):
        for i in x:
            x[i] = x[i] * s

    capsys.readouterr()
    scale(2.0)
    out = capsys.readouterr().out
    assert "IR of kernel 'scale'" in out
    assert "kernel scale(f32) {" in out
    assert "parallel_for" in out
    assert "global_store" in out
    assert "global_load f32" in out
    assert "arg f32 0" in out
    assert "mul f32" in out
    store_line = line_of(scale, "x[i] = x[i] * s")
    assert f"test_kernel_lifecycle.py:{store_line}" in out
    scale(3.0)                                   # no compile, nothing printed
    assert capsys.readouterr().out == ""


def test_no_ir_printed_by_default(capsys):
    x = ti.field(ti.f32, shape=8)
    capsys.readouterr()
    add(x, 1)
    assert capsys.readouterr().out == ""


def test_default_fp_f64_makes_float_literals_and_locals_f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    r = ti.field(ti.f64, shape=3)

    @ti.kernel
    def k():
        t = 0.1                      # a f64 local
        r[0] = t
        u = 1.0                      # a f64 local
        r[1] = u / 3
        r[2] = t * 3.0 + 1e-12

    k()
    np.testing.assert_array_equal(r.to_numpy(), [0.1, 1 / 3, 0.1 * 3.0 + 1e-12])
    assert ti.field(float, shape=1).dtype == ti.f64


def test_default_fp_f32_rounds_float_locals():
    r = ti.field(ti.f64, shape=2)

    @ti.kernel
    def k():
        t = 0.1                      # a f32 local by default
        r[0] = t
        u = 1.0
        r[1] = u / 3

    k()
    np.testing.assert_array_equal(r.to_numpy(),
                                  [float(np.float32(0.1)), float(np.float32(1) / np.float32(3))])


def test_default_fp_annotation_float_follows_init():
    ti.init(arch=ti.cpu, default_fp=ti.f64)

    @ti.kernel
    def k(a: float) -> float:
        return a / 3

    assert k(1.0) == 1.0 / 3


@pytest.mark.cpu_only
@pytest.mark.parametrize("arch", [ti.gpu, ti.cuda], ids=["gpu", "cuda"])
def test_gpu_archs_fall_back_to_cpu_with_one_warning(arch):
    if cuda_driver.available():
        pytest.skip("a CUDA device is present")
    with pytest.warns(UserWarning) as rec:
        ti.init(arch=arch)
    assert len(rec) == 1
    assert "cpu" in str(rec[0].message).lower()
    x = ti.field(ti.i32, shape=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # running kernels warns no more
        add(x, 3)
        add(x, 4)
    np.testing.assert_array_equal(x.to_numpy(), np.full(5, 7))


def test_cpu_arch_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ti.init(arch=ti.cpu)


def test_cpu_max_num_threads_one():
    ti.init(arch=ti.cpu, cpu_max_num_threads=1)
    n = 10000
    x = ti.field(ti.f64, shape=n)
    total = ti.field(ti.f64, shape=())
    x.from_numpy(np.arange(n, dtype=np.float64))

    @ti.kernel
    def k():
        for i in x:
            x[i] = x[i] * 2
        for i in x:
            total[None] += x[i]

    k()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(n) * 2.0)
    assert total[None] == float(n * (n - 1))


def test_unknown_init_option_is_rejected():
    with pytest.raises(TypeError):
        ti.init(arch=ti.cpu, no_such_option=True)


def test_reinit_discards_instances(compiles):
    x = ti.field(ti.i32, shape=4)
    add(x, 1)
    assert len(add.instances) == 1
    ti.init(arch=ti.cpu)                         # a second init is a reset
    assert len(add.instances) == 0
    y = ti.field(ti.i32, shape=4)
    add(y, 2)
    np.testing.assert_array_equal(y.to_numpy(), [2, 2, 2, 2])
    assert compiles == ["add", "add"]
