"""Array arguments: `ti.types.ndarray()` parameters take numpy arrays, torch tensors and
fluxion's own `ti.ndarray` (lang/ndarray.py) by pointer, shape and strides, without copying.

A call describes each array (`describe`): its element type, number of dimensions, element
shape (for vector/matrix elements in the trailing dimensions), whether it is C-contiguous
(the compiled code then derives strides from the shape, which lets LLVM vectorize) and its
device. That description is part of the template signature, so arrays of new shapes reuse
the compiled instance. `array_info` is the launch's fast path to it; `pack_array` puts an
array into a launch's context.
"""
from __future__ import annotations

import ctypes
import warnings

import numpy as np

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionArgumentError, FluxionRuntimeTypeError, FluxionTypeError
from fluxion.ir.modes import GRAD, GRAD_DUAL
from fluxion.lang.ndarray import _NDARRAY_TYPES, Ndarray
from fluxion.runtime import program
from fluxion.runtime.launch import TorchWrite


class Desc:
    """What the compiled code needs to know about an array argument (part of the signature).

    `writable` is False for memory a kernel must not store to: a read-only numpy array, or
    a strided array whose elements overlap (a stride of 0, as from `expand()`). Such an array
    may be read; compiling a store to it raises (see ArrayArg.written). `where` names the
    kernel and argument for that message; it is not part of the signature."""
    __slots__ = ("dtype", "ndim", "elem_shape", "contiguous", "device", "writable", "where",
                 "_hash")

    def __init__(self, dtype, ndim, elem_shape, contiguous, device, writable=True, where=None):
        self.dtype, self.ndim, self.elem_shape = dtype, ndim, elem_shape
        self.contiguous, self.device = contiguous, device
        self.writable, self.where = writable, where
        self._hash = hash((dtype.name, ndim, elem_shape, contiguous, device, writable))

    def __hash__(self):
        return self._hash

    def __eq__(self, o):
        return isinstance(o, Desc) and (self.dtype, self.ndim, self.elem_shape, self.contiguous,
                                        self.device, self.writable) == (
            o.dtype, o.ndim, o.elem_shape, o.contiguous, o.device, o.writable)

    def __repr__(self):
        el = f", element {self.elem_shape}" if self.elem_shape else ""
        return (f"ndarray({self.dtype}, ndim={self.ndim}{el}"
                f"{'' if self.contiguous else ', strided'}{'' if self.writable else ', read-only'})")


_TORCH_DTYPES = None


def _torch_dtype(t):
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        import torch
        _TORCH_DTYPES = {torch.float32: T.f32, torch.float64: T.f64, torch.float16: T.f16,
                         torch.int8: T.i8, torch.int16: T.i16, torch.int32: T.i32,
                         torch.int64: T.i64, torch.uint8: T.u8, torch.bool: T.u8}
        for name, dt in (("uint16", T.u16), ("uint32", T.u32), ("uint64", T.u64)):
            if hasattr(torch, name):
                _TORCH_DTYPES[getattr(torch, name)] = dt
    try:
        return _TORCH_DTYPES[t.dtype]
    except KeyError:
        raise TypeError(f"torch dtype {t.dtype} is not supported") from None


def unwrap(a):
    """(kind, object): 'numpy' with an ndarray, 'torch' with a tensor, or 'cuda_array' with
    an object exposing `__cuda_array_interface__` (CuPy, Numba, ...)."""
    if isinstance(a, np.ndarray):
        return "numpy", a
    if isinstance(a, Ndarray):
        return "numpy", a.arr
    mod = type(a).__module__
    if mod.startswith("torch"):
        return "torch", a
    if hasattr(a, "__cuda_array_interface__"):
        return "cuda_array", a
    if hasattr(a, "__dlpack__"):
        try:
            return "numpy", np.from_dlpack(a)
        except (TypeError, BufferError, RuntimeError):
            import torch
            return "torch", torch.from_dlpack(a)
    return None, a


