"""Python-scope access to quantized field components: `x[i]`, `x[i] = v`, `to_numpy`,
`from_numpy`, `fill`, without launching a kernel.

Each element is a bit field of an unsigned word in its tree's buffer (see lang/quant.py): its
word is at the byte offset that the place's `terms` give, its bits at `offset` plus the quant
array's element index times the width. Reads extract and decode; writes read the words,
replace the element's bits (re-encoding the other members of a shared-exponent group) and
write the words back. On CUDA the touched byte range is pulled before and pushed after, like
the bytes of any field.
"""
from __future__ import annotations

import numpy as np

from fluxion.lang import quant as Q


def _locate_one(place, idx):
    """(byte offset in the tree's buffer of the word, bit offset) of element `idx`."""
    tree = place.snode.tree
    byte = place.addr - tree.buffer.ctypes.data
    for t in place.terms:
        byte += (idx[t.axis] // t.divisor % t.extent) * t.stride
    bit = place.quant.offset
    for t in place.bit_terms:
        bit += (idx[t.axis] // t.divisor % t.extent) * t.stride * place.quant.bits
    return byte, bit


def _locate_all(place):
    """(byte offsets, bit offsets) of every element, int64 arrays of the field's shape."""
    shape = place.field.shape
    tree = place.snode.tree
    n = int(np.prod(shape)) if shape else 1
    idx = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), np.int64)
    byte = np.full(n, place.addr - tree.buffer.ctypes.data, dtype=np.int64)
    for t in place.terms:
        byte += (idx[t.axis] // t.divisor % t.extent) * t.stride
    bit = np.full(n, place.quant.offset, dtype=np.int64)
    for t in place.bit_terms:
        bit += (idx[t.axis] // t.divisor % t.extent) * (t.stride * place.quant.bits)
    return byte.reshape(shape), bit.reshape(shape)


def _words(place):
    return place.snode.tree.buffer.view(place.quant.word.np_dtype)


def _values(place, words, bits):
    """Decoded values of `place`'s elements in `words` at bit offsets `bits`."""
    slot = place.quant
    if slot.group is not None:
        return Q.decode_group(slot.group, words)[slot.index]
    return Q.decode(slot.qtype, Q.extract(words, bits, slot.bits))


def _store(place, words, bits, values):
    """`words` with `place`'s elements at `bits` set to `values`."""
    slot = place.quant
    if slot.group is not None:
        current = Q.decode_group(slot.group, words)
        current[slot.index] = np.broadcast_to(
            np.asarray(values).astype(np.float32), np.shape(words))
        return Q.encode_group(slot.group, words, current)
    return Q.insert(words, bits, slot.bits, Q.encode(slot.qtype, values))


def read_one(place, idx):
    byte, bit = _locate_one(place, idx)
    nb = place.quant.word.nbytes
    tree = place.snode.tree
    if tree.device_newer:
        tree.read_span(byte, byte + nb)
    word = _words(place)[byte // nb]
    return _values(place, np.asarray(word), bit)[()]


def write_one(place, idx, value):
    byte, bit = _locate_one(place, idx)
    nb = place.quant.word.nbytes
    tree = place.snode.tree
    tree.before_write(byte, byte + nb, partial=True)
    words = _words(place)
    words[byte // nb] = _store(place, np.asarray(words[byte // nb]), bit,
                               _scalar(place, value))
    tree.after_write(byte, byte + nb)


def _scalar(place, value):
    ct = place.dtype
    if ct.is_float:
        return np.asarray(value).astype(ct.np_dtype)
    return value        # integers wrap in the encoding (lang/quant._as_int)


def _span(byte, nb):
    if byte.size == 0:
        return 0, 0
    return int(byte.min()), int(byte.max()) + nb


def read_all(place):
    byte, bit = _locate_all(place)
    nb = place.quant.word.nbytes
    tree = place.snode.tree
    if tree.device_newer:
        tree.read_span(*_span(byte, nb))
    words = _words(place)[byte // nb]
    return np.asarray(_values(place, words, bit)).astype(place.dtype.np_dtype)


def write_all(place, values):
    """Every element of `place` := `values` (broadcast to the field's shape)."""
    byte, bit = _locate_all(place)
    nb = place.quant.word.nbytes
    tree = place.snode.tree
    lo, hi = _span(byte, nb)
    tree.before_write(lo, hi, partial=True)
    values = np.broadcast_to(np.asarray(values), byte.shape)
    if place.dtype.is_float:
        values = values.astype(place.dtype.np_dtype)
    all_words = _words(place)
    index = (byte // nb).reshape(-1)
    bits = bit.reshape(-1)
    vals = values.reshape(-1)
    if place.quant.array:
        # elements of one word are written together: clear all their bits, then set them
        slot = place.quant
        mask = np.uint64((1 << slot.bits) - 1)
        clear = np.zeros(all_words.shape, dtype=np.uint64)
        np.bitwise_or.at(clear, index, mask << bits.astype(np.uint64))
        raw = (Q.encode(slot.qtype, vals) & mask) << bits.astype(np.uint64)
        setb = np.zeros(all_words.shape, dtype=np.uint64)
        np.bitwise_or.at(setb, index, raw)
        touched = np.unique(index)
        w = all_words[touched].astype(np.uint64)
        all_words[touched] = ((w & ~clear[touched]) | setb[touched]).astype(all_words.dtype)
    else:
        # each element has a word of its own
        all_words[index] = _store(place, all_words[index], bits, vals).astype(all_words.dtype)
    tree.after_write(lo, hi)
