"""Quantized data types (`ti.types.quant.int/fixed/float`): how a value of a compute type
becomes `bits` bits and back. Where such values live (words in SNode cells) and their
Python-scope encoding are the language's (lang/quant.py, which describes the whole design);
codegen/quant.py lowers the same encodings to LLVM.
"""
from __future__ import annotations

import builtins

import numpy as np

from fluxion.ir import types as T

WORD_TYPES = {8: T.u8, 16: T.u16, 32: T.u32, 64: T.u64}


# -- the types ------------------------------------------------------------------------------
class QuantType:
    """Base of the quantized types: `bits` stored, computed with `compute`."""

    def _key(self):
        raise NotImplementedError

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash((type(self).__name__,) + self._key())

    def __reduce__(self):
        return (type(self), self._key())

    def __call__(self, *args):
        raise TypeError(f"{self!r} is a storage type of fields, not a type to convert to; "
                        f"cast to its compute type {self.compute} instead")


class QuantInt(QuantType):
    def __init__(self, bits, signed, compute):
        self.bits, self.signed, self.compute = bits, signed, compute

    def _key(self):
        return (self.bits, self.signed, self.compute)

    def __repr__(self):
        return f"q{'i' if self.signed else 'u'}{self.bits}"


class QuantFixed(QuantType):
    def __init__(self, bits, signed, compute, scale):
        self.bits, self.signed, self.compute, self.scale = bits, signed, compute, scale

    def _key(self):
        return (self.bits, self.signed, self.compute, self.scale)

    def __repr__(self):
        return f"qfx(d=q{'i' if self.signed else 'u'}{self.bits} c={self.compute} s={self.scale})"


class QuantFloat(QuantType):
    def __init__(self, exp, frac, signed, compute):
        self.exp, self.frac, self.signed, self.compute = exp, frac, signed, compute
        self.bits = exp + frac
        self.mag = frac - (1 if signed else 0)      # fraction bits, the sign bit left out
        self.bias = (1 << (exp - 1)) - 1
        # the largest exponent field: all ones, or what an f32 can hold (exp == 8: 254)
        self.field_max = min((1 << exp) - 1, 127 + self.bias)

    def _key(self):
        return (self.exp, self.frac, self.signed, self.compute)

    def __repr__(self):
        return f"qfl(d=q{'i' if self.signed else 'u'}{self.frac} e=qu{self.exp} c={self.compute})"


def make_int(bits, signed=True, compute=None):
    bits = _count(bits, "bits", 1, 64, "quant.int")
    if compute is None:
        ip = T._hooks.defaults()[1]
        compute = ip if signed else {32: T.u32, 64: T.u64}.get(ip.bits, T.u32)
        if compute.bits < bits:
            compute = T.i64 if signed else T.u64
    compute = T.normalize(compute)
    if compute.is_float or compute.bits < bits:
        raise TypeError(f"quant.int({bits}): the compute type must be an integer type of at "
                        f"least {bits} bits, got {compute}")
    return QuantInt(bits, bool(signed), compute)


def make_fixed(bits, signed=True, max_value=1.0, compute=None, scale=None):
    bits = _count(bits, "bits", 1, 32, "quant.fixed")
    compute = T._hooks.defaults()[0] if compute is None else T.normalize(compute)
    if not compute.is_float or compute.bits < 32:
        raise TypeError(f"quant.fixed: the compute type must be f32 or f64, got {compute}")
    if scale is None:
        scale = max_value / 2 ** (bits - 1) if signed else max_value / 2 ** bits
    scale = builtins.float(scale)
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"quant.fixed: the scale (or max_value) must be positive, got {scale}")
    return QuantFixed(bits, bool(signed), compute, scale)


def make_float(exp, frac, signed=True, compute=None):
    exp = _count(exp, "exp", 1, 8, "quant.float")
    frac = _count(frac, "frac", 1, 24 if signed else 23, "quant.float")
    compute = T.f32 if compute is None else T.normalize(compute)
    if compute is not T.f32:
        # (the original system asserts the same: the encoding works on f32 bit patterns)
        raise TypeError(f"quant.float: the compute type must be f32, got {compute}")
    return QuantFloat(exp, frac, bool(signed), compute)


def _count(v, name, lo, hi, what):
    if isinstance(v, bool) or not isinstance(v, (builtins.int, np.integer)) or not lo <= v <= hi:
        raise ValueError(f"{what}: {name} must be an integer from {lo} to {hi}, got {v!r}")
    return builtins.int(v)


def is_quant(dtype):
    return isinstance(dtype, QuantType)


# the floats (f32, f64) from -2**63 to the largest below 2**63: they convert to i64 exactly
I64_FLOAT_RANGE = {32: (-2.0 ** 63, 2.0 ** 63 - 2.0 ** 39), 64: (-2.0 ** 63, 2.0 ** 63 - 1024.0)}
