"""Arrays as kernel arguments: numpy arrays, torch tensors, ti.ndarray; zero copy, dtypes,
element shapes, strides, errors, gradients, and kernels as torch operations."""
import numpy as np
import pytest

import fluxion as ti

DTYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64, ti.f32, ti.f64]


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_numpy_arrays_of_every_dtype_are_written_in_place(dt):
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i] * 2 + 1

    a = (np.arange(50) % 60).astype(dt.np_dtype)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, (a * 2 + 1).astype(dt.np_dtype))


def test_shapes_and_ndims_reuse_one_instance_and_expose_shape():
    @ti.kernel
    def k(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in a:
            out[i, j] = a[i, j] + a.shape[0] * 100 + a.shape[1]

    for shape in [(3, 4), (5, 2), (1, 7)]:
        a = np.random.default_rng(0).random(shape)
        out = np.zeros(shape)
        k(a, out)
        np.testing.assert_allclose(out, a + shape[0] * 100 + shape[1])
    assert len(k.instances) == 1


def test_strided_views_are_handled():
    @ti.kernel
    def k(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in a:
            out[i, j] = a[i, j] * 10

    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    out = np.zeros((8, 6), np.float32)
    k(base.T, out)                       # a transposed view
    np.testing.assert_array_equal(out, base.T * 10)
    out2 = np.zeros((3, 4), np.float32)
    k(base[::2, 1::2], out2)             # a strided slice
    np.testing.assert_array_equal(out2, base[::2, 1::2] * 10)
    big = np.zeros((6, 8), np.float32)
    k(base, big[:, :])                   # writes through a view land in the base array
    np.testing.assert_array_equal(big, base * 10)


def test_vector_and_matrix_elements():
    @ti.kernel
    def k(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1),
          m: ti.types.ndarray(dtype=ti.math.mat2, ndim=1), out: ti.types.ndarray()):
        for i in p:
            out[i] = p[i].norm() + (m[i] @ ti.Vector([1.0, 2.0])).sum()
            p[i] = p[i] * 2

    rng = np.random.default_rng(1)
    p = rng.random((5, 3)).astype(np.float32)
    m = rng.random((5, 2, 2)).astype(np.float32)
    out = np.zeros(5, np.float32)
    p0 = p.copy()
    k(p, m, out)
    ref = np.linalg.norm(p0, axis=1) + (m @ np.array([1.0, 2.0])).sum(1)
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    np.testing.assert_allclose(p, 2 * p0)


def test_ti_ndarray_api_and_struct_for():
    a = ti.ndarray(ti.f32, (4, 3))
    a.fill(1.5)
    a[2, 1] = 7
    assert a[2, 1] == 7 and a.shape == (4, 3) and a.dtype == ti.f32
    v = ti.Vector.ndarray(2, ti.i32, 5)
    v.from_numpy(np.arange(10, dtype=np.int32).reshape(5, 2))

    @ti.kernel
    def k(x: ti.types.ndarray(), y: ti.types.ndarray(dtype=ti.math.ivec2, ndim=1)) -> ti.f32:
        s = 0.0
        for I in ti.grouped(x):
            s += x[I]
        for i in y:
            y[i] = y[i] + 1
        return s

    assert k(a, v) == pytest.approx(1.5 * 11 + 7)
    np.testing.assert_array_equal(v.to_numpy(), np.arange(10).reshape(5, 2) + 1)


def test_argument_errors_name_the_argument():
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.f32, ndim=2)):
        for i, j in a:
            a[i, j] = 0

    with pytest.raises(ti.FluxionRuntimeTypeError, match="'a'.*f32.*f64"):
        k(np.zeros((2, 2)))
    with pytest.raises(ti.FluxionRuntimeTypeError, match="'a' expects 2 dimensions"):
        k(np.zeros(3, np.float32))
    with pytest.raises(ti.FluxionRuntimeTypeError, match="'a'"):
        k([1.0, 2.0])

    @ti.kernel
    def v(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1)):
        for i in p:
            p[i] = p[i] * 0

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"element.*\(3,\)"):
        v(np.zeros((4, 2), np.float32))


