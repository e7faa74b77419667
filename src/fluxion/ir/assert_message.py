"""The message of a failed assertion that shows kernel values (`assert x[i] == 0, "x[%d] =
%d" % (i, x[i])`): the kernel writes each value as a 64-bit word (a float as the bits of an
f64), its kind says how to read it back, and the message's C conversions format them."""
from __future__ import annotations

import re
import struct

_CONVERSION = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[a-zA-Z])")


def assert_kind(dt):
    """How a value of type `dt` travels: "f32"/"f64"/"f16", "i" (signed), "u<bits>"."""
    if dt.is_float:
        return "f%d" % dt.bits
    return "i" if dt.is_signed or dt.bits == 1 else "u%d" % dt.bits


def _shortest(v, kind):
    """A float's shortest text that reads back to the value of its type (`0.5`, `1e-05`),
    as the original's messages show `%f` values."""
    if kind == "f64":
        return repr(v)
    fmt = "f" if kind == "f32" else "e"
    for p in range(1, 18):
        text = "%.*g" % (p, v)
        if struct.unpack(fmt, struct.pack(fmt, float(text)))[0] == v:
            return text
    return repr(v)


def assert_text(fmt, kinds, words):
    """The message of a failed assertion from the words its kernel wrote. A bare `%f` shows
    the value's shortest text, as the original's messages do; any other conversion is C's."""
    values = []
    for kind, w in zip(kinds, words):
        w = int(w) & ((1 << 64) - 1)
        if kind[0] == "f":
            values.append((struct.unpack("d", struct.pack("Q", w))[0], kind))
        elif kind == "i":
            values.append((w - (1 << 64) if w >> 63 else w, kind))
        else:
            values.append((w & ((1 << int(kind[1:])) - 1), kind))
    out, pos, k = [], 0, 0
    for m in _CONVERSION.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        conv = m.group(0)
        if conv == "%%":
            out.append("%")
            continue
        if k >= len(values):
            out.append(conv)
            continue
        v, kind = values[k]
        k += 1
        try:
            out.append(_shortest(v, kind) if conv == "%f" and kind[0] == "f" else conv % v)
        except (TypeError, ValueError):
            out.append(f"{conv}({v})")
    out.append(fmt[pos:])
    return "".join(out)
