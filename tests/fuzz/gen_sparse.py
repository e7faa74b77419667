"""The sparse part of the random programs (gen.py): fields under `pointer` and `bitmasked`
SNodes, each in a tree of its own, and `dynamic` lists (below), with the statements that
only sparse fields have.

What keeps a program race-free and its answer unique (gen.py's rules, plus):
- a field's cells are activated by any write (Python-scope writes pick a random part of them
  at the start; kernels' "own", "mark" and "atomic" writes activate more): activation is
  idempotent, so the order of a parallel loop's writes does not matter;
- a struct-for over a sparse field visits the cells active when the loop starts; the loop may
  only read that field or write it at the loop's own element (no new cell becomes active
  while it runs: which of them a loop visits would depend on timing);
- `ti.is_active` of a field's block is read in serial code, or in a parallel loop that does
  not write that field; `ti.deactivate` runs in serial code; `blk.deactivate_all()` between
  launches;
- the results add, per sparse tree, which blocks are active (`ti.is_active` over the block
  grid) and how many cells a struct-for over the field visits.
"""
from __future__ import annotations

import math
import random

KINDS = ("pointer", "bitmasked")


def declare(g, dt, shape):
    """Emit a sparse tree holding one scalar field of `shape`: (its name, its sparse facts)."""
    kind = g.pick(KINDS)
    nd = len(shape)
    axes = "ti.i" if nd == 1 else "ti.ij"
    # blocks: a divisor of each extent (a block of 1 is a cell-level mask); a power of two
    # under taichi, whose to_numpy reads zeros from cells of a bitmasked block of 3x5 that
    # its own x[i, j] reads as written (taichi 1.7.4; it pads such blocks to powers of two;
    # gen.py gives sparse fields power-of-two extents under taichi for the same reason)
    blocks = tuple(g.pick([d for d in range(1, n + 1) if n % d == 0 and d <= 8
                           and not (g.o.taichi and d & (d - 1))]) for n in shape)
    grid = tuple(n // b for n, b in zip(shape, blocks))
    name, blk = g.fresh("x"), g.fresh("blk")
    g.emit(1, f"{name} = ti.field(ti.{dt})")
    # sometimes the pointer lies below another pointer that splits its grid (what the pool
    # takes by default: lang/sparse_pool.py); drawn from a stream of its own, so that the
    # rest of the program is drawn as before. `blk` stays the lower pointer, whose cells are
    # indexed over the whole grid as a single level's are
    rn = random.Random(f"nested{g.seed}{name}")
    outer = tuple(rn.choice([d for d in (2, 4) if n % d == 0] or [1]) for n in grid)
    if kind == "pointer" and math.prod(outer) > 1 and rn.random() < 0.5:
        g.emit(1, f"{blk} = ti.root.pointer({axes}, {_tup(outer)})"
                  f".pointer({axes}, {_tup(tuple(n // o for n, o in zip(grid, outer)))})")
    else:
        g.emit(1, f"{blk} = ti.root.{kind}({axes}, {_tup(grid)})")
    # and sometimes a pointer's blocks are bitmasked, not dense (their states then lie in the
    # pointer's blocks: lang/sparse_block_states.py), from a stream of its own as well
    leaf = "dense"
    if kind == "pointer" and random.Random(f"bitmasked{g.seed}{name}").random() < 0.4:
        leaf = "bitmasked"
    if math.prod(blocks) == 1:
        g.emit(1, f"{blk}.place({name})")
    else:
        g.emit(1, f"{blk}.{leaf}({axes}, {_tup(blocks)}).place({name})")
    return name, dict(kind=kind, blk=blk, grid=grid, block=blocks, leaf=leaf)


def _tup(t):
    return f"({t[0]},)" if len(t) == 1 else f"({', '.join(map(str, t))})"


def block_index(g, env, f):
    """`[b0, b1]`: a block of sparse field `f` picked by an expression of the scope."""
    return "[" + ", ".join(g.index(env, n) for n in f.sparse["grid"]) + "]"


def may_probe(loop, f):
    """Whether `ti.is_active` of `f`'s block is race-free here (no write of f in the loop)."""
    return loop is None or loop.roles.get(f.name) == "ro"


def is_active(g, env):
    """An i32 expression `ti.is_active(blk, [...])`, or None where no sparse field allows it."""
    loop = env.get("loop")
    fs = [f for f in g.fields if f.sparse and may_probe(loop, f)]
    if not fs:
        return None
    f = g.pick(fs)
    return f"ti.cast(ti.is_active({f.sparse['blk']}, {block_index(g, env, f)}), ti.i32)"


def deactivate(g, env, ind):
    """A serial `ti.deactivate(blk, [...])` (its cells read 0 after; a pointer block's values
    are gone, a bitmasked cell's mask bit only)."""
    fs = [f for f in g.fields if f.sparse]
    if fs:
        f = g.pick(fs)
        g.emit(ind, f"ti.deactivate({f.sparse['blk']}, {block_index(g, env, f)})")


def restrict_roles(loop, fields):
    """A struct-for over a sparse field may only read it or write its own element."""
    for f in fields:
        if f.name == loop.over and f.sparse \
                and loop.roles.get(f.name) not in ("ro", "own"):
            loop.roles[f.name] = "ro"


def fill(g, f, data):
    """run()'s Python-scope writes to a random part of sparse field `f` (activating it)."""
    g.emit(2, f"vals = {data}")
    g.emit(2, f"for idx in zip(*np.nonzero(rng.random({_tup(f.shape)}) < "
              f"{g.pick([0.05, 0.3, 0.7])})):")
    g.emit(3, f"{f.name}[tuple(int(t) for t in idx)] = vals[idx].item()")


def probes(g):
    """Kernels that report each sparse tree's active blocks and struct-for visit count (by an
    atomic add into an array: a kernel-level accumulator is a construct the generator may be
    told to leave out)."""
    for f in g.fields:
        s = f.sparse
        if not s:
            continue
        nd = len(s["grid"])
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def probe_{f.name}(act: ti.types.ndarray(dtype=ti.i32, ndim={nd}), "
                  f"visits: ti.types.ndarray(dtype=ti.i32, ndim=1)):")
        g.emit(2, f"for I in ti.grouped(ti.ndrange({', '.join(map(str, s['grid']))})):")
        g.emit(3, f"act[I] = ti.cast(ti.is_active({s['blk']}, I), ti.i32)")
        idx = "i" if nd == 1 else "i, j"
        g.emit(2, f"for {idx} in {f.name}:")
        g.emit(3, "visits[0] += 1")
        g.emit(0, "")


def between_launches(g):
    """Sometimes `deactivate_all()` of a sparse tree or a list between two launches."""
    nodes = [f.sparse["blk"] for f in g.fields if f.sparse] + [lst.node for lst in g.lists]
    if nodes and g.chance(0.15):
        g.emit(2, f"{g.pick(nodes)}.deactivate_all()")


def results(g):
    for f in g.fields:
        s = f.sparse
        if s:
            g.emit(2, f"act, visits = np.zeros({_tup(s['grid'])}, np.int32), np.zeros(1, np.int32)")
            g.emit(2, f"probe_{f.name}(act, visits)")
            g.emit(2, f"out['{f.name}.visits'] = visits")
            g.emit(2, f"out['{f.name}.active'] = act")


# -- dynamic lists ---------------------------------------------------------------------------
# A list field `xN` of integers under `ti.root.dense(ti.i, rows).dynamic(ti.j, CAP)`: parallel
# loops append to it (row = the loop's own index mod rows), and nothing else in that loop
# touches it; the order of the appends varies, so run() reports each row sorted, its length and
# the sum and count a struct-for over the field finds. CAP holds every append a program can
# make (loops that append run at most APPEND_LOOP iterations; at most 12 such loops a program).
CAP = 16384
APPEND_LOOP = 1000


class List:
    def __init__(self, name, dt, rows, node):
        self.name, self.dt, self.rows, self.node = name, dt, rows, node


def declare_list(g):
    dt = g.pick(["i32", "i64"])
    # a power of two under taichi: with 3 rows, taichi 1.7.4 keeps 2,052 of 3,000 appended
    # values (2,400 too; its lengths say 1,000 a row), with 2 or 4 rows all of them
    rows = g.pick([1, 2, 4] if g.o.taichi else [1, 3, 4])
    name, node = g.fresh("x"), g.fresh("lst")
    chunk = g.pick([4, 32, 1024])
    g.emit(1, f"{name} = ti.field(ti.{dt})")
    g.emit(1, f"{node} = ti.root.dense(ti.i, {rows}).dynamic(ti.j, {CAP}, chunk_size={chunk})")
    g.emit(1, f"{node}.place({name})")
    g.lists.append(List(name, dt, rows, node))


def append(g, env, loop, ind):
    """`ti.append(lst, [row], value)` at the top of a parallel loop's body."""
    if not g.lists or math.prod(loop.shape) > APPEND_LOOP:
        return
    lst = g.pick(g.lists)
    own = "I[0]" if loop.idx == ["I"] else loop.idx[0]
    g.emit(ind, f"ti.append({lst.node}, [{own} % {lst.rows}], "
                f"ti.cast({g.iexpr(env, 1)}, ti.{lst.dt}))")


def clear_list(g, env, ind):
    """A serial `ti.deactivate(lst, [row])`: the row's list becomes empty."""
    if g.lists:
        lst = g.pick(g.lists)
        g.emit(ind, f"ti.deactivate({lst.node}, [{g.index(env, lst.rows)}])")


def list_probes(g):
    for lst in g.lists:
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def probe_{lst.name}(lens: ti.types.ndarray(dtype=ti.i32, ndim=1), "
                  f"walk: ti.types.ndarray(dtype=ti.i64, ndim=1)):")
        g.emit(2, f"for i in range({lst.rows}):")
        g.emit(3, f"lens[i] = ti.length({lst.node}, [i])")
        g.emit(2, f"for i, j in {lst.name}:")
        g.emit(3, f"walk[0] += ti.cast({lst.name}[i, j], ti.i64)")
        g.emit(3, "walk[1] += 1")
        g.emit(0, "")


def list_results(g):
    for lst in g.lists:
        g.emit(2, f"lens, walk = np.zeros({lst.rows}, np.int32), np.zeros(2, np.int64)")
        g.emit(2, f"probe_{lst.name}(lens, walk)")
        g.emit(2, f"out['{lst.name}.walk'] = walk")
        g.emit(2, f"out['{lst.name}.lengths'] = lens")
        g.emit(2, f"out['{lst.name}'] = np.sort({lst.name}.to_numpy(), axis=1)")
