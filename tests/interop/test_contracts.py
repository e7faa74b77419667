"""Interop contracts not covered by test_ndarray.py / test_torch.py / test_arrays.py.

Fields' to_numpy/from_numpy/to_torch/from_torch for scalar, vector and matrix fields;
`ti.sync()`; every dtype through `ti.ndarray`; one instance shared by numpy arrays, torch
tensors and ti.ndarrays of one signature; errors naming both the kernel and the argument
(dtype, ndim, element shape, device, a written read-only or overlapping array); the autograd bridge over vector elements (gradcheck) and
under a real `torch.compile` (inductor) and `aot_eager`; the seed examples (`pytorch_pad`,
`rwkv_conv`) against PyTorch built here; and fluxion without torch installed.

Torch tests skip without torch (pytest.importorskip in each). Every expected value is
computed here with numpy or torch.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion as ti

DTYPES = [ti.i8, ti.i16, ti.i32, ti.i64, ti.u8, ti.u16, ti.u32, ti.u64, ti.f32, ti.f64]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")  # fluxion itself (a src/ layout)


def _torch():
    return pytest.importorskip("torch")


def _f64():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def _values(npdt, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(npdt, np.integer):
        info = np.iinfo(npdt)
        v = rng.integers(info.min, info.max, size=shape, dtype=npdt, endpoint=True)
        v.reshape(-1)[:2] = [info.min, info.max]
        return v
    return rng.uniform(-1e3, 1e3, size=shape).astype(npdt)


# -- fields ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_scalar_field_numpy_and_torch_round_trips(dt):
    torch = _torch()
    f = ti.field(dt, shape=(3, 5))
    vals = _values(dt.np_dtype, (3, 5), seed=1)
    f.from_numpy(vals)
    out = f.to_numpy()
    assert out.dtype == dt.np_dtype and out.shape == (3, 5)
    np.testing.assert_array_equal(out, vals)
    t = f.to_torch()
    assert isinstance(t, torch.Tensor) and tuple(t.shape) == (3, 5)
    np.testing.assert_array_equal(t.numpy(), vals)
    t.zero_()                                     # a copy: the field keeps its values
    np.testing.assert_array_equal(f.to_numpy(), vals)
    back = _values(dt.np_dtype, (3, 5), seed=2)
    f.from_torch(torch.from_numpy(back))
    np.testing.assert_array_equal(f.to_numpy(), back)
    assert f[2, 4] == back[2, 4]


def test_vector_and_matrix_fields_round_trip_with_element_dimensions_last():
    torch = _torch()
    v = ti.Vector.field(3, ti.f32, shape=(4, 2))
    m = ti.Matrix.field(2, 3, ti.f64, shape=5)
    vv = np.random.default_rng(3).random((4, 2, 3)).astype(np.float32)
    mm = np.random.default_rng(4).random((5, 2, 3))
    v.from_numpy(vv)
    m.from_torch(torch.from_numpy(mm))
    np.testing.assert_array_equal(v.to_numpy(), vv)
    np.testing.assert_array_equal(m.to_numpy(), mm)
    tv, tm = v.to_torch(), m.to_torch(device="cpu")
    assert tv.dtype == torch.float32 and tuple(tv.shape) == (4, 2, 3)
    assert tm.dtype == torch.float64 and tuple(tm.shape) == (5, 2, 3)
    assert torch.equal(tv, torch.from_numpy(vv)) and torch.equal(tm, torch.from_numpy(mm))
    np.testing.assert_array_equal(v[3, 1].to_numpy(), vv[3, 1])
    np.testing.assert_array_equal(m[2].to_numpy(), mm[2])

    # what a kernel writes is what to_torch/to_numpy read
    @ti.kernel
    def k():
        for i, j in v:
            v[i, j] = v[i, j] * 2 + ti.Vector([i, j, 0.0])
        for i in m:
            m[i] = m[i].transpose().transpose() + i

    k()
    ref_v = vv * 2 + np.stack(list(np.meshgrid(np.arange(4), np.arange(2), indexing="ij")) +
                              [np.zeros((4, 2))], -1)
    np.testing.assert_allclose(v.to_torch().numpy(), ref_v, rtol=1e-6)
    np.testing.assert_allclose(m.to_torch().numpy(), mm + np.arange(5)[:, None, None])


def test_from_torch_takes_strided_and_grad_tracking_tensors():
    torch = _torch()
    f = ti.field(ti.f32, shape=(4, 3))
    src = torch.arange(12.0).reshape(3, 4)
    f.from_torch(src.t())                          # non-contiguous
    np.testing.assert_array_equal(f.to_numpy(), src.t().numpy())
    g = torch.ones(4, 3, requires_grad=True) * 2  # tracks grad (a non-leaf)
    f.from_torch(g)
    np.testing.assert_array_equal(f.to_numpy(), np.full((4, 3), 2.0, np.float32))
    v = ti.Vector.field(2, ti.i32, shape=3)
    v.from_torch(torch.tensor([[1, 2], [3, 4], [5, 6]], dtype=torch.int32))
    assert v.to_torch().tolist() == [[1, 2], [3, 4], [5, 6]]


def test_field_shape_mismatch_is_an_error():
    f = ti.Vector.field(3, ti.f32, shape=4)
    with pytest.raises(ValueError, match="shape"):
        f.from_numpy(np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="shape"):
        f.from_numpy(np.zeros((3, 3), np.float32))


def test_sync_after_launches():
    x = ti.field(ti.i32, shape=16)

    @ti.kernel
    def fill(a: ti.types.ndarray()):
        for i in x:
            x[i] = i * i
            a[i] = i + 1

    a = np.zeros(16, np.int32)
    fill(a)
    assert ti.sync() is None
    np.testing.assert_array_equal(x.to_numpy(), np.arange(16) ** 2)
    np.testing.assert_array_equal(a, np.arange(16) + 1)
    ti.sync()                                    # idempotent


# -- ti.ndarray of every dtype, shared instances ---------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_ti_ndarray_of_every_dtype_is_written_in_place(dt):
    a = ti.ndarray(dt, (3, 4))
    vals = _values(dt.np_dtype, (3, 4), seed=5)
    a.from_numpy(vals)
    view = np.asarray(a)                         # shares the ndarray's memory

    @ti.kernel
    def k(a: ti.types.ndarray(dtype=dt, ndim=2)):
        for i, j in a:
            a[i, j] = a[i, j] * 3 + (i * 4 + j)

    k(a)
    with np.errstate(over="ignore"):
        ref = vals * np.dtype(dt.np_dtype).type(3) + np.arange(12).reshape(3, 4).astype(dt.np_dtype)
    if dt.is_float:
        np.testing.assert_allclose(a.to_numpy(), ref, rtol=1e-6)
    else:
        np.testing.assert_array_equal(a.to_numpy(), ref)
    np.testing.assert_array_equal(view, a.to_numpy())
    assert a.to_numpy().dtype == dt.np_dtype


def test_numpy_torch_and_ti_ndarray_of_one_signature_share_an_instance():
    torch = _torch()

    @ti.kernel
    def k(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=2)):
        for i, j in p:
            p[i, j] = p[i, j] * 2 + ti.Vector([i, j, p.shape[1]])

    def ref(a):
        n, m = a.shape[:2]
        idx = np.stack(list(np.meshgrid(np.arange(n), np.arange(m), indexing="ij"))
                       + [np.full((n, m), m)], -1)
        return a * 2 + idx

    a = np.random.default_rng(7).random((2, 5, 3)).astype(np.float32)
    a0 = a.copy()
    k(a)
    np.testing.assert_allclose(a, ref(a0), rtol=1e-6)
    t = torch.rand(4, 1, 3)
    t0 = t.numpy().copy()
    k(t)
    np.testing.assert_allclose(t.numpy(), ref(t0), rtol=1e-6)
    n = ti.ndarray(ti.math.vec3, (3, 3))
    n.fill(1.0)
    k(n)
    np.testing.assert_allclose(n.to_numpy(), ref(np.ones((3, 3, 3), np.float32)), rtol=1e-6)
    assert len(k.instances) == 1


# -- errors name the kernel and the argument -------------------------------------------------------
def _checked_kernel():
    @ti.kernel
    def scale_rows(src: ti.types.ndarray(dtype=ti.f32, ndim=2),
                   v: ti.types.ndarray(dtype=ti.math.vec2, ndim=1),
                   dst: ti.types.ndarray(dtype=ti.f32, ndim=2)):
        for i, j in src:
            dst[i, j] = src[i, j] * v[i][j % 2]

    return scale_rows


def test_numpy_errors_name_the_kernel_and_the_argument():
    k = _checked_kernel()
    s, v, d = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32)
    cases = [((s.astype(np.float64), v, d), r"kernel 'scale_rows'.*'src'.*f32.*f64"),
             ((s, v, d.astype(np.int32)), r"kernel 'scale_rows'.*'dst'.*f32.*i32"),
             ((s[0], v, d), r"kernel 'scale_rows'.*'src' expects 2 dimensions"),
             ((s, np.ones((2, 3), np.float32), d), r"kernel 'scale_rows'.*'v'.*\(2,\)"),
             ((s, v, [[0.0, 0.0]]), r"kernel 'scale_rows'.*'dst'.*list")]
    for args, pattern in cases:
        with pytest.raises(ti.FluxionRuntimeTypeError, match=pattern):
            k(*args)
    k(s, v, d)
    np.testing.assert_array_equal(d, np.ones((2, 2)))


def test_torch_errors_name_the_kernel_and_the_argument():
    torch = _torch()
    k = _checked_kernel()
    s, v, d = torch.ones(2, 2), torch.ones(2, 2), torch.zeros(2, 2)
    cases = [((s.double(), v, d), r"kernel 'scale_rows'.*'src'.*f32.*f64"),
             ((s, v, torch.zeros(2, 2, 1)), r"kernel 'scale_rows'.*'dst' expects 2 dimensions"),
             ((s, torch.ones(2, 4), d), r"kernel 'scale_rows'.*'v'.*\(2,\)"),
             ((s, v, torch.zeros(2, 2, device="meta")), r"kernel 'scale_rows'.*'dst'.*'meta'"),
             ((s, torch.ones(2, 2, dtype=torch.complex64), d), r"kernel 'scale_rows'.*'v'")]
    for args, pattern in cases:
        with pytest.raises(ti.FluxionRuntimeTypeError, match=pattern):
            k(*args)
    # reading a tensor that requires grad (and a meta-free, non-contiguous one) is fine
    k(torch.ones(2, 2, requires_grad=True), torch.ones(2, 2).t(), d)
    assert torch.equal(d, torch.ones(2, 2))


def test_writing_read_only_or_overlapping_memory_is_an_error_reading_is_not():
    torch = _torch()

    @ti.kernel
    def put(a: ti.types.ndarray(ndim=2)):
        for i, j in a:
            a[i, j] = i * 10 + j

    @ti.kernel
    def get(a: ti.types.ndarray(ndim=2), out: ti.types.ndarray(ndim=2)):
        for i, j in a:
            out[i, j] = a[i, j] + i

    ro = np.arange(6.0).reshape(2, 3)
    ro.flags.writeable = False
    bc = np.broadcast_to(np.arange(3.0), (2, 3))              # read-only, stride 0
    ex = torch.arange(3.0, dtype=torch.float64).expand(2, 3)  # overlapping
    good = np.zeros((2, 3))
    put(good)                                                 # compiled for writable arrays
    for a, before in ((ro, ro.copy()), (bc, bc.copy()), (ex, ex.numpy().copy())):
        with pytest.raises(ti.FluxionTypeError,
                           match=r"kernel 'put'.*argument 'a' is written.*cannot be written"):
            put(a)
        np.testing.assert_array_equal(np.asarray(a), before)  # nothing was stored
        out = np.zeros((2, 3))
        get(a, out)
        np.testing.assert_array_equal(out, np.asarray(a) + np.arange(2)[:, None])
    put(good)                                                 # the good instance still works
    np.testing.assert_array_equal(good, np.arange(2)[:, None] * 10 + np.arange(3))
    # a writable view of the same numpy memory is accepted
    w = np.arange(6.0).reshape(2, 3)
    put(w[:, ::-1])
    np.testing.assert_array_equal(w[:, ::-1], np.arange(2)[:, None] * 10 + np.arange(3))


# -- the autograd bridge -------------------------------------------------------------------------
def test_torch_function_over_vector_elements_passes_gradcheck():
    torch = _torch()
    _f64()

    @ti.kernel
    def f(p: ti.types.ndarray(dtype=ti.math.vec3, ndim=1),
          q: ti.types.ndarray(dtype=ti.math.vec3, ndim=1),
          out: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)):
        for i in p:
            c = p[i].cross(q[i])
            out[i] = ti.Vector([c.norm(), p[i].dot(q[(i + 1) % p.shape[0]])])

    op = ti.ad.torch_function(f, outputs={
        "out": lambda p, q: torch.empty(p.shape[0], 2, dtype=p.dtype)})
    torch.manual_seed(9)
    p = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    q = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    ref = torch.stack([torch.linalg.cross(p, q).norm(dim=1),
                       (p * q.roll(-1, 0)).sum(1)], 1)
    assert torch.allclose(op(p, q), ref)
    assert torch.autograd.gradcheck(op, (p, q))


def _compile_model(torch):
    @ti.kernel
    def f(x: ti.types.ndarray(), w: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = ti.sin(x[i]) * w[i] + x[i] ** 2 * w[(i + 1) % w.shape[0]]

    op = ti.ad.torch_function(f, outputs={"y": lambda x, w: torch.empty_like(x)})

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 6, dtype=torch.float64)
            self.w = torch.nn.Parameter(torch.linspace(-1, 1, 6, dtype=torch.float64))

        def forward(self, x):
            return (op(torch.tanh(self.lin(x)), self.w) ** 2).sum()

    return Model()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_runs_the_kernel_with_the_same_value_and_grads(backend):
    torch = _torch()
    _f64()
    torch.manual_seed(10)
    model = _compile_model(torch)
    x = torch.randn(6, dtype=torch.float64)
    eager = model(x)
    eager.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    for _ in range(2):                        # the second call runs the cached compiled graph
        model.zero_grad()
        out = compiled(x)
        out.backward()
        assert torch.allclose(out, eager)
        for g, p in zip(grads, model.parameters()):
            assert torch.allclose(g, p.grad)
    torch._dynamo.reset()


# -- seed examples against PyTorch -----------------------------------------------------------------
@pytest.mark.parametrize("size", [(37, 101, 5, 8, 3, 2), (64, 64, 32, 64, 7, 5),
                                  (9, 13, 4, 6, 0, 0)])
def test_pytorch_pad_kernel_is_identical_to_the_torch_ops_and_to_a_numpy_loop(size):
    torch = _torch()
    from fluxion.examples import pytorch_pad
    h, w, th, tw, pw, ph = size
    tile = pytorch_pad.make_tile(torch, th, tw)
    ti_pad, torch_pad = pytorch_pad.build(torch, h, w, th, tw, pw, ph)
    out = torch.full((h, w, 3), 7, dtype=torch.uint8)
    ti_pad(out, tile)
    assert torch.equal(out, torch_pad(tile))
    # the staggered-brick rule, element by element with Python integers
    tn = tile.numpy()
    ref = np.empty((h, w, 3), np.uint8)
    for r in range(h):
        for c in range(w):
            x1, y1 = c - pw, h - 1 - r + ph
            v = y1 // th
            u = (x1 - v * (tw // 2)) // tw
            x2, y2 = x1 - u * tw - v * (tw // 2), y1 - v * th
            ref[r, c] = tn[th - 1 - y2, x2]
    np.testing.assert_array_equal(out.numpy(), ref)


@pytest.mark.parametrize("variant,B,C,T", [("v0", 2, 3, 10), ("v0", 1, 4, 33), ("v1", 2, 3, 12)])
def test_rwkv_conv_forward_and_backward_match_conv1d(variant, B, C, T):
    torch = _torch()
    import torch.nn.functional as F
    from fluxion.examples import rwkv_conv
    torch.manual_seed(11)
    eps = 0.1
    w = torch.rand(C, 1, T)
    k = torch.rand(B, C, T)
    forward = rwkv_conv.VARIANTS[variant](T)
    kp = F.pad(k, (T - 1, 0))
    out = torch.empty(B, C, T)
    forward(out, w, kp, eps)
    ref = eps + F.conv1d(F.pad(k, (T - 1, 0)), w, groups=C)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)

    conv = ti.ad.torch_function(forward, outputs={
        "out": lambda w, k, eps: torch.empty(k.shape[0], k.shape[1], T)})
    wg, kg = w.clone().requires_grad_(), kp.clone().requires_grad_()
    seed = torch.rand(B, C, T)
    conv(wg, kg, eps).backward(seed)
    wr, kr = w.clone().requires_grad_(), k.clone().requires_grad_()
    (eps + F.conv1d(F.pad(kr, (T - 1, 0)), wr, groups=C)).backward(seed)
    torch.testing.assert_close(wg.grad, wr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kg.grad[:, :, T - 1:], kr.grad, rtol=1e-5, atol=1e-5)
    # the padding's gradient: what the convolution would send to the zeros
    kpr = F.pad(k, (T - 1, 0)).requires_grad_()
    (eps + F.conv1d(kpr, w, groups=C)).backward(seed)
    torch.testing.assert_close(kg.grad, kpr.grad, rtol=1e-5, atol=1e-5)


# -- without torch ---------------------------------------------------------------------------------
_NO_TORCH = """
import sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch' (blocked for this test)", name=name)

