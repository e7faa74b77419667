"""Torch tensors as ndarray kernel arguments, and kernels as differentiable torch operations.

Zero copy, every dtype, vector and matrix elements, non-contiguous tensors, signature reuse,
argument errors, kernel.grad into `tensor.grad`, and `ti.ad.torch_function`: gradcheck in
float64, training inside an nn.Module, repeated backward, torch.compile. Every expected value
is computed here with torch or numpy.

The runtime is initialised and reset around each test by tests/conftest.py.
"""
import numpy as np
import pytest

import fluxion as ti

torch = pytest.importorskip("torch")

# (fluxion dtype, numpy dtype): torch's unsigned 16/32/64-bit tensors are made from numpy
DTYPES = [(ti.i8, np.int8), (ti.i16, np.int16), (ti.i32, np.int32), (ti.i64, np.int64),
          (ti.u8, np.uint8), (ti.u16, np.uint16), (ti.u32, np.uint32), (ti.u64, np.uint64),
          (ti.f32, np.float32), (ti.f64, np.float64)]


def _f64():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)


# -- zero copy ---------------------------------------------------------------------------------
def test_kernel_writes_land_in_the_tensor_its_views_and_shared_numpy():
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    t = torch.full((4, 6), -1.0)
    shared = t.numpy()                     # the same memory seen from numpy
    ptr = t.data_ptr()
    k(t)
    ref = torch.arange(4)[:, None] * 10.0 + torch.arange(6)
    assert torch.equal(t, ref) and t.data_ptr() == ptr
    np.testing.assert_array_equal(shared, ref.numpy())

    t.fill_(-1)
    k(t[1:3, 2:5])                         # a view: writes go to the base tensor
    expect = torch.full((4, 6), -1.0)
    expect[1:3, 2:5] = torch.arange(2)[:, None] * 10.0 + torch.arange(3)
    assert torch.equal(t, expect)


def test_reading_a_tensor_requiring_grad_is_allowed_and_leaves_its_values_alone():
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i] * 2

    a = torch.arange(5.0, requires_grad=True)
    b = torch.zeros(5)
    k(a, b)
    assert torch.equal(b, torch.arange(5.0) * 2)
    assert torch.equal(a.detach(), torch.arange(5.0))
    # as the original, a launch gives a tensor that requires grad a zero .grad (where
    # `k.grad(a, b)` will accumulate); torch's own backward adds to it as usual
    assert torch.equal(a.grad, torch.zeros(5))
    (a * 3).sum().backward()
    assert torch.equal(a.grad, torch.full((5,), 3.0))


# -- dtypes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt,npdt", DTYPES, ids=[str(d) for d, _ in DTYPES])
def test_every_dtype(dt, npdt):
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=dt), copy: ti.types.ndarray(dtype=dt),
          b: ti.types.ndarray(dtype=dt)):
        for i, j in a:
            copy[i, j] = a[i, j]
            b[i, j] = a[i, j] * 3 + 1

    rng = np.random.default_rng(12)
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        an = rng.integers(info.min, info.max, size=(4, 7), dtype=npdt, endpoint=True)
        an[0, :3] = [info.min, info.max, info.max // 2 + 1]
    else:
        an = rng.uniform(-1e3, 1e3, size=(4, 7)).astype(npdt)
    a = torch.from_numpy(an.copy())
    copy, b = torch.zeros_like(a), torch.zeros_like(a)
    k(a, copy, b)
    with np.errstate(over="ignore"):
        ref = an * npdt(3) + npdt(1)
    np.testing.assert_array_equal(copy.numpy(), an)
    if dt.is_float:
        np.testing.assert_allclose(b.numpy(), ref, rtol=1e-6 if dt == ti.f32 else 1e-14)
    else:
        np.testing.assert_array_equal(b.numpy(), ref)


def test_bool_and_half_tensors():
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.u8), b: ti.types.ndarray(dtype=ti.i32)):
        for i in a:
            b[i] = a[i] * 2

    a = torch.tensor([True, False, True])
    b = torch.zeros(3, dtype=torch.int32)
    k(a, b)
    assert b.tolist() == [2, 0, 2]


