"""Pooled pointer levels: the cells of a pointer node take their bytes from a pool of blocks
through a slot table, as the original system's pointer cells do.

Why (issue 16): a tree in reserved memory (lang/tree_buffer.py) commits a page the first
time a cell in it is written, and `deactivate_all` gives the pages back. A program that
activates other blocks each round (sparse_cycles: 2% of 2 KiB blocks, hashed anew each cycle)
then pays a page fault for every page its new blocks touch: 5,200 a cycle, 9 to 10 ms of its
15. A pool keeps the bytes of the blocks it handed out committed, and gives them to the next
round's blocks: no fault, and memory is the blocks in use (2 KiB blocks no longer commit a 4
KiB page each).

Layout. The tree keeps its dense layout for everything but the cells of a pooled node P: the
region where they would lie is reserved and never touched, and cell c's bytes are slot
`table[c]` of the pool, which lies in the same buffer after the dense layout (and its free
row): slot k at `pool.offset + k * span`, `span` = P's cell size, one slot per cell and slot
0. Slot 0 is never written: an inactive cell's entry is 0, so a read of it reads zeros there
without allocating. An element's byte offset is then

    pool.offset + (its place's offset in a cell) + table[cell] * span + (terms of the levels below P)

(codegen/memory.py lowers field pointers so; `offset_of`/`offsets` here for Python scope).
Hidden i32 fields (marked `_is_mask`, like the cell states of lang/sparse.py) hold the
table (over P's cells), `alloc` = [the next never-used slot, the count of free slots] and
`free`, the stack of freed slots.

Invariants: every slot below `alloc[0]` (slot 0 apart) is in exactly one table entry or in
`free[:alloc[1]]`; a slot in no entry holds zeros; an active cell (its state flag, which
stays lang/sparse.py's) has a slot. A cell may hold a slot while inactive: `ti.deactivate`
in a kernel zeroes the block and keeps the slot, which a later activation of the same cell
reuses, so a kernel never frees slots and the free stack only shrinks while kernels run.
* Kernels take slots (SlotAcquireStmt, put before each write by lang/sparse_writes.py): an
  entry of 0 is claimed by a compare-and-swap to -1 (busy), the winner pops a free slot
  (an atomic decrement of the count; at or below 0: none) or takes the next new one, and
  publishes it; others wait while it reads -1. A read of a busy entry (a race in the
  program) reads below slot 0, in the untouched dense region: zeros.
* Python takes slots the same way (`take`, serially) and gives them back (`give_back`:
  a Python-scope `ti.deactivate`, zeroing the block); `deactivate_all` (`reset`) zeroes the
  blocks in place, leaves their slots to the cells active in this round and the one before,
  frees the others, and gives back the pages beyond the highest slot held.

Which nodes: a `pointer` node in a reserved tree (the CPU) whose cells hold no pointer, list,
quantized or bit-packed data (their own addressing stays dense), and, by default, only one
below another pointer level (`NESTED`): FLUXION_SPARSE_POOL=1 pools every such node, =0 none.
Why nested only (measured 2026-11-29, the sparse benchmarks against Taichi in one run): a
tree of pointers below pointers spans a domain too large to lay out densely at a page per
touched block (sparse_cycles: 512^3 cells, 2 KiB blocks, 2% new blocks a cycle: 2.0-2.2x
Taichi and 20.6 MiB resident in the dense layout, its cycles bound by ~5,200 page faults;
5.8x and 13.9 MiB pooled, Taichi 14.1 MiB), while a single pointer level over a grid that a
band or particles sweep gains more from dense addressing than it loses to faults, since
every access under a pooled node loads its slot first (one run under load: sparse_band
2.7x -> 2.1x, sparse_mpm 3.1x -> 1.5x pooled; an earlier quiet run saw no gain for them).
What works on a pooled node as on the dense layout: kernels, Python-scope access,
`to_numpy`/`from_numpy`, (de)activation from both sides, gradients, the scatter's
per-thread copies (they are fields of their own, merged through the pooled addresses),
`ti.get_addr`, the offline cache.
"""
from __future__ import annotations

import os

import numpy as np

from fluxion.ir import types as T
from fluxion.lang import runtime, tree_buffer

NESTED = "nested"
# True: every poolable pointer; False: none; NESTED: those below another pointer level
ENABLED = {"1": True, "0": False}.get(os.environ.get("FLUXION_SPARSE_POOL", ""), NESTED)