sys.meta_path.insert(0, _Block())
"""


def test_fluxion_works_and_torch_tests_skip_without_torch(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(_NO_TORCH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT, SRC]))
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import fluxion as ti
        try:
            import torch
            raise SystemExit("torch was importable")
        except ImportError:
            pass
        ti.init(arch=ti.cpu)
        f = ti.Vector.field(2, ti.f32, shape=3)

        @ti.kernel
        def k(a: ti.types.ndarray(), b: ti.types.ndarray(dtype=ti.math.vec2, ndim=1)):
            for i in a:
                a[i] = a[i] * 2
                f[i] = b[i] + 1

        a = np.arange(3.0)
        k(a, np.ones((3, 2), np.float32))
        assert a.tolist() == [0.0, 2.0, 4.0], a
        assert f.to_numpy().tolist() == [[2.0, 2.0]] * 3
        assert "torch" not in sys.modules
        print("ok without torch")
    """)
    script_path = tmp_path / "no_torch.py"
    script_path.write_text(script)
    r = subprocess.run([sys.executable, str(script_path)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "ok without torch" in r.stdout, r.stdout + r.stderr
    tests = [os.path.join(ROOT, "tests", "interop", n) for n in ("test_torch.py",)]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0",
                        "-p", "no:cacheprovider", *tests],
                       env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode in (0, 5) and "skipped" in r.stdout and "error" not in r.stdout.lower(), \
        r.stdout + r.stderr


_DIRECT_CALL_UNDER_COMPILE = """
import sys
import torch
import fluxion as ti

ti.init(arch=ti.cpu)


@ti.kernel
def k(x: ti.types.ndarray(), y: ti.types.ndarray()):
    for i in x:
        y[i] = x[i] * 2


def fn(x):
    y = torch.empty_like(x)
    k(torch.sin(x), y)
    return y + 1


c = torch.compile(fn, backend=sys.argv[1])
for n in (5, 5, 7, 9):
    x = torch.randn(n)
    assert torch.allclose(c(x), torch.sin(x) * 2 + 1), n
print("ok")
"""


@pytest.mark.parametrize("torch_first", [True, False])
def test_a_plain_kernel_call_inside_torch_compile(tmp_path, torch_first):
    """Dynamo must not trace the launch (it would bake the first call's data pointers into
    the compiled frame): the kernel runs eagerly at a graph break, whichever module was
    imported first."""
    _torch()
    script = tmp_path / "direct.py"
    text = _DIRECT_CALL_UNDER_COMPILE
    if not torch_first:
        text = text.replace("import torch\nimport fluxion as ti\n", "import fluxion as ti\nimport torch\n")
        assert text != _DIRECT_CALL_UNDER_COMPILE
    script.write_text(text)
    r = subprocess.run([sys.executable, str(script), "aot_eager"], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + SRC))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr[-2000:]


def test_a_folder_named_fluxion_beside_the_program_does_not_shadow_the_package(tmp_path):
    """A user who runs a program from the folder that holds a clone (named `fluxion`, without an
    `__init__.py` at its top) gets the installed package, not an empty namespace package."""
    clone = tmp_path / "fluxion"
    (clone / "src").mkdir(parents=True)
    (clone / "README.md").write_text("a clone\n")
    prog = tmp_path / "prog.py"
    prog.write_text("import fluxion as ti\nti.init(arch=ti.cpu)\nprint('ok', ti.__file__)\n")
    r = subprocess.run([sys.executable, str(prog)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