def raw_info(a):
    """(scalar dtype, full shape, byte strides, data pointer, device, requires_grad, grad obj)."""
    kind, obj = unwrap(a)
    if kind == "numpy":
        # a ti.ndarray has its own dtype (u1 is stored as NumPy's bool, which external
        # arrays pass as u8)
        dt = a.dtype if isinstance(a, Ndarray) else T.from_numpy_dtype(obj.dtype)
        return (dt, obj.shape, obj.strides, obj.ctypes.data, "cpu",
                False, a.grad.arr if isinstance(a, Ndarray) and a.grad is not None else None)
    if kind == "torch":
        dt = _torch_dtype(obj)
        es = obj.element_size()
        # a non-leaf's .grad is never filled, and reading it makes torch warn
        # (a device other than the first GPU keeps its index: fluxion does not run there)
        dev = obj.device
        return (dt, tuple(obj.shape), tuple(s * es for s in obj.stride()), obj.data_ptr(),
                dev.type if not dev.index else str(dev), obj.requires_grad,
                obj.grad if obj.is_leaf else _non_leaf_grad(obj))
    if kind == "cuda_array":
        return _cuda_array_info(obj.__cuda_array_interface__)
    raise TypeError(f"expected a numpy array, a torch tensor, a ti.ndarray or an object with "
                    f"__cuda_array_interface__, got {type(a).__name__}")


def _non_leaf_grad(t):
    """The .grad a launch gave a non-leaf tensor (see ensure_torch_grad), or None; without
    torch's warning about reading a non-leaf's .grad."""
    if not t.requires_grad:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return t.grad


def ensure_torch_grad(t):
    """As the original does at each launch: a tensor that requires grad and has no .grad
    gets a zero one (a non-leaf too), so that `k.grad(x, y)` after `y.grad.fill_(1)` finds
    it. Returns the gradient."""
    g = t.grad if t.is_leaf else _non_leaf_grad(t)
    if g is None:
        es = t.element_size()
        strides = [st * es for st in t.stride()]
        if not non_overlapping(t.shape, strides, es):
            return None          # (expand()ed: no gradient of its own; a grad launch says so)
        g = t.grad = _torch_grad_in_layout(t, strides, None)
    return g


def _cuda_array_info(cai):
    """raw_info of a `__cuda_array_interface__` (device memory of the current GPU). The
    producer's `stream` is not waited on: synchronize it before the launch."""
    npdt = np.dtype(cai["typestr"])
    dt = T.from_numpy_dtype(npdt)
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    strides = tuple(row_major_strides(shape, npdt.itemsize)) if strides is None else \
        tuple(int(s) for s in strides)
    ptr, _ = cai["data"]
    return dt, shape, strides, int(ptr or 0), "cuda", False, None


def _cuda_array_read_only(a):
    return bool(a.__cuda_array_interface__["data"][1])


