"""Smaller functions of the original system's API: C-style division and modulo (`raw_div`,
`raw_mod`), the logical right shift `bit_shr`, `zero`/`one`, `randn`, `rescale_index`,
`get_addr`, and the color helpers `rgb_to_hex`/`hex_to_rgb`.

Each works on kernel values (emitting IR through the builtins) and, where that means
something, on Python numbers."""
from __future__ import annotations

import math as _math

import numpy as np

from fluxion.frontend.access import field_access, normalize_index
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir.expr import Expr
from fluxion.lang import builtins as B
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSyntaxError, FluxionTypeError
from fluxion.lang import runtime
from fluxion.lang.field import Field
from fluxion.lang.matrix import Matrix, Vector
from fluxion.lang.snode import PlaceSNode, SNode


def _is_int(x):
    if isinstance(x, Expr):
        return x.dtype.is_int
    return isinstance(x, (int, np.integer))


@B._elementwise
def raw_div(a, b):
    """C's division: truncating for two integers (`raw_div(-7, 2)` is -3 in a kernel), the
    true quotient otherwise."""
    if not (isinstance(a, Expr) or isinstance(b, Expr)):
        # as the original in Python scope: Python's // for two ints, / otherwise
        if _is_int(a) and _is_int(b):
            return a // b
        return a / b
    if not (_is_int(a) and _is_int(b)):
        return a / b
    q = a // b
    if not _signed(q):
        return q
    r = a - q * b
    # floor and truncation differ when there is a remainder and the signs differ
    return q + B.select((r != 0) & ((a < 0) != (b < 0)), 1, 0)


@B._elementwise
def raw_mod(a, b):
    """C's remainder: it has the sign of the dividend (`raw_mod(-7, 2)` is -1)."""
    if not (isinstance(a, Expr) or isinstance(b, Expr)):
        return a - b * int(float(a) / b)
    if _is_int(a) and _is_int(b):
        return a - raw_div(a, b) * b
    q = a / b
    return a - b * B.select(q < 0, B.ceil(q), B.floor(q))


def _signed(x):
    return isinstance(x, Expr) and x.dtype.is_signed


_UNSIGNED = {8: T.u8, 16: T.u16, 32: T.u32, 64: T.u64}


@B._elementwise
def bit_shr(x, n):
    """Logical right shift: zeros come in from the left whatever the sign (`bit_sar` and `>>`
    shift the sign bit in for signed types)."""
    if not isinstance(x, Expr) and not isinstance(n, Expr):
        if not builder.in_kernel() and isinstance(x, (int, np.integer)) and x >= 0:
            return x >> n
        if not builder.in_kernel():
            raise FluxionSyntaxError("ti.bit_shr of a negative Python int: the result depends "
                                     "on the integer's width; call it on a typed kernel value")
        x = E.to_expr(x)
    if x.dtype.is_float:
        raise FluxionTypeError(f"ti.bit_shr on a float ({x.dtype})")
    if not x.dtype.is_signed:
        return x >> n
    u = _UNSIGNED[x.dtype.bits]
    return E.bit_cast(E.bit_cast(x, u) >> n, x.dtype)


def zero(x):
    """Zeros of the shape and type of `x` (a scalar or a vector/matrix)."""
    return x * 0


def one(x):
    """Ones of the shape and type of `x`."""
    return zero(x) + 1


def randn(dt=None):
    """A sample of the standard normal distribution (Box-Muller on two `ti.random()`s)."""
    if not builder.in_kernel():
        return float(np.random.standard_normal())
    dt = T.normalize(dt) if dt is not None else builder.current().cfg.default_fp
    u1 = B.cast(1.0, dt) - B.random(dt)      # in (0, 1]: the log is finite
    u2 = B.cast(1.0, dt) - B.random(dt)
    return B.sqrt(-2 * B.log(u1)) * B.cos(_math.tau * u2)


