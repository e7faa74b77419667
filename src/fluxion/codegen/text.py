"""The text of an llvmlite.ir module or function, as str() writes it, written faster.

Why: str(module) was a fifth of the Python part of a cold compile (the MLS-MPM substep's 2,000
instructions), most of it in llvmlite's layers of calls per instruction (its text cache, the
name, the operands' references, the types, the metadata, each through a method of its own).
Here the instructions codegen emits most get one function each that writes the same line in
one format, reading the cached texts of operands and types directly; any other instruction
(calls, atomics, ...) is written by llvmlite itself. Every line is also left in llvmlite's
own cache of the instruction's text, as str() would, so the two ways share their work.

Precondition: the llvmlite whose formats these functions copy (LLVMLITE_FORMATS); with any
other, `module_text` and `function_text` are str() itself. tests/runtime/test_module_text.py
compares both ways on kernels that emit every instruction written here.
"""
from __future__ import annotations

import llvmlite
from llvmlite import ir

LLVMLITE_FORMATS = "0.50."       # the llvmlite versions whose str() these functions match
_SAME = llvmlite.__version__.startswith(LLVMLITE_FORMATS)

_TEXT = "_StrCaching__cached_str"               # llvmlite's caches of a value's text
_REF = "_StringReferenceCaching__cached_refstr"  # and of its reference
_TYPE_STR = ir.Type.__str__                     # (the types' str(), which fills that cache)


def module_text(module):
    """str(module)."""
    if not _SAME:
        return str(module)
    lines = ['; ModuleID = "%s"' % (module.name,),
             'target triple = "%s"' % (module.triple,),
             'target datalayout = "%s"' % (module.data_layout,), '']
    lines += [it.get_declaration() for it in module.get_identified_types().values()]
    lines += [function_text(g) if type(g) is ir.Function else str(g)
              for g in module.globals.values()]
    lines += module._get_metadata_lines()
    return "\n".join(lines)


def function_text(fn):
    """str(fn) of an ir.Function."""
    if not _SAME or not fn.blocks:
        return str(fn)
    buf = []
    fn.descr_prototype(buf)
    buf.append("{\n")
    for blk in fn.blocks:
        buf.append(f"{blk._format_name()}:\n")
        for i in blk.instructions:
            s = getattr(i, _TEXT, None)
            if s is None:
                write = _WRITERS.get(type(i))
                s = str(i) if write is None else write(i)
            buf.append(f"  {s}\n")
    buf.append("}\n")
    return "".join(buf)


def _ref(v):
    """v.get_reference(), made once and kept in llvmlite's cache as it does, without its way
    of finding the cache empty: a caught AttributeError, which took about as long as the
    rest of writing the instruction."""
    r = getattr(v, _REF, None)
    if r is None:
        r = v._get_reference()
        setattr(v, _REF, r)
    return r


def _ty(t):
    """str(t) of a type, kept as _ref keeps a reference (typed pointers are made anew by
    every as_pointer)."""
    s = getattr(t, _TEXT, None)
    if s is None:
        if type(t).__str__ is not _TYPE_STR:
            return str(t)
        s = t._to_string()
        setattr(t, _TEXT, s)
    return s


def _meta(i):
    return i._stringify_metadata(leading_comma=True) if i.metadata else ""


def _named(i, body):
    """The instruction's line: `%name = ` before a value's `body`, trailing spaces gone (as
    NamedValue._to_string), kept in llvmlite's cache."""
    t = i.type
    s = body.rstrip() if type(t) is ir.VoidType else f"{_ref(i)} = {body}".rstrip()
    setattr(i, _TEXT, s)
    return s


def _plain(i):
    """Instruction.descr: binary operations."""
    op = i.opname
    if i.flags:
        op = " ".join([op] + i.flags)
    return _named(i, f"{op} {_ty(i.type)} {', '.join([_ref(o) for o in i.operands])}"
                     f"{_meta(i)}\n")


def _cast(i):
    v = i.operands[0]
    return _named(i, f"{i.opname} {_ty(v.type)} {_ref(v)} to {_ty(i.type)} {_meta(i)}\n")


def _load(i):
    (p,) = i.operands
    align = "" if i.align is None else ", align %d" % (i.align,)
    return _named(i, f"load {_ty(i.type)}, {_ty(p.type)} {_ref(p)}{align}{_meta(i)}\n")


def _store(i):
    v, p = i.operands
    align = "" if i.align is None else ", align %d" % (i.align,)
    return _named(i, f"store {_ty(v.type)} {_ref(v)}, {_ty(p.type)} {_ref(p)}{align}"
                     f"{_meta(i)}\n")


def _gep(i):
    idx = ", ".join([f"{_ty(x.type)} {_ref(x)}" for x in i.indices])
    op = "getelementptr inbounds" if i.inbounds else "getelementptr"
    p = i.pointer
    return _named(i, f"{op} {_ty(i.source_etype)}, {_ty(p.type)} {_ref(p)}, {idx} "
                     f"{_meta(i)}\n")


def _compare(i):
    a, b = i.operands
    flags = "".join(" " + f for f in i.flags)
    return _named(i, f"{i.opname}{flags} {i.op} {_ty(a.type)} {_ref(a)}, {_ref(b)} "
                     f"{_meta(i)}\n")


def _branch(i):
    ops = ", ".join([f"{_ty(o.type)} {_ref(o)}" for o in i.operands])
    return _named(i, f"{i.opname} {ops}{_meta(i)}")


def _ret(i):
    if i.operands:
        v = i.operands[0]
        return _named(i, f"{i.opname} {_ty(v.type)} {_ref(v)}{_meta(i)}\n")
    return _named(i, f"{i.opname}{_meta(i)}\n")


def _alloca(i):
    s = f"{i.opname} {_ty(i.allocated_type)}"
    if i.operands:
        (n,) = i.operands
        s += f", {_ty(n.type)} {_ref(n)}"
    if i.align is not None:
        s += f", align {i.align}"
    return _named(i, s + _meta(i))


def _select(i):
    c, a, b = i.operands
    return _named(i, f"select {' '.join(i.flags)} {_ty(c.type)} {_ref(c)}, {_ty(a.type)} "
                     f"{_ref(a)}, {_ty(b.type)} {_ref(b)} {_meta(i)}\n")


def _phi(i):
    incs = ", ".join([f"[{_ref(v)}, {_ref(b)}]" for v, b in i.incomings])
    return _named(i, f"phi {' '.join(i.flags)} {_ty(i.type)} {incs} {_meta(i)}\n")


_WRITERS = {
    ir.Instruction: _plain, ir.CastInstr: _cast, ir.LoadInstr: _load,
    ir.StoreInstr: _store, ir.GEPInstr: _gep, ir.ICMPInstr: _compare,
    ir.FCMPInstr: _compare, ir.Branch: _branch, ir.ConditionalBranch: _branch,
    ir.Ret: _ret, ir.AllocaInstr: _alloca, ir.SelectInstr: _select, ir.PhiInstr: _phi,
}
