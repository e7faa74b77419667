"""The IR pass that makes writes activate cells (lang/sparse.py says what activity is):
before each store or atomic into a field under sparse levels, the cells of every sparse
level above the element are marked active, and a dynamic list grows to hold it. It runs on
every compiled kernel (compiler/driver.py calls it between autodiff and the pass pipeline);
the stores that zero a deactivated cell (`sparse._raw_stores`) are left alone.

What one activation costs matters where a loop writes many elements: a cell's flag is set by
a plain store of 1, and a write whose cell the same block activated already, with nothing in
between that could deactivate it, activates nothing (`gm[I] += w` and `gv[I] += w * v` at the
same index set the flag once). Testing the flag first (a load and a branch, to keep the cache
line shared where threads scatter into the same blocks) was meant here until 2026-11-28 but
not emitted (the test's block was empty); emitted, it made sparse_cycles' activation 2-3x
slower (its inner loop writes 512 elements a block) and MPM's scatter no faster within
noise, so the store stays plain."""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.lang.sparse import cell_map, levels, list_position, mask_of


def _is_mask_write(st):
    return isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
        isinstance(st.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)) and \
        getattr(st.ptr.place.field, "_is_mask", False)


def _may_deactivate(st):
    """Whether `st` (or what it holds) may deactivate a cell: a write of a cell state (an
    in-kernel ti.deactivate) or a call of a real function."""
    return any(_is_mask_write(x) or isinstance(x, S.FuncCallStmt) for x in S.walk_one(st))


def _epochs(kernel):
    """For each statement: (its block, how many statements before it in that block may
    deactivate a cell). Two writes with the same cell and epoch need one activation."""
    out = {}

    def visit(block):
        n = 0
        for st in block.stmts:
            out[id(st)] = (id(block), n)
            if st.blocks() or isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt,
                                              S.FuncCallStmt)):
                if _may_deactivate(st):
                    n += 1
                for b in st.blocks():
                    visit(b)
    visit(kernel.body)
    return out


def instrument_writes(kernel):
    """Before each store or atomic into a field under sparse levels: activate its cells (a
    list grows to hold the element: an atomic max of its length)."""
    raw = getattr(kernel, "sparse_raw_stores", {})
    epochs = None
    done = set()
    for st in list(S.walk(kernel.body)):
        # (a quantized field's element is a bit range of a word: QuantPtrStmt)
        if not isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)) or \
                not isinstance(st.ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)) or \
                raw.get(id(st), 0) is None:
            continue
        place = st.ptr.place
        if getattr(place.field, "_is_mask", False):
            continue
        t = place.snode
        lv = levels(t)
        if not lv:
            continue
        if epochs is None:
            epochs = _epochs(kernel)
        blk = st.parent
        at = blk.stmts.index(st)
        new = []

        def add(x):
            x.parent = blk
            x.loc = st.loc
            new.append(x)
            return x

        def arith(v, op, k):
            it = v.ret_type
            c = add(S.ConstStmt(k, ret_type=it))
            return add(S.BinaryOpStmt(v, c, op, ret_type=it))
        off = place.field.offset

        def coord(d, div):
            v = st.ptr.indices[d]
            if off and off[d]:
                v = arith(v, "sub", off[d])
            return arith(v, "div_nonneg", div) if div != 1 else v
        for s in lv:
            if raw.get(id(st)) is s:
                continue            # (ti.append grew this list already)
            m = mask_of(s)
            cmap = cell_map(t, s)
            if s.kind != "dynamic":
                key = (id(s), epochs[id(st)],
                       tuple((id(st.ptr.indices[d]), off[d] if off else 0, div)
                             for d, div in cmap))
                if key in done:
                    continue        # (activated by an earlier write of this block)
                done.add(key)
            idx = [coord(d, div) for d, div in cmap]
            ptr = add(S.GlobalPtrStmt(idx, m.places[0], ret_type=m.dtype))
            if s.kind == "dynamic":
                d, div, ext = list_position(t, s)
                pos = arith(coord(d, div), "mod_nonneg", ext)
                if pos.ret_type is not T.i32:
                    pos = add(S.UnaryOpStmt(pos, "cast", ret_type=T.i32))
                end = arith(pos, "add", 1)
                add(S.AtomicOpStmt(ptr, end, "max", ret_type=T.i32))
            else:
                add(S.GlobalStoreStmt(ptr, add(S.ConstStmt(1, ret_type=m.dtype))))
        blk.stmts[at:at] = new
