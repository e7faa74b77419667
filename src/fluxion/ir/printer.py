"""Readable, deterministic text of the IR: `$7 = mul f32 $5 $6  # k.py:12`."""
from __future__ import annotations

from fluxion.ir import stmts as S


def print_kernel(kernel):
    names = {}

    def n(s):
        if id(s) not in names:
            names[id(s)] = f"${len(names)}"
        return names[id(s)]

    fnames = {}

    def fname(f):
        # specializations of one function share its name: number them in order of appearance
        if id(f) not in fnames:
            fnames[id(f)] = f"{f.name}#{len(fnames)}"
        return fnames[id(f)]

    lines = [f"kernel {kernel.name}({', '.join(map(str, kernel.arg_types))})"
             + (f" -> ({', '.join(map(str, kernel.ret_types))})" if kernel.ret_types else "") + " {"]

    def fmt(s):
        t = s.ret_type
        if isinstance(s, S.ConstStmt):
            return f"{n(s)} = const {t} {s.value!r}"
        if isinstance(s, S.ArgLoadStmt):
            return f"{n(s)} = arg {t} {s.index}"
        if isinstance(s, S.UnaryOpStmt):
            return f"{n(s)} = {s.op} {t} {n(s.operand)}"
        if isinstance(s, S.BinaryOpStmt):
            return f"{n(s)} = {s.op} {t} {n(s.lhs)} {n(s.rhs)}"
        if isinstance(s, S.TernaryOpStmt):
            return f"{n(s)} = select {t} {n(s.cond)} {n(s.a)} {n(s.b)}"
        if isinstance(s, S.RandStmt):
            return f"{n(s)} = random {t}"
        if isinstance(s, S.FuncRefArgStmt):
            return f"{n(s)} = ref_arg {t} {s.index}"
        if isinstance(s, S.AllocaStmt):
            return f"{n(s)} = alloca {t}"
        if isinstance(s, S.FuncArgStmt):
            return f"{n(s)} = func_arg {t} {s.index}"
        if isinstance(s, S.FuncCallStmt):
            return f"{n(s)} = call {fname(s.func)}({', '.join(n(a) for a in s.args)})"
        if isinstance(s, S.CallResultStmt):
            return f"{n(s)} = result {t} {n(s.call)}[{s.index}]"
        if isinstance(s, S.FuncReturnStmt):
            return f"return_from_function {' '.join(n(v) for v in s.values)}".rstrip()
        if isinstance(s, S.LocalLoadStmt):
            return f"{n(s)} = load {t} {n(s.alloca)}"
        if isinstance(s, S.LocalStoreStmt):
            return f"store {n(s.alloca)} {n(s.value)}"
        if isinstance(s, S.GlobalPtrStmt):
            return f"{n(s)} = global_ptr {s.place!r} [{', '.join(n(i) for i in s.indices)}]"
        if isinstance(s, S.QuantPtrStmt):
            return (f"{n(s)} = quant_ptr {s.place!r} {s.place.quant.qtype!r} "
                    f"[{', '.join(n(i) for i in s.indices)}]")
        if isinstance(s, S.ExternalPtrStmt):
            comp = f".{s.component}" if s.arg.desc.elem_shape else ""
            return (f"{n(s)} = external_ptr {'grad ' if s.grad else ''}{s.arg!r}{comp} "
                    f"[{', '.join(n(i) for i in s.indices)}]")
        if isinstance(s, S.GlobalLoadStmt):
            return f"{n(s)} = global_load {t} {n(s.ptr)}"
        if isinstance(s, S.GlobalStoreStmt):
            return f"global_store {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.AtomicOpStmt):
            return f"{n(s)} = atomic_{s.op} {t} {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.IfStmt):
            return f"if {n(s.cond)}"
        if isinstance(s, S.RangeForStmt):
            kind = "parallel_for" if s.parallel else "for"
            marks = (f" rows={n(s.rows)}" if s.rows is not None else "") + \
                (f" jam={s.jam}" if s.jam else "") + (" independent" if s.independent else "")
            return f"{n(s)} : {kind} {n(s.begin)} .. {n(s.end)}{marks}"
        if isinstance(s, S.LoopIndexStmt):
            return f"{n(s)} = loop_index {t} {n(s.loop)}"
        if isinstance(s, S.RowIndexStmt):
            return f"{n(s)} = {s.kind}_index {t} {n(s.loop)} width {n(s.width)}"
        if isinstance(s, S.WhileStmt):
            return "while"
        if isinstance(s, S.BreakStmt):
            return "break"
        if isinstance(s, S.ContinueStmt):
            return "continue"
        if isinstance(s, S.ReturnStmt):
            return f"return[{s.index}] {n(s.value)}"
        if isinstance(s, S.PrintStmt):
            parts = [repr(p) if isinstance(p, str) else n(s.values[p[0]]) for p in s.fmt]
            return "print " + " ".join(parts)
        if isinstance(s, S.PrivateAddStmt):
            return f"private_add[copy {s.copy}] {n(s.ptr)} {n(s.value)}"
        if isinstance(s, S.MergeCopiesStmt):
            return f"merge_copies {s.copy}"
        if isinstance(s, S.WorkerIndexStmt):
            return f"{n(s)} = worker_index"
        if isinstance(s, S.AssertStmt):
            return f"assert {n(s.cond)} error={s.code}"
        return f"{type(s).__name__}"

    def block(b, indent):
        for s in b.stmts:
            text = fmt(s)
            if s.loc is not None:
                text = f"{text:<48}  # {s.loc!r}"
            lines.append("  " * indent + text)
            for name in s.BLOCKS:
                blk = getattr(s, name)
                if blk is None or (name == "else_block" and not blk.stmts):
                    continue
                if name == "else_block":
                    lines.append("  " * indent + "else")
                block(blk, indent + 1)

    block(kernel.body, 1)
    lines.append("}")
    for f in getattr(kernel, "functions", ()):
        params = ", ".join(("ref " if r else "") + str(t)
                           for t, r in zip(f.param_types, f.ref_params))
        rets = f" -> ({', '.join(map(str, f.ret_types))})" if f.ret_types else ""
        lines.append(f"function {fname(f)}({params}){rets} {{")
        block(f.body, 1)
        lines.append("}")
    return "\n".join(lines)
