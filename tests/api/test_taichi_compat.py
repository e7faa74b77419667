"""Valid programs of the original system that fluxion rejected or computed differently
(issue 15). Expected values come from Python or NumPy computed here, and the programs at the
end run on taichi (the oracle, where installed) as well."""
import math
import typing

import numpy as np
import pytest

import fluxion as ti
from taichi_ref import check_against_taichi


# -- C-style division and logical shifts -----------------------------------------------------

def _c_div(a, b):
    return int(a / b) if isinstance(a, int) and isinstance(b, int) else a / b


def test_raw_div_raw_mod_are_c_style():
    @ti.kernel
    def ints(a: ti.i32, b: ti.i32) -> ti.types.vector(4, ti.i32):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b), a // b, a % b])

    @ti.kernel
    def floats(a: ti.f32, b: ti.f32) -> ti.types.vector(2, ti.f32):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b)])

    for a in range(-7, 8):
        for b in (-3, -2, -1, 1, 2, 3):
            q = int(a / b)
            assert list(ints(a, b)) == [q, a - b * q, a // b, a % b], (a, b)
    for a, b in ((7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-0.25, 0.5)):
        got = floats(a, b)
        assert got[0] == pytest.approx(a / b) and got[1] == pytest.approx(math.fmod(a, b))
    # Python scope: Taichi 1.7.4's raw_div of two Python ints is Python's floor division
    # (ti.raw_div(-7, 2) is -4 there), its raw_mod C's remainder
    assert ti.raw_div(-7, 2) == -7 // 2 and ti.raw_mod(-7, 2) == -1 and ti.raw_mod(7, -2) == 1


def test_bit_shr_is_logical_and_sar_arithmetic():
    @ti.kernel
    def shr(a: ti.i32, b: ti.i32) -> ti.types.vector(2, ti.i32):
        return ti.Vector([ti.bit_shr(a, b), a >> b])

    @ti.kernel
    def shr_u(a: ti.u32, b: ti.i32) -> ti.u32:
        return ti.bit_shr(a, b)

    for a in (256, -256, -1, 12345, -2**31):
        for b in range(0, 9):
            logical = ((a & 0xFFFFFFFF) >> b)
            want = logical - 2**32 if logical >= 2**31 else logical
            assert list(shr(a, b)) == [want, a >> b], (a, b)
    assert shr_u(5, 2) == 1 and shr_u(2**32 - 1, 31) == 1


# -- swizzles and slices ------------------------------------------------------------------------

def test_swizzles_read_and_write_in_python_and_kernels():
    v = ti.math.vec3(1, 2, 3)
    assert list(v.zyx) == [3, 2, 1] and list(v.xx) == [1, 1] and list(v.bgr) == [3, 2, 1]
    assert v.s == 1 and list(v.stp) == [1, 2, 3]
    v.rgb += 1
    v.zx = [10, 20]
    assert list(v) == [20, 3, 10]
    w = ti.math.vec4(v.xyz, 5)
    assert list(w.wzyx) == [5, 10, 3, 20]

    @ti.kernel
    def k() -> ti.types.vector(4, ti.f32):
        u = ti.math.vec4(1, 2, 3, 4)
        u.brg += 10            # b, r, g: entries 2, 0, 1
        u.wx = u.xw
        t = ti.math.vec2(u.yy)
        return ti.math.vec4(u.xyz, t.x + t.y)

    u = np.array([1, 2, 3, 4], np.float32)
    u[[2, 0, 1]] += 10
    u[[3, 0]] = u[[0, 3]]
    assert k().to_numpy().tolist() == [u[0], u[1], u[2], u[1] * 2]
    with pytest.raises(ti.FluxionSyntaxError, match="vec2 only has attributes"):
        ti.math.vec2(1, 2).z = 3


def test_matrix_slices_read_and_write():
    @ti.kernel
    def read(i: ti.i32) -> ti.types.vector(7, ti.i32):
        c = ti.Vector([0, 1, 2, 3, 4, 5, 6])
        m = ti.Matrix([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
        a = c[:6:2]
        b = m[1:, :]
        col = m[:, i]
        return ti.Vector([a[0] + a[1] + a[2], b[0, 0], b[1, 2], col[0], col[1], col[2],
                          m[i, 1:].sum()])

    @ti.kernel
    def write(i: ti.i32) -> ti.types.matrix(3, 4, ti.i32):
        m = ti.Matrix([[1, 1, 1, 1] for _ in range(3)])
        m[i, :] = ti.Vector([5, 6, 7, 8])          # a kernel-value row: every entry stored
        m[:, 0] = ti.Vector([-1, -2, -3])
        m[(i + 1) % 3, 1:3] += ti.Vector([10, 20])
        m[:2, 3] -= 100
        return m

    base = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    for i in range(3):
        got = read(i).to_numpy()
        assert got.tolist() == [0 + 2 + 4, 4, 9, *base[:, i].tolist(), base[i, 1:].sum()]
        m = np.ones((3, 4), np.int32)
        m[i, :] = [5, 6, 7, 8]
        m[:, 0] = [-1, -2, -3]
        m[(i + 1) % 3, 1:3] += [10, 20]
        m[:2, 3] -= 100
        assert write(i).to_numpy().tolist() == m.tolist(), i
    v = ti.Vector([1, 2, 3, 4, 5, 6])
    assert list(v[2::3]) == [3, 6]
    assert ti.Matrix([[2, 3], [4, 5]])[:1, 1:].to_numpy().tolist() == [[3]]


# -- structured return values -----------------------------------------------------------------

def test_kernels_return_structs_and_tuples():
    s0 = ti.types.struct(a=ti.math.vec3, b=ti.i16)
    s1 = ti.types.struct(a=ti.f32, b=s0)

    @ti.func
    def make(x) -> s0:
        return s0(a=ti.math.vec3([x, 0.5, 3]), b=65537)   # 65537 wraps to 1 in an i16

    @ti.kernel
    def one(x: ti.f32) -> s1:
        return s1(a=1, b=make(x))

    @ti.kernel
    def pair(x: ti.f32) -> tuple[ti.f32, s0]:
        return x * 2, make(x)

    @ti.kernel
    def typed(x: ti.f32) -> typing.Tuple[ti.i32, ti.math.vec2]:
        return 7, ti.math.vec2(x, -x)

    r = one(100.0)
    assert r.a == 1.0 and list(r.b.a) == pytest.approx([100, 0.5, 3]) and r.b.b == 1
    a, b = pair(1.5)
    assert a == 3.0 and list(b.a) == pytest.approx([1.5, 0.5, 3]) and b.b == 1
    n, v = typed(2.0)
    assert n == 7 and list(v) == [2.0, -2.0]

    other = ti.types.struct(a=ti.math.vec3, b=ti.i32)

    @ti.kernel
    def wrong() -> s0:
        return other(a=ti.math.vec3(1, 2, 3), b=1)

    with pytest.raises(ti.FluxionCompilationError, match="return annotation"):
        wrong()


def test_func_with_scalar_annotation_returning_a_vector_casts_each_entry():
    @ti.func
    def f(x) -> ti.i32:
        return ti.Vector([x, x * 2.5, 3.9])

    @ti.kernel
    def k(x: ti.f32) -> ti.types.vector(3, ti.f32):
        return f(x) * 1.0

    assert list(k(1.5)) == [int(1.5), int(1.5 * 2.5), int(3.9)]


def test_struct_members_named_like_methods():
    @ti.dataclass
    class Foo:
        entries: int
        keys: int
        to_dict: int

    @ti.kernel
    def k() -> int:
        x = Foo(42, 21, 5)
        return x.entries + x.keys + x.to_dict

    assert k() == 68


# -- fields -------------------------------------------------------------------------------------

def test_field_of_vector_and_matrix_types():
    v = ti.field(ti.types.vector(3, ti.f64), shape=(2, 4))
    m = ti.field(dtype=ti.types.matrix(2, 3, ti.i32), shape=5)
    s = ti.field(ti.types.struct(a=ti.f32, b=ti.math.ivec2), shape=3)
    assert v.shape == (2, 4) and v.dtype == ti.f64 and (v.n, v.m) == (3, 1)
    assert m.shape == (5,) and m.dtype == ti.i32 and (m.n, m.m) == (2, 3)

    @ti.kernel
    def fill():
        for i, j in v:
            v[i, j] = ti.Vector([i, j, i * j])
        for i in m:
            m[i] = ti.Matrix([[i, 1, 2], [3, 4, i * 2]])
        for i in s:
            s[i].b = ti.math.ivec2(i, -i)

    fill()
    i, j = np.meshgrid(np.arange(2), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(v.to_numpy(), np.stack([i, j, i * j], -1))
    assert m.to_numpy()[4].tolist() == [[4, 1, 2], [3, 4, 8]]
    assert s.b.to_numpy().tolist() == [[0, 0], [1, -1], [2, -2]]


def test_grad_placed_explicitly_and_fill_in_a_kernel():
    x = ti.field(ti.f32)
    loss = ti.field(ti.f32)
    ti.root.dense(ti.i, 4).place(x, x.grad)
    ti.root.place(loss, loss.grad)

    @ti.kernel
    def init():
        x.fill(1.5)                     # a struct-for inside the kernel

    @ti.kernel
    def compute():
        for i in x:
            loss[None] += x[i] ** 2 * (i + 1)

    init()
    with ti.ad.Tape(loss):
        compute()
    assert loss[None] == pytest.approx(sum(1.5 ** 2 * (i + 1) for i in range(4)))
    np.testing.assert_allclose(x.grad.to_numpy(), [2 * 1.5 * (i + 1) for i in range(4)])


def test_python_scope_integer_writes_wrap_around():
    a = ti.field(ti.i8, shape=2)
    b = ti.field(ti.u8, shape=2)
    v = ti.Vector.field(2, ti.i16, shape=1)
    a[0], a[1] = -128, 200
    b[0], b[1] = -128, 300
    v[0] = [0xFFFF, 65537]
    assert [a[0], a[1], b[0], b[1]] == [-128, 200 - 256, 128, 300 - 256]
    assert list(v[0]) == [-1, 1]
    assert ti.i16(65537) == 1 and ti.u8(-1) == 255


# -- the same programs on taichi ----------------------------------------------------------------

def compat_values(ti):
    out = {}

    @ti.kernel
    def div(a: ti.i32, b: ti.i32) -> ti.types.vector(3, ti.i32):
        return ti.Vector([ti.raw_div(a, b), ti.raw_mod(a, b), ti.bit_shr(a, b & 7)])

    out["div"] = [div(a, b) for a in (-9, -4, 0, 5, 11) for b in (-3, 2, 5)]

    @ti.kernel
    def swz() -> ti.types.vector(4, ti.f32):
        u = ti.math.vec4(1, 2, 3, 4)
        u.brg += 10
        u.wx = u.xw
        return ti.math.vec4(u.zyx, u.y * 2)

    out["swizzle"] = swz()

    @ti.kernel
    def slc(i: ti.i32) -> ti.types.matrix(3, 4, ti.i32):
        m = ti.Matrix([[1, 1, 1, 1] for _ in range(3)])
        m[i, :] = ti.Vector([5, 6, 7, 8])
        m[:, 0] = ti.Vector([-1, -2, -3])
        m[i, 1:3] += ti.Vector([10, 20])
        return m

    out["slice"] = [slc(i) for i in range(3)]

    s0 = ti.types.struct(a=ti.math.vec3, b=ti.i16)

    @ti.func
    def cast_vec(x) -> ti.i32:
        return ti.Vector([x, x * 2.5, 3.9])

    @ti.kernel
    def ret(x: ti.f32) -> s0:
        return s0(a=cast_vec(x) * 1.0, b=65537)

    r = ret(1.5)
    out["struct"] = [r.a, r.b]

    f = ti.field(ti.math.vec2, shape=3)

    @ti.kernel
    def fill_k():
        f.fill(ti.math.vec2(1, 2))

    fill_k()
    out["fill"] = f
    return out


def issue_items(ti):
    """The other programs of issue 15, as the original runs them."""
    out = {}
    S = ti.types.struct(p=ti.math.vec2, m=ti.f32)

    @ti.kernel
    def structs(x: ti.f32) -> ti.f32:
        a = S(p=ti.math.vec2(x, 2), m=3.0)
        b = a                      # a copy
        b.m = 10.0
        c = S(ti.math.vec2(5, 6), 7.0)
        c = a
        a.p.x = 100.0
        t = S(p=b.p * 2, m=b.m)
        t.p += c.p
        return a.m + b.m + c.m + a.p.x + b.p.x + c.p.y + t.p.x + t.p.y

    out["structs"] = structs(1.5)

    @ti.kernel
    def walrus(x: ti.i32) -> ti.i32:
        s = 0
        if (y := x * 2) > 5:
            s = y
        return s + y

    out["walrus"] = [walrus(2), walrus(4)]

    @ti.kernel
    def vec_logic(x: ti.f32) -> ti.types.vector(7, ti.i32):
        v = ti.math.vec3(x, 2, 3)
        w = 0 < v < 2.5
        return ti.Vector([all(v > 0), any(v > 2.5), all(v), any(v < 0), w[0], w[1], w[2]])

    out["vec_logic"] = [vec_logic(1.0), vec_logic(0.0), vec_logic(-4.0)]

    @ti.kernel
    def zero_d(a: ti.types.ndarray()) -> ti.f32:
        a[None] += 1.5
        return a[None]

    arr = np.array(2.0, dtype=np.float32)
    nd = ti.ndarray(ti.f32, shape=())
    nd[None] = 3.0
    out["zero_d"] = [zero_d(arr), float(arr), zero_d(nd), nd[None]]

    x = ti.field(ti.f32)
    ti.root.pointer(ti.ijk, [4]).dense(ti.ijk, 2).place(x)
    x[1, 2, 3] = 1.0
    out["pointer"] = [list(x.shape), x.to_numpy().sum()]
    return out


def test_compat_programs_match_taichi():
    check_against_taichi(compat_values, issue_items)


# -- torch tensors and Python-scope broadcasting ------------------------------------------------

def test_ndarray_autodiff_on_torch_tensors_that_require_grad():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def k(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[0] += x[i] ** 2 * (i + 1)

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = torch.zeros(1, requires_grad=True)
    k(x, y)                                   # writes y, which requires grad
    assert y.detach().item() == pytest.approx(1 + 8 + 27)
    assert x.grad is not None and y.grad is not None     # zero gradients, as the original
    y.grad.fill_(1.0)
    k.grad(x, y)
    assert x.grad.tolist() == pytest.approx([2 * 1 * 1, 2 * 2 * 2, 2 * 3 * 3])


def test_python_scope_vector_ops_with_other_shapes_broadcast():
    a = ti.Vector([6.0, 6.0])
    r = a == [ti.Vector([6.0, 6.0]), ti.Vector([9.0, 9.0])]
    np.testing.assert_array_equal(np.asarray(r.to_numpy(), bool),
                                  np.array([6.0, 6.0]) == np.array([[6.0, 6.0], [9.0, 9.0]]))
    np.testing.assert_array_equal(
        (ti.Matrix([[1, 2], [3, 4]]) * [1, 2]).to_numpy(), np.array([[1, 2], [3, 4]]) * [1, 2])


def test_fields_builder_trees():
    fb = ti.FieldsBuilder()
    x = ti.field(ti.f32, needs_grad=True)
    y = ti.field(ti.i32)
    loss = ti.field(ti.f32)
    fb.dense(ti.i, np.int32(5)).place(x, x.grad)      # needs_grad and an explicit grad
    fb.pointer(ti.j, 4).place(y)
    fb.place(loss, loss.grad)
    tree = fb.finalize()

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i * 1.5
        y[2] = 7

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] ** 2
        for j in y:
            loss[None] += 1000.0

    fill()
    total()
    assert loss[None] == pytest.approx(sum((i * 1.5) ** 2 for i in range(5)) + 1000)
    loss.grad[None] = 1.0
    total.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), [2 * i * 1.5 for i in range(5)])
    tree.destroy()
    with pytest.raises(ti.FluxionRuntimeError):
        tree.destroy()


def ndarray_element_dim(ti):
    # the older annotation of vector and matrix elements (difftaichi's diffmpm3d): the last
    # element_dim dimensions of the array are the element, of whatever size it has
    import numpy as np
    x = ti.Vector.field(3, ti.f32, 4)
    y = ti.field(ti.f32, 4)

    @ti.kernel
    def init(v: ti.types.ndarray(element_dim=1), m: ti.types.ndarray(element_dim=2),
             s: ti.types.ndarray()):
        for i in range(4):
            x[i] = v[i] + m[i] @ ti.Vector([1.0, 2.0, 3.0])
            y[i] = s[i] + v[i].norm_sqr() + m[i][1, 2]

    m = np.arange(36, dtype=np.float32).reshape(4, 3, 3)
    init(np.arange(12, dtype=np.float32).reshape(4, 3), m, np.ones(4, np.float32))
    return {"x": x, "y": y}


def test_ndarray_element_dim_as_the_original_system():
    check_against_taichi(ndarray_element_dim)


def test_loop_unique_is_a_hint_that_changes_no_value():
    """`from taichi.lang.misc import loop_unique` (the original's tests and programs): the
    value passes through; the write it indexes stays exact."""
    from fluxion.lang.misc import loop_unique
    n = 16
    x, y = ti.field(ti.i32), ti.field(ti.i32)
    ti.root.pointer(ti.i, n).place(x)
    ti.root.dense(ti.i, n).place(y)

    @ti.kernel
    def count():
        for i in x:
            y[loop_unique(x[i], covers=[y]) + 1] += 1

    src = {1: 2, 2: 3, 7: 5, 9: 8}
    for i, v in src.items():
        x[i] = v
    count()
    want = np.zeros(n, np.int32)
    for v in src.values():
        want[v + 1] += 1
    np.testing.assert_array_equal(y.to_numpy(), want)