def row_major_strides(shape, itemsize):
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def contiguous(shape, strides, itemsize):
    if 0 in tuple(shape):
        # no element is addressed: any strides will do (torch and numpy call such arrays
        # contiguous, whatever their strides, and launch them without any)
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def describe(ann, a, kernel_name, arg_name):
    """The Desc of array `a` passed for annotation `ann`, with clear errors on mismatch."""
    try:
        dt, shape, strides, ptr, device, req, grad = raw_info(a)
    except TypeError as e:
        raise FluxionRuntimeTypeError(f"Invalid type for argument {arg_name}, got {a!r:.80}: "
                                      f"kernel '{kernel_name}': argument '{arg_name}': {e}") \
            from None
    es = ann.element_shape()
    want = ann.scalar_dtype()
    where = f"kernel '{kernel_name}': argument '{arg_name}'"
    own = array_element_shape(a)
    # (each message begins with the original system's words for the mismatch)
    if any(e is None for e in es):
        # ti.types.vector() / ti.types.matrix(): any vector / matrix, whose shape the array
        # gives (a ti.ndarray's elements, else the trailing dimensions)
        got = own if own else tuple(shape[max(len(shape) - len(es), 0):])
        if len(got) != len(es) or any(w is not None and w != g for w, g in zip(es, got)):
            kind = "vector" if len(es) == 1 else "matrix"
            raise FluxionArgumentError(
                f"Invalid value for argument {arg_name} - {where} expects {kind} elements, got "
                + (f"an ndarray of elements of shape {own}" if own else
                   f"an array of shape {tuple(shape)}"))
        es = got
    if own:
        # a ti.ndarray of vectors/matrices carries its element shape: the annotation may leave
        # it out, but must not contradict it (a scalar dtype there would make the element's
        # components a loop dimension)
        if ann.element is None and ann.dtype is not None:
            raise FluxionArgumentError(
                f"Expect element type {ann.dtype} for argument {arg_name}, but get [Tensor "
                f"({', '.join(map(str, own))}) {dt}]: {where} expects scalar elements of type "
                f"{ann.dtype}, got an ndarray of {len(own)}-D elements of shape {own}; annotate "
                f"it ti.types.ndarray() or with the element type")
        if es and es != own:
            raise FluxionArgumentError(
                f"Invalid value for argument {arg_name} - required element type: "
                f"{_element_text(es, want)}, but {_element_text(own, dt)} is provided: {where} "
                f"expects elements of shape {es}, got an ndarray of elements of shape {own}")
        es = own
    if want is T.u1 and dt is T.u8 and _bool_array(a):
        dt = T.u1          # a bool array for a u1 annotation: the same bytes
    # (each message begins with the original's words, other for numpy arrays/tensors: `ext`)
    ext, bad = not isinstance(a, Ndarray), f"Invalid value for argument {arg_name} - required"
    if want is not None and want is not dt and (ann.element is None or not ext):
        # (as in the original, a numpy array or tensor passed for a vector or matrix element
        # type is taken with its own scalar type: only the element shape must match)
        raise FluxionArgumentError(
            (f"{bad} array has dtype={want}, array with dtype={dt} is provided" if ext else
             f"Expect element type {want} for argument {arg_name}, but get {dt}")
            + f": {where} expects elements of type {want}, got an array of {dt}")
    ndim = len(shape) - len(es)
    if es and ext and ann.ndim is not None and ann.ndim != ndim:
        raise FluxionArgumentError(f"{bad} array has ndim={ann.ndim} element_dim={len(es)}, "
                                   f"array with {len(shape)} dimensions is provided: {where} "
                                   f"expects {ann.ndim} dimensions and elements of shape {es}, "
                                   f"got an array of shape {tuple(shape)}")
    if es and tuple(shape[len(shape) - len(es):]) != es:
        raise FluxionArgumentError(
            (f"{bad} element_shape={es}, array with element shape of "
             f"{tuple(shape[len(shape) - len(es):])} is provided" if ext else
             f"{bad} element type: {_element_text(es, want or dt)}")
            + f": {where} expects elements of shape {es} in its trailing dimensions, got an "
            f"array of shape {tuple(shape)}")
    if ann.ndim is not None and ann.ndim != ndim:
        raise FluxionArgumentError(
            (f"{bad} array has ndim={ann.ndim}, array with {len(shape)} dimensions is provided"
             if ext else f"{bad} ndim={ann.ndim}, but {ndim}d ndarray with shape "
             f"{tuple(shape[:ndim])} is provided") + f": {where} expects {ann.ndim} dimensions"
            + (f" (plus element dimensions {es})" if es else "")
            + f", got an array of shape {tuple(shape)}")
    if device != "cpu" and not program.on_cuda():
        raise FluxionArgumentError(f"{where} is on device '{device}', but fluxion runs on "
                                   f"the CPU in this session; move it with .cpu()")
    if device not in ("cpu", "cuda"):
        # a meta tensor has no memory, another GPU is not the one fluxion's kernels run on
        raise FluxionArgumentError(f"{where} is on device '{device}'; fluxion's CUDA kernels "
                                   f"take CPU memory and tensors on device cuda:0")
    # host memory in a CUDA session is staged: copied to the device for each launch, and
    # back after it when the kernel writes it (see HostStaging)
    contig = contiguous(shape, strides, dt.nbytes)
    writable = contig or non_overlapping(shape, strides, dt.nbytes)
    if writable:
        kind, obj = unwrap(a)
        if kind == "numpy":
            writable = bool(obj.flags.writeable)
        elif kind == "cuda_array":
            writable = not _cuda_array_read_only(obj)
    return Desc(dt, ndim, es, contig, device, writable, where)


