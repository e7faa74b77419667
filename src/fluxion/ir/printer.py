"""Readable, deterministic text of the IR, which `ir/parser.py` reads back (the format is
described there): `$7 = mul f32 $5 $6  # k.py:12`.

Fields and arrays appear by name (`@x`, `@v[1]`, `@arr`); `print_kernel(kernel, env)` fills
`env` with those names, so that `parse_kernel(text, env)` finds the same objects again. Two
different objects that would print alike (two unnamed fields of one shape) get distinct names.
"""
from __future__ import annotations

import json
import re

from fluxion.ir import stmts as S
from fluxion.ir.scratch import ScratchBuffer

_BARE = re.compile(r"[A-Za-z_][\w.:\-]*\Z")
_LABEL = re.compile(r"[A-Za-z_][\w.]*\Z")

# statements that always define a value (printed as `$N = ...`); any other statement gets a
# name only when something refers to it
_VALUES = (S.ConstStmt, S.ArgLoadStmt, S.UnaryOpStmt, S.BinaryOpStmt, S.TernaryOpStmt,
           S.RandStmt, S.AllocaStmt, S.LocalLoadStmt, S.GlobalPtrStmt, S.QuantPtrStmt,
           S.ExternalPtrStmt, S.GlobalLoadStmt, S.AtomicOpStmt, S.RangeForStmt,
           S.LoopIndexStmt, S.StructIndexStmt, S.RowIndexStmt, S.FuncCallStmt,
           S.CallResultStmt, S.FuncArgStmt,
           S.SharedArrayStmt, S.SharedPtrStmt, S.ThreadIndexStmt, S.WorkerIndexStmt,
           S.AdStackAllocaStmt, S.AdStackTopStmt, S.AdStackSizeStmt)


def quote_name(name):
    """A name as the text writes it: bare when it is a plain word, else a JSON string."""
    return name if _BARE.match(name) else json.dumps(name)


def _type(t):
    return "none" if t is None else str(t)


class _Globals:
    """Names of the fields and arrays a kernel reaches, distinct per object."""

    def __init__(self, env):
        self.env = env if env is not None else {}
        # names the caller chose keep their objects (a test's environment)
        self.by_id = {id(v): k for k, v in self.env.items()}

    def _name_of(self, obj, base):
        key = id(obj)
        if key not in self.by_id:
            name, k = base, 1
            while name in self.env and self.env[name] is not obj:
                k += 1
                name = f"{base}#{k}"
            self.env[name] = obj
            self.by_id[key] = name
        return self.by_id[key]

    def field(self, field):
        """A field (or an array argument, or a scratch buffer) by itself: `@x`."""
        if isinstance(field, ScratchBuffer):
            base = "scratch"
        elif hasattr(field, "places"):
            place = field.places[0]
            base = repr(place)
            if place.component is not None:
                base = base[:-len(f"[{place.component}]")]
        else:
            base = repr(field)
        return "@" + quote_name(self._name_of(field, base))

    def container(self, obj):
        """What a struct-for ranges over: a field as `field` writes it, a struct field by its
        name (or `struct` and its shape), an SNode by its path from the root."""
        name = getattr(obj, "name", None)
        if not hasattr(obj, "places") and isinstance(name, str):
            return "@" + quote_name(self._name_of(obj, name or f"struct{tuple(obj.shape)}"))
        return self.field(obj)

    def place(self, place):
        """One component of a field: `@x` (a scalar field) or `@v[1]`; a scratch buffer
        (ir/scratch.py) by itself."""
        if isinstance(place, ScratchBuffer):
            return self.field(place)
        text = self.field(place.field)
        return text if place.component is None else f"{text}[{place.component}]"


def print_kernel(kernel, env=None, locs=True):
    """The text of `kernel` (its body, then the real functions it calls). `env`: a dict to
    fill with name -> field / array argument. `locs`: print source locations as comments."""
    glob = _Globals(env)
    fnames = {}

    def fname(f):
        # specializations of one function share its name: number them in order of appearance
        if id(f) not in fnames:
            label = f.name if _LABEL.match(f.name) else json.dumps(f.name)
            fnames[id(f)] = f"{label}#{len(fnames)}"
        return fnames[id(f)]

    for f in getattr(kernel, "functions", ()):
        fname(f)
    lines = []
    header = (f"kernel {quote_name(kernel.name)}({', '.join(map(_type, kernel.arg_types))})"
              + (f" -> ({', '.join(map(_type, kernel.ret_types))})" if kernel.ret_types else ""))
    if kernel.tasks is not None:
        header += " offloaded"
    lines.append(header + " {")
    body = _BodyPrinter(kernel.body, glob, fname, locs, lines)
    body.kernel_meta(kernel)
    body.block(kernel.body, 1, tasks=kernel.tasks)
    lines.append("}")
    for f in getattr(kernel, "functions", ()):
        params = ", ".join(("ref " if r else "") + _type(t)
                           for t, r in zip(f.param_types, f.ref_params))
        rets = f" -> ({', '.join(map(_type, f.ret_types))})" if f.ret_types else ""
        text = f"function {fname(f)}({params}){rets} {{"
        if locs and f.loc is not None:
            text = f"{text:<48}  # {f.loc!r}"
        lines.append(text)
        _BodyPrinter(f.body, glob, fname, locs, lines).block(f.body, 1)
        lines.append("}")
    return "\n".join(lines)


