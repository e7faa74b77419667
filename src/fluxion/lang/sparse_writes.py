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
from fluxion.ir.ops import Op
from fluxion.lang import sparse_pool
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


def shares_cells_with_primal(place):
    """Whether `place` is a gradient's element whose sparse cells are its primal's (the
    gradient placed in the same sparse nodes: `place(x, x.grad)`, `lazy_grad`, `shape=`)."""
    twin = getattr(place.field, "_twin_of", None)
    if twin is None or twin[1] != "grad":
        return False
    primal = twin[0]
    k = place.field.places.index(place) if place in place.field.places else 0
    pp = primal.places[k] if k < len(primal.places) else None
    return pp is not None and levels(pp.snode) == levels(place.snode)


def instrument_writes(kernel, reverse=False):
    """Before each store or atomic into a field under sparse levels: activate its cells (a
    list grows to hold the element: an atomic max of its length).

    In a reverse-mode kernel (`reverse`), a write into a gradient that shares its primal's
    cells activates nothing: it is done only where the cell is active, and dropped where it
    is not. The gradient of a sparse field has its primal's activity; an inactive cell reads
    as the constant 0, whose derivative goes nowhere. Activating it (as Taichi does) would
    change the program that was differentiated: the cell's primal turns active, a struct-for
    of the same adjoint kernel visits it (a gradient that depends on the order of the
    cells), and a later run of the primal reads one more cell.

    Returns whether it changed the kernel (False: the IR is as it was, which lets the
    pipeline skip a dce that would find nothing)."""
    raw = getattr(kernel, "sparse_raw_stores", {})
    changed = False
    epochs = None
    done = set()
    loops = {}
    visited = {}
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
        changed = True
        if reverse and shares_cells_with_primal(place):
            _only_where_active(st, t, lv)
            continue
        if epochs is None:
            epochs = _epochs(kernel)
        active = _visited_levels(kernel, st, t, lv, visited)
        b = _Before(st)
        add, arith = b.add, b.arith
        off = place.field.offset

        coord = _coords(b)
        for s in lv:
            if raw.get(id(st)) is s or s in active:
                continue            # (ti.append grew this list already; a loop's element)
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
                end = arith(b.list_position(t, s, coord), "add", 1)
                add(S.AtomicOpStmt(ptr, end, "max", ret_type=T.i32))
            else:
                add(S.GlobalStoreStmt(ptr, add(S.ConstStmt(1, ret_type=m.dtype))))
                if s.kind == "pointer" and sparse_pool.pool_of(s) is not None:
                    _acquire(st, s._pool, cmap, loops)
        b.insert()
    return changed


def _visited_levels(kernel, st, t, lv, memo):
    """The sparse levels among `lv` (those of write `st`, into an element of node `t`) that
    are active at the written element because it is the element a lowered struct-for's body
    visits (the same index values, the same field offset; kernel.visited_cells), and the
    body deactivates nothing: `y[i, j] = ...` in `for i, j in x` with `y` in `x`'s cells
    activates nothing, which saves a store a level per element (and a pooled node's slot,
    which the cell has). `memo`: a dict kept across writes."""
    out = set()
    for idx, node, offset, block in kernel.visited_cells:
        if len(idx) != len(st.ptr.indices) or any(a is not b for a, b in
                                                   zip(idx, st.ptr.indices)):
            continue
        if (st.ptr.place.field.offset or None) != (offset or None):
            continue
        inside = memo.get(id(block))
        if inside is None:
            inside = memo[id(block)] = (
                {id(x) for x in S.walk(block)},
                not any(_may_deactivate(x) for x in block.stmts))
        if id(st) not in inside[0] or not inside[1]:
            continue
        theirs = levels(node)
        out.update(s for s in lv if s in theirs and cell_map(t, s) == cell_map(node, s))
    return out


def _coords(b):
    """coord(d, div): the write's index along axis `d` divided by `div`, as statements that
    `b` puts before it (no division where the index is a block's: _cell_of_block)."""
    def coord(d, div):
        v = b.index(d)
        if div == 1:
            return v
        got = _cell_of_block(v, div)
        if got is None:
            return b.arith(v, "div_nonneg", div)
        a, op, k = got
        return a if k == 1 else b.arith(a, op, k)
    return coord