def _element_text(shape, dt):
    """An element type as the original system names it: VectorType[3, f32], MatrixType[2,2, f32]."""
    if len(shape) == 1:
        return f"VectorType[{shape[0]}, {dt}]"
    return f"MatrixType[{shape[0]},{shape[1]}, {dt}]"


def array_element_shape(a):
    """The element shape a `ti.ndarray` of vectors or matrices was made with; () for scalar
    ndarrays and for numpy arrays and torch tensors, whose dimensions are all array dimensions
    unless the annotation names an element type."""
    if type(a) in _NDARRAY_TYPES and a.element is not None:
        e = a.element
        return (e.n,) if e.ndim == 1 else (e.n, e.m)
    return ()


def _bool_array(a):
    kind, obj = unwrap(a)
    if kind == "numpy":
        return obj.dtype == np.bool_
    return kind == "torch" and str(obj.dtype) == "torch.bool"


def same_layout(shape, strides_a, strides_b):
    """Whether two stride tuples address the same elements (a dimension of size 1 may have
    any stride)."""
    return all(n <= 1 or x == y for n, x, y in zip(shape, strides_a, strides_b))


def non_overlapping(shape, strides, itemsize):
    """Whether distinct indices address distinct elements (the sufficient test torch uses:
    sorted by stride, each dimension steps past the extent of the smaller ones)."""
    if 0 in tuple(shape):
        return True
    extent = itemsize
    for st, n in sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1):
        if st < extent:
            return False
        extent += (n - 1) * st
    return True


def _torch_grad_in_layout(a, strides, old):
    """A gradient tensor for leaf `a` laid out with `a`'s strides (the grad kernel addresses
    the gradient with the array's strides): zeros, or a copy of `old`."""
    import torch
    if not non_overlapping(a.shape, strides, a.element_size()):
        raise FluxionTypeError(
            "kernel.grad cannot fill the .grad of a tensor whose elements overlap (a stride "
            "of 0, as from expand()): pass a contiguous copy (tensor.contiguous())")
    g = torch.zeros_like(a)   # keeps the strides of a dense tensor
    es = a.element_size()
    if not same_layout(a.shape, [st * es for st in g.stride()], strides):
        g = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device).zero_()
    if old is not None:
        g.copy_(old)
    return g