# -- vector and matrix elements ------------------------------------------------------------------
def test_vector_and_matrix_elements_over_tensors():
    @ti.kernel
    def k(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=2),
          m: ti.types.ndarray(dtype=ti.math.mat3, ndim=1),
          out: ti.types.ndarray(dtype=ti.math.vec3, ndim=2)):
        for i, j in p:
            out[i, j] = m[j] @ p[i, j] + p[i, j].norm_sqr()

    torch.manual_seed(0)
    p = torch.randn(3, 5, 3)
    m = torch.randn(5, 3, 3)
    out = torch.zeros(3, 5, 3)
    k(p, m, out)
    ref = torch.einsum("jab,ijb->ija", m, p) + (p * p).sum(-1, keepdim=True)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_uint8_pixel_vectors():
    @ti.kernel
    def k(img: ti.types.ndarray(dtype=ti.types.vector(3, ti.u8), ndim=2),
          tile: ti.types.ndarray(dtype=ti.types.vector(3, ti.u8), ndim=2)):
        for r, c in img:
            img[r, c] = tile[r % tile.shape[0], c % tile.shape[1]]

    img = torch.zeros(7, 11, 3, dtype=torch.uint8)
    tile = torch.randint(0, 256, (3, 4, 3), dtype=torch.uint8)
    k(img, tile)
    assert torch.equal(img, tile.repeat(3, 3, 1)[:7, :11])


