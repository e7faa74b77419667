"""The sparse part of the random programs (gen.py): fields under `pointer` and `bitmasked`
SNodes, each in a tree of its own, with the statements that only sparse fields have.

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

KINDS = ("pointer", "bitmasked")


def declare(g, dt, shape):
    """Emit a sparse tree holding one scalar field of `shape`: (its name, its sparse facts)."""
    kind = g.pick(KINDS)
    nd = len(shape)
    axes = "ti.i" if nd == 1 else "ti.ij"
    # blocks: a divisor of each extent (a block of 1 is a cell-level mask)
    blocks = tuple(g.pick([d for d in range(1, n + 1) if n % d == 0 and d <= 8]) for n in shape)
    grid = tuple(n // b for n, b in zip(shape, blocks))
    name, blk = g.fresh("x"), g.fresh("blk")
    g.emit(1, f"{name} = ti.field(ti.{dt})")
    g.emit(1, f"{blk} = ti.root.{kind}({axes}, {_tup(grid)})")
    if math.prod(blocks) == 1:
        g.emit(1, f"{blk}.place({name})")
    else:
        g.emit(1, f"{blk}.dense({axes}, {_tup(blocks)}).place({name})")
    return name, dict(kind=kind, blk=blk, grid=grid, block=blocks)


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
    """Kernels that report each sparse tree's active blocks and struct-for visit count."""
    for f in g.fields:
        s = f.sparse
        if not s:
            continue
        nd = len(s["grid"])
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def probe_{f.name}(act: ti.types.ndarray(dtype=ti.i32, ndim={nd})) "
                  f"-> ti.i32:")
        g.emit(2, f"for I in ti.grouped(ti.ndrange({', '.join(map(str, s['grid']))})):")
        g.emit(3, f"act[I] = ti.cast(ti.is_active({s['blk']}, I), ti.i32)")
        g.emit(2, "n = 0")
        idx = "i" if nd == 1 else "i, j"
        g.emit(2, f"for {idx} in {f.name}:")
        g.emit(3, "n += 1")
        g.emit(2, "return n")
        g.emit(0, "")


def between_launches(g):
    """Sometimes `blk.deactivate_all()` between two launches of run()."""
    fs = [f for f in g.fields if f.sparse]
    if fs and g.chance(0.15):
        g.emit(2, f"{g.pick(fs).sparse['blk']}.deactivate_all()")


def results(g):
    for f in g.fields:
        s = f.sparse
        if s:
            g.emit(2, f"act = np.zeros({_tup(s['grid'])}, np.int32)")
            g.emit(2, f"out['{f.name}.visits'] = probe_{f.name}(act)")
            g.emit(2, f"out['{f.name}.active'] = act")
