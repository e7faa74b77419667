"""Machine code may call compiler runtime functions (libgcc's or compiler-rt's builtins) that no
module of fluxion defines: LLVM's code generator made an f64 -> f16 conversion of a kernel a
call of `__truncdfhf2`, which the JIT resolved to address 0, and the process died (a program of
the random-program fuzz). The JIT now loads libgcc's builtins, and an object calling a function
nothing defines is an error naming the kernel before it is linked."""
import numpy as np
import pytest

import fluxion as ti
from fluxion._llvm import llvm
from fluxion.ir.errors import FluxionCompilationError
from fluxion.runtime import libcalls


def _f16_through_f32(v):
    return np.float16(np.float32(v))


def test_f16_field_assigned_an_f64_product(fluxion_arch):
    # the fuzz's program, reduced: an exact f64 product stored into an f16 field, then an f32
    # expression of it
    x = ti.field(ti.f16, shape=(5,))

    @ti.kernel
    def k(p: ti.u8):
        for i in x:
            x[i] = ti.cast(p, ti.f64) * 0.25
            x[i] = (4.0 - x[i]) + 1.5

    for p in (39, 0, 255):
        k(p)
        first = _f16_through_f32(p * 0.25)
        want = _f16_through_f32((np.float32(4.0) - np.float32(first)) + np.float32(1.5))
        np.testing.assert_array_equal(x.to_numpy(), np.full(5, want, np.float16))


def test_f64_to_f16_rounds_through_f32(fluxion_arch):
    # f64 -> f16 goes through f32 as in the original system: 1 + 2^-11 + 2^-40 rounds to
    # 1 + 2^-11 in f32, a tie that f16 rounds to even (1.0); a single rounding would give
    # 1 + 2^-10
    y = ti.field(ti.f16, shape=(3,))

    @ti.kernel
    def k(a: ti.f64, n: ti.i32):
        for i in y:
            y[i] = a * ti.cast(n + i, ti.f64) * 0.25

    v = 1 + 2.0 ** -11 + 2.0 ** -40
    k(v, 4)
    want = [_f16_through_f32(v * (4 + i) * 0.25) for i in range(3)]
    np.testing.assert_array_equal(y.to_numpy(), np.array(want, np.float16))
    assert y.to_numpy()[0] == 1.0


def _object_calling(name):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(f"""
        declare double @{name}(double)
        define double @f(double %x) {{
          %y = call double @{name}(double %x)
          ret double %y
        }}""")
    tm = llvm.Target.from_default_triple().create_target_machine()
    return tm.emit_object(mod)


@pytest.mark.cpu_only
def test_undefined_symbols_of_an_object_are_read():
    obj = _object_calling("fluxion_test_not_defined_anywhere")
    assert "fluxion_test_not_defined_anywhere" in libcalls.undefined_symbols(obj)
    assert "f" not in libcalls.undefined_symbols(obj)       # defined there


@pytest.mark.cpu_only
def test_a_call_nothing_defines_is_an_error_naming_the_kernel():
    with pytest.raises(FluxionCompilationError, match="kernel 'kk'.*fluxion_test_not_defined"):
        libcalls.check(_object_calling("fluxion_test_not_defined_anywhere"), "kk")
    # a function of the C library and a builtin of libgcc resolve
    libcalls.provide()
    libcalls.check(_object_calling("sin"), "kk")
