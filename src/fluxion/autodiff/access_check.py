"""Run-time check of the global data access rules across the kernels of a Tape
(`ti.init(debug=True)` + `Tape(validation=True)`).

Each field gets a read mask (a u8 field of the same shape). The instrumented instance marks
every element it reads and, before every write, asserts that no recorded kernel has read the
element: a write after a read is what makes a replayed read see the wrong value.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.scratch import hooks


def mask_of(field, kind="read"):
    """An access mask of a field ("read" or "write"): a u8 field of the same shape with one
    component per component of the field (writing x[i].y does not touch x[i].x)."""
    attr = "_read_mask" if kind == "read" else "_write_mask"
    m = getattr(field, attr, None)
    if m is None:
        ncomp = len(field.places)
        shape = field.shape + ((ncomp,) if ncomp > 1 else ())
        m = hooks.hidden_field(T.u8, shape)
        setattr(field, attr, m)
    return m


def mask_ptr(ptr, loc, kind="read"):
    """A GlobalPtrStmt to the mask element of the field component `ptr` addresses."""
    f = ptr.place.field
    m = mask_of(f, kind)
    idx = list(ptr.indices)
    if len(f.places) > 1:
        c = S.ConstStmt(f.places.index(ptr.place), ret_type=T.i32, loc=loc)
        _insert_before(ptr, c)
        idx.append(c)
    return S.GlobalPtrStmt(idx, m.places[0], ret_type=T.u8, loc=loc)


def _insert_before(stmt, new):
    blk = stmt.parent
    new.parent = blk
    blk.stmts.insert(blk.stmts.index(stmt), new)
    return new


def _insert_after(stmt, new):
    blk = stmt.parent
    new.parent = blk
    blk.stmts.insert(blk.stmts.index(stmt) + 1, new)
    return new


FIELD_PTRS = (S.GlobalPtrStmt, S.QuantPtrStmt)


def mark_read(s):
    """After load `s`: its element's read mark := 1."""
    mptr = _insert_after(s, mask_ptr(s.ptr, s.loc))
    one = _insert_after(mptr, S.ConstStmt(1, ret_type=T.u8, loc=s.loc))
    _insert_after(one, S.GlobalStoreStmt(mptr, one, loc=s.loc))


def assert_unread(kernel, s, message):
    """Before write `s`: fail with `message` if a recorded kernel read its element."""
    mptr = _insert_before(s, mask_ptr(s.ptr, s.loc))
    mark = _insert_before(s, S.GlobalLoadStmt(mptr, ret_type=T.u8, loc=s.loc))
    zero = _insert_before(s, S.ConstStmt(0, ret_type=T.u8, loc=s.loc))
    ok = _insert_before(s, S.BinaryOpStmt(mark, zero, "cmp_eq", ret_type=T.i32, loc=s.loc))
    code = len(kernel.errors)
    kernel.errors.append((message, s.loc, None))
    _insert_before(s, S.AssertStmt(ok, [], code, loc=s.loc))


def run(kernel, cfg=None):
    # the real functions the kernel calls access fields too (and their bodies are the
    # kernel's own copies: instrumenting them changes no other kernel)
    for s in list(S.walk_all(kernel)):
        if isinstance(s, S.GlobalLoadStmt) and isinstance(s.ptr, FIELD_PTRS):
            mark_read(s)
        elif isinstance(s, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                isinstance(s.ptr, FIELD_PTRS):
            assert_unread(kernel, s, (
                f"(kernel={kernel.name}) breaks the global data access rule: field element "
                f"{s.ptr.place!r} is overwritten after a kernel recorded by the Tape read it"))
    return True


def clear_masks(fields):
    """Zero the access masks of `fields` (the live fields: a Tape starts afresh)."""
    for f in fields:
        for attr in ("_read_mask", "_write_mask"):
            m = getattr(f, attr, None)
            if m is not None:
                m.fill(0)
