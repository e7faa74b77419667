"""Methods of Python-scope objects that have a kernel-scope meaning: `x.fill(v)` inside a
kernel fills the field with a loop (in Python scope it writes the field's memory directly).
The frontend inlines the ti.func registered here in place of the method call; the package
imports this module at its start (fluxion/__init__.py)."""
import numpy as np

from fluxion.frontend import calls
from fluxion.frontend.access import NdarrayType
from fluxion.frontend.builtins import static
from fluxion.frontend.loops import grouped, ndrange
from fluxion.frontend.matrix import Vector
from fluxion.ir import builder
from fluxion.lang.ad import no_grad
from fluxion.lang.field import Field
from fluxion.lang.kernel import func, kernel, template
from fluxion.ir.types import f64, i64


@func
def fill_field(f: template(), value: template()):
    for I in grouped(f):
        f[I] = value


@no_grad
@kernel
def _fill_int(f: template(), value: i64):
    for I in grouped(f):
        f[I] = value


@no_grad
@kernel
def _fill_float(f: template(), value: f64):
    for I in grouped(f):
        f[I] = value


@no_grad
@kernel
def _fill_elements(f: template(), a: NdarrayType(), elem: template()):
    for I in grouped(f):
        if static(len(elem) == 1):
            for p in static(range(elem[0])):
                f[I][p] = a[p]
        else:
            for p, q in static(ndrange(elem[0], elem[1])):
                f[I][p, q] = a[p, q]


def fill_sparse(f, value):
    """`x.fill(v)` in Python scope of a field under sparse SNodes: a struct-for, as the
    original's fill. It writes the active cells only, and visits only them: through numpy,
    the whole dense extent was gathered and scattered (mgpcg_advanced filled four 256^3
    fields per iteration, 3/4 of its time), and a vector field's under a pointer through a
    table of 8 bytes an element (a 512^3 one: 7.8 s and 3.3 GiB). Its kernels are `no_grad`:
    a Tape records no launch of them, as it recorded none of the NumPy path's writes. False
    (nothing done) while a kernel is being built, and for a quantized vector or matrix."""
    if builder.active[0]:
        return False
    elem = f._element_shape()
    if elem:
        if f._quant:
            return False
        # each entry as numpy would store it, an integer out of range wrapped first (a half
        # rounded by numpy, then carried exactly in an f32 array, as copy_sparse does)
        dt = f.dtype.np_dtype
        vals = np.broadcast_to(np.asarray(value), elem).reshape(-1)
        vals = np.array([np.asarray(f._scalar(v.item())).astype(dt) for v in vals])
        vals = vals.astype(np.float32 if dt == np.float16 else dt).reshape(elem)
        _fill_elements(f, vals, elem)
        return True
    v = np.asarray(f._scalar(value)).astype(f.dtype.np_dtype)   # the value numpy would store
    if f.dtype.is_float:
        _fill_float(f, float(v))
    else:
        _fill_int(f, int(v.astype(np.int64)))                # (a u64 by its bits)
    return True


@no_grad
@kernel
def _active_to_array(f: template(), a: NdarrayType(), off: template(), elem: template()):
    for I in grouped(f):
        J = I - Vector(off)
        if static(len(elem) == 0):
            a[J] = f[I]
        elif static(len(elem) == 1):
            for p in static(range(elem[0])):
                a[J, p] = f[I][p]
        else:
            for p, q in static(ndrange(elem[0], elem[1])):
                a[J, p, q] = f[I][p, q]


@no_grad
@kernel
def _array_to_active(f: template(), a: NdarrayType(), off: template(), elem: template()):
    for I in grouped(f):
        J = I - Vector(off)
        if static(len(elem) == 0):
            f[I] = a[J]
        elif static(len(elem) == 1):
            for p in static(range(elem[0])):
                f[I][p] = a[J, p]
        else:
            for p, q in static(ndrange(elem[0], elem[1])):
                f[I][p, q] = a[J, p, q]


def copy_sparse(f, arr=None):
    """`x.to_numpy()` (`arr` None: the array, else `x.from_numpy(arr)`: True) in Python scope
    of a scalar, vector or matrix field under sparse SNodes: a struct-for, as the original's,
    which visits the active cells only (elements of inactive cells read 0, and are not
    written). Through numpy, the whole dense extent was gathered or scattered, and a field
    whose tree splits an axis over levels (a pointer over blocks) through a table of 8 bytes
    an element: 2048^2 cells in 16^2 blocks took 111 ms and 64 MiB a to_numpy (the original
    2.7 ms). Its kernels are `no_grad`: a Tape records no launch of them (nor did it record
    the NumPy path's reads and writes). A 16-bit float field's values go through an f32
    array (which an array argument takes), exactly: each value is rounded to f16 by NumPy
    first, as its own path stores it. None (nothing done) where it does not apply: while a
    kernel is being built, for quantized fields."""
    if builder.active[0] or f._quant:
        return None
    off = tuple(f.offset or (0,) * len(f.shape))
    elem = f._element_shape()
    dt = f.dtype.np_dtype
    carrier = np.float32 if dt == np.float16 else dt
    if arr is None:
        out = np.zeros(f.shape + elem, carrier)
        _active_to_array(f, out, off, elem)
        return out.astype(dt, copy=False)
    vals = np.asarray(arr, dtype=dt).astype(carrier, copy=False)
    _array_to_active(f, np.ascontiguousarray(vals), off, elem)
    return True


calls.register_method(Field, Field.fill, fill_field)
Field._fill_by_kernel = fill_sparse       # (in Python scope, under sparse levels)
Field._copy_by_kernel = copy_sparse
