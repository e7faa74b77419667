"""`ti.types.argpack`: several arguments under one parameter (scalars, vectors, structs,
ndarrays, nested packs), read as `pack.member` in the kernel."""
import numpy as np
import pytest

import fluxion as ti


def test_scalars_and_a_bool():
    P = ti.types.argpack(a=ti.i32, b=bool, c=ti.f32)

    @ti.kernel
    def foo(pack: P) -> ti.f32:
        r = 0.0
        if pack.b:
            r = pack.a + pack.c
        else:
            r = pack.a * pack.c
        return r

    assert foo(P(a=3, b=False, c=2.5)) == 7.5
    assert foo(P(a=3, b=True, c=2.5)) == 5.5
    assert len(foo.instances) == 1                   # values, not types: one instance


def test_vector_struct_ndarray_and_nested_members():
    S = ti.types.struct(a=ti.i32, c=ti.f32)
    Inner = ti.types.argpack(u=ti.i32, w=ti.i32)
    P = ti.types.argpack(v=ti.types.vector(3, ti.f32), s=S,
                         arr=ti.types.ndarray(dtype=ti.math.vec3, ndim=2), inner=Inner)
    arr = ti.ndarray(ti.math.vec3, shape=(4, 4))
    data = np.arange(48, dtype=np.float32).reshape(4, 4, 3)
    arr.from_numpy(data)

    @ti.kernel
    def foo(x: ti.i32, pack: P) -> ti.f32:
        return x + pack.v[1] + pack.s.a + pack.s.c + pack.arr[1, 2][2] + pack.inner.u * \
            pack.inner.w

    pack = P(v=[1.0, 2.0, 3.0], s=S(a=4, c=0.5), arr=arr, inner=Inner(u=3, w=5))
    assert foo(10, pack) == 10 + 2.0 + 4 + 0.5 + data[1, 2, 2] + 15
    assert foo(x=0, pack=pack) == 2.0 + 4 + 0.5 + data[1, 2, 2] + 15


def test_a_pack_is_no_return_type_nor_struct_member():
    P = ti.types.argpack(a=ti.i32)

    @ti.kernel
    def ret(p: P) -> P:
        return p

    with pytest.raises(ti.TaichiSyntaxError):
        ret(P(a=1))
    with pytest.raises(ValueError, match="Invalid data type"):
        ti.types.struct(e=P)
    with pytest.raises(TypeError):
        P(b=1)


def test_the_wrong_value_for_a_pack():
    P = ti.types.argpack(a=ti.i32)

    @ti.kernel
    def k(p: P) -> ti.i32:
        return p.a

    with pytest.raises(ti.TaichiRuntimeTypeError):
        k(3)
    assert k({"a": 7}) == 7                         # a dict of the members will do