# (dtype, shape, name) -> a hidden field, materialized (set by lang/sparse.py, which builds on
# fields: trees, which this module serves, cannot import them)
new_field = None


class Pool:
    """A pooled pointer node's pool: slot 0 at byte `offset` of its tree's buffer, `span`
    bytes a slot, `capacity` slots; its hidden fields once made (`make_fields`)."""
    __slots__ = ("node", "offset", "span", "capacity", "table", "alloc", "free", "high",
                 "last")

    def __init__(self, node, offset, span, capacity):
        self.node, self.offset, self.span, self.capacity = node, offset, span, capacity
        self.table = self.alloc = self.free = None
        self.high = 1              # slots below this may be committed (see reset)
        self.last = None           # the cells active at the last deactivate_all (reset)


class PoolPlace:
    """How a field component under a pooled node is addressed: byte `base` of the buffer
    is its element in slot 0 at index 0 of the cell; `terms`, the levels below the node
    (lang/snode_tree.Term); `cells`, per dimension of the node's cells, (the field's
    dimension, divisor)."""
    __slots__ = ("pool", "base", "terms", "cells")

    def __init__(self, pool, base, terms, cells):
        self.pool, self.base, self.terms, self.cells = pool, base, terms, cells


def _poolable(node):
    """Whether pointer `node`'s cells hold only dense and bitmasked levels and plain places
    (no pointer or list, whose own addressing would need a pool of its own; no quant array
    (it has a `word`) or bit-packed word (it has `places`), which codegen/quant.py
    addresses by the dense terms)."""
    for c in node.children:
        if getattr(c, "kind", "dense") in ("pointer", "dynamic") or hasattr(c, "word") or \
                hasattr(c, "places") or (hasattr(c, "children") and not _poolable(c)):
            return False
    return True