class _DLPackOnly:
    """An array-like that only speaks the DLPack protocol."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_dlpack_objects_are_used_without_a_copy():
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=2), b: ti.types.ndarray(dtype=ti.i64, ndim=1)):
        for i, j in a:
            a[i, j] = a[i, j] * 2 + b[j]

    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.tensor([1, 2, 3, 4])
    k(_DLPackOnly(t), _DLPackOnly(b))
    assert torch.equal(t, torch.arange(12.0).reshape(3, 4) * 2 + torch.tensor([1., 2, 3, 4]))


# -- non-contiguous tensors, instances -------------------------------------------------------------
def test_non_contiguous_tensors():
    @ti.kernel
    def k(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in a:
            out[i, j] = a[i, j] * 10 + i - j

    base = torch.arange(60, dtype=torch.float64).reshape(6, 10)

    def ij(s):
        return torch.arange(s[0])[:, None] - torch.arange(s[1])

    views = {"t": base.t(), "step": base[::2, 1::3], "column block": base[:, 3:5],
             "expand": torch.arange(5.0, dtype=torch.float64).expand(3, 5),
             "permute 3d slice": base.reshape(2, 3, 10).permute(2, 0, 1)[:, 1, :]}
    for name, v in views.items():
        assert not v.is_contiguous(), name
        out = torch.zeros(v.shape, dtype=torch.float64)
        k(v, out)
        assert torch.equal(out, v * 10 + ij(v.shape)), name
    out_base = torch.zeros(10, 6, dtype=torch.float64)
    k(base, out_base.t())                  # a strided output
    assert torch.equal(out_base.t(), base * 10 + ij(base.shape))


def test_permuted_three_dimensional_tensor():
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=3), out: ti.types.ndarray(ndim=3)):
        for i, j, l in a:
            out[i, j, l] = a[i, j, l] + i * 100 + j * 10 + l

    a = torch.rand(2, 3, 4).permute(2, 0, 1)          # (4, 2, 3), non-contiguous
    out = torch.zeros(4, 2, 3)
    k(a, out)
    idx = torch.arange(4)[:, None, None] * 100 + torch.arange(2)[:, None] * 10 + torch.arange(3)
    assert torch.allclose(out, a + idx)


def test_tensors_of_new_shapes_reuse_the_instance():
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i, j in a:
            b[i, j] = a[i, j] + a.shape[1]

    for shape in [(2, 3), (8, 8), (1, 30)]:
        a = torch.rand(shape)
        b = torch.zeros(shape)
        k(a, b)
        assert torch.allclose(b, a + shape[1])
    assert len(k.instances) == 1
    k(torch.rand(3, 3, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64))
    assert len(k.instances) == 2


# -- errors ----------------------------------------------------------------------------------------
def test_argument_errors_name_the_argument():
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.f32, ndim=2),
          v: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)):
        for i, j in a:
            a[i, j] = v[i][j % 2]

    good_a, good_v = torch.zeros(2, 2), torch.ones(2, 2)
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*f32.*f64"):
        k(torch.zeros(2, 2, dtype=torch.float64), good_v)
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*f32.*i64"):
        k(torch.zeros(2, 2, dtype=torch.int64), good_v)
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a' expects 2 dimensions"):
        k(torch.zeros(4), good_v)
    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'v'.*element.*\(2,\)"):
        k(good_a, torch.ones(2, 3))
    # a tensor for a vector element type keeps its own scalar type, as in the original
    k(good_a, torch.ones(2, 2, dtype=torch.float64))
    k(good_a, good_v)
    assert torch.equal(good_a, torch.ones(2, 2))


def test_unsupported_torch_dtype_names_the_argument():
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i in a:
            a[i] = 0

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'"):
        k(torch.zeros(3, dtype=torch.complex64))


def test_writing_a_tensor_that_requires_grad_bumps_its_version():
    """As in the original, a kernel may write a tensor that requires grad (its ndarray
    autodiff runs `k(x, y); k.grad(x, y)` on such tensors). Torch does not see the write, so
    its version counter moves on: a graph that saved the old values refuses to backpropagate
    rather than silently using the new ones."""
    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i]

    b = torch.zeros(4, requires_grad=True)
    loss = (b * b).sum()                  # saves b
    v = b._version
    k(torch.ones(4), b)
    assert torch.equal(b.detach(), torch.ones(4)) and b._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    c = torch.zeros(4, requires_grad=True)
    k(torch.ones(4), c)                   # no graph saved c: its gradient is right
    (c * 3).sum().backward()
    assert torch.equal(c.grad, torch.full((4,), 3.0))


def test_a_tensor_on_another_device_is_rejected():
    # the 'meta' device exists without a GPU: no memory, so no pointer to pass
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i in a:
            a[i] = 1

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*device 'meta'"):
        k(torch.zeros(3, device="meta"))


@pytest.mark.cpu_only      # (the [cuda] run's session is a CUDA one, which takes the tensor)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_tensor_in_a_cpu_session_is_rejected():
    @ti.kernel
    def k(a: ti.types.ndarray()):
        for i in a:
            a[i] = 1

    with pytest.raises(ti.FluxionRuntimeTypeError, match=r"'a'.*cuda"):
        k(torch.zeros(3, device="cuda"))


# -- kernel.grad with tensors ------------------------------------------------------------------
def test_kernel_grad_fills_tensor_grads_and_accumulates():
    _f64()

    @ti.kernel
    def f(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = x[i] ** 3 + ti.sin(x[i])

    x = torch.linspace(-1, 1, 6, dtype=torch.float64, requires_grad=True)
    y = torch.zeros(6, dtype=torch.float64)
    with torch.no_grad():
        f(x.detach(), y)
    assert torch.allclose(y, x.detach() ** 3 + torch.sin(x.detach()))
    y.grad = torch.ones(6, dtype=torch.float64)
    f.grad(x, y)                               # x.grad is created as zeros, then accumulated
    d = 3 * x.detach() ** 2 + torch.cos(x.detach())
    assert torch.allclose(x.grad, d)
    # the adjoint of the store to y[i] consumes y.grad[i] (as in the original system)
    assert torch.equal(y.grad, torch.zeros(6, dtype=torch.float64))
    y.grad.fill_(1.0)
    f.grad(x, y)
    assert torch.allclose(x.grad, 2 * d)


# -- the autograd bridge ---------------------------------------------------------------------------
def _op():
    @ti.kernel
    def f(x: ti.types.ndarray(), w: ti.types.ndarray(ndim=2), s: ti.f64,
          y: ti.types.ndarray()):
        for i in x:
            acc = 0.0
            for j in range(w.shape[1]):
                acc += w[i, j] * ti.tanh(x[(i + j) % x.shape[0]])
            y[i] = s * acc + x[i] ** 2

    return ti.ad.torch_function(f, outputs={"y": lambda x, w, s: torch.empty_like(x)})


def _op_ref(x, w, s):
    n, m = w.shape
    idx = (torch.arange(n)[:, None] + torch.arange(m)) % n
    return s * (w * torch.tanh(x[idx])).sum(1) + x ** 2


def test_torch_function_forward_matches_torch():
    _f64()
    op = _op()
    torch.manual_seed(1)
    x, w = torch.randn(6, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    assert torch.allclose(op(x, w, 0.7), _op_ref(x, w, 0.7))
    assert [p for p in __import__("inspect").signature(op).parameters] == ["x", "w", "s"]


def test_torch_function_gradcheck_with_several_inputs_and_a_scalar():
    _f64()
    op = _op()
    torch.manual_seed(2)
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, w, 1.7))
    assert torch.autograd.gradcheck(lambda w: op(x.detach(), w, -0.3), (w,))
    # and against torch's own autograd of the reference
    y = op(x, w, 0.9)
    g = torch.randn(6, dtype=torch.float64)
    gx, gw = torch.autograd.grad(y, (x, w), g)
    rx, rw = torch.autograd.grad(_op_ref(x, w, 0.9), (x, w), g)
    assert torch.allclose(gx, rx) and torch.allclose(gw, rw)


def test_torch_function_with_transposed_inputs():
    _f64()
    op = _op()
    torch.manual_seed(3)
    wt = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    y = op(x, wt.t(), 1.3)                 # a non-contiguous (but dense) input
    ref = _op_ref(x, wt.t(), 1.3)
    assert torch.allclose(y, ref)
    g = torch.randn(6, dtype=torch.float64)
    gx, gw = torch.autograd.grad(y, (x, wt), g)
    rx, rw = torch.autograd.grad(ref, (x, wt), g)
    assert torch.allclose(gx, rx) and torch.allclose(gw, rw)


def test_torch_function_with_step_sliced_inputs():
    _f64()
    op = _op()
    torch.manual_seed(3)
    w = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(12, dtype=torch.float64, requires_grad=True)
    y = op(x[::2], w, 1.3)
    ref = _op_ref(x[::2], w, 1.3)
    assert torch.allclose(y, ref)
    g = torch.randn(6, dtype=torch.float64)
    gx, gw = torch.autograd.grad(y, (x, w), g)
    rx, rw = torch.autograd.grad(ref, (x, w), g)
    assert torch.allclose(gx, rx) and torch.allclose(gw, rw)


def _square_kernel():
    @ti.kernel
    def sq(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for I in ti.grouped(x):
            y[I] = x[I] ** 2

    return sq


@pytest.mark.parametrize("view", ["step", "column", "block", "expand"])
def test_torch_function_backward_with_non_dense_inputs(view):
    _f64()
    op = ti.ad.torch_function(_square_kernel(),
                              outputs={"y": lambda x: torch.empty(x.shape, dtype=x.dtype)})
    base = torch.arange(1.0, 25.0, dtype=torch.float64)
    if view == "step":
        base.requires_grad_()
        x, make = base, lambda b: b[1::3]
    elif view == "column":
        base = base.reshape(6, 4).requires_grad_()
        x, make = base, lambda b: b[:, 2]
    elif view == "block":
        base = base.reshape(6, 4).requires_grad_()
        x, make = base, lambda b: b[::2, 1::2]
    else:
        x = torch.tensor([1.5, -2.0], dtype=torch.float64, requires_grad=True)
        make = lambda b: b[:, None].expand(2, 5)
    v = make(x)
    assert not v.is_contiguous()
    seed = torch.linspace(-1, 2, v.numel(), dtype=torch.float64).reshape(v.shape)
    y = op(v)
    assert torch.equal(y, v.detach() ** 2)
    (y * seed).sum().backward()
    # analytic: d(sum(seed * v**2))/dv = 2 * seed * v, scattered (summed) back into x
    dv = 2 * seed * v.detach()
    want = dv.sum(1) if view == "expand" else torch.zeros_like(x)
    if view != "expand":
        make(want).copy_(dv)
    assert torch.allclose(x.grad, want)


def test_kernel_grad_fills_the_grad_of_a_strided_leaf_in_place_of_its_elements():
    _f64()
    sq = _square_kernel()
    storage = torch.arange(12.0, dtype=torch.float64)
    x = storage[::3].detach().requires_grad_()         # a non-dense leaf: stride 3
    y = torch.zeros(4, dtype=torch.float64)
    seed = torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=torch.float64)
    y.grad = seed.clone()
    want = 2 * x.detach() * seed
    sq.grad(x, y)                                      # x.grad is None: created
    assert torch.allclose(x.grad, want)
    assert torch.equal(storage, torch.arange(12.0, dtype=torch.float64))   # data untouched
    y.grad.copy_(seed)          # the store's adjoint consumed it
    sq.grad(x, y)
    assert torch.allclose(x.grad, 2 * want)
    # a .grad in another layout (torch's own backward makes it contiguous) is accumulated into
    x.grad = None
    (x ** 3).sum().backward()
    assert x.grad.is_contiguous()
    y.grad.copy_(seed)
    sq.grad(x, y)
    assert torch.allclose(x.grad, 3 * x.detach() ** 2 + want)


def test_kernel_grad_with_a_transposed_leaf_and_grads_in_other_layouts():
    _f64()
    sq = _square_kernel()
    torch.manual_seed(8)
    x = torch.randn(4, 3, dtype=torch.float64).t().requires_grad_()   # dense, transposed
    x.grad = torch.full((3, 4), 0.25, dtype=torch.float64)            # contiguous grad
    ybuf = torch.zeros(3, 8, dtype=torch.float64)
    y = ybuf[:, ::2]                                                   # a strided output
    y.grad = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)    # seed, contiguous
    sq.grad(x, y)
    assert torch.allclose(x.grad, 0.25 + 2 * x.detach() * torch.arange(12.0).reshape(3, 4))


def test_kernel_grad_refuses_the_grad_of_an_overlapping_leaf():
    _f64()
    sq = _square_kernel()
    x = torch.tensor([2.0], dtype=torch.float64).expand(4).detach().requires_grad_()
    y = torch.zeros(4, dtype=torch.float64)
    y.grad = torch.ones(4, dtype=torch.float64)
    with pytest.raises(ti.FluxionTypeError, match="overlap"):
        sq.grad(x, y)
    assert x.grad is None


def test_torch_function_with_a_reversed_numpy_input():
    _f64()

    @ti.kernel
    def f(x: ti.types.ndarray(), c: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = c[i] * x[i] ** 2

    op = ti.ad.torch_function(f, outputs={"y": lambda x, c: torch.empty_like(x)})
    n = 1 << 16
    c = np.linspace(0.0, 1.0, n)[::-1]                 # negative strides, no gradient
    x = torch.linspace(-1, 1, n, dtype=torch.float64, requires_grad=True)
    cr = torch.from_numpy(c.copy())
    y = op(x, c)
    assert torch.allclose(y, cr * x.detach() ** 2)
    y.sum().backward()
    assert torch.allclose(x.grad, 2 * cr * x.detach())


def test_passing_a_non_leaf_tensor_gives_no_warning():
    import warnings

    @ti.kernel
    def k(a: ti.types.ndarray(), b: ti.types.ndarray()):
        for i in a:
            b[i] = a[i]

    x = torch.arange(4.0, requires_grad=True)
    b = torch.zeros(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(x * 2, b)
    assert torch.equal(b, torch.arange(4.0) * 2)


def test_torch_function_with_two_outputs():
    _f64()

    @ti.kernel
    def polar(x: ti.types.ndarray(), y: ti.types.ndarray(), r: ti.types.ndarray(),
              a: ti.types.ndarray()):
        for i in x:
            r[i] = ti.sqrt(x[i] ** 2 + y[i] ** 2)
            a[i] = ti.atan2(y[i], x[i])

    op = ti.ad.torch_function(polar, outputs={"r": lambda x, y: torch.empty_like(x),
                                              "a": lambda x, y: torch.empty_like(x)})
    torch.manual_seed(4)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, dtype=torch.float64, requires_grad=True)
    r, a = op(x, y)
    assert torch.allclose(r, torch.hypot(x, y)) and torch.allclose(a, torch.atan2(y, x))
    assert torch.autograd.gradcheck(op, (x, y))
    # only one output used: the other's gradient is zero
    gx, = torch.autograd.grad(op(x, y)[1].sum(), (x,))
    rx, = torch.autograd.grad(torch.atan2(y, x).sum(), (x,))
    assert torch.allclose(gx, rx)


def test_inputs_without_requires_grad_get_no_gradient():
    _f64()
    op = _op()
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 2, dtype=torch.float64)
    op(x, w, 1.0).sum().backward()
    assert x.grad is not None and w.grad is None


def test_repeated_backward_with_retain_graph_gives_the_same_grads():
    _f64()
    op = _op()
    torch.manual_seed(5)
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    loss = (op(x, w, 0.5) ** 2).sum()
    loss.backward(retain_graph=True)
    g1 = (x.grad.clone(), w.grad.clone())
    x.grad, w.grad = None, None
    loss.backward(retain_graph=True)
    assert torch.equal(g1[0], x.grad) and torch.equal(g1[1], w.grad)
    loss.backward()                            # a third time accumulates
    assert torch.allclose(x.grad, 2 * g1[0]) and torch.allclose(w.grad, 2 * g1[1])


class _Model(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op
        self.w = torch.nn.Parameter(torch.full((8, 3), 0.1, dtype=torch.float64))
        self.lin = torch.nn.Linear(8, 8, dtype=torch.float64)

    def forward(self, x):
        return self.op(self.lin(x), self.w, 1.5)


def test_training_in_an_nn_module_reduces_the_loss():
    _f64()
    torch.manual_seed(6)
    model = _Model(_op())
    x = torch.randn(8, dtype=torch.float64)
    target = torch.randn(8, dtype=torch.float64)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model.w.grad is not None and model.lin.weight.grad is not None
    assert losses[-1] < 0.3 * losses[0]


def test_torch_compile_gives_the_same_value_and_gradient():
    _f64()
    torch.manual_seed(7)
    model = _Model(_op())
    x = torch.randn(8, dtype=torch.float64)
    eager = model(x).sum()
    eager.backward()
    g_eager = model.w.grad.clone()
    model.zero_grad()
    compiled = torch.compile(model, backend="eager")
    comp = compiled(x).sum()
    comp.backward()
    assert torch.allclose(eager, comp) and torch.allclose(g_eager, model.w.grad)


def test_torch_function_does_not_import_dynamo(tmp_path):
    # torch.compiler.disable imports torch._dynamo (seconds): only tracing needs it
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (
        "import sys, torch, fluxion as ti\n"
        "ti.init(arch=ti.cpu)\n"
        "@ti.kernel\n"
        "def sq(a: ti.types.ndarray(), out: ti.types.ndarray()):\n"
        "    for i in a:\n"
        "        out[i] = a[i] ** 2\n"
        "op = ti.ad.torch_function(sq, outputs={'out': lambda a: torch.empty_like(a)})\n"
        "x = torch.rand(5, requires_grad=True)\n"
        "op(x).sum().backward()\n"
        "assert torch.allclose(x.grad, 2 * x)\n"
        "print('dynamo' if 'torch._dynamo' in sys.modules else 'no dynamo')\n")
    path = str(tmp_path / "no_dynamo.py")
    with open(path, "w") as f:
        f.write(code)
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.path.join(root, "src")))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "no dynamo"
