"""`ti.types`: the type predicates, `primitive_types` and its lists, `DataType.to_string`,
vector/matrix annotations of any shape, and the Taichi names of the exception classes."""
import numpy as np
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


def test_the_original_submodules_import_as_taichi_programs_import_them():
    from fluxion.types.annotations import Template, sparse_matrix_builder, template
    from fluxion.types.compound_types import argpack, matrix, struct, vector
    from fluxion.types.ndarray_type import NdarrayType, ndarray
    from fluxion.types.texture_type import rw_texture, texture
    import fluxion.types.compound_types as compound_types
    assert (template, Template) == (ti.template, ti.template)
    assert sparse_matrix_builder is ti.types.sparse_matrix_builder is ti.sparse_matrix_builder
    assert (vector, matrix, struct, argpack) == (ti.types.vector, ti.types.matrix,
                                                ti.types.struct, ti.types.argpack)
    assert compound_types is ti.types.compound_types
    assert NdarrayType is ndarray is ti.types.ndarray
    assert (texture, rw_texture) == (ti.types.texture, ti.types.rw_texture)
    assert ti.types.ndarray_type.__all__ == ["ndarray", "NdarrayType"]
    # what they make works as the ti.types ones do
    vec3 = vector(3, ti.f32)
    pair = struct(a=ti.i32, b=vec3)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k(arr: NdarrayType(dtype=ti.f32, ndim=1), f: template()) -> ti.f32:
        p = pair(a=2, b=vec3(1.0, 2.0, 3.0))
        m = matrix(2, 2, ti.f32)([[1.0, 0.0], [0.0, 1.0]])
        s = 0.0
        for i in arr:
            f[i] = arr[i] * p.a
            s += arr[i]
        return s + p.b.sum() + m.trace()

    a = ti.ndarray(ti.f32, 4)
    a.from_numpy(np.arange(4, dtype=np.float32))
    assert k(a, x) == 6 + 6 + 2
    assert list(x.to_numpy()) == [0, 2, 4, 6]
    assert isinstance(texture(2), ti.types.texture_type.TextureType)
    assert isinstance(rw_texture(2, ti.Format.r32f), ti.types.texture_type.RWTextureType)
