"""Vectors and matrices of a given type in Python scope hold NumPy scalars of that type, as the
original's do (against taichi, the oracle, where installed): `ti.math.vec3(1.1, 2, 3)[0]` is
`np.float32(1.1)`, printed `1.1`, and arithmetic on it stays in f32, as it would in a kernel.
fluxion held Python floats rounded to f32 (printed `1.10000002`, multiplied in f64), and a
kernel's vector return the same."""
import numpy as np

from taichi_ref import check_against_taichi


def typed_vectors(ti):
    v = ti.math.vec3(1.1, 2, 3)
    m = ti.Matrix([[1.1, 2], [3, 4.7]], ti.f32)
    h = ti.Vector([1.1, 2.5], ti.f16)
    iv = ti.math.ivec2(5, 7)
    d = ti.Vector([0.1, 0.2], ti.f64)

    @ti.kernel
    def ret() -> ti.math.vec2:
        return ti.math.vec2(1.1, 2)

    @ti.kernel
    def ret_int() -> ti.math.ivec2:
        return ti.math.ivec2(3, -4)

    r, ri = ret(), ret_int()
    cases = {
        "vec3": v[0], "vec3_times": (v * 3)[0], "vec3_plus": (v + 0.1)[0],
        "vec3_dot": v.dot(v), "vec3_sum": v.sum(), "matmul": (m @ m)[0, 0],
        "half": h[0], "half_sq": (h * h)[0], "ivec_div": (iv / 2)[1],
        "ivec_floordiv": (iv // 2)[1], "f64": (d + d)[0], "ret": r[0], "ret_times": (r * 3)[0],
        "ret_int": ri[1], "to_numpy": v.to_numpy(),
    }
    out = {k: [type(x).__name__ if not hasattr(x, "dtype") or np.ndim(x) == 0
                else str(x.dtype), x] for k, x in cases.items()}
    out["printed"] = str(v) + " " + str(m)
    return out


def test_typed_vectors_in_python_scope_as_in_taichi():
    check_against_taichi(typed_vectors, rtol=0)


def test_typed_vector_entries_against_numpy():
    import fluxion as ti
    ti.init(arch=ti.cpu)
    v = ti.math.vec3(1.1, 2, 3)
    assert type(v[0]) is np.float32 and v[0] == np.float32(1.1)
    assert (v * 3)[0] == np.float32(1.1) * np.float32(3)
    assert str(v) == "[1.1 2.  3. ]"
    assert v.to_numpy().dtype == np.float32
    u = ti.Vector([300, -1], ti.u8)          # wraps into the type's range (taichi raises)
    assert type(u[0]) is np.uint8 and list(u.to_numpy()) == [44, 255]
    plain = ti.Vector([1.1, 2])              # no type given: Python numbers, as before
    assert type(plain[0]) is float and plain.to_numpy().dtype == np.float64


def typed_vectors_in_kernels(ti):
    import numpy as np
    g = ti.Vector([0, 0.1, 0], ti.f32)       # a global (here a closure) of the kernel
    holder = type("Holder", (), {})()
    holder.g = g                              # reached through an attribute
    c = np.float32(0.1)
    out = ti.field(ti.f64, 8)
    xs = ti.field(ti.f32, 1)
    xs[0] = 0.1

    @ti.kernel
    def k():
        out[0] = c * 0.1
        out[1] = g[1] * 0.1
        out[2] = holder.g[1] * 0.1
        v = g
        out[3] = v[1] * 0.1
        w = holder.g
        out[4] = w[1] * 0.1
        out[5] = xs[0] * 0.1
        out[6] = (g * 0.1)[1]
        out[7] = (g + g)[1] * 0.1

    k()
    return {"out": out.to_numpy()}


def test_typed_vectors_named_in_kernels_as_in_taichi():
    # under default_fp=f64 a literal is f64: whether the f32 entry meets it in the kernel or
    # in NumPy at build time shows in the product
    check_against_taichi(typed_vectors_in_kernels, rtol=0, default_fp="ti.f64")


def test_a_struct_with_typed_vectors_passed_to_a_function_in_a_kernel():
    # (its members' NumPy entries become arguments of the function: a kernel value each)
    import fluxion as ti
    ti.init(arch=ti.cpu)

    @ti.dataclass
    class Pair:
        p1: ti.math.vec3
        p2: ti.math.vec3

    shift = Pair(p1=[0, 2, 4], p2=[-2, -4, -6])
    out = ti.Vector.field(3, ti.f32, shape=2)

    @ti.func
    def moved(v, s):
        return v + s.p1 - s.p2

    @ti.kernel
    def k():
        for i in out:
            out[i] = moved(ti.math.vec3(i, 1, 2), shift)

    k()
    want = np.array([[i + 2, 1 + 6, 2 + 10] for i in range(2)], np.float32)
    np.testing.assert_array_equal(out.to_numpy(), want)


def comparisons(ti):
    a, b = ti.Vector([1, 2, 3]), ti.Vector([2, 2, 1])
    f, g = ti.math.vec3(1.5, 2, 3), ti.math.vec3(2, 2, 1)
    m = ti.Matrix([[1, 2], [3, 4]]) > ti.Matrix([[2, 2], [2, 2]])
    c = a < b
    cases = {"lt": c, "eq": a == b, "ne": a != b, "f_lt": f < g, "f_ge": f >= g,
             "scalar": a < 2, "reflected": 2 < a, "f_eq": f == 2.0, "matrix": m,
             "invert": ~c, "count": c + 1, "scaled": c * 2.5, "and": c & (a > 0),
             "all": (a < b).all(), "any": (a < b).any(), "all_true": (a > 0).all()}
    out = {k: [type(x[0] if hasattr(x, "n") and x.ndim == 1 else x).__name__, x.to_list()
               if hasattr(x, "to_list") else bool(x)] for k, x in cases.items()}
    out["printed"] = str(c) + " " + str(m)
    out["dtype"] = str(c.to_numpy().dtype)
    return out


def test_python_scope_comparisons_give_bools_as_in_taichi():
    # fluxion gave 1/0 (printed `[1 0 0]`, and `~` a bitwise not: -2); the original's entries
    # are NumPy bools (`~` a logical not)
    check_against_taichi(comparisons, rtol=0)
