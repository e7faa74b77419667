"""Quantized types in the random programs (gen.py): `ti.types.quant.int`, `quant.fixed` and
`quant.float` fields packed into words by `ti.BitpackedFields` (32 or 64 bits, and 16
without the taichi oracle; two floats sometimes with a shared exponent), and a `quant_array`
of 1-, 2- or 4-bit unsigned integers (bits of one word belong to neighbouring cells), written
and read by parallel loops.

What a parallel loop does to them is race-free by construction, so that any correct build
gives one answer: a field is written in a loop either at the loop's own element (a store, or
`+=` of its own element) or only through atomic adds of integers and fixed-point values
(integer additions of the stored representation: their order does not change the sum), never
both, and a field written in a loop is read there only at the loop's own element. Fields of
one word are written by different threads at once (an atomic add on `a` beside a store to
`b` of the same word, neighbouring bits of a quant_array): a store must not lose its
neighbours' bits. Integer stores may leave the type's range (they wrap to its bits, as on
the original); fixed-point and floating-point values are clamped into range first.
Values are read back through a kernel into an f64 field (taichi 1.7.4 has no to_numpy of a
quantized field) and, for a few elements, in Python scope.

Whether a program has them (about 2 in 10) and every choice about them come from random
streams of their own (`Gen.with_quant`, `Gen.rq`), so the programs without them are the
programs of before."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class QField:
    name: str
    kind: str                   # "int", "fixed", "float"
    bits: int
    signed: bool
    lo: float = 0.0             # the range stores are clamped into (fixed, float)
    hi: float = 0.0


@dataclass
class Quant:
    size: int
    fields: list = field(default_factory=list)
    bits: tuple = None          # (name, bits per element, rows, columns) of the quant_array
    kernels: list = field(default_factory=list)


def _qtype(f, exp=None):
    if f.kind == "int":
        return f"ti.types.quant.int({f.bits}, {f.signed})"
    if f.kind == "fixed":
        return f"ti.types.quant.fixed({f.bits}, {f.signed}, {f.hi!r})"
    return f"ti.types.quant.float(exp={exp}, frac={f.bits}, signed={f.signed})"


def declare(g):
    """The family's fields, after the program's (in build)."""
    if not g.with_quant:
        return
    rq = g.rq
    q = g.q = Quant(rq.choice([16, 64, 1000]))
    word = rq.choice([16, 32, 32, 64])
    if word == 16 and g.o.taichi:
        word = 32       # taichi 1.7.4 aborts in LLVM storing into a 16-bit bit struct
    used, decls = 0, []
    shared = None
    for k in range(rq.randint(1, 3)):
        kind = rq.choice(["int", "int", "fixed", "float"])
        name = f"q{'ixf'[['int', 'fixed', 'float'].index(kind)]}{k}"
        signed = rq.random() < 0.6
        if kind == "int":
            f = QField(name, kind, rq.randint(2, 12), signed)
            need = f.bits
        elif kind == "fixed":
            f = QField(name, kind, rq.randint(6, 14), signed)
            f.hi = rq.choice([1.0, 4.0, 100.0])
            f.lo = -f.hi if signed else 0.0
            need = f.bits
        else:
            exp = rq.choice([4, 5, 6])
            f = QField(name, kind, rq.randint(3, 10), signed)
            f.hi = rq.choice([3.0, 60.0])
            f.lo = -f.hi if signed else 0.0
            f.exp = exp
            need = exp + f.bits + int(signed)
        if used + need > word:
            continue
        used += need
        q.fields.append(f)
        decls.append(f"{name} = ti.field({_qtype(f, getattr(f, 'exp', None))})")
    if not q.fields:
        q.fields.append(QField("qi9", "int", rq.randint(2, 8), True))
        decls.append(f"qi9 = ti.field({_qtype(q.fields[0])})")
    floats = [f for f in q.fields if f.kind == "float"]
    if len(floats) == 2 and rq.random() < 0.5:
        # a shared exponent: one exponent field for both (fewer bits: it still fits)
        shared = tuple(floats)
        shared[1].exp = shared[0].exp
        decls = [f"{f.name} = ti.field({_qtype(f, getattr(f, 'exp', None))})" for f in q.fields]
    for d in decls:
        g.emit(1, d)
    g.emit(1, f"qbp = ti.BitpackedFields(max_num_bits={word})")
    rest = [f.name for f in q.fields if not shared or f not in shared]
    if shared:
        g.emit(1, f"qbp.place({shared[0].name}, {shared[1].name}, shared_exponent=True)")
    if rest:
        g.emit(1, f"qbp.place({', '.join(rest)})")
    g.emit(1, f"ti.root.dense(ti.i, {q.size}).place(qbp)")
    if rq.random() < 0.6:
        b = rq.choice([1, 2, 4])
        cols = rq.choice([c for c in (8, 16, 32) if c * b <= 32])
        rows = rq.choice([4, 16, 64])
        q.bits = ("qbits", b, rows, cols)
        g.emit(1, f"qbits = ti.field(ti.types.quant.int({b}, False))")
        g.emit(1, f"ti.root.dense(ti.i, {rows}).quant_array(ti.j, {cols}, max_num_bits=32)"
                  ".place(qbits)")
        g.emit(1, f"qbout = ti.field(ti.i32, shape=({rows}, {cols}))")
    g.emit(1, f"qout = ti.field(ti.f64, shape=({q.size}, {len(q.fields)}))")


def _program_reads(g, rq):
    """A read of one of gen.py's dense scalar fields at an element of `i`, or a constant."""
    cands = [f for f in g.fields if not f.vec and not f.sparse and not f.arg and f.shape]
    if not cands or rq.random() < 0.3:
        return repr(rq.randint(-12, 12) * 0.5)
    f = rq.choice(cands)
    idx = ", ".join(f"(i * {rq.randint(1, 7)} + {k}) % {n}" for k, n in enumerate(f.shape))
    return f"ti.cast({f.name}[{idx}], ti.f32)"


