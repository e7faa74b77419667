"""`ti.types.quant`: constructors of quantized types (ir/quant.py; lang/quant.py says where their values live).

    i10 = ti.types.quant.int(bits=10)                          # signed, computes in i32
    u5 = ti.types.quant.int(bits=5, signed=False)             # computes in u32
    fx = ti.types.quant.fixed(bits=10, max_value=20.0)        # [-20, 20) in 2**10 steps
    fl = ti.types.quant.float(exp=5, frac=10)                 # f16-like, computes in f32

A field of such a type is placed through `ti.BitpackedFields(max_num_bits=...)` or
`snode.quant_array(...)`.
"""
from fluxion.ir import quant as _q


def int(bits, signed=True, compute=None):  # noqa: A001 (the original system's name)
    """A `bits`-bit integer (two's complement when signed), computed in `compute` (default:
    the default integer type, its unsigned twin for unsigned types)."""
    return _q.make_int(bits, signed, compute)


def fixed(bits, signed=True, max_value=1.0, compute=None, scale=None):
    """A `bits`-bit fixed-point number: an integer times `scale` (default: `max_value` over
    2**(bits-1) when signed, 2**bits when not), computed in `compute` (default: the default
    float type)."""
    return _q.make_fixed(bits, signed, max_value, compute, scale)


def float(exp, frac, signed=True, compute=None):  # noqa: A001
    """A floating-point number with `exp` exponent bits and `frac` fraction bits (a signed
    type spends one of them on the sign), computed in f32."""
    return _q.make_float(exp, frac, signed, compute)


__all__ = ["int", "fixed", "float"]