def _acquire(st, pool, cmap, loops):
    """Before write `st` into a cell of a pooled pointer node: a slot for the cell (the write's
    address reads it: lang/sparse_pool.py). Taking a slot changes nothing a program sees (an
    inactive cell with a slot reads zeros, as one without), so it goes before the serial
    loops around the write whose iterations all write the same cell: a loop over a block's
    elements takes its slot once. It stays inside any `if` (a cell not written would hold a
    block of the pool until the next deactivate_all). `loops`: a dict kept across writes, of
    the ids of the statements inside each loop."""
    c = _Before(st)
    coord = _coords(c)
    idx = [coord(d, div) for d, div in cmap]
    c.add(S.SlotAcquireStmt(c.add(S.GlobalPtrStmt(idx, pool.table.places[0], ret_type=T.i32))))
    at = st
    while isinstance(at.parent.parent_stmt, S.RangeForStmt):
        loop = at.parent.parent_stmt
        inside = loops.get(id(loop))
        if inside is None:
            inside = loops[id(loop)] = {id(x) for x in S.walk(loop.body)}
        made = {id(x) for x in c.new}
        pre, memo = [], {}
        for x in c.new:
            for o in x.operands():
                if id(o) not in made:
                    memo[id(o)] = _lift(o, inside, memo, pre)
        if any(v is None for v in memo.values()):
            break
        for x in c.new:
            for o in x.operands():
                if memo.get(id(o), o) is not o:
                    x.replace_operand(o, memo[id(o)])
        c.new[:0] = pre
        at = loop
    if at is not st:
        c.st = at
        for x in c.new:
            x.parent = at.parent
            x.loc = at.loc
    c.insert()


# what _lift may compute ahead of a loop: arithmetic that cannot trap (a division only by a
# nonzero constant)
_LIFTABLE = {Op.ADD, Op.SUB, Op.MUL, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR}
_DIVISIONS = {Op.FLOORDIV, Op.DIV_NONNEG, Op.MOD, Op.MOD_NONNEG}


def _lift(v, inside, memo, out):
    """`v` computed ahead of the loop whose statements are `inside`: itself when defined
    outside it, else a copy (appended to `out`) of the arithmetic that makes it from values
    defined outside; None when that is not so (a load, the loop's index, a division by a
    value)."""
    if id(v) not in inside:
        return v
    if id(v) in memo:
        return memo[id(v)]
    ok = isinstance(v, S.ConstStmt) or (isinstance(v, S.UnaryOpStmt) and v.op == Op.CAST) or (
        isinstance(v, S.BinaryOpStmt) and (v.op in _LIFTABLE or (
            v.op in _DIVISIONS and isinstance(v.rhs, S.ConstStmt) and v.rhs.value)))
    new = None
    if ok:
        fields = {a: getattr(v, a) for a in v.ATTRS}
        for name in v.OPERANDS:
            fields[name] = _lift(getattr(v, name), inside, memo, out)
        if all(f is not None for n, f in fields.items() if n in v.OPERANDS):
            new = type(v)(ret_type=v.ret_type, loc=v.loc, **fields)
            out.append(new)
    memo[id(v)] = new
    return new


class _Before:
    """Statements to put before write `st`, in its block, at its source location."""

    def __init__(self, st):
        self.st = st
        self.new = []

    def add(self, x):
        x.parent = self.st.parent
        x.loc = self.st.loc
        self.new.append(x)
        return x

    def arith(self, v, op, k):
        return self.add(S.BinaryOpStmt(v, self.add(S.ConstStmt(k, ret_type=v.ret_type)), op,
                                       ret_type=v.ret_type))

    def index(self, d):
        """The write's index along axis `d`, less the field's offset."""
        v = self.st.ptr.indices[d]
        off = self.st.ptr.place.field.offset
        return self.arith(v, "sub", off[d]) if off and off[d] else v

    def list_position(self, t, s, coord):
        """The element's position in its list of dynamic node `s` (an i32)."""
        d, div, ext = list_position(t, s)
        pos = self.arith(coord(d, div), "mod_nonneg", ext)
        return pos if pos.ret_type is T.i32 else self.add(S.UnaryOpStmt(pos, "cast",
                                                                         ret_type=T.i32))

    def insert(self):
        blk = self.st.parent
        at = blk.stmts.index(self.st)
        blk.stmts[at:at] = self.new