def _value(g, rq, leaves, d):
    """A float expression of the leaves (small, finite)."""
    if d <= 0 or rq.random() < 0.3:
        return rq.choice(leaves) if rq.random() < 0.8 else repr(rq.randint(-16, 16) * 0.125)
    a, b = _value(g, rq, leaves, d - 1), _value(g, rq, leaves, d - 1)
    k = rq.randrange(6)
    if k == 0:
        return f"({a} + {b})"
    if k == 1:
        return f"({a} - {b})"
    if k == 2:
        return f"ti.min(ti.max({a} * {b}, -500.0), 500.0)"
    if k == 3:
        return f"ti.sin({a}) * {rq.choice(['3.0', '0.01', '50.0'])}"
    if k == 4:
        return f"ti.cast(i % {rq.randint(2, 9)}, ti.f32) * {rq.choice(['0.3', '-1.7', '0.001'])}"
    return f"ti.{rq.choice(['min', 'max'])}({a}, {b})"


def _store(f, e):
    if f.kind == "int":
        # wraps to the field's bits when out of range (both implementations mask)
        return f"ti.cast(ti.floor(ti.min(ti.max({e}, -5000.0), 5000.0)), ti.i32)"
    # (a fixed-point field's largest value is one step below max_value: 0.9 of it stays in)
    return f"ti.math.clamp({e}, {f.lo * 0.9!r}, {f.hi * 0.9!r})"


