"""Quantized types (`ti.types.quant.int/fixed/float`) and where their values live.

The design is one layer with three parts:

* A quantized type says how a value of its *compute type* (a primitive type: `i32`, `f32`...,
  what kernels compute with) becomes `bits` bits and back: its encoding. `QuantInt`,
  `QuantFixed` and `QuantFloat` of ir/quant.py (data types are the IR's).
* Quantized values live in unsigned words (u8, u16, u32, u64) that are ordinary members of
  SNode cells: a `ti.BitpackedFields` placed under an SNode is one `Word` per cell holding its
  fields at fixed bit offsets (floats of a `shared_exponent=True` group share one exponent),
  and a `quant_array` level packs n elements of one field into one word of its parent's cell.
* A quantized element is a `QuantSlot` on the field's `Place`: the address of its word
  (computed like any field address, from `place.addr` and `place.terms`), its bit offset in
  the word (`offset`, plus `bits` times the quant-array index from `place.bit_terms`), its
  width and its encoding. Kernels address it with `QuantPtrStmt`, whose value is a *bit
  address* (8 * the word's address + the bit offset, one i64, so it travels between tasks
  like any integer); `codegen/quant.py` turns loads, stores and atomics through it into
  shifts and masks on the word. Python scope reads and writes the same words through numpy,
  with the encoding implemented a second time here (`decode`, `encode`, `encode_group`) with
  the same integer and IEEE operations, so both give the same bits (tests compare them).
  Within its bits a float keeps its fraction lowest, then its sign (signed types), then its
  exponent; a shared-exponent group keeps the exponent first, then each member's fraction
  and sign. (No public API shows bit positions; the original's differ.)

What a value stores (checked against the original system, Taichi 1.7.4):
* `quant.int(bits, signed)`: the value converted to the compute type, then its low `bits`
  bits (two's complement wraparound, like any integer conversion).
* `quant.fixed(bits, signed, max_value | scale)`: the integer round(v / scale), rounding
  halves away from zero, computed as `v * (1 / scale)` in the compute type; its low `bits`
  bits (out-of-range values wrap around, as for integers; the original gives hardware-
  dependent results for 32-bit types). Reads give `digits * scale` in the compute type.
* `quant.float(exp, frac, signed)`: like an IEEE float with `exp` exponent bits (bias
  2**(exp-1) - 1) and `frac` fraction bits, of which a signed type spends one on the sign;
  a normal number has an implicit leading one, the exponent field 0 is zero. Rounding is to
  nearest with halves away from zero; a magnitude below the smallest normal number gives 0;
  one above the largest (or inf, NaN) gives the largest magnitude (the original system wraps
  the exponent there, giving values unrelated to the input). An unsigned type stores |v|.
* Shared exponent (`BitpackedFields.place(a, b, ..., shared_exponent=True)`): the group's
  exponent is the largest exponent of its members' values, and each member stores
  round(|v| / 2**(E - m + 1)) with an explicit leading bit (m = its fraction bits, less the
  sign), saturated at 2**m - 1. Storing one member re-encodes the others from their current
  values (they may lose low bits when the exponent grows). A member that rounds to zero is
  +0 (the original system reads a rounded-away negative one back as -2**(E - m - 1)).
  Consecutive stores round once each: the original system may fuse the stores of one word
  within a kernel and round once.
"""
from __future__ import annotations

import builtins

import numpy as np

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionError, FluxionSyntaxError
from fluxion.ir.quant import I64_FLOAT_RANGE, WORD_TYPES, QuantFixed, QuantFloat, QuantInt


# -- storage ---------------------------------------------------------------------------------
class SharedGroup:
    """Floats of one word sharing an exponent (`exp` bits at `exp_offset` in the word);
    `slots` are the members' QuantSlots in placement order, each with its fraction bits at
    its own `offset`."""

    def __init__(self, exp, exp_offset):
        self.exp, self.exp_offset = exp, exp_offset
        self.bias = (1 << (exp - 1)) - 1
        self.field_max = min((1 << exp) - 1, 127 + self.bias)
        self.slots = []


