"""How each kind of kernel argument reaches the compiled code: the specifications that the
launch packs into context slots (scalars, vectors and matrices, structs, ndarrays).

`lang/kernel.py` makes one per parameter from its annotation (the template signature); the
launch (runtime/launch.py) reads them on every call, so they are plain slotted objects. What
the launch needs of the language's values comes with them, chosen by the language: the class
whose instances pass their `entries` (lang/matrix.py's Matrix; any other value passes its
values in row-major order), a struct's scalar members, and how an array is packed.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion.ir.errors import FluxionTypeError


class ScalarArg:
    __slots__ = ("dtype", "is_float", "lo", "hi")

    def __init__(self, dtype):
        self.dtype = dtype
        self.is_float = dtype.is_float
        # the values a Python int may have for this argument (checked on every launch)
        # (the fast path's: values that fit the int64 slot as they are)
        self.lo, self.hi = int_range(dtype) if dtype.is_int else (0, -1)
        self.hi = min(self.hi, (1 << 63) - 1)


def int_range(dtype):
    if dtype.is_signed:
        return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    return 0, (1 << dtype.bits) - 1


def int_slot_value(v, dtype):
    """What an int64 context slot holds for integer argument `v` of type `dtype` (u64 values
    above 2**63 as their two's-complement bit pattern), or None where `v` is no integer or
    out of the type's range: the kernel would see another value (a wrapped one, or a float
    truncated), so the launch raises instead. bool and NumPy integers are integers; floats
    are not, even integral ones, as in the original system."""
    if isinstance(v, (float, np.floating, complex, np.complexfloating, str, bytes)):
        return None
    if isinstance(v, np.bool_):
        v = bool(v)                    # (NumPy 2's bool has no __index__)
    try:
        v = operator.index(v)          # int, bool, NumPy integers, 0-d integer tensors
    except TypeError:
        return None
    if dtype.bits == 1:
        return int(v != 0)             # a u1 argument takes the truth of an integer
    lo, hi = int_range(dtype)
    if not lo <= v <= hi:
        return None
    return v - (1 << 64) if v >= 1 << 63 else v


class MatrixArg:
    __slots__ = ("mtype", "dtype", "count", "matrix_cls", "shape")

    def __init__(self, mtype, matrix_cls):
        self.mtype = mtype
        self.dtype = mtype.dtype
        self.count = mtype.n * mtype.m
        self.matrix_cls = matrix_cls     # a value of this class passes its `entries`
        self.shape = (mtype.n,) if mtype.ndim == 1 else (mtype.n, mtype.m)

    def mismatch(self, value):
        """Why `value` does not have this type's shape (None when it has). Entries pass in
        row-major order, so a value of another 2-D shape with as many entries (a 3x2 matrix
        for a 2x3, a 2x3 for a vector of 6) would be read as this shape without a word. A
        flat sequence of the right length passes (row-major), as a vector does for an n x 1
        or 1 x n shape."""
        if isinstance(value, self.matrix_cls):
            shape = (value.n,) if value.ndim == 1 else (value.n, value.m)
        else:
            try:
                shape = np.shape(value)
            except ValueError:       # ragged nested lists
                return f"{value!r} is not {self.count} values of shape {self.shape}"
        if len(shape) < 2 or shape == self.shape:
            return None
        if len(self.shape) == 1 and len(shape) == 2 and 1 in shape:
            return None
        return f"a value of shape {tuple(shape)} is given for shape {self.shape}"


class StructArg:
    """A struct argument: one context slot per scalar member, in member order."""
    __slots__ = ("stype", "leaves", "dtype", "matrix_cls", "struct_cls", "layout")

    def __init__(self, stype, leaves, matrix_cls, struct_cls):
        self.stype = stype
        self.leaves = leaves        # (path, scalar dtype); a matrix member's path ends in its index
        self.dtype = ("struct", id(stype))
        self.matrix_cls = matrix_cls
        self.struct_cls = struct_cls    # its values' members are their `_members`
        self.layout = _layout(leaves)

    def mismatch(self, value):
        """Why `value` is not a value of this struct type (None when it is): its members and
        their shapes must be the type's, or a struct of another type would be read in part
        (a vec3 member where a vec2 is expected passed its first two entries). A value of
        this very type is checked too: a nested struct member keeps the type it was given."""
        return self._mismatch(value, self.layout, ())

    def _mismatch(self, value, layout, path):
        where = f" (member '{'.'.join(path)}')" if path else ""
        if isinstance(value, self.struct_cls):
            members = value._members
        elif isinstance(value, dict):
            members = value
        else:
            return f"a struct is expected{where}, not {type(value).__name__}"
        if set(members) != set(layout):
            return (f"it has members {sorted(members)}{where}; the type has "
                    f"{sorted(layout)}")
        for k, want in layout.items():
            v = members[k]
            if isinstance(want, dict):
                why = self._mismatch(v, want, path + (k,))
                if why:
                    return why
                continue
            size = (len(v.entries) if isinstance(v, self.matrix_cls) else
                    None if isinstance(v, (dict, self.struct_cls)) else np.size(v))
            if want is None and (size != 1 or isinstance(v, self.matrix_cls) or np.ndim(v)):
                return f"member '{'.'.join(path + (k,))}' is a scalar, not {type(v).__name__}"
            if want is not None and size != want:
                return (f"member '{'.'.join(path + (k,))}' takes {want} entries, "
                        f"got {'a ' + type(v).__name__ if size is None else size}")
        return None

    def flatten(self, value):
        out = []
        for path, _ in self.leaves:
            v = value
            for k in path[:-1]:
                v = v[k] if isinstance(v, dict) else getattr(v, k)
            last = path[-1]
            if isinstance(last, int):
                v = v.entries[last] if isinstance(v, self.matrix_cls) else list(np.ravel(v))[last]
            else:
                v = v[last] if isinstance(v, dict) else getattr(v, last)
            out.append(v)
        return out


def _layout(leaves):
    """A struct type's members as its leaves give them: name -> a nested layout (a struct), the
    number of entries (a matrix) or None (a scalar)."""
    out = {}
    for path, _ in leaves:
        names = path[:-1] if isinstance(path[-1], int) else path
        node = out
        for k in names[:-1]:
            node = node.setdefault(k, {})
        if isinstance(path[-1], int):
            node[names[-1]] = (node.get(names[-1]) or 0) + 1
        else:
            node[names[-1]] = None
    return out


class Checked(tuple):
    """The names of the ndarray arguments whose accesses an instance bound-checks; the last
    entry of its key."""
    __slots__ = ()


class NdarrayArg:
    __slots__ = ("ann", "cache")

    def __init__(self, ann):
        self.ann = ann
        self.cache = {}   # array kind -> checked Desc, so a launch only reads the pointer


class ArrayArg:
    """A kernel's ndarray argument as the compiled code sees it: context slots for its data
    pointer, its grad's pointer, its shape and its byte strides."""

    def __init__(self, name, desc, slot, pack=None):
        self.name = name
        # how a launch packs the value passed for it (the language's arrays:
        # lang/ndarray.py's pack_array, given by whoever makes the spec)
        self.pack = pack
        self.desc = desc
        self.ptr_slot = slot
        self.grad_slot = slot + 1
        total = desc.ndim + len(desc.elem_shape)
        self.shape_slot = slot + 2
        self.stride_slot = slot + 2 + total
        self.nslots = 2 + 2 * total
        self._written = False
        self.no_grad = False      # annotated `ti.types.ndarray(needs_grad=False)`
        self.reads_grad = False   # the kernel accesses `arr.grad[...]` (its launches pass it)
        self.clamp = False        # annotated `boundary="clamp"`: indices clamped to the shape
        # every access is bound-checked, whatever the configuration (the outputs of a
        # torch_function: tensors its factories made, whose shapes nothing else checks)
        self.checked = False
        self.clamp = False        # annotated `ti.types.ndarray(boundary="clamp")`

    @property
    def written(self):
        """Whether the compiled code stores to the array (set after the passes)."""
        return self._written

    @written.setter
    def written(self, v):
        if v and not self.desc.writable:
            raise FluxionTypeError(f"{self.desc.where or f'argument {self.name!r}'} is written "
                                   f"by the kernel, but {_READ_ONLY_WHY}")
        self._written = v

    def __repr__(self):
        return self.name


_READ_ONLY_WHY = ("the array passed for it cannot be written: a read-only numpy array, or a "
                  "strided array whose elements overlap (a stride of 0, as from expand() or "
                  "np.broadcast_to). Pass a writable, non-overlapping copy "
                  "(tensor.contiguous() / arr.copy())")