def _zeros_spanning(shape, strides, dtype):
    """A zero scratch array that every index of (shape, byte strides) lands in, and the
    address of its index 0 (negative strides reach below it)."""
    if 0 in tuple(shape):
        buf = np.zeros(1, dtype=dtype.np_dtype)
        return buf, buf.ctypes.data
    lo = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
    hi = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
    nb = dtype.nbytes
    buf = np.zeros(-(-(hi - lo + nb) // nb), dtype=dtype.np_dtype)
    return buf, buf.ctypes.data - lo


def grad_pointer(a, grad, shape, strides, desc, keep):
    """(address, keep, scratch) of `a`'s gradient array for a grad launch: the ti.ndarray's
    `.grad`, the tensor's `.grad` (created as zeros when it requires grad), or else a zero
    scratch array in host memory that is dropped after the launch (no gradient was asked
    for; `scratch` is then True).

    The compiled code addresses the gradient with the array's strides, so a leaf tensor's
    .grad in another layout (torch makes a non-dense tensor's grad contiguous) is replaced
    by a copy in the array's layout."""
    if grad is None and type(a).__module__.startswith("torch") and a.is_leaf:
        grad = a.grad
        if (grad is None and a.requires_grad) or (
                grad is not None and not same_layout(
                    shape, [st * grad.element_size() for st in grad.stride()], strides)):
            grad = a.grad = _torch_grad_in_layout(a, strides, grad)
    if grad is not None:
        g_dt, g_shape, g_strides, g_ptr, _, _, _ = raw_info(grad)
        if (g_dt is not desc.dtype or tuple(g_shape) != tuple(shape)
                or not same_layout(shape, g_strides, strides)):
            raise FluxionTypeError("the gradient of an ndarray argument must have the same "
                                   "dtype, shape and layout as the array")
        return g_ptr, keep, False
    scratch, ptr = _zeros_spanning(shape, strides, desc.dtype)
    keep = [] if keep is None else keep
    keep.append(scratch)
    return ptr, keep, True


def pack_array(inst, arg, a, info, ints, mode, keep, grad_override=None):
    """Pack array `a` passed for ArrayArg `arg` into the context of Instance `inst`'s launch
    (`info`: what array_info found): its pointer, its gradient's, its shape and strides.
    Returns `keep`, with what must live until the launch is over (runtime/launch.py)."""
    desc, ptr, shape, strides, req, grad = info
    if grad_override is not None:
        grad = grad_override
    if req and unwrap(a)[0] == "torch":
        # (only made here; a grad launch finds it as it finds any tensor's .grad)
        g = ensure_torch_grad(a)
        if grad is None and not a.is_leaf:
            grad = g
    if req and arg.written and mode is not GRAD and unwrap(a)[0] == "torch":
        # a tensor that requires grad, written in place (the original allows it: its
        # ndarray autodiff runs `k(x, y); k.grad(x, y)` on such tensors): torch does not
        # see the write, so its version counter moves on after the launch, and a torch
        # graph that saved the old values refuses to backpropagate instead of silently
        # using the new ones
        keep = [] if keep is None else keep
        keep.append(TorchWrite(a))
    staging = inst._staging and desc.device == "cpu"
    if staging:
        if strides is None:
            strides = row_major_strides(shape, desc.dtype.nbytes)
        ptr, keep = inst._stage(ptr, shape, strides, desc, arg.written, keep)
    ints[arg.ptr_slot] = ptr
    if arg.reads_grad and not (mode is GRAD or mode is GRAD_DUAL):
        # the kernel's code reads or writes `arr.grad[...]`: only an existing gradient
        # array will do (a scratch one would silently give zeros)
        if strides is None:
            strides = row_major_strides(shape, desc.dtype.nbytes)
        gptr, keep, scratch = grad_pointer(a, grad, shape, strides, desc, keep)
        if scratch:
            raise FluxionArgumentError(
                f"kernel '{inst.kernel.name}' accesses '{arg.name}.grad', but the array "
                f"passed for '{arg.name}' has no gradient (ti.ndarray(..., needs_grad=True), "
                f"or a torch tensor with requires_grad=True)")
        if staging:
            gptr, keep = inst._stage(gptr, shape, strides, desc, True, keep)
        ints[arg.grad_slot] = gptr
    if mode is GRAD or mode is GRAD_DUAL:
        if strides is None:
            strides = row_major_strides(shape, desc.dtype.nbytes)
        gptr, keep, scratch = grad_pointer(a, grad, shape, strides, desc, keep)
        if staging:
            gptr, keep = inst._stage(gptr, shape, strides, desc, True, keep)
        elif scratch and inst._staging:
            # a device array without a gradient array: the scratch must be device memory
            gptr, keep = inst._stage(gptr, shape, strides, desc, False, keep)
        ints[arg.grad_slot] = gptr
    s0 = arg.shape_slot
    for k, n in enumerate(shape):
        ints[s0 + k] = n
    if not desc.contiguous:
        t0 = arg.stride_slot
        for k, st in enumerate(strides):
            ints[t0 + k] = st
    return keep


# -- the launch fast path ------------------------------------------------------------------------
def _probe_numpy_data_offset():
    """Byte offset of the data pointer inside a numpy array object (CPython + numpy ABI:
    after the object header); verified here, so a different layout falls back to `.ctypes`."""
    probe = np.arange(3.0)
    for off in (16, 24, 32):
        if ctypes.c_void_p.from_address(id(probe) + off).value == probe.ctypes.data:
            return off
    return None


_NP_DATA_OFFSET = _probe_numpy_data_offset()
_c_void_p = __import__("ctypes").c_void_p


def _numpy_ptr(a):
    if _NP_DATA_OFFSET is not None:
        return _c_void_p.from_address(id(a) + _NP_DATA_OFFSET).value or 0
    return a.ctypes.data


_np_dtypes = {}
# exact tensor types (torch.Tensor, torch.nn.Parameter) known to take the fast path below;
# filled when torch is first seen, so fluxion never imports torch itself
_torch_types = set()


def _register_torch_types():
    import torch
    _torch_types.update((torch.Tensor, torch.nn.Parameter))


def array_info(ann, a, kernel_name, arg_name, cache):
    """(Desc, data pointer, shape, byte strides, requires_grad, grad) for a launch, with the
    checks done once per (annotation, array kind) and cached in `cache`.

    The cache key holds everything describe() checks that can differ between arrays of one
    kind: dtype, ndim, contiguity, element shape, device, and whether the array may be
    written (read-only numpy memory, overlapping strides)."""
    tp = type(a)
    if tp in _torch_types:
        shape = a.shape
        nes = ann.n_element_dims
        if a.is_contiguous():   # contiguous arrays' strides follow from the shape
            ck = (a.dtype, True if a.is_cpu else a.device, len(shape),
                  tuple(shape[len(shape) - nes:]) if nes else ())
            desc = cache.get(ck)
            if desc is None:
                desc = cache[ck] = describe(ann, a, kernel_name, arg_name)
            # the gradient is looked up only by a grad launch (grad_pointer)
            return desc, a.data_ptr(), shape, None, a.requires_grad, None
        st = a.stride()
        ck = (a.dtype, True if a.is_cpu else a.device, len(shape),
              tuple(shape[len(shape) - nes:]) if nes else (), non_overlapping(shape, st, 1))
        desc = cache.get(ck)
        if desc is None:
            desc = cache[ck] = describe(ann, a, kernel_name, arg_name)
        es = desc.dtype.nbytes
        return desc, a.data_ptr(), shape, [x * es for x in st], a.requires_grad, None
    if tp is np.ndarray or tp in _NDARRAY_TYPES:
        own = tp is not np.ndarray
        arr = a.arr if own else a
        dt = _np_dtypes.get(arr.dtype)
        if dt is None:
            dt = _np_dtypes[arr.dtype] = T.from_numpy_dtype(arr.dtype)
        if own:
            dt = a.dtype
        shape = arr.shape
        # a ti.ndarray's own element dimensions win over the annotation's (describe checks
        # they agree); the key's shape tail then holds them, so the two cannot share an entry
        nes = a.element.ndim if own and a.element is not None else ann.n_element_dims
        fl = arr.flags
        # (the NumPy dtype too: a bool array and a uint8 one are both u8, unless the
        # annotation asks for u1)
        if fl.c_contiguous:
            ck = (dt, arr.dtype, len(shape), True, shape[len(shape) - nes:] if nes else (),
                  fl.writeable)
        else:
            ck = (dt, arr.dtype, len(shape), False, shape[len(shape) - nes:] if nes else (),
                  fl.writeable and non_overlapping(shape, arr.strides, arr.itemsize))
        desc = cache.get(ck)
        if desc is None:
            desc = cache[ck] = describe(ann, a, kernel_name, arg_name)
        grad = a.grad.arr if own and a.grad is not None else None
        return desc, _numpy_ptr(arr), shape, arr.strides, False, grad
    if tp.__module__.startswith("torch") and not _torch_types:
        _register_torch_types()
        if tp in _torch_types:
            return array_info(ann, a, kernel_name, arg_name, cache)
    desc = describe(ann, a, kernel_name, arg_name)
    dt, shape, strides, ptr, device, req, grad = raw_info(a)
    return desc, ptr, shape, strides, req, grad
