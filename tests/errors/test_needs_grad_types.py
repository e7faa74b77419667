"""needs_grad / needs_dual on integer data: an error, as in the original system (before, the
flag was accepted and no gradient was ever made)."""
import pytest

import fluxion as ti
from fluxion.ir.errors import FluxionRuntimeError


@pytest.mark.parametrize("dt", [ti.i8, ti.i32, ti.u16, ti.i64, ti.u64])
@pytest.mark.parametrize("flag", ["needs_grad", "needs_dual"])
def test_integer_fields_refuse_gradients(dt, flag):
    with pytest.raises(FluxionRuntimeError, match=f"{dt}.*floating-point"):
        ti.field(dt, 4, **{flag: True})
    with pytest.raises(FluxionRuntimeError, match=f"{dt}.*floating-point"):
        ti.Vector.field(2, dt, 4, **{flag: True})
    with pytest.raises(FluxionRuntimeError, match="'count'"):
        ti.field(dt, 4, name="count", **{flag: True})


def test_integer_members_of_struct_fields_and_integer_ndarrays_refuse_gradients():
    with pytest.raises(FluxionRuntimeError, match="i32.*floating-point"):
        ti.Struct.field({"a": ti.i32, "b": ti.f32}, shape=4, needs_grad=True)
    with pytest.raises(FluxionRuntimeError, match="i32.*floating-point"):
        ti.ndarray(ti.i32, 4, needs_grad=True)


@pytest.mark.parametrize("dt", [ti.f16, ti.f32, ti.f64])
def test_float_fields_still_get_gradients(dt):
    x = ti.field(dt, 4, needs_grad=True, needs_dual=True)
    assert x.grad is not None and x.dual is not None
    assert ti.ndarray(dt, 4, needs_grad=True).grad is not None
