"""The Python value a kernel's return annotation gives back, against taichi (the oracle, where
installed): several values come back as a list, a one-element tuple annotation as its value,
vectors (in structs too) with NumPy entries of their type, and a struct's `to_dict` gives its
vectors as lists. fluxion gave tuples, Python floats and NumPy arrays."""
from taichi_ref import check_against_taichi


def returned_values(ti):
    @ti.kernel
    def two() -> (ti.i32, ti.f32):
        return 5, 2.5

    @ti.kernel
    def one() -> (ti.i32,):
        return 7

    @ti.kernel
    def mixed() -> (ti.i32, ti.math.vec2):
        return 1, ti.math.vec2(0.5, 1.5)

    def described(v):
        if isinstance(v, (list, tuple)):
            return [type(v).__name__] + [described(x) for x in v]
        if hasattr(v, "to_numpy"):
            return ["vector", type(v[0]).__name__, v.to_numpy().tolist()]
        return [type(v).__name__, v]

    S = ti.types.struct(a=ti.i8, v=ti.math.vec2, iv=ti.types.vector(2, ti.u8))

    @ti.kernel
    def struct() -> S:
        return S(a=-3, v=ti.math.vec2(1.1, 2), iv=ti.Vector([250, 7], ti.u8))

    s = struct()
    return {"two": described(two()), "one": described(one()), "mixed": described(mixed()),
            "struct": [type(s.a).__name__, type(s.v[0]).__name__, type(s.iv[1]).__name__],
            "to_dict": described(list(s.to_dict().values())),
            "ndim": s.to_dict(include_ndim=True)["__matrix_ndim"]}


def test_returned_values_are_shaped_as_in_taichi():
    check_against_taichi(returned_values, rtol=0)
