"""`ti.types`: the type predicates, `primitive_types` and its lists, `DataType.to_string`,
vector/matrix annotations of any shape, and the Taichi names of the exception classes."""
import pytest

import fluxion as ti
from fluxion.types.primitive_types import all_types, integer_types, real_types


def test_predicates():
    ints = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u1, ti.u8, ti.u16, ti.u32, ti.u64]
    for t in ints:
        assert ti.types.is_integral(t) and not ti.types.is_real(t)
        assert ti.types.is_signed(t) == t.name.startswith("i")
    for t in (ti.f16, ti.f32, ti.f64):
        assert ti.types.is_real(t) and not ti.types.is_integral(t)
        with pytest.raises(TypeError):
            ti.types.is_signed(t)
    assert ti.types.is_tensor(ti.types.vector(3, ti.f32)) and not ti.types.is_tensor(ti.f32)


def test_primitive_type_lists_and_names():
    assert set(real_types) == {ti.f16, ti.f32, ti.f64, float}
    assert {ti.u1, int, bool} <= set(integer_types)
    assert len(all_types) == len(real_types) + len(integer_types)
    assert ti.types.primitive_types.all_types is all_types
    for t in (ti.u8, ti.i64, ti.f16):
        assert t.to_string() == t.name == str(t)


def test_exception_names():
    assert ti.TaichiRuntimeTypeError is ti.FluxionRuntimeTypeError
    assert issubclass(ti.TaichiRuntimeTypeError, ti.TaichiRuntimeError)
    assert issubclass(ti.TaichiRuntimeTypeError, TypeError)

    @ti.kernel
    def k(a: ti.i32):
        pass

    with pytest.raises(ti.TaichiRuntimeTypeError):
        k(1.5)
    with pytest.raises(TypeError):                    # a TypeError too
        k("x")


def test_ndarray_classes_and_any_shape_annotations():
    import numpy as np
    v = ti.ndarray(ti.types.vector(3, ti.i32), shape=(2, 2))
    m = ti.Matrix.ndarray(3, 4, float, shape=5)
    s = ti.ndarray(ti.f32, shape=3)
    assert isinstance(v, ti.VectorNdarray) and isinstance(m, ti.MatrixNdarray)
    assert isinstance(s, ti.ScalarNdarray) and isinstance(v, ti.Ndarray)
    assert v.element_type.element_type() is ti.i32 and v.element_type.shape() == [3]
    assert m.element_shape == (3, 4) and s.element_type is ti.f32
    s2 = ti.ndarray(ti.f32, shape=3)
    s2.from_numpy(np.array([1, 2, 3], np.float32))
    s.copy_from(s2)
    assert s.to_numpy().tolist() == [1, 2, 3]

    @ti.kernel
    def ones(x: ti.types.ndarray(dtype=ti.types.matrix())):
        for I in ti.grouped(x):
            x[I] = 1.0

    a, b = ti.ndarray(ti.math.mat2, 3), ti.ndarray(ti.math.mat3, 2)
    ones(a)
    ones(b)
    assert (a.to_numpy() == 1).all() and (b.to_numpy() == 1).all()
    assert len(ones.instances) == 2
    with pytest.raises(ValueError, match="Invalid value for argument x"):
        ones(ti.ndarray(ti.math.vec2, 3))

    @ti.kernel
    def as_template(x: ti.template()):
        pass

    with pytest.raises(ti.TaichiRuntimeTypeError, match="template"):
        as_template(s)
