"""The Python value a kernel's return annotation gives back, against taichi (the oracle, where
installed): several values come back as a list, a one-element tuple annotation as its value,
vectors with NumPy entries of their type. fluxion gave tuples."""
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

    return {"two": described(two()), "one": described(one()), "mixed": described(mixed())}


def test_returned_values_are_shaped_as_in_taichi():
    check_against_taichi(returned_values, rtol=0)
