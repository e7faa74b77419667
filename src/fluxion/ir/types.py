"""Primitive data types and the promotion rules of the language.

A `DataType` is a small immutable object; the module-level instances (`i32`, `f32`, ...) are
the only ones, so identity comparison works. Python literals are *weak*: an `int` literal
combined with a typed value takes that value's type, like in the original system.
"""
from __future__ import annotations

import numpy as np


class DataType:
    __slots__ = ("name", "bits", "is_float", "is_signed", "np_dtype")

    def __init__(self, name, bits, is_float, is_signed):
        self.name = name
        self.bits = bits
        self.is_float = is_float
        self.is_signed = is_signed
        kind = "float" if is_float else ("int" if is_signed else "uint")
        # u1 (booleans) is a byte in memory, 0 or 1, like NumPy's bool
        self.np_dtype = np.dtype(np.bool_) if bits == 1 else np.dtype(f"{kind}{bits}")

    @property
    def is_int(self):
        return not self.is_float

    @property
    def nbytes(self):
        return max(1, self.bits // 8)

    def __repr__(self):
        return self.name

    def to_string(self):
        """The type's name (`ti.f32.to_string()` is 'f32'), as in the original system."""
        return self.name

    def __call__(self, *args):
        # `ti.f32(x)` is a cast in a kernel and a conversion in Python scope: the builtins
        # (frontend/builtins.py) install what that means, so this module needs nothing above
        # it.
        return _hooks.call(self, *args)

    def __reduce__(self):
        return (by_name, (self.name,))


# u1: a boolean, 0 or 1. Converting a value to it is a truth test (`ti.u1(2)` is 1, as
# `bool(2)`); arithmetic between u1 values wraps in one bit (1 + 1 is 0), as in the original
u1 = DataType("u1", 1, False, False)
i8 = DataType("i8", 8, False, True)
i16 = DataType("i16", 16, False, True)
i32 = DataType("i32", 32, False, True)
i64 = DataType("i64", 64, False, True)
u8 = DataType("u8", 8, False, False)
u16 = DataType("u16", 16, False, False)
u32 = DataType("u32", 32, False, False)
u64 = DataType("u64", 64, False, False)
f16 = DataType("f16", 16, True, True)
f32 = DataType("f32", 32, True, True)
f64 = DataType("f64", 64, True, True)

ALL = (i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64, u1)
_BY_NAME = {t.name: t for t in ALL}
# (NumPy's bool arrays map to u8 in from_numpy_dtype: external arrays keep their byte type)
_BY_NP = {t.np_dtype: t for t in ALL if t is not u1}

# aliases accepted by the original system
int8, int16, int32, int64 = i8, i16, i32, i64
uint1, uint8, uint16, uint32, uint64 = u1, u8, u16, u32, u64
float16, float32, float64 = f16, f32, f64
half = f16


def by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return u8
    try:
        return _BY_NP[dt]
    except KeyError:
        raise TypeError(f"unsupported numpy dtype {dt}") from None


def promote(a: DataType, b: DataType) -> DataType:
    """The type of a binary arithmetic op on two typed operands."""
    if a is b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    # same width, one signed and one unsigned: unsigned wins (C rule, as the original system)
    return a if not a.is_signed else b


class _Hooks:
    """What the layers above supply to the data types: the meaning of calling a type
    (frontend/builtins.py) and the default float and int types of the running program
    (lang/runtime.py, from `ti.init(default_fp=..., default_ip=...)`)."""

    @staticmethod
    def call(dtype, *args):
        raise TypeError(f"{dtype.name}(...) needs fluxion's language layer (import fluxion)")

    @staticmethod
    def defaults():
        return f32, i32


_hooks = _Hooks()


def normalize(dtype, default_fp=None, default_ip=None):
    """Map annotations (`float`, `int`, numpy dtypes, DataType) to a DataType."""
    if dtype is float:
        return default_fp or _hooks.defaults()[0]
    if dtype is int:
        return default_ip or _hooks.defaults()[1]
    if dtype is bool:
        return u1          # as in the original system (1.7): fields and arguments of bools
    if isinstance(dtype, DataType):
        return dtype
    try:
        return from_numpy_dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a fluxion data type") from None