class _BodyPrinter:
    """Names `$0, $1, ...` are given per body (the kernel's, each function's), in program
    order, to the statements that define a value or that something refers to."""

    def __init__(self, body, glob, fname, locs, lines):
        self.glob, self.fname, self.locs, self.lines = glob, fname, locs, lines
        referred = set()
        for s in S.walk(body):
            for o in s.operands():
                referred.add(id(o))
            if isinstance(s, (S.LoopIndexStmt, S.RowIndexStmt, S.StructIndexStmt)):
                referred.add(id(s.loop))
            if isinstance(s, S.RangeForStmt):
                referred.update(id(p) for p, _ in s.reductions or ())
                if s.rows is not None:
                    referred.add(id(s.rows))
        self.names = {}
        for s in S.walk(body):
            if isinstance(s, _VALUES) or id(s) in referred:
                self.names[id(s)] = f"${len(self.names)}"

    def n(self, s):
        if s is None:
            return "none"
        if id(s) not in self.names:       # not in this body: broken IR, shown as such
            self.names[id(s)] = f"$?{len(self.names)}"
        return self.names[id(s)]

    def _bound(self, v):
        """An ndrange-for's bound: a statement's name or an int."""
        return self.n(v) if isinstance(v, S.Stmt) else repr(v)

    def ns(self, stmts):
        return "[" + ", ".join(self.n(s) for s in stmts) + "]"

    def kernel_meta(self, kernel):
        """What passes record on the kernel beside its body (scatter's per-thread copies)."""
        out = []
        if kernel.private_copies:
            out.append(f"private_copies threads={kernel.private_threads}")
        for f in kernel.private_fields:
            out.append(f"private_field {self.glob.field(f)}")
        for r in getattr(kernel, "scratch", ()):
            # the request's shape and type are shown for the reader; the parser takes the
            # buffer itself from the environment, as it takes fields
            copies = f" copies={self.glob.place(r.copy_of)}" if r.copy_of is not None else ""
            out.append(f"scratch {self.glob.field(r)} {_type(r.dtype)}{list(r.shape)}{copies}")
        for (arg, grad), (begin, end, adds) in zip(kernel.private_arrays, kernel.private_trips):
            out.append(f"private_array {self.glob.field(arg)}{' grad' if grad else ''} "
                       f"trips={self.n(begin)}..{self.n(end)} adds={adds}")
        capacity = getattr(kernel, "tape_log_capacity", None)
        if capacity is not None:
            out.append(f"tape_log_capacity {capacity}")
        for text in out:
            self.lines.append("  " + text)

    def block(self, b, indent, tasks=None):
        pad = "  " * indent
        if b.stop_gradients:
            self.lines.append(pad + "stop_grad " + ", ".join(self.glob.field(t)
                                                             for t in b.stop_gradients))
        starts = _task_starts(b, tasks)
        for s in b.stmts:
            if id(s) in starts:
                self.lines.append(pad + "task " + starts[id(s)])
            text = self.fmt(s)
            if self.locs and s.loc is not None:
                text = f"{text:<48}  # {s.loc!r}"
            self.lines.append(pad + text)
            for k, name in enumerate(s.BLOCKS):
                blk = getattr(s, name)
                if k > 0:
                    if blk is None or (not blk.stmts and not blk.stop_gradients):
                        continue
                    self.lines.append(pad + ("else" if name == "else_block" else f".{name}"))
                if blk is not None:
                    self.block(blk, indent + 1)

    def fmt(self, s):
        text = self._fmt(s)
        if id(s) in self.names and not isinstance(s, (S.RangeForStmt, S.StructForStmt,
                                                      S.NdRangeForStmt)):
            return f"{self.n(s)} = {text}"
        if id(s) in self.names:
            return f"{self.n(s)} : {text}"
        return text

    def _fmt(self, s):
        n, t = self.n, _type(s.ret_type)
        g = self.glob
        if isinstance(s, S.ConstStmt):
            return f"const {t} {s.value!r}"
        if isinstance(s, S.ArgLoadStmt):
            return f"arg {t} {s.index}"
        if isinstance(s, S.UnaryOpStmt):
            return f"{s.op} {t} {n(s.operand)}"
        if isinstance(s, S.BinaryOpStmt):
            return f"{s.op} {t} {n(s.lhs)} {n(s.rhs)}"
        if isinstance(s, S.TernaryOpStmt):
            return f"select {t} {n(s.cond)} {n(s.a)} {n(s.b)}"
        if isinstance(s, S.RandStmt):
            return f"random {t}"
        if isinstance(s, S.FuncRefArgStmt):
            return f"ref_arg {t} {s.index}" + (" shared" if s.shared else "")
        if isinstance(s, S.AllocaStmt) and type(s) is S.AllocaStmt:
            return f"alloca {t}"
        if isinstance(s, S.FuncArgStmt):
            return f"func_arg {t} {s.index}"
        if isinstance(s, S.FuncCallStmt):
            return f"call{_typed(s)} {self.fname(s.func)}({', '.join(n(a) for a in s.args)})"
        if isinstance(s, S.CallResultStmt):
            return f"result {t} {n(s.call)}[{s.index}]"
        if isinstance(s, S.FuncReturnStmt):
            return f"return_from_function {' '.join(n(v) for v in s.values)}".rstrip()
        if isinstance(s, S.LocalLoadStmt):
            return f"load {t} {n(s.alloca)}"
        if isinstance(s, S.LocalStoreStmt):
            return f"store {n(s.alloca)} {n(s.value)}"
        if isinstance(s, S.GlobalPtrStmt):
            return f"global_ptr {t} {g.place(s.place)} {self.ns(s.indices)}"
        if isinstance(s, S.QuantPtrStmt):
            return (f"quant_ptr {t} {g.place(s.place)} {json.dumps(repr(s.place.quant.qtype))} "
                    f"{self.ns(s.indices)}")
        if isinstance(s, S.ExternalPtrStmt):
            return (f"external_ptr {t} {'grad ' if s.grad else ''}{g.field(s.arg)} "
                    f"{self.ns(s.indices)}" + (f" component={s.component}" if s.component else ""))
        if isinstance(s, S.GlobalLoadStmt):
            return f"global_load {t} {n(s.ptr)}"
        if isinstance(s, S.GlobalStoreStmt):
            return f"global_store {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.AtomicOpStmt):
            return f"atomic_{s.op} {t} {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.IfStmt):
            return f"if {n(s.cond)}"
        if isinstance(s, S.RangeForStmt):
            text = f"{'parallel_for' if s.parallel else 'for'} {n(s.begin)} .. {n(s.end)}"
            if s.parallel not in (True, False):
                text += f" parallel={s.parallel!r}"
            if s.block_dim is not None:
                text += f" block_dim={s.block_dim}"
            if s.reductions is not None:
                text += " reduce=[" + ", ".join(f"{op} {n(p)}" for p, op in s.reductions) + "]"
            if s.rows is not None:
                text += f" rows={n(s.rows)}"
            if s.jam is not None:
                text += f" jam={s.jam}"
            if s.independent is not None:
                text += " independent" if s.independent is True else \
                    f" independent={s.independent!r}"
            return text
        if isinstance(s, S.LoopIndexStmt):
            return f"loop_index {t} {n(s.loop)}"
        if isinstance(s, S.StructForStmt):
            text = (f"{'parallel_struct_for' if s.parallel else 'struct_for'} {t} "
                    f"{g.container(s.over)} {_literal(list(s.bounds))}")
            if s.grouped:
                text += " grouped"
            if s.block_dim is not None:
                text += f" block_dim={s.block_dim}"
            return text
        if isinstance(s, S.NdRangeForStmt):
            dims = ", ".join(f"({self._bound(b)}, {self._bound(e)})"
                             for b, e in zip(s.begins, s.ends))
            text = f"{'parallel_ndrange_for' if s.parallel else 'ndrange_for'} {t} [{dims}]"
            if s.grouped:
                text += " grouped"
            if s.block_dim is not None:
                text += f" block_dim={s.block_dim}"
            return text
        if isinstance(s, S.StructIndexStmt):
            return f"struct_index {t} {n(s.loop)}[{s.axis}]"
        if isinstance(s, S.RowIndexStmt):
            return f"{s.kind}_index {t} {n(s.loop)} width={n(s.width)}"
        if isinstance(s, S.WhileStmt):
            return "while"
        if isinstance(s, S.BreakStmt):
            return "break"
        if isinstance(s, S.ContinueStmt):
            return "continue"
        if isinstance(s, S.ReturnStmt):
            return f"return[{s.index}] {n(s.value)}"
        if isinstance(s, S.PrintStmt):
            parts = []
            for p in s.fmt:
                if isinstance(p, str):
                    parts.append(repr(p))
                else:
                    k, spec = p
                    parts.append(n(s.values[k]) + ("" if spec is None else f":{spec!r}"))
            return " ".join(["print"] + parts)
        if isinstance(s, S.AssertStmt):
            return f"assert {n(s.cond)} error={s.code}" + (
                f" args={self.ns(s.args)}" if s.args else "")
        if isinstance(s, S.TapeLogStmt):
            return (f"tape_log {s.kind} {n(s.ptr)} read={n(s.read)} written={n(s.written)} "
                    f"grad={n(s.grad)}")
        if isinstance(s, S.PrivateAddStmt):
            return f"private_add[copy {s.copy}] {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.MergeCopiesStmt):
            return f"merge_copies {s.copy}"
        if isinstance(s, S.SlotAcquireStmt):
            return f"slot_acquire {n(s.ptr)}"
        if isinstance(s, S.WorkerIndexStmt):
            return f"worker_index {t}"
        if isinstance(s, S.SharedArrayStmt):
            return (f"shared_array{_typed(s)} {_type(s.dtype)} "
                    f"({', '.join(str(d) for d in s.shape)})")
        if isinstance(s, S.SharedPtrStmt):
            return f"shared_ptr {t} {n(s.array)} {self.ns(s.indices)}"
        if isinstance(s, S.BlockSyncStmt):
            return "block_sync"
        if isinstance(s, S.ThreadIndexStmt):
            return f"thread_index {t} {s.kind}"
        if isinstance(s, S.AdStackAllocaStmt):
            return (f"ad_stack_alloca{_typed(s)} ({', '.join(map(_type, s.dtypes))}) "
                    f"capacity={_literal(s.capacity)}")
        if isinstance(s, S.AdStackPushStmt):
            return f"ad_stack_push {n(s.stack)} {' '.join(n(v) for v in s.values)}".rstrip()
        if isinstance(s, S.AdStackTopStmt):
            return f"ad_stack_top {t} {n(s.stack)}[{s.slot}]"
        if isinstance(s, S.AdStackPopStmt):
            return f"ad_stack_pop {n(s.stack)}"
        if isinstance(s, S.AdStackSizeStmt):
            return f"ad_stack_size {t} {n(s.stack)}"
        return self._generic(s)

    def _generic(self, s):
        """A statement class without a syntax of its own: `!ClassName type name=value ...`,
        driven by its OPERANDS and ATTRS (blocks follow as `.name` sections)."""
        parts = [f"!{type(s).__name__}", _type(s.ret_type)]
        for name in s.OPERANDS:
            v = getattr(s, name)
            parts.append(f"{name}=" + (self.ns(v) if isinstance(v, (list, tuple)) else self.n(v)))
        for name in s.ATTRS:
            parts.append(f"{name}={self._value(getattr(s, name))}")
        return " ".join(parts)

    def _value(self, v):
        if isinstance(v, S.Stmt):
            return self.n(v)
        if isinstance(v, (list, tuple)):
            inner = ", ".join(self._value(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        if hasattr(v, "field") and hasattr(v, "component"):
            return self.glob.place(v)
        return _literal(v)


def _typed(s):
    """The type of a statement whose syntax has none, when it has one after all."""
    return "" if s.ret_type is None else f":{_type(s.ret_type)}"


def _literal(v):
    if isinstance(v, tuple):
        inner = ", ".join(_literal(x) for x in v)
        return f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if hasattr(v, "is_float") and hasattr(v, "bits"):     # a data type
        return str(v)
    raise TypeError(f"the IR text has no form for the value {v!r} ({type(v).__name__})")


def _task_starts(block, tasks):
    """id(first statement of each task) -> its kind; the tasks must cover the block in order."""
    if not tasks:
        return {}
    starts, pos = {}, 0
    stmts = block.stmts
    for kind, what in tasks:
        group = what if isinstance(what, list) else [what]
        here = stmts[pos:pos + len(group)]
        if not group or len(here) != len(group) or any(a is not b for a, b in zip(here, group)):
            raise ValueError("the kernel's tasks are not its top-level statements in order")
        starts[id(group[0])] = kind
        pos += len(group)
    if pos != len(stmts):
        raise ValueError("the kernel's tasks leave out some of its top-level statements")
    return starts