class QuantSlot:
    """How one quantized field component sits in its word (see the module docstring)."""

    def __init__(self, qtype, word, offset, group=None, array=False):
        self.qtype = qtype
        self.word = word          # the word's unsigned DataType
        self.offset = offset      # bit offset of the value (of a float's fraction bits)
        self.group = group        # SharedGroup of a shared-exponent float, else None
        self.array = array        # an element of a quant_array: + bits * element index
        self.index = None         # position in its group
        # the word's only content (a bitpacked word of one member, not a shared group): its
        # other bits are always zero, so a store writes the whole word and needs no merge
        self.sole = False

    @property
    def bits(self):
        return self.qtype.bits


class Word:
    """A member of SNode cells: one unsigned word holding quantized fields."""

    def __init__(self, dtype, bitpack):
        self.dtype = dtype
        self.bitpack = bitpack
        self.places = []


class ScalarComponent:
    """`x.get_scalar_field(i, j)`: one component of a matrix field, to place on its own."""

    def __init__(self, field, component):
        self.field, self.component = field, component

    def _quant_members(self):
        return [(self.field, self.component)]


class BitpackedFields:
    """`ti.BitpackedFields(max_num_bits=32)`: quantized fields packed into one word per cell.
    `.place(a, b, ...)` adds members (a matrix field adds each component) at increasing bit
    offsets; `snode.place(bitpack)` puts the word into the SNode's cells."""

    def __init__(self, max_num_bits):
        if max_num_bits not in WORD_TYPES:
            raise ValueError(f"ti.BitpackedFields: max_num_bits must be 8, 16, 32 or 64, got "
                             f"{max_num_bits!r}")
        self.max_num_bits = max_num_bits
        self.members = []          # (field, component, QuantSlot)
        self.used = 0
        self.placed = False

    def place(self, *fields, shared_exponent=False):
        if self.placed:
            raise FluxionError("ti.BitpackedFields: cannot add fields after it was placed")
        members = []
        for f in fields:
            getter = getattr(f, "_quant_members", None)
            if getter is None:
                raise TypeError(f"BitpackedFields.place() takes fields, got {f!r}")
            members.extend(getter())
        word = WORD_TYPES[self.max_num_bits]
        seen = {(id(f), c) for f, c, _ in self.members}
        for f, c in members:
            q = f._qtypes[c]
            if q is None:
                raise TypeError(f"BitpackedFields.place(): field {f._label()} has the primitive "
                                f"type {f.dtype}; only fields of quantized types "
                                f"(ti.types.quant...) are packed")
            if (id(f), c) in seen or f.places[c] is not None:
                raise FluxionError(f"field {f._label()} is already placed")
            seen.add((id(f), c))
        if shared_exponent:
            if len(members) <= 1:
                raise FluxionSyntaxError("At least 2 fields need to be placed when "
                                         "shared_exponent=True")
            qs = [f._qtypes[c] for f, c in members]
            if not all(isinstance(q, QuantFloat) for q in qs):
                raise TypeError("shared_exponent=True: every member must be a quant.float type")
            if len({q.exp for q in qs}) != 1:
                raise TypeError(f"shared_exponent=True: the members' exponents must have the same "
                                f"number of bits, got {sorted({q.exp for q in qs})}")
            if any(q.mag < 1 for q in qs):
                raise TypeError("shared_exponent=True: each member needs at least one fraction "
                                "bit besides its sign")
            need = qs[0].exp + sum(q.frac for q in qs)
            self._check_room(need)
            group = SharedGroup(qs[0].exp, self.used)
            off = self.used + qs[0].exp
            for (f, c), q in zip(members, qs):
                slot = QuantSlot(q, word, off, group)
                slot.index = len(group.slots)
                group.slots.append(slot)
                self.members.append((f, c, slot))
                off += q.frac
            self.used += need
            return
        for f, c in members:
            q = f._qtypes[c]
            self._check_room(q.bits)
            self.members.append((f, c, QuantSlot(q, word, self.used)))
            self.used += q.bits

    def _check_room(self, need):
        if self.used + need > self.max_num_bits:
            raise FluxionError(f"ti.BitpackedFields(max_num_bits={self.max_num_bits}) overflows: "
                               f"{self.used + need} bits used out of {self.max_num_bits}")

    def _place_in(self, snode, offset=None):
        if self.placed:
            raise FluxionError("this ti.BitpackedFields is already placed")
        if not self.members:
            raise FluxionError("ti.BitpackedFields: place fields into it before placing it")
        self.placed = True
        if len(self.members) == 1 and self.members[0][2].group is None:
            self.members[0][2].sole = True
        w = Word(WORD_TYPES[self.max_num_bits], self)
        snode.children.append(w)
        for f, c, slot in self.members:
            w.places.append(f._place_quant(c, snode, slot, offset))
        return w