def plan(root, size):
    """Choose the pooled nodes of the tree under `root` (laid out, `size` bytes dense) and
    place their pools after its dense layout: the buffer's size with them."""
    pools = []

    def visit(n, below_pointer):
        for c in getattr(n, "children", ()):
            pointer = getattr(c, "kind", None) == "pointer"
            if pointer and (ENABLED is True or below_pointer) and _poolable(c):
                pools.append(c)
            elif hasattr(c, "children"):
                visit(c, below_pointer or pointer)
    if ENABLED and not runtime.on_cuda():
        visit(root, False)
    page = tree_buffer.PAGE
    at = -(-(size + tree_buffer.slack(root, size)) // page) * page if pools else size
    for s in pools:
        cells = int(np.prod(s.shape))
        s._pool = Pool(s, at, s.cell_size, cells + 1)
        at += -(-(cells + 1) * s.cell_size // page) * page
    return at


def pool_of(node):
    """The pool of pointer node `node` (its tree materialized), or None."""
    if node.tree is not None:
        node.tree.materialize()
    return getattr(node, "_pool", None)


def place_pool(place, pool, cell0, terms):
    """Address component `place` (placed under pooled node pool.node, whose cell 0 lies at
    address `cell0` of the dense layout) through the pool; `terms`: its finished address
    terms of the levels below the node."""
    # (lang/sparse.py's index_map, which this module sits below: trees cannot import it)
    t, p = place.snode, pool.node
    path, axes = t.path(), t.space_axes()
    below = path[path.index(p) + 1:]
    cells = [(axes.index(a), int(np.prod([e for lvl in below
                                           for ax, e in zip(lvl.axes, lvl.extents) if ax == a])))
             for a in p.space_axes()]
    place.pool = PoolPlace(pool, pool.offset + (place.addr - cell0), terms, cells)


def make_fields(pool):
    """The pool's hidden fields (made when its tree is materialized)."""
    if pool.table is not None:
        return
    pool.table, pool.alloc, pool.free = (
        new_field(T.i32, shape, f"<{what} of a pooled pointer node>")
        for what, shape in (("slot table", pool.node.shape), ("allocation counts", (2,)),
                            ("free slots", (pool.capacity,))))
    pool.table._pool_of = pool        # (how codegen finds the pool of a SlotAcquireStmt)
    pool.alloc._write_element(0, (0,), 1)


def _view(f):
    return f._views()[0][0]


# -- Python scope ----------------------------------------------------------------------------
def take(pool, cell):
    """Give cell `cell` (an index of the node's cells) a slot if it has none."""
    table = _view(pool.table)
    if table[cell] != 0:
        return
    alloc, free = _view(pool.alloc), _view(pool.free)
    n = max(int(alloc[1]), 0)
    if n > 0:
        slot = int(free[n - 1])
        alloc[1] = n - 1
    else:
        slot = int(alloc[0])
        alloc[0] = slot + 1
        alloc[1] = 0
    table[cell] = slot


def give_back(pool, region):
    """Free the slots of the cells `region` (a tuple of slices or indices over the node's
    cells) holds, zeroing their blocks."""
    table = _view(pool.table)
    sub = table[tuple(r if isinstance(r, slice) else slice(r, r + 1) for r in region)]
    slots = np.asarray(sub[sub != 0], dtype=np.int64).reshape(-1)
    if not len(slots):
        return
    buf = pool.node.tree.buffer
    lo = pool.offset + slots * pool.span
    tree_buffer.zero(buf, lo, lo + pool.span)
    alloc, free = _view(pool.alloc), _view(pool.free)
    n = max(int(alloc[1]), 0)
    free[n:n + len(slots)] = slots
    alloc[1] = n + len(slots)
    sub[...] = 0


def reset(pool, active=None):
    """deactivate_all of the pooled node (`active`: its cells' states before it, or None).
    Every block is zeroed in place. A cell active now and at the previous deactivate_all
    keeps its slot for the next round, as the dense layout keeps such a block's pages
    (lang/sparse_memory.py): a block written again each round (a band that moves a little,
    particles that stay) is then found without a claim, two atomics and a compare-and-swap
    on shared words (the moving band's activation: 0.67-0.69 to 0.53-0.54 ms at best).
    Every other slot below the highest one of an active cell goes on the free stack,
    lowest on top; their pages stay committed for the next round, those beyond them go
    back, so memory follows the blocks of the last round (a second deactivate_all, which
    finds none active, gives all back)."""
    if pool.table is None:
        return
    table = _view(pool.table)
    alloc, free = _view(pool.alloc), _view(pool.free)
    buf = pool.node.tree.buffer
    high = max(pool.high, int(alloc[0]))
    now = None if active is None or active.shape != table.shape else active != 0
    last, pool.last = pool.last, now
    held = table > 0
    used = table[held if now is None else held & now]     # (the round's blocks)
    top = int(used.max()) + 1 if len(used) else 1
    if top > 1:
        # (the other slots hold zeros: those of inactive cells and the free ones)
        tree_buffer.zero(buf, np.array([pool.offset + pool.span]),
                         np.array([pool.offset + top * pool.span]))
    keep = None if now is None or last is None else now & last & held
    if keep is not None and keep.any():
        mine = np.zeros(top, dtype=bool)
        mine[0] = True
        mine[table[keep]] = True
        spare = np.flatnonzero(~mine)[::-1]
        table[~keep] = 0
        free[:len(spare)] = spare
        alloc[0], alloc[1] = top, len(spare)
    else:
        table[...] = 0
        alloc[0], alloc[1] = 1, 0
    if high > top:
        # (to the end of the page of slot high - 1: the slots beyond it were never handed
        # out, and a page left there would stay committed beyond every later `high`)
        page = tree_buffer.PAGE
        end = -(-(pool.offset + high * pool.span) // page) * page
        tree_buffer.release_runs(buf, np.array([pool.offset + top * pool.span]),
                                 np.array([end]))
    pool.high = top


def slots_in_use(pool):
    if pool.table is None:
        return 0
    return int(np.count_nonzero(_view(pool.table)))


def _cell_of(pp, idx):
    return tuple(idx[d] // div for d, div in pp.cells)


def offset_of(place, idx):
    """The byte offset in its tree's buffer of element `idx` (0-based) of pooled `place`."""
    pp = place.pool
    slot = int(_view(pp.pool.table)[_cell_of(pp, idx)])
    off = pp.base + slot * pp.pool.span
    for t in pp.terms:
        off += idx[t.axis] // t.divisor % t.extent * t.stride
    return off


def offsets(place, shape):
    """The byte offsets of every element of pooled `place` (a field of `shape`), as an
    int64 array of that shape: read afresh each time, as the table changes."""
    pp = place.pool
    table = _view(pp.pool.table)
    grids = np.ix_(*[np.arange(n, dtype=np.int64) for n in shape])
    cell = tuple(grids[d] // div for d, div in pp.cells)
    out = np.broadcast_to(table[cell].astype(np.int64) * pp.pool.span + pp.base, shape).copy()
    for t in pp.terms:
        out += grids[t.axis] // t.divisor % t.extent * t.stride
    return out
