"""Helpers of frontend/matrix.py on entries: their type, swizzle names, reductions,
comparisons and indexing with kernel values (a select chain)."""
from __future__ import annotations

import functools
import numbers

import numpy as np

from fluxion.frontend import builtins as B
from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionIndexError, FluxionSyntaxError
from fluxion.ir.expr import binary, Expr, select


_SWIZZLE_SETS = ("xyzw", "rgba", "stpq")
_SWIZZLE_CHARS = frozenset("xyzwrgbastpq")


def _swizzle_indices(mat, name):
    """The entries a swizzle name selects; AttributeError for a name that is not one, a
    syntax error for letters beyond the vector's size."""
    d = mat.__dict__
    if "entries" not in d or name.startswith("_") or not name or d.get("ndim") != 1:
        raise AttributeError(name)
    for group in _SWIZZLE_SETS:
        if all(c in group for c in name):
            n = d["n"]
            if any(group.index(c) >= n for c in name):
                raise FluxionSyntaxError(
                    f"vec{n} only has attributes={tuple(group[:n])}, got={tuple(name)}")
            return [group.index(c) for c in name]
    raise AttributeError(f"'{type(mat).__name__}' object has no attribute '{name}'")


def _typed_entries(entries, dt):
    """The entries of a matrix built from a list: cast to `dt` where it is given. In a kernel,
    where an entry is a kernel value, all are cast to the type they promote to (a Python int
    counting as the default integer type, a float as the default float type), as the original
    types a matrix literal: `ti.Vector([i_i32, 0.5])` is an f32 vector (its first entry no
    longer wraps around as an i32), `ti.Vector([x_f32, 2.0])` an f64 one under
    default_fp=f64. Entries that are all Python numbers stay numbers (weakly typed literals),
    an int among floats becoming a float, as it would be an f32 entry there."""
    if dt is not None:
        dt = T.normalize(dt)
        if builder.in_kernel():
            return [B.cast(e, dt) for e in entries]
        return [scalar_of(B.cast(e, dt), dt) for e in entries]
    if not builder.in_kernel() or not entries:
        return entries
    kinds = [_entry_type(e) for e in entries]
    if None in kinds:
        return entries          # (nested or unusual entries: left as they are)
    if not any(isinstance(e, Expr) for e in entries):
        if any(isinstance(e, float) for e in entries):
            return [float(e) if isinstance(e, numbers.Integral) else e for e in entries]
        return entries
    t = functools.reduce(T.promote, kinds)
    return [e if isinstance(e, Expr) and e.dtype is t else B.cast(e, t) for e in entries]


def scalar_of(v, dt):
    """A Python-scope entry of a matrix of type `dt`: a NumPy scalar of it, as the original
    holds them (`ti.math.vec3(1.1, 2, 3)[0]` is `np.float32(1.1)`, printed `1.1`, and arithmetic
    on it stays in f32, as in a kernel); `v` already converted (`B.cast`: an integer wrapped
    into the type's range). Entries that are not numbers are left as they are."""
    if isinstance(v, (int, float, np.generic)) and dt.bits > 1:
        return dt.np_dtype.type(v)
    return v


def in_kernel_matrix(mat):
    """A Python-scope matrix that a kernel names: its NumPy entries (a typed matrix's) become
    constants of their type, as the original makes such a matrix a kernel value, so that
    `g[1] * 0.1` for `g = ti.Vector([0, 0.1, 0], ti.f32)` is the kernel's f32 times a literal
    of the default float type, not NumPy's f32 product computed while the kernel is built."""
    if not any(_numpy_number(e) for e in mat.entries):
        return mat
    return mat._like([E.const(e.item(), T.from_numpy_dtype(e.dtype))
                      if _numpy_number(e) else e for e in mat.entries])


def _numpy_number(e):
    return isinstance(e, np.generic) and e.dtype.kind in "iuf"


