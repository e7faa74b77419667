"""Integer `//` and `%` by zero: with ti.init(debug=True) the launch raises ZeroDivisionError
naming the kernel, file and line; without debug the result is 0 (documented in the README)."""
import numpy as np
import pytest

import fluxion as ti


def _kernels():
    out = ti.field(ti.i32, 6)

    @ti.kernel
    def div(a: ti.i32, b: ti.i32) -> ti.i32:
        return a // b

    @ti.kernel
    def mod(a: ti.i64, b: ti.i64) -> ti.i64:
        return a % b

    @ti.kernel
    def loop(b: ti.i32):
        for i in out:
            out[i] = 60 // (b - i)        # zero at i == b

    @ti.kernel
    def vec(b: ti.i32) -> ti.types.vector(2, ti.i32):
        return ti.Vector([7, 8]) % b

    return out, div, mod, loop, vec


def test_debug_mode_raises_zero_division_error_naming_kernel_and_line():
    ti.init(arch=ti.cpu, debug=True)
    out, div, mod, loop, vec = _kernels()
    cases = [(div, (7, 0), "div", "a // b"), (mod, (7, 0), "mod", "a % b"),
             (loop, (3,), "loop", "60 // (b - i)"), (vec, (0,), "vec", "% b")]
    for k, args, name, text in cases:
        with pytest.raises(ZeroDivisionError) as e:
            k(*args)
        msg = str(e.value)
        assert f"kernel '{name}'" in msg and __file__ in msg and text in msg
        assert "by zero" in msg
    # nonzero divisors still follow Python's floor semantics in debug mode
    for a in (-7, 7):
        for b in (-2, 3):
            assert div(a, b) == a // b and mod(a, b) == a % b
    loop(10)
    np.testing.assert_array_equal(out.to_numpy(), [60 // (10 - i) for i in range(6)])


def test_without_debug_integer_division_by_zero_gives_zero():
    out, div, mod, loop, vec = _kernels()
    assert div(7, 0) == 0 and mod(-7, 0) == 0
    loop(3)
    np.testing.assert_array_equal(out.to_numpy(), [20, 30, 60, 0, -60, -30])
    assert list(vec(0)) == [0, 0]