# -- encoding in numpy (Python scope); codegen/quant.py is the same in LLVM IR -------------
_U64 = np.uint64


def _u(x):
    return np.asarray(x).astype(_U64)


def extract(words, offsets, bits):
    """The `bits`-bit fields at `offsets` of unsigned `words`, as uint64."""
    return (_u(words) >> _u(offsets)) & _U64((1 << bits) - 1)


def insert(words, offsets, bits, raw):
    mask = _U64((1 << bits) - 1)
    offs = _u(offsets)
    return (_u(words) & ~(mask << offs)) | ((_u(raw) & mask) << offs)


def decode(q, raw):
    """Values (numpy arrays of the compute type) of the raw `bits`-bit patterns `raw`."""
    raw = _u(raw)
    ct = q.compute.np_dtype
    if isinstance(q, QuantFloat):
        m = q.mag
        fr = raw & _U64((1 << m) - 1)
        sign = (raw >> _U64(m)) & _U64(1) if q.signed else np.zeros_like(raw)
        field = (raw >> _U64(q.frac)) & _U64((1 << q.exp) - 1)
        bits = (sign << _U64(31)) | ((field + _U64(127 - q.bias)) << _U64(23)) | \
            (fr << _U64(23 - m))
        out = (bits & _U64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
        return np.where(field == 0, np.float32(0), out)
    digits = _sign_extend(raw, q.bits) if q.signed else raw
    if isinstance(q, QuantInt):
        return digits.astype(ct)      # the numpy cast wraps like LLVM's trunc
    # fixed: digits (an exact int64) in the compute type, times the scale
    with np.errstate(over="ignore"):
        return digits.astype(ct) * ct.type(q.scale)


def _sign_extend(raw, bits):
    v = raw.astype(np.int64)
    if bits < 64:
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v


def encode(q, values):
    """Raw `bits`-bit patterns (uint64) storing `values` (converted to the compute type)."""
    ct = q.compute.np_dtype
    if isinstance(q, QuantInt):
        return _u(_as_int(values, ct)) & _U64((1 << q.bits) - 1)
    v = np.asarray(values).astype(ct)
    if isinstance(q, QuantFixed):
        with np.errstate(all="ignore"):
            s = v * ct.type(1.0 / q.scale)
            r = s + np.copysign(ct.type(0.5), s)
            # truncation toward zero of r clamped into the i64 range (NaN: 0)
            lo, hi = I64_FLOAT_RANGE[q.compute.bits]
            r = np.where(np.isnan(r), ct.type(0), np.clip(r, ct.type(lo), ct.type(hi)))
            i = np.trunc(r).astype(np.int64)
        return i.astype(_U64) & _U64((1 << q.bits) - 1)
    return _float_encode(q, v)


def _as_int(values, ct):
    """`values` in the integer compute type `ct`: floats truncated toward zero, integers
    wrapped, as a kernel's conversion does."""
    a = np.asarray(values)
    if a.dtype.kind == "f":
        return _to_int64_saturating(a).astype(ct)
    if a.dtype == object:       # Python ints beyond 64 bits: their low 64 bits
        flat = [builtins.int(x) & 0xFFFFFFFFFFFFFFFF for x in a.reshape(-1)]
        return np.array(flat, dtype=_U64).reshape(a.shape).astype(ct)
    return a.astype(ct)


def _to_int64_saturating(r):
    """LLVM's fptosi.sat to i64: truncation toward zero, saturated, NaN -> 0."""
    r = np.asarray(r, dtype=np.float64)
    big = r >= 9.223372036854775808e18
    small = r < -9.223372036854775808e18
    nan = np.isnan(r)
    safe = np.where(big | small | nan, 0.0, np.trunc(r))
    out = safe.astype(np.int64)
    out = np.where(big, np.int64(2**63 - 1), out)
    out = np.where(small, np.int64(-2**63), out)
    return out


def _float_encode(q, v):
    b = v.astype(np.float32).view(np.uint32).astype(_U64)
    sign = b >> _U64(31)
    mag = b & _U64(0x7FFFFFFF)
    e_orig = mag >> _U64(23)
    m = q.mag
    if m < 23:
        mag = mag + _U64(1 << (22 - m))          # round half away from zero; carries into e
        fr = (mag >> _U64(23 - m)) & _U64((1 << m) - 1)
    else:
        fr = mag & _U64((1 << 23) - 1)
    e = (mag >> _U64(23)).astype(np.int64)
    field = e - 127 + q.bias
    zero = (e_orig == 0) | (field <= 0)
    sat = ~zero & (field > q.field_max)
    field = np.where(zero, 0, np.where(sat, q.field_max, field)).astype(_U64)
    fr = np.where(zero, _U64(0), np.where(sat, _U64((1 << m) - 1), fr))
    raw = (field << _U64(q.frac)) | fr
    if q.signed:
        raw = raw | (np.where(zero, _U64(0), sign) << _U64(m))
    return raw


def decode_group(group, words):
    """Values of every member of a shared-exponent group (list of float32 arrays)."""
    words = _u(words)
    field = extract(words, group.exp_offset, group.exp).astype(np.int64)
    out = []
    for slot in group.slots:
        q = slot.qtype
        d = extract(words, slot.offset, q.mag)
        v = np.ldexp(d.astype(np.float64), field - group.bias - q.mag + 1)
        if q.signed:
            neg = extract(words, slot.offset + q.mag, 1) == 1
            v = np.where(neg, -v, v)
        v = np.where(field == 0, 0.0, v).astype(np.float32)
        out.append(_flush_denormal(v))
    return out


def _flush_denormal(v):
    # kernels run with denormal results flushed to zero (cpu_jit.flush_to_zero)
    return np.where(np.abs(v) < np.float32(2.0 ** -126), np.float32(0) * v, v)


def encode_group(group, words, values):
    """`words` with the group's bits replaced by the encoding of `values` (one array per
    member, in the group's order)."""
    words = _u(words)
    bs = [np.asarray(v).astype(np.float32).view(np.uint32).astype(_U64) for v in values]
    es = [((b >> _U64(23)) & _U64(0xFF)).astype(np.int64) for b in bs]
    e_max = es[0]
    for e in es[1:]:
        e_max = np.maximum(e_max, e)
    field = e_max - 127 + group.bias
    zero = (e_max == 0) | (field <= 0)
    sat = field > group.field_max
    e_top = np.where(sat, group.field_max + 127 - group.bias, e_max)
    field = np.where(zero, 0, np.where(sat, group.field_max, field))
    out = insert(words, group.exp_offset, group.exp, field)
    for slot, b, e in zip(group.slots, bs, es):
        q = slot.qtype
        m = q.mag
        full = (b & _U64(0x7FFFFF)) | _U64(1 << 23)
        s = (24 - m) + (e_top - e)          # how far the 24-bit significand moves right
        left = np.clip(-s, 0, 40).astype(_U64)
        right = np.clip(s, 1, 40).astype(_U64)
        d = np.where(s <= 0, full << left, (full + (_U64(1) << (right - _U64(1)))) >> right)
        d = np.minimum(d, _U64((1 << m) - 1))
        d = np.where(zero | (e == 0), _U64(0), d)
        out = insert(out, slot.offset, m, d)
        if q.signed:
            neg = np.where(d == 0, _U64(0), b >> _U64(31))
            out = insert(out, slot.offset + m, 1, neg)
    return out
