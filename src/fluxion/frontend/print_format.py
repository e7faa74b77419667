"""How `print` in a kernel formats its values, as the original system does.

A value prints with its type's C conversion (`%d`, `%u`, `%f` for f16/f32, `%.12f` for f64),
so `print(x)` of an f32 shows `1.500000`. A format spec (`f"{x:.2f}"`, `"{:e}".format(x)`)
that is a C printf specifier (flags `-+ #0`, width, precision, length, conversion, each
optional) is merged with the type's as the original merges them: the user's precision or the
type's, the type's length, the user's conversion or the type's; and a conversion of the
wrong kind for the value (`'.2d'` on an f32, `'u'` on an i32) is a FluxionTypeError. Any other
spec (`>8.2f`, `^7d`, `,`; the original rejects those) is applied as a Python format spec.

The resolved spec of a value is what the backends receive: one starting with `%` is a C
conversion (the CPU applies it with Python's `%` operator, which follows C's printf; CUDA
passes it to `vprintf`), any other a Python spec (`format()`; CUDA translates it).

`"...".format(...)` in a kernel follows the original's rules too: numbered, automatic (counted
apart from the numbered ones) and named fields; every positional argument used and every
keyword (errors name what is missing or left over).
"""
from __future__ import annotations

import ast
import re
import string

import numpy as np

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.assert_message import assert_kind
from fluxion.ir.builder import emit
from fluxion.ir.errors import FluxionSyntaxError, FluxionTypeError
from fluxion.ir.expr import Expr


class _Formatted:
    """A field of an f-string or str.format: a value and its spec (None without one)."""

    def __init__(self, value, spec):
        self.value, self.spec = value, spec


class _FString:
    """An f-string (or str.format) with kernel values: `print` formats it when it runs."""

    def __init__(self, parts):
        self.parts = parts

    def __str__(self):
        return "".join(p if isinstance(p, str) else str(p.value) for p in self.parts)


def _entries(v):
    """The entries of a vector or matrix value (frontend/matrix.py), else None."""
    return getattr(v, "entries", None) if hasattr(v, "ndim") else None

# the original's parse_printf_specifier: %[flags][width][.precision][length][conversion]
_PRINTF = re.compile(r"%?([-+ #0]+)?(\d+|\*)?(\.(?:\d+|\*))?([hljztL]|hh|ll)?"
                     r"([csdioxXufFeEaAgGnp])?")
_CONVERSIONS = "csdioxXufFeEaAgGnp"
_SIGNED, _UNSIGNED, _REAL = "di", "oxXu", "fFeEaAgG"


def _type_name(dt):
    return getattr(dt, "name", None) or str(dt)


def default_spec(dt):
    """The C conversion a value of type `dt` prints with when no spec is given."""
    if dt.is_float:
        return "%f" if dt.bits <= 32 else "%.12f"
    if dt.bits == 1:
        return "%d"
    return "%d" if dt.is_signed else "%u"


def check(spec, dt):
    """The original's check of a spec's conversion (its last character) against the type."""
    conv = spec[-1]
    if conv not in _CONVERSIONS:
        return
    if conv in "csnp":
        raise FluxionTypeError(f"conversion '{conv}' is not supported.")
    is_int = not dt.is_float
    signed_ok = is_int and (dt.is_signed or dt.bits == 1)
    unsigned_ok = is_int and (not dt.is_signed or dt.bits == 1)
    if (conv in _REAL and not dt.is_float) or (conv in _SIGNED and not signed_ok) or \
            (conv in _UNSIGNED and not unsigned_ok):
        raise FluxionTypeError(f"'{spec}' doesn't match '{_type_name(dt)}'.")


def resolve(spec, dt):
    """The spec a value of type `dt` is printed with (see the module's docstring)."""
    if not spec:
        return default_spec(dt)
    check(spec, dt)
    m = _PRINTF.fullmatch(spec)
    if m is None:
        return spec                      # a Python format spec: fluxion's extension
    flags, width, prec, _length, conv = (g or "" for g in m.groups())
    if width == "*" or prec == ".*":
        raise FluxionTypeError(f"The {spec} printf specifier is not supported")
    if conv and conv in "aA":
        raise FluxionTypeError(f"conversion '{conv}' (hexadecimal floating point) is not "
                               f"supported by fluxion's print")
    if conv == "o" and "#" in flags:
        # Python's `%#o` writes 0o17 where C writes 017: rather an error than other text
        raise FluxionTypeError(f"the spec '{spec}' (C's alternate octal form) is not "
                               f"supported by fluxion's print; use 'o'")
    base = default_spec(dt)
    if not prec and "." in base:
        prec = base[base.index("."):-1]  # f64's `.12`
    return "%" + flags + width + prec + (conv or base[-1])


def apply(spec, value):
    """Text of a Python value under a resolved spec (at compile time)."""
    return spec % value if spec.startswith("%") else format(value, spec)


def constant_type(value):
    """The type a Python number gets when printed (the defaults of ti.init)."""
    cfg = builder.current().cfg
    if isinstance(value, (bool, np.bool_)):
        return T.i32
    if isinstance(value, (int, np.integer)):
        return cfg.default_ip
    return cfg.default_fp


def constant_text(value, spec):
    """A Python number printed as the original prints the constant it becomes."""
    dt = constant_type(value)
    if dt.is_float:
        v = float(np.float32(value)) if dt.bits == 32 else float(np.float16(value)) \
            if dt.bits == 16 else float(value)
    else:
        v = int(value)
    return apply(resolve(spec, dt), v)


def is_number(value):
    return isinstance(value, (bool, int, float, np.number, np.bool_))