def _entry_type(e):
    if isinstance(e, Expr):
        return e.dtype
    if isinstance(e, np.generic):
        return T.from_numpy_dtype(e.dtype)
    cfg = builder.current().cfg
    if isinstance(e, numbers.Integral):
        return cfg.default_ip
    if isinstance(e, float):
        return cfg.default_fp
    return None


def _zero(dt):
    return _typed(0, dt)


def _one(dt):
    return _typed(1, dt)


def _typed(v, dt):
    """`v` as an entry of `ti.Matrix.zero/one/identity/unit(dt, ...)`: in a kernel a constant
    of `dt` (as the original system's `ti.cast(v, dt)`: an f16 identity times an f16 matrix
    stays f16), in Python scope a number of its kind."""
    t = T.normalize(dt)
    if builder.in_kernel():
        return E.const(v, t)
    return float(v) if (dt is float or getattr(t, "is_float", False)) else v


def _sum(items):
    items = list(items)
    acc = items[0]
    for x in items[1:]:
        acc = acc + x
    return acc


def _reduce(fn, items):
    acc = items[0]
    for x in items[1:]:
        acc = fn(acc, x)
    return acc


def _truth_of(entries, fn):
    """`any` (fn: or) or `all` (and) of entries: in a kernel an i32 of 1 or 0, in Python scope
    a bool."""
    r = _reduce(fn, [B.truth(e) for e in entries])
    return r if isinstance(r, Expr) or builder.in_kernel() else bool(r)


def _cmp(op):
    """An entry of a comparison of vectors: in a kernel an i32 of 1 or 0, in Python scope a
    NumPy bool, as the original's (whose entries are then a NumPy array of bools: `~` is
    logical not, `+ 1` counts)."""
    def f(a, b):
        if isinstance(a, Expr) or isinstance(b, Expr):
            return binary(op, a, b)
        r = {"cmp_lt": a < b, "cmp_le": a <= b, "cmp_gt": a > b, "cmp_ge": a >= b,
             "cmp_eq": a == b, "cmp_ne": a != b}[op]
        return int(r) if builder.in_kernel() else np.bool_(r)
    return f


def _dynamic_get(mat, key):
    """Index a matrix with kernel values: a select chain over the (few) entries."""
    if not isinstance(key, tuple):
        key = (key,)
    if mat.ndim == 2 and len(key) == 1:
        rows = [mat._row(r) for r in range(mat.n)]
        return mat._make([_select_chain(key[0], [rw.entries[c] for rw in rows])
                             for c in range(mat.m)], mat.m, 1, 1)
    if len(key) == 1:
        return _select_chain(key[0], mat.entries)
    if len(key) != 2:
        raise FluxionIndexError(f"a matrix takes 1 or 2 indices, got {len(key)}")
    # a constant index is checked against its axis; with kernel values the flat index
    # r * m + c is what the select chain clamps (Taichi's clamp of an element index is on the
    # flattened index too: (2, 0) of a 2x2 reads (1, 1))
    r, c = (_axis_index(mat, k, n, key) for k, n in zip(key, (mat.n, mat.m)))
    return _select_chain(r * mat.m + c, mat.entries)


def _axis_index(mat, k, n, key):
    return k if isinstance(k, Expr) else mat._axis(k, n, key)


def _select_chain(index, values):
    # an index past either end reads the nearest entry (clamped), never an arbitrary one:
    # what ndarray(boundary="clamp") promises for element indices too
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = select(index <= 0 if k == 0 else index == k, values[k], out)
    return out


def _plus_eps(s, eps):
    """`s + eps` with `eps` as the user's literal: of the default type of its kind, also
    inside fluxion's library code (whose literals take the other operand's type). A zero
    that changes neither the value (s >= +0) nor the type is left out."""
    if isinstance(eps, numbers.Real) and not isinstance(eps, bool) and builder.in_kernel():
        lt = E.literal_type(eps)
        st = getattr(s, "dtype", None)
        if eps == 0 and st is not None and st.is_float and T.promote(st, lt) == st:
            return s
        return s + E.const(eps, lt)
    return s + eps
