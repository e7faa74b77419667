"""Loads, stores and atomics of quantized field elements, as shifts and masks on words.

A `QuantPtrStmt` (lang/quant.py has the whole design) lowers to a bit address, 8 * the word's
address + the element's bit offset. An access in the same function uses the word pointer
(an offset from the field's base, as for any field) and the bit offset computed there; one in
another task (a value passed along) takes them back from the bit address. A load reads the word and decodes the element's bits into the compute type; a store
encodes the value and merges it into the word; an atomic decodes, combines and re-encodes.
Stores and atomics in parallel code are compare-exchange loops on the whole word: other
threads may be writing other elements of the same word (a quant array's neighbours, the
other members of a bitpacked cell). Serial code reads, merges and writes back. A word that
holds one element only (a bitpacked word of one field) is stored whole, without a merge.

The encodings are the numpy ones of lang/quant.py, operation for operation (integer
arithmetic on the bits of f32 values; the float operations are single IEEE operations without
fast-math flags), so that kernels and Python scope store the same bits.
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.ir import quant as Q

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()


def _log2(n):
    return n.bit_length() - 1


class QuantLowering:
    """Mixed into FunctionLowering: `self.b` is the builder, `self.parallel` says whether other
    threads run the same code at the same time."""

    # -- addresses ------------------------------------------------------------------------------
    def lower_QuantPtrStmt(self, s):
        b = self.b
        place = s.place
        slot = place.quant
        wty = ir.IntType(slot.word.bits)
        byte = self.place_offset(place, [self.index64(i) for i in s.indices])
        base = self.ml.place_base(place)
        wptr = b.bitcast(base if byte is None else b.gep(base, [byte]), wty.as_pointer())
        bit = ir.Constant(I64, slot.offset)
        idx = None
        for t in place.bit_terms:
            v = self.index64(s.indices[t.axis])
            off = place.field.offset
            if off and off[t.axis]:
                v = b.sub(v, ir.Constant(I64, off[t.axis]))
            if t.divisor != 1:
                v = b.udiv(v, ir.Constant(I64, t.divisor))
            if not t.outermost:
                v = b.urem(v, ir.Constant(I64, t.extent))
            v = b.mul(v, ir.Constant(I64, t.stride))
            idx = v if idx is None else b.add(idx, v)
        if idx is not None:
            bit = b.add(bit, b.mul(idx, ir.Constant(I64, slot.bits)))
        # the accesses in this function use the pointer and offset themselves (LLVM sees a
        # field address it can reason about); the bit address serves uses in other tasks
        self.values[("quant", id(s))] = (wptr, self._resize(bit, wty))
        return b.add(b.shl(b.ptrtoint(wptr, I64), ir.Constant(I64, 3)), bit)

    def quant_word(self, ptr):
        """(pointer to the word, bit offset as a word-typed value) of QuantPtrStmt `ptr`."""
        known = self.values.get(("quant", id(ptr)))
        if known is not None:
            return known
        b = self.b
        slot = ptr.place.quant
        wty = ir.IntType(slot.word.bits)
        addr = self.v(ptr)
        if not slot.array:
            # a bitpacked member: its offset is a constant
            waddr = b.lshr(b.sub(addr, ir.Constant(I64, slot.offset)), ir.Constant(I64, 3))
            off = ir.Constant(wty, slot.offset)
        else:
            lg = _log2(slot.word.bits)
            waddr = b.shl(b.lshr(addr, ir.Constant(I64, lg)),
                          ir.Constant(I64, _log2(slot.word.nbytes)))
            off = self._resize(b.and_(addr, ir.Constant(I64, slot.word.bits - 1)), wty)
        return b.inttoptr(waddr, wty.as_pointer()), off

    def _resize(self, v, ty, signed=False):
        b = self.b
        w, t = v.type.width, ty.width
        if w == t:
            return v
        if w > t:
            return b.trunc(v, ty)
        return b.sext(v, ty) if signed else b.zext(v, ty)

    def _load_word(self, wptr, slot):
        # A plain load even where other threads compare-exchange the word: an aligned word
        # is read whole on every target fluxion runs on, so the load sees one state of the
        # word, as an atomic load would. (Plain loads let LLVM vectorize loops that read
        # packed fields.)
        return self.b.load(wptr, align=slot.word.nbytes)

    # -- the three accesses --------------------------------------------------------------------
    def quant_load(self, s):
        slot = s.ptr.place.quant
        wptr, off = self.quant_word(s.ptr)
        return self.quant_decode(slot, self._load_word(wptr, slot), off)

    def quant_store(self, s):
        slot = s.ptr.place.quant
        wptr, off = self.quant_word(s.ptr)
        if slot.sole:
            # nothing else lives in the word: write it whole
            raw = self._resize(self.quant_encode(slot.qtype, self.v(s.value)), wptr.type.pointee)
            self.b.store(self.b.shl(raw, off), wptr, align=slot.word.nbytes)
            return
        merge = self.quant_merger(slot, off, self.v(s.value))
        self._update_word(wptr, slot, merge)

    def quant_atomic(self, s):
        slot = s.ptr.place.quant
        wptr, off = self.quant_word(s.ptr)
        val, op, dt = self.v(s.value), s.op, s.ret_type

        def update(word):
            old = self.quant_decode(slot, word, off)
            new = self.combine(op, dt, old, val)
            return self.quant_merger(slot, off, new)(word)

        old_word = self._update_word(wptr, slot, update)
        return self.quant_decode(slot, old_word, off)

    def _update_word(self, wptr, slot, update):
        """word := update(word), atomically in parallel code; the old word."""
        b = self.b
        if self.parallel:
            return self.cas_loop(wptr, update)
        old = b.load(wptr, align=slot.word.nbytes)
        b.store(update(old), wptr, align=slot.word.nbytes)
        return old

    # -- bits <-> values --------------------------------------------------------------------
    def _field(self, word, off, bits):
        """The `bits`-bit field of `word` at offset `off` (both word-typed), zero-extended."""
        b = self.b
        wty = word.type
        v = b.lshr(word, off)
        if bits < wty.width:
            v = b.and_(v, ir.Constant(wty, (1 << bits) - 1))
        return v

    def quant_decode(self, slot, word, off):
        """The element's value, in its compute type."""
        b = self.b
        q = slot.qtype
        wty = word.type
        if slot.group is not None:
            return self._decode_shared(slot, word)
        if isinstance(q, Q.QuantFloat):
            raw = self._resize(self._field(word, off, q.bits), I32)
            fr = b.and_(raw, ir.Constant(I32, (1 << q.mag) - 1))
            field = b.and_(b.lshr(raw, ir.Constant(I32, q.frac)), ir.Constant(I32, (1 << q.exp) - 1))
            bits = b.or_(b.shl(b.add(field, ir.Constant(I32, 127 - q.bias)), ir.Constant(I32, 23)),
                         b.shl(fr, ir.Constant(I32, 23 - q.mag)))
            if q.signed:
                sign = b.and_(b.lshr(raw, ir.Constant(I32, q.mag)), ir.Constant(I32, 1))
                bits = b.or_(bits, b.shl(sign, ir.Constant(I32, 31)))
            zero = b.icmp_unsigned("==", field, ir.Constant(I32, 0))
            return b.select(zero, ir.Constant(F32, 0.0), b.bitcast(bits, F32))
        # the field's bits at the top of the word, then shifted down with the sign
        w = wty.width
        hi = b.shl(word, b.sub(ir.Constant(wty, w - q.bits), off))
        shift = ir.Constant(wty, w - q.bits)
        v = b.ashr(hi, shift) if q.signed else b.lshr(hi, shift)
        ct = q.compute
        if isinstance(q, Q.QuantInt):
            return self._resize(v, ir.IntType(ct.bits), q.signed)
        d = self._resize(v, I64, q.signed)
        ty = F32 if ct.bits == 32 else F64
        return b.fmul(b.sitofp(d, ty), ir.Constant(ty, q.scale))

    def quant_encode(self, q, value):
        """The raw bits (i64, zero above `bits`) storing `value` of the compute type."""
        b = self.b
        mask = ir.Constant(I64, (1 << q.bits) - 1)
        if isinstance(q, Q.QuantInt):
            return b.and_(self._resize(value, I64, q.compute.is_signed), mask)
        if isinstance(q, Q.QuantFixed):
            ty = value.type
            s = b.fmul(value, ir.Constant(ty, 1.0 / q.scale))
            half = b.call(self.ml.intrinsic("llvm.copysign", ty, 2), [ir.Constant(ty, 0.5), s])
            r = b.fadd(s, half)
            # truncated to an integer, clamped into i64 first (NaN: 0), as lang/quant.py does;
            # selects and a plain conversion vectorize, llvm.fptosi.sat did not (25x slower)
            lo, hi = Q.I64_FLOAT_RANGE[32 if ty == F32 else 64]
            r = b.select(b.fcmp_ordered("<", r, ir.Constant(ty, lo)), ir.Constant(ty, lo), r)
            r = b.select(b.fcmp_ordered(">", r, ir.Constant(ty, hi)), ir.Constant(ty, hi), r)
            r = b.select(b.fcmp_unordered("uno", r, r), ir.Constant(ty, 0.0), r)
            return b.and_(b.fptosi(r, I64), mask)
        return self._resize(self._encode_float(q, value), I64)

    def _encode_float(self, q, value):
        b = self.b
        c = lambda v: ir.Constant(I32, v)  # noqa: E731
        bits = b.bitcast(value, I32)
        sign = b.lshr(bits, c(31))
        mag = b.and_(bits, c(0x7FFFFFFF))
        e_orig = b.lshr(mag, c(23))
        m = q.mag
        if m < 23:
            mag = b.add(mag, c(1 << (22 - m)))   # round half away from zero; may carry into e
            fr = b.and_(b.lshr(mag, c(23 - m)), c((1 << m) - 1))
        else:
            fr = b.and_(mag, c((1 << 23) - 1))
        field = b.add(b.lshr(mag, c(23)), c(q.bias - 127))
        zero = b.or_(b.icmp_unsigned("==", e_orig, c(0)), b.icmp_signed("<=", field, c(0)))
        sat = b.icmp_signed(">", field, c(q.field_max))
        field = b.select(zero, c(0), b.select(sat, c(q.field_max), field))
        fr = b.select(zero, c(0), b.select(sat, c((1 << m) - 1), fr))
        raw = b.or_(b.shl(field, c(q.frac)), fr)
        if q.signed:
            raw = b.or_(raw, b.shl(b.select(zero, c(0), sign), c(m)))
        return raw

    def quant_merger(self, slot, off, value):
        """A function word -> the word with the element set to `value`."""
        b = self.b
        if slot.group is not None:
            return lambda word: self._encode_shared(slot, word, value)
        wty = ir.IntType(slot.word.bits)
        raw = self._resize(self.quant_encode(slot.qtype, value), wty)
        bits = b.shl(raw, off)
        keep = b.not_(b.shl(ir.Constant(wty, (1 << slot.bits) - 1), off))
        return lambda word: b.or_(b.and_(word, keep), bits)

    # -- shared exponents ----------------------------------------------------------------------
    def _decode_shared(self, slot, word):
        b = self.b
        g, q = slot.group, slot.qtype
        wty = word.type
        field = self._resize(self._field(word, ir.Constant(wty, g.exp_offset), g.exp), I32)
        d = self._field(word, ir.Constant(wty, slot.offset), q.mag)
        # d * 2**(field - bias - m + 1), exact in f64, then rounded once to f32
        k = b.add(field, ir.Constant(I32, 1023 - g.bias - q.mag + 1))
        scale = b.bitcast(b.shl(b.zext(k, I64), ir.Constant(I64, 52)), F64)
        v = b.fptrunc(b.fmul(b.uitofp(d, F64), scale), F32)
        if q.signed:
            neg = b.trunc(self._field(word, ir.Constant(wty, slot.offset + q.mag), 1), I1)
            v = b.select(neg, b.fneg(v), v)
        zero = b.icmp_unsigned("==", field, ir.Constant(I32, 0))
        return b.select(zero, ir.Constant(F32, 0.0), v)

    def _encode_shared(self, member, word, value):
        """`word` with the group of `member` re-encoded, `member` holding `value`."""
        b = self.b
        g = member.group
        c32 = lambda v: ir.Constant(I32, v)  # noqa: E731
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        vals = [value if s is member else self._decode_shared(s, word) for s in g.slots]
        bits = [b.bitcast(v, I32) for v in vals]
        es = [b.and_(b.lshr(x, c32(23)), c32(0xFF)) for x in bits]
        e_max = es[0]
        for e in es[1:]:
            e_max = b.select(b.icmp_unsigned(">", e, e_max), e, e_max)
        field = b.add(e_max, c32(g.bias - 127))
        zero = b.or_(b.icmp_unsigned("==", e_max, c32(0)), b.icmp_signed("<=", field, c32(0)))
        sat = b.icmp_signed(">", field, c32(g.field_max))
        e_top = b.select(sat, c32(g.field_max + 127 - g.bias), e_max)
        field = b.select(zero, c32(0), b.select(sat, c32(g.field_max), field))
        out = self._put(word, g.exp_offset, g.exp, field)
        for s, x, e in zip(g.slots, bits, es):
            m = s.qtype.mag
            full = b.or_(b.zext(b.and_(x, c32(0x7FFFFF)), I64), c64(1 << 23))
            sh = b.sext(b.add(c32(24 - m), b.sub(e_top, e)), I64)   # right shift of `full`
            left = self._clamp(b.neg(sh), 0, 40)
            right = self._clamp(sh, 1, 40)
            rounded = b.lshr(b.add(full, b.shl(c64(1), b.sub(right, c64(1)))), right)
            d = b.select(b.icmp_signed("<=", sh, c64(0)), b.shl(full, left), rounded)
            top = c64((1 << m) - 1)
            d = b.select(b.icmp_unsigned(">", d, top), top, d)
            d = b.select(b.or_(zero, b.icmp_unsigned("==", e, c32(0))), c64(0), d)
            out = self._put(out, s.offset, m, d)
            if s.qtype.signed:
                neg = b.select(b.icmp_unsigned("==", d, c64(0)), c32(0), b.lshr(x, c32(31)))
                out = self._put(out, s.offset + m, 1, neg)
        return out

    def _clamp(self, v, lo, hi):
        b = self.b
        v = b.select(b.icmp_signed("<", v, ir.Constant(I64, lo)), ir.Constant(I64, lo), v)
        return b.select(b.icmp_signed(">", v, ir.Constant(I64, hi)), ir.Constant(I64, hi), v)

    def _put(self, word, offset, bits, value):
        """`word` with its `bits`-bit field at constant `offset` set to `value`."""
        b = self.b
        wty = word.type
        mask = (1 << bits) - 1
        v = b.and_(self._resize(value, wty), ir.Constant(wty, mask))
        keep = ir.Constant(wty, ~(mask << offset) & ((1 << wty.width) - 1))
        return b.or_(b.and_(word, keep), b.shl(v, ir.Constant(wty, offset)))