def kernels(g):
    """Declare the family's kernels (after the program's); their launches go to run()."""
    if not g.with_quant:
        return
    rq, q = g.rq, g.q
    for _ in range(rq.randint(1, 2)):
        name = g.fresh("qk")
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}(c: ti.f32):")
        g.emit(2, rq.choice([f"for i in range({q.size}):", f"for i in {q.fields[0].name}:"]))
        roles = {}
        for f in q.fields:
            can_add = f.kind in ("int", "fixed")
            roles[f.name] = rq.choice(["own", "own", "read"] + (["atomic"] if can_add else []))
        leaves = ["c"]
        p = g.fresh("qp")
        g.emit(3, f"{p} = {_program_reads(g, rq)}")
        leaves.append(p)
        for f in q.fields:
            idx = "i" if roles[f.name] == "own" else f"(i * {rq.randint(1, 5)} + " \
                f"{rq.randint(0, 3)}) % {q.size}"
            if roles[f.name] == "atomic":
                continue
            v = g.fresh("qv")
            g.emit(3, f"{v} = ti.cast({f.name}[{idx}], ti.f32)")
            leaves.append(v)
        for f in q.fields:
            role = roles[f.name]
            e = _value(g, rq, leaves, 2)
            if role == "own":
                if f.kind != "float" and rq.random() < 0.3:
                    inc = rq.randint(-3, 3) if f.kind == "int" else \
                        rq.choice([0.5, -0.25 if f.signed else 0.25])
                    g.emit(3, f"{f.name}[i] += {inc!r}")
                else:
                    g.emit(3, f"{f.name}[i] = {_store(f, e)}")
            elif role == "atomic":
                tgt = f"(i * {rq.randint(1, 7)} + {rq.randint(0, 5)}) % {rq.choice([q.size, 3, 7])}"
                # (no negative addend for an unsigned fixed-point field: taichi 1.7.4 wraps it
                # in `x[i] += v` but drops it in a true atomic add, fuzz seed 30232)
                inc = rq.choice(["1", "-2", "3", "ti.cast(i % 5, ti.i32)"]) if f.kind == "int" \
                    else rq.choice(["0.37", "-0.125" if f.signed else "0.125",
                                    "ti.cast(i % 3, ti.f32) * 0.5"])
                g.emit(3, f"ti.atomic_add({f.name}[{tgt}], {inc})" if rq.random() < 0.5
                       else f"{f.name}[{tgt}] += {inc}")
        g.emit(0, "")
        q.kernels.append(f"{name}({rq.randint(-8, 8) * 0.25!r})")
    if q.bits:
        bn, b, rows, cols = q.bits
        name = g.fresh("qk")
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}():")
        g.emit(2, rq.choice([f"for r, j in {bn}:", f"for r, j in ti.ndrange({rows}, {cols}):"]))
        mask = (1 << b) - 1
        src = q.fields[0].name if q.fields else None
        e = rq.choice([f"r * {rq.randint(1, 5)} + j", f"{mask} - {bn}[r, j]",
                       f"{bn}[r, j] + {rq.randint(1, 3)}"])
        if src and rq.random() < 0.5:
            e = f"ti.cast(ti.abs({src}[(r * {cols} + j) % {q.size}]), ti.i32) + {e}"
        # an unsigned store wraps to the element's bits
        g.emit(3, f"{bn}[r, j] = ({e}) & {mask}")
        g.emit(0, "")
        q.kernels.append(f"{name}()")
    name = g.fresh("qr")
    g.emit(1, "@ti.kernel")
    g.emit(1, f"def {name}():")
    g.emit(2, f"for i in range({q.size}):")
    for k, f in enumerate(q.fields):
        g.emit(3, f"qout[i, {k}] = {f.name}[i]")
    if q.bits:
        bn, b, rows, cols = q.bits
        g.emit(2, "for r, j in qbout:")
        g.emit(3, f"qbout[r, j] = {bn}[r, j]")
    g.emit(0, "")
    q.read = f"{name}()"


def launch(g, ind):
    """The family's launches, with Python-scope writes and reads of elements between them."""
    if not g.with_quant:
        return
    rq, q = g.rq, g.q
    for line in q.kernels:
        if rq.random() < 0.4 and q.fields:
            f = rq.choice(q.fields)
            j = rq.randrange(q.size)
            v = rq.randint(-3, 3) if f.kind == "int" and f.signed else rq.randint(0, 3) \
                if f.kind == "int" else rq.choice([0.5, 0.25])
            g.emit(ind, f"{f.name}[{j}] = {v!r}")
        g.emit(ind, line)
        if rq.random() < 0.3 and q.fields:
            f = rq.choice(q.fields)
            g.emit(ind, f"out['{g.fresh('Q')}'] = float({f.name}[{rq.randrange(q.size)}])")
    g.emit(ind, q.read)
    g.emit(ind, "out['qout'] = qout.to_numpy()")
    if q.bits:
        g.emit(ind, "out['qbout'] = qbout.to_numpy()")