def _only_where_active(st, t, lv):
    """Put write `st` (into an element of a node `t` under sparse levels `lv`) under an `if`
    on its cells' states: every level's flag set (a list: its position below the length)."""
    b = _Before(st)
    add, arith = b.add, b.arith

    def coord(d, div):
        v = b.index(d)
        return v if div == 1 else arith(v, "div_nonneg", div)
    cond = None
    for s in lv:
        m = mask_of(s)
        ptr = add(S.GlobalPtrStmt([coord(d, div) for d, div in cell_map(t, s)], m.places[0],
                                  ret_type=m.dtype))
        state = add(S.GlobalLoadStmt(ptr, ret_type=m.dtype))
        if s.kind == "dynamic":
            c = add(S.BinaryOpStmt(b.list_position(t, s, coord), state, "cmp_lt",
                                   ret_type=T.i32))
        else:
            zero = add(S.ConstStmt(0, ret_type=m.dtype))
            c = add(S.BinaryOpStmt(state, zero, "cmp_ne", ret_type=T.i32))
        cond = c if cond is None else add(S.BinaryOpStmt(cond, c, "bit_and", ret_type=T.i32))
    guard = add(S.IfStmt(cond))
    b.insert()
    blk = st.parent
    blk.stmts.remove(st)
    st.parent = guard.then_block
    guard.then_block.stmts.append(st)


# -- the cell of an element addressed by block -------------------------------------------------
def _cell_of_block(v, div):
    """`v // div` (v >= 0: an index in bounds; the write checks come first) as (a, op, k):
    `a op k`, when v is `a * m + r` with 0 <= r < min(m, div) and one of m, div dividing the
    other: then v // div is a // (div / m) or a * (m / div). A loop writing a block's elements
    at `b * 8 + e // 64` (sparse_cycles) so activates cells whose index does not change with
    its element: no division per element, and the flag's store is loop-invariant. None where
    r's interval is not known to lie there (a value loaded from memory, an argument, a loop
    with run-time bounds) or v is no such sum: the division stays."""
    if not (isinstance(v, S.BinaryOpStmt) and v.op == Op.ADD):
        return None
    for x, r in ((v.lhs, v.rhs), (v.rhs, v.lhs)):
        if not (isinstance(x, S.BinaryOpStmt) and x.op == Op.MUL):
            continue
        for a, c in ((x.lhs, x.rhs), (x.rhs, x.lhs)):
            m = c.value if isinstance(c, S.ConstStmt) and type(c.value) is int else 0
            iv = _interval(r) if m > 0 else None
            if iv is None or iv[0] < 0:
                continue
            if div % m == 0 and iv[1] < m:
                return a, "div_nonneg", div // m
            if m % div == 0 and iv[1] < div:
                return a, "mul", m // div
    return None


_I32 = (-(1 << 31), (1 << 31) - 1)


def _interval(v, depth=0):
    """The values integer statement `v` can take (inclusive), or None: constants, indices of
    range loops with constant bounds, and +, * and floor division and modulo by positive
    constants of those (the non-negative forms only of non-negative values)."""
    if depth > 12:
        return None
    if isinstance(v, S.ConstStmt):
        return (v.value, v.value) if type(v.value) is int else None
    if isinstance(v, S.LoopIndexStmt) and isinstance(v.loop, S.RangeForStmt):
        b, e = _interval(v.loop.begin, depth + 1), _interval(v.loop.end, depth + 1)
        return (b[0], e[1] - 1) if b and e and b[0] <= e[1] - 1 else None
    if not isinstance(v, S.BinaryOpStmt) or v.ret_type not in (T.i32, T.i64):
        return None
    a, b = _interval(v.lhs, depth + 1), _interval(v.rhs, depth + 1)
    if a is None or b is None:
        return None
    op = v.op
    if op in (Op.ADD, Op.MUL):
        ends = [x + y if op == Op.ADD else x * y for x in a for y in b]
        out = (min(ends), max(ends))
    elif op in (Op.FLOORDIV, Op.DIV_NONNEG, Op.MOD, Op.MOD_NONNEG) and b[0] == b[1] > 0:
        c = b[0]
        if op.endswith("nonneg") and a[0] < 0:
            return None
        if op in (Op.FLOORDIV, Op.DIV_NONNEG):
            out = (a[0] // c, a[1] // c)
        else:
            out = a if a[0] >= 0 and a[1] < c else (0, c - 1)
    else:
        return None
    return out if _I32[0] <= out[0] and out[1] <= _I32[1] else None