def test_kernel_grad_with_ti_ndarrays_against_finite_differences():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n = 6
    x = ti.ndarray(ti.f64, n, needs_grad=True)
    y = ti.ndarray(ti.f64, n, needs_grad=True)

    @ti.kernel
    def f(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = ti.sin(x[i]) * x[(i + 1) % n]

    xs = np.random.default_rng(3).uniform(-1, 1, n)
    x.from_numpy(xs)
    f(x, y)
    y.grad.fill(1.0)
    f.grad(x, y)

    def total(v):
        return np.sum(np.sin(v) * np.roll(v, -1))

    h = 1e-6
    fd = np.array([(total(xs + h * e) - total(xs - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(x.grad.to_numpy(), fd, rtol=1e-7)


# -- torch -----------------------------------------------------------------------------------
def test_torch_tensors_zero_copy_and_dtypes():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i, j in a:
            b[i, j] = a[i, j] + i * 10 + j

    for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8):
        a = torch.ones(3, 4, dtype=dt)
        b = torch.zeros(3, 4, dtype=dt)
        k(a, b)
        ref = a + torch.arange(3)[:, None].to(dt) * 10 + torch.arange(4)[None, :].to(dt)
        assert torch.equal(b, ref)
    t = torch.zeros(5, 4)
    k(torch.ones(4, 5).t(), t)           # a transposed (non-contiguous) tensor
    assert torch.equal(t, torch.ones(5, 4) + torch.arange(5)[:, None] * 10 + torch.arange(4))


def test_writing_a_tensor_that_requires_grad_works_reading_too():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i]

    a = torch.ones(4, requires_grad=True)
    b = torch.zeros(4, requires_grad=True)
    k(torch.ones(4), b)                 # as in the original; torch sees a new version of b
    assert torch.equal(b.detach(), torch.ones(4)) and b._version > 0
    out = torch.zeros(4)
    k(a, out)                           # reading one is fine
    assert torch.equal(out, torch.ones(4))


def _torch_op():
    torch = pytest.importorskip("torch")

    @ti.kernel
    def f(x: ti.types.ndarray(), w: ti.types.ndarray(), s: ti.f64, y: ti.types.ndarray()):
        for i in x:
            y[i] = ti.sin(x[i]) * w[i] * s + x[i] ** 2 * w[(i + 1) % x.shape[0]]

    return torch, ti.ad.torch_function(f, outputs={"y": lambda x, w, s: torch.empty_like(x)})


def test_torch_function_passes_gradcheck_and_repeats_backward():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    torch, op = _torch_op()
    x = torch.randn(7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: op(a, b, 1.7), (x, w))
    y = op(x, w, 0.5)
    loss = (y ** 2).sum()
    loss.backward(retain_graph=True)
    g1 = x.grad.clone()
    x.grad = None
    loss.backward()
    assert torch.allclose(g1, x.grad)


def test_torch_function_trains_in_a_module_and_under_torch_compile():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    torch, op = _torch_op()

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(8, dtype=torch.float64))

        def forward(self, x):
            return ((op(x, self.w, 1.0) - 1.0) ** 2).mean()

    torch.manual_seed(0)
    x = torch.rand(8, dtype=torch.float64) + 0.5
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]

    compiled = torch.compile(model, backend="eager")
    model.w.grad = None
    eager = model(x)
    eager.backward()
    g_eager = model.w.grad.clone()
    model.w.grad = None
    comp = compiled(x)
    comp.backward()
    assert torch.allclose(eager, comp) and torch.allclose(g_eager, model.w.grad)


def test_dlpack_objects_are_accepted():
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i in a:
            a[i] = i * 3

    a = np.zeros(6, np.int32)

    class Wrapped:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    k(Wrapped(a))
    np.testing.assert_array_equal(a, np.arange(6) * 3)
