"""The IR pass that makes writes activate cells (lang/sparse.py says what activity is):
before each store or atomic into a field under sparse levels, the cells of every sparse
level above the element are marked active, and a dynamic list grows to hold it. It runs on
every compiled kernel (compiler/driver.py calls it between autodiff and the pass pipeline);
the stores that zero a deactivated cell (`sparse._raw_stores`) are left alone."""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.lang.sparse import cell_map, levels, list_position, mask_of


def instrument_writes(kernel):
    """Before each store or atomic into a field under sparse levels: activate its cells (a
    list grows to hold the element: an atomic max of its length)."""
    raw = getattr(kernel, "sparse_raw_stores", {})
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
        one = None
        for s in lv:
            if raw.get(id(st)) is s:
                continue            # (ti.append grew this list already)
            m = mask_of(s)
            idx = [coord(d, div) for d, div in cell_map(t, s)]
            ptr = add(S.GlobalPtrStmt(idx, m.places[0], ret_type=m.dtype))
            if s.kind == "dynamic":
                d, div, ext = list_position(t, s)
                pos = arith(coord(d, div), "mod_nonneg", ext)
                if pos.ret_type is not T.i32:
                    pos = add(S.UnaryOpStmt(pos, "cast", ret_type=T.i32))
                end = arith(pos, "add", 1)
                add(S.AtomicOpStmt(ptr, end, "max", ret_type=T.i32))
            else:
                if one is None:
                    one = add(S.ConstStmt(1, ret_type=T.u8))
                add(S.GlobalStoreStmt(ptr, one))
        blk.stmts[at:at] = new
