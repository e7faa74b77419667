"""How each kind of kernel argument reaches the compiled code: the specifications that the
launch packs into context slots (scalars, vectors and matrices, structs, ndarrays).

`lang/kernel.py` makes one per parameter from its annotation (the template signature); the
launch (runtime/launch.py) reads them on every call, so they are plain slotted objects.
"""
from __future__ import annotations

import operator

import numpy as np

from fluxion.lang.matrix import Matrix, MatrixType
from fluxion.lang.struct import StructType


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
    __slots__ = ("mtype", "dtype", "count")

    def __init__(self, mtype):
        self.mtype = mtype
        self.dtype = mtype.dtype
        self.count = mtype.n * mtype.m


class StructArg:
    """A struct argument: one context slot per scalar member, in member order."""
    __slots__ = ("stype", "leaves", "dtype")

    def __init__(self, stype):
        self.stype = stype
        self.leaves = struct_leaves(stype)        # (path, scalar dtype)
        self.dtype = ("struct", id(stype))

    def flatten(self, value):
        out = []
        for path, _ in self.leaves:
            v = value
            for k in path[:-1]:
                v = v[k] if isinstance(v, dict) else getattr(v, k)
            last = path[-1]
            if isinstance(last, int):
                v = v.entries[last] if isinstance(v, Matrix) else list(np.ravel(v))[last]
            else:
                v = v[last] if isinstance(v, dict) else getattr(v, last)
            out.append(v)
        return out


def struct_leaves(stype, prefix=()):
    out = []
    for k in stype.members:
        t = stype.member_type(k)
        if isinstance(t, StructType):
            out.extend(struct_leaves(t, prefix + (k,)))
        elif isinstance(t, MatrixType):
            out.extend(((prefix + (k, c)), t.dtype) for c in range(t.n * t.m))
        else:
            out.append((prefix + (k,), t))
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