# -- "...".format(...) ---------------------------------------------------------------------------

def str_format(template, args, kwargs):
    """`template.format(*args, **kwargs)` in a kernel: a Python string when no field has a
    spec or a kernel value, else an f-string value that print
    formats as the original does."""
    fields = []      # (literal, key, spec, conversion)
    auto = 0
    for literal, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            fields.append((literal, None, None, None))
            continue
        first, rest = _split_field(name)
        if first == "":
            first, auto = auto, auto + 1
        elif first.isdigit():
            first = int(first)
        fields.append((literal, (first, rest), spec or None, conv))
    used = [f[1][0] for f in fields if f[1] is not None]
    top = max((k for k in used if isinstance(k, int)), default=-1)
    if top + 1 != len(args):
        raise FluxionSyntaxError(f"Expected {top + 1} positional argument(s), but received "
                                 f"{len(args)} instead.")
    names = [k for k in used if isinstance(k, str)]
    for k in names:
        if k not in kwargs:
            raise FluxionSyntaxError(f"Keyword '{k}' not found.")
    for k in kwargs:
        if k not in names:
            raise FluxionSyntaxError(f"Keyword '{k}' not used.")
    parts = []
    kernel_valued = False
    for literal, key, spec, conv in fields:
        if literal:
            parts.append(literal)
        if key is None:
            continue
        value = args[key[0]] if isinstance(key[0], int) else kwargs[key[0]]
        if key[1]:
            value = string.Formatter().get_field("x" + key[1], [], {"x": value})[0]
        if conv and not _has_kernel_value(value):
            value = string.Formatter().convert_field(value, conv)
        kernel_valued |= _has_kernel_value(value) or (spec is not None and is_number(value))
        parts.append(_Formatted(value, spec))
    if not kernel_valued:
        # Python's text (the fields numbered as above: `"{1} {}"` mixes the two ways)
        return "".join(p if isinstance(p, str) else format(p.value, p.spec or "")
                       for p in parts)
    return _FString(parts)


def _split_field(name):
    """'k.x' -> ('k', '.x'); '0[1]' -> ('0', '[1]')."""
    m = re.match(r"[^.\[]*", name)
    return m.group(0), name[m.end():]


def _has_kernel_value(v):
    return isinstance(v, Expr) or any(isinstance(e, Expr) for e in (_entries(v) or ()))


# -- messages of assert ---------------------------------------------------------------------------
# A failed assertion reports up to 8 values (64-bit words written by the kernel, as the
# original's); floats travel as the bits of an f64. The error table's entry of the assertion
# holds ("assert", kinds), and ir/assert_message.py makes the text when the error is raised.
MAX_ASSERT_VALUES = 8


def emit_assert(cond, node, visit):
    """`assert cond, msg` in debug mode: a check that fails with the message when it runs."""
    ctx = builder.current()
    msg, args = _assert_message(node, visit)
    if not isinstance(cond, Expr):
        if cond:
            return
        # `assert 0`: fails when it runs (in a branch that runs), as the original's does
        cond = E.const(0, T.i32)
    code = len(ctx.ir.errors)
    kinds = tuple(assert_kind(a.dtype) for a in args)
    ctx.ir.errors.append((msg, ctx.loc, ("assert", kinds) if args else []))
    emit(S.AssertStmt(E.truth(cond).stmt, [_assert_word(a).stmt for a in args], code))


def _assert_message(node, visit):
    """The message of `assert cond, msg` and the kernel values it shows: a string, an
    f-string or `"..." % (values)` (C conversions, as in the original); without one, the
    condition's text."""
    if node.msg is None:
        return ast.unparse(node.test), []
    if isinstance(node.msg, ast.BinOp) and isinstance(node.msg.op, ast.Mod) and \
            isinstance(node.msg.left, ast.Constant) and isinstance(node.msg.left.value, str):
        right = visit(node.msg.right)
        values = list(right) if isinstance(right, tuple) else [right]
        if any(_has_kernel_value(v) for v in values):
            args = [_to_expr(v) for v in _scalars(values)]
            return node.msg.left.value.strip(), _checked(args)
    m = visit(node.msg)
    if isinstance(m, _FString):
        return _assert_fstring(m)
    return str(m).strip(), []


def _assert_word(e):
    """The 64-bit word that carries value `e` to the message."""
    if e.dtype.is_float:
        return E.bit_cast(E.cast(e, T.f64), T.i64)
    return e


def _scalars(values):
    out = []
    for v in values:
        out.extend(_entries(v) or [v])
    return out


def _to_expr(v):
    return v if isinstance(v, Expr) else E.const(v, constant_type(v))


def _checked(args):
    if len(args) > MAX_ASSERT_VALUES:
        raise FluxionSyntaxError(f"an assertion's message can show at most "
                                 f"{MAX_ASSERT_VALUES} kernel values, this one has {len(args)}")
    return args


def _assert_fstring(fs):
    """`assert c, f"x[{i}] = {x[i]}"`: each kernel value shown by its type's conversion
    (%d or %f, as the original; a spec given is applied), the text escaped for the format."""
    parts, args = [], []
    for p in fs.parts:
        if isinstance(p, str):
            parts.append(p.replace("%", "%%"))
            continue
        for v in _scalars([p.value]):
            if isinstance(v, Expr):
                parts.append(resolve(p.spec, v.dtype) if p.spec else
                             "%f" if v.dtype.is_float else "%d")
                args.append(v)
            else:
                parts.append(format(v, p.spec or "").replace("%", "%%"))
    return "".join(parts).strip(), _checked(args)