def rescale_index(a, b, I):  # noqa: E741 (the original's name)
    """The index `I` of field (or SNode) `a` scaled to the shape of `b`: divided where `a` is
    finer along an axis, multiplied where it is coarser."""
    for what, o in (("first", a), ("second", b)):
        if not isinstance(o, (Field, SNode)) and not hasattr(o, "shape"):
            raise TypeError(f"ti.rescale_index: the {what} argument must be a field or an SNode")
    idx = list(I.entries) if isinstance(I, Matrix) else list(I)
    sa, sb = _shape(a), _shape(b)
    out = list(idx)
    for k in range(min(len(idx), len(sa), len(sb))):
        if sa[k] > sb[k]:
            out[k] = idx[k] // (sa[k] // sb[k])
        elif sa[k] < sb[k]:
            out[k] = idx[k] * (sb[k] // sa[k])
    return Vector(out)


def _shape(o):
    s = o.shape
    return tuple(s() if callable(s) else s)


def get_addr(f, indices):
    """The address (a u64) of element `indices` of field `f`, inside a kernel."""
    if not builder.in_kernel():
        raise FluxionSyntaxError("ti.get_addr can only be called inside a kernel")
    if isinstance(f, PlaceSNode):
        f = f.field     # `ti.get_addr(x.snode, ...)`, as the original system takes it too
    if not hasattr(f, "places"):
        raise FluxionSyntaxError(f"ti.get_addr takes a field or a field's `.snode`, got "
                                 f"{type(f).__name__}")
    f._materialize()
    if isinstance(indices, list):
        indices = tuple(indices)
    idx = normalize_index(f, indices)
    place = f.places[0]
    base = place.addr
    tree = f._snode.tree
    if runtime.on_cuda() and tree.device_ptr is not None:
        base = tree.device_ptr + (place.addr - tree.buffer.ctypes.data)
    off = f.offset or (0,) * len(idx)
    addr = E.const(base, T.i64)
    terms = place.terms
    if place.pool is not None:
        # under a pooled pointer node: the cell's slot, read now (lang/sparse_pool.py)
        pp = place.pool
        cell = [E.cast(idx[d], T.i32) - off[d] for d, _ in pp.cells]
        cell = [c // div if div != 1 else c for c, (_, div) in zip(cell, pp.cells)]
        slot = E.cast(E.to_expr(field_access(pp.pool.table, cell), like=T.i32), T.i64)
        addr = E.const(tree.buffer.ctypes.data + pp.base, T.i64) + slot * pp.pool.span
        terms = pp.terms
    for t in terms:
        i = E.cast(idx[t.axis], T.i64) - off[t.axis]
        if t.divisor != 1:
            i = i // t.divisor
        if not t.outermost:
            i = i % t.extent
        addr = addr + i * t.stride
    return E.cast(addr, T.u64)


def rgb_to_hex(c):
    """(r, g, b) in [0, 1] to 0xRRGGBB."""
    def to255(x):
        return np.clip(np.int32(x * 255), 0, 255)
    return (to255(c[0]) << 16) + (to255(c[1]) << 8) + to255(c[2])


def hex_to_rgb(color):
    """0xRRGGBB to (r, g, b) in [0, 1]."""
    r, g, b = (color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF
    return r / 255, g / 255, b / 255


_FLOAT_BITS = {32: (T.i32, 23, 0xFF, 126, 25, 1.1754943508222875e-38),
               64: (T.i64, 52, 0x7FF, 1022, 54, 2.2250738585072014e-308)}


def frexp(x):
    """(mantissa, exponent) with x == mantissa * 2**exponent and 0.5 <= |mantissa| < 1 (0,
    infinities and NaN give (x, 0)), as numpy.frexp; the exponent is an i32."""
    if not isinstance(x, Expr):
        m, e = np.frexp(x)
        return float(m), int(e)
    if not x.dtype.is_float:
        x = E.cast(x, builder.current().cfg.default_fp)
    dt = x.dtype
    if dt.bits == 16:
        m, e = frexp(E.cast(x, T.f32))
        return E.cast(m, T.f16), e
    itype, mbits, emask, bias, scale, tiny = _FLOAT_BITS[dt.bits]
    # subnormals are scaled into the normal range first, and the scale taken off the exponent
    sub = (B.abs(x) < E.const(tiny, dt)) & (x != 0)
    y = B.select(sub, x * E.const(2.0 ** scale, dt), x)
    bits = E.bit_cast(y, itype)
    biased = (bits >> mbits) & emask
    e = E.cast(biased - bias, T.i32) - B.select(sub, scale, 0)
    m = E.bit_cast((bits & ~(emask << mbits)) | (bias << mbits), dt)
    special = (x == 0) | (biased == emask)          # zero, infinity, NaN
    return B.select(special, x, m), B.select(special, 0, e)


def assume_in_range(val, base, low, high):
    """A hint that base + low <= val < base + high (the original uses it for scratch-pad
    memory); returns `val` unchanged."""
    return val
