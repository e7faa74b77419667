"""The memory of sparse SNodes: which trees are reserved, where a cell's bytes lie, giving
them back, and the counts that report it.

Design (issue 16): the OS page allocator is the pool. A tree that holds a `pointer` or
`dynamic` level keeps its dense layout, so addresses and code generation are those of a dense
tree and dense code under a pointer level costs what it costs in a dense tree, but its buffer
is reserved virtual memory whose pages are committed when first written (lang/tree_buffer.py).
A pointer cell's block and a list are contiguous bytes of the layout (`cell_spans`), except
short lists, whose chunks are interleaved so that lists share pages (`list_chunk`); a
deactivation gives back the whole pages among them and zeroes the partial pages at their ends
(`release_cells`). A bitmasked level's cells are dense in the original system too, and stay so;
its states lie in the blocks of the pointer above it when there is one
(lang/sparse_block_states.py), so they follow those blocks.
What is not covered:
* `ti.deactivate` inside a kernel zeroes the cell there (lang/sparse.py), so its pages stay
  committed (to the same cell: a later activation reuses them, the process does not grow)
  until a Python-scope deactivation or `deactivate_all` of that node gives them back (the
  latter only where the node's cells lie in few runs of bytes: see deactivate_all);
* on CUDA device memory is allocated densely (the host copy mirrors it whole), so a tree
  there is not reserved: sparse trees on CUDA cost their dense size;
* a block smaller than a page commits its page whenever any block of that page is active.
"""
from __future__ import annotations

import numpy as np

from fluxion.lang import (runtime, sparse_block_states, sparse_copies, sparse_list_sweep,
                         sparse_pool, sparse_sweep, tree_buffer)
from fluxion.lang.sparse_counts import note_allocated
from fluxion.lang.sparse_lists import list_chunk, list_region, list_runs


def reserves(root):
    """Whether the tree under `root` gets a reserved buffer: it holds a pointer or dynamic
    level (or asks for one: the per-thread copies of a sparse field, lang/launch_values.py),
    and it runs on the CPU."""
    return not runtime.on_cuda() and (_has_pointer_or_list(root) or
                                      getattr(root.tree, "reserve", False))


def _has_pointer_or_list(node):
    for c in getattr(node, "children", ()):
        if getattr(c, "kind", "dense") in ("pointer", "dynamic") or _has_pointer_or_list(c):
            return True
    return False


def reserved(node):
    """Whether `node`'s tree lives in reserved memory (a deactivated cell's bytes are then
    given back rather than overwritten)."""
    t = node.tree
    if t is None:
        return False
    t.materialize()
    return tree_buffer.is_reserved(t.buffer)


def _cell_node(s):
    return s.up if s.kind == "dynamic" else s


def cell_spans(s, cells):
    """Where sparse node `s` keeps what one of its cells holds: (byte offsets in its tree's
    buffer, bytes) for `cells`, an int array (k, d) of indices in the space of `s`'s cells
    (a pointer's block; a dynamic node's list, within its parent's cell)."""
    n = _cell_node(s)
    n._tree_layout()
    axes = n.space_axes()
    cells = np.asarray(cells, dtype=np.int64)
    cells = cells if cells.ndim == 2 else cells.reshape(-1, len(axes))
    off = np.zeros(len(cells), dtype=np.int64)
    below = {a: 1 for a in axes}          # extents along each axis of the levels below
    for lvl in reversed([lvl for lvl in n.path() if lvl.extents]):
        up = lvl.up
        off += up._offsets[up.children.index(lvl)]
        stride = lvl.cell_size            # row-major over the level's cells
        for a, e in reversed(list(zip(lvl.axes, lvl.extents))):
            off += cells[:, axes.index(a)] // below[a] % e * stride
            stride *= e
        for a, e in zip(lvl.axes, lvl.extents):
            below[a] *= e
    if s.kind == "dynamic":
        return off + n._offsets[n.children.index(s)], s.cell_size * s.extents[0]
    return off, s.cell_size


def release_cells(s, cells=None):
    """Zero what cells `cells` (every cell when None) of pointer or dynamic node `s` hold,
    giving their whole pages back in a reserved tree."""
    n = _cell_node(s)
    if cells is None:
        cells = np.indices(n.shape).reshape(len(n.shape), -1).T if n.shape else [()]
    if list_chunk(s):
        # (the chunks of a list lie in pages of other lists: zeroing an unwritten chunk
        # would commit its page)
        tree_buffer.release_runs(s.tree.buffer, *list_runs(s, cells), written_only=True)
        return
    lo, size = cell_spans(s, cells)
    # (a pooled node's cells are never written where the dense layout puts them: zeroing
    # their partial pages would commit them)
    tree_buffer.release_runs(s.tree.buffer, lo, lo + size, written_only=_pooled_below(s))


def _pooled_below(s):
    return s._pool is not None or any(_pooled_below(c) for c in getattr(s, "children", ())
                                      if hasattr(c, "children"))


def _active_cells(s, state, up=None):
    """The indices (k, d) of the active cells of sparse node `s` (`state`: its state
    field's values); `up`: (the pointer node above it, that node's active cells), to look
    only under those (an active cell's ancestors are active)."""
    if not state.ndim:
        return np.zeros((int(state != 0), 0), np.int64)
    if up is None:
        return np.argwhere(state != 0)
    p, pcells = up
    if s.kind == "dynamic":                  # its lists are the cells of the node above
        return pcells[state[tuple(pcells.T)] != 0]
    p_axes, axes = p.space_axes(), s.space_axes()
    ext = [dict(zip(s.axes, s.extents)).get(a, 1) for a in axes]
    if len(pcells) * int(np.prod(ext)) * 2 > state.size:
        return np.argwhere(state != 0)
    local = np.indices(ext).reshape(len(axes), -1).T          # the cells under one cell
    base = np.zeros((len(pcells), len(axes)), np.int64)
    for k, a in enumerate(axes):
        if a in p_axes:
            base[:, k] = pcells[:, p_axes.index(a)] * ext[k]
    cand = (base[:, None, :] + local[None, :, :]).reshape(-1, len(axes))
    return cand[state[tuple(cand.T)] != 0]


def written_spans(s, up=None, lists=None):
    """The bytes that the active cells of pointer or dynamic node `s` may have written, as
    [(starts, ends)] arrays: a pointer's active blocks, or, where its cells hold further
    pointers or lists, their parts outside those (and the written bytes of those, found
    the same way); a list's elements up to its length. A write activates its cells, so
    the bytes of inactive cells were not written since their last deactivation. (`up`:
    see _active_cells; `lists`, a dict: where the spans of lists go, by node, when given.)"""
    m = s._active_mask
    if m is None:
        return []
    state = m.to_numpy()
    cells = _active_cells(s, state, up)
    if len(cells) == 0:
        return []
    starts, size = cell_spans(s, cells)
    if s.kind == "dynamic" and not _has_pointer_or_list(s):
        n = np.minimum(state[tuple(cells.T)].astype(np.int64), s.extents[0])
        runs = list_runs(s, cells, n) if list_chunk(s) else (starts, starts + n * s.cell_size)
        if lists is None:
            return [runs]
        lists[s] = runs
        return []
    if s.kind == "dynamic" or not _has_pointer_or_list(s):
        return [(starts, starts + size)]
    out, beside = [], []
    for c, off in zip(s.children, s._offsets):
        if getattr(c, "kind", None) in ("pointer", "dynamic"):
            out += written_spans(c, (s, cells), lists)
            continue
        if not hasattr(c, "children"):                   # a place, a bit-packed word
            n = c.dtype.nbytes
        elif hasattr(c, "word"):                         # a quant array: one word
            n = c.cell_size
        else:                     # a dense or bitmasked level (whole, lists below or not)
            n = c.cell_size * int(np.prod(c.extents))
        beside.append((starts + off, starts + off + n))
    if lists is not None and beside and any(getattr(c, "kind", None) == "dynamic"
                                            for c in s.children):
        # (what lies beside lists in a cell shares their first page: it is kept with them)
        lists[s] = (np.concatenate([a for a, _ in beside]),
                    np.concatenate([b for _, b in beside]))
        return out
    return out + beside


def deactivate_all(node, mask_of):
    """deactivate_all of a sparse node in a reserved tree: every state at or below it
    cleared (`mask_of(s)`: sparse node `s`'s state field, lang/sparse.py), and the memory
    of the cells of the outermost pointers and lists there given back:
    * a pointer's blocks: the node's cells are all inactive now, so when they lie in a few
      runs of bytes (a pointer level at the top of its tree, or under few dense cells) each
      run goes back to the system whole, in one madvise: the kernel walks only the page
      tables that exist, so it costs what the committed pages cost, one system call instead
      of one per active block, and it finds the pages that in-kernel `ti.deactivate` zeroed
      and left committed; under many dense cells (many short runs) only the pages that hold
      a byte written by an active cell go back. The bytes of pages shared with memory
      outside the node are zeroed;
      A block active now and at the previous deactivate_all (a band that moves a little,
      particles that stay in place) is likely to be written again at once: it is zeroed in
      place, keeping its pages (no page fault when it is written again), and goes back at
      the next deactivate_all if it is not active then; when most active blocks were active
      at the previous one too (a set that persists), every active block is kept so. Memory
      then follows the active blocks and those kept for them, at most twice the active set
      and as much as it for a set that does not move. After the first deactivate_all, only
      the blocks that changed go back (_blocks_to_keep), and every few calls all runs;
    * a list (and what lies beside it in its cell, which shares its first page): its
      elements are zeroed in place, so a list refilled at once (particles binned again each
      step) finds its pages without a page fault; its pages go back at the next
      deactivate_all if it was not used again in between. Memory then follows the lists
      used in the last two rounds.
    A pointer whose cells lie in one run (dense or bitmasked levels below), or in a few runs
    with pointers below it, and interleaved lists (lang/sparse_list_sweep.py) are done by one
    native call by these rules (_native_plan, lang/sparse_sweep.py).
    """
    tops, states, has_lists = _plan(node)
    if not tops:            # (bitmasked levels only: their states, no memory to give back)
        for s in states:
            _clear_states(s, node, mask_of)
        return
    buf = node.tree.buffer
    plan = _native_plan(node, tops, states, has_lists, mask_of)
    if plan is not None:          # (the common cases in one native call: lang/sparse_sweep.py)
        plan.deactivate(mask_of)
        return
    for s in states:
        if s._pool is not None:
            sparse_pool.reset(s._pool, None if s._active_mask is None else
                              s._active_mask._views()[0][0])
    sparse_copies.release(tops, mask_of)
    r_lo, r_hi = _cell_runs(node, tops)
    if not has_lists and len(r_lo) <= _WHOLE_RUNS:
        keep, changed = _blocks_to_keep(tops, mask_of)
        for s in states:
            note_allocated(s)
            _clear_states(s, node, mask_of)
        if keep is not None:
            # the runs less the kept blocks go back; the kept blocks are zeroed in place
            a = np.sort(np.concatenate([r_lo, keep[1]]))
            b = np.sort(np.concatenate([keep[0], r_hi]))
            r_lo, r_hi = a[b > a], b[b > a]
            tree_buffer.zero(buf, *keep)
        if changed is not None and len(changed[0]):
            # only the changed blocks, widened to their pages: what else lies in those runs
            # (the runs less the kept blocks) is zero
            page = tree_buffer.PAGE
            c_lo, c_hi = tree_buffer.merge_runs(changed[0] // page * page,
                                                -(-changed[1] // page) * page)
            r_lo, r_hi = tree_buffer.intersect_runs(c_lo, c_hi, r_lo, r_hi)
        elif changed is not None:
            return
        tree_buffer.release_runs(buf, r_lo, r_hi, written_only=True)
        return
    if all(_plain_lists(s) for s in tops) and len(states) == len(tops):
        for s in tops:
            _deactivate_lists(s, mask_of(s), buf)
        return
    lists = {}
    spans = [sp for s in tops for sp in written_spans(s, None, lists)]
    keep = []
    for s in states:
        if s in lists or getattr(s, "_kept", None) is not None:
            now = lists.get(s, (np.zeros(0, np.int64),) * 2)
            old = getattr(s, "_kept", None)
            if old is not None:        # (pages of lists not used again: back to the pool)
                gone = ~np.isin(old[0], now[0], assume_unique=True)
                spans.append((old[0][gone], old[1][gone]))
            s._kept = now
            s._kept_cells = None
            keep.append(now)
        note_allocated(s)
        _clear_states(s, node, mask_of)
    if spans:
        lo = np.concatenate([a for a, _ in spans])
        hi = np.concatenate([b for _, b in spans])
        tree_buffer.release_runs(buf, *_whole_pages(r_lo, r_hi, lo, hi))
    release_spans(buf, keep)


def _clear_states(s, node, mask_of):
    """deactivate_all(`node`)'s clearing of the states of sparse node `s` at or below it:
    none where they lie in blocks that it gives back or zeroes, those under the active
    blocks where they lie in the blocks of a pointer above it (lang/sparse_block_states.py),
    else all."""
    if sparse_block_states.cleared_with(s, node):
        return
    if sparse_block_states.in_blocks(s) is not None:
        sparse_block_states.clear(s)
        return
    mask_of(s).fill(0)


def _blocks_to_keep(tops, mask_of):
    """(the bytes (merged runs) of the blocks of pointers `tops` that are active now and were
    at the previous deactivate_all (see deactivate_all), or None: none, or a pointer with
    pointers or lists below it (whose blocks are kept whole or not at all); the bytes of
    the blocks that may hold committed pages besides those, or None: every run of the
    nodes' cells is to be swept).

    What may be committed after a deactivate_all is the blocks it kept; until the next, what
    is written activates its block. So the next one needs to give back only the blocks
    active now and not kept again, and those it kept before and not active now: not every
    run of the node's cells, whose dirty ends cost a look each (the MPM step's grid: 26
    runs). A block activated and deactivated by a kernel in one round (`ti.deactivate`
    zeroes it in place) escapes that, so every `_SWEEP_EVERY`-th deactivate_all, and the
    first, sweeps all the runs: such pages stay committed, zeroed, for at most that many
    rounds."""
    lo, hi, clo, chi = [], [], [], []
    sweep = False
    for s in tops:
        if s.kind != "pointer" or _has_pointer_or_list(s) or int(np.prod(s.shape)) > 1 << 22:
            return None, None
        if s._active_mask is None:          # (never active)
            continue
        now = mask_of(s).to_numpy().reshape(-1) != 0
        if s._pool is not None:
            continue        # (its blocks are not where the layout puts them: sparse_pool.reset)
        prev, kept = getattr(s, "_last_active", None), getattr(s, "_kept_last", None)
        rounds = getattr(s, "_unswept", _SWEEP_EVERY)
        s._last_active, s._kept_last = now, None
        if prev is None or prev.shape != now.shape:
            sweep = True
            continue
        again = now & prev
        if 2 * np.count_nonzero(again) > np.count_nonzero(now):
            # a set that persists (most of its blocks were active at the last call too): its
            # new blocks are likely to stay as well (a band that moves a row a round is
            # written again in the next rounds), so every active block is kept
            again = now
        s._kept_last = again
        if kept is None or rounds >= _SWEEP_EVERY - 1:
            sweep = True
        else:
            s._unswept = rounds + 1
            changed = np.flatnonzero((now & ~again) | (kept & ~now))
            if len(changed):
                starts = _cell_starts(s, changed, len(now))
                clo.append(starts)
                chi.append(starts + s.cell_size)
        again = np.flatnonzero(again)
        if len(again):
            starts = _cell_starts(s, again, len(now))
            lo.append(starts)
            hi.append(starts + s.cell_size)
    if sweep:
        for s in tops:
            s._unswept = 0
    keep = tree_buffer.merge_runs(np.concatenate(lo), np.concatenate(hi)) if lo else None
    if sweep:
        return keep, None
    return keep, ((np.concatenate(clo), np.concatenate(chi)) if clo else
                  (np.zeros(0, np.int64), np.zeros(0, np.int64)))


def _cell_starts(s, flat, ncells):
    """Where the cells `flat` (flat indices) of pointer `s` start."""
    # (the starts of all cells are kept for a pointer of few cells: argwhere and cell_spans
    # each time cost more than the rest of deactivate_all)
    if ncells <= 1 << 18:
        return _all_cell_starts(s)[flat]
    return cell_spans(s, np.stack(np.unravel_index(flat, s.shape), axis=1))[0]


def _all_cell_starts(s):
    """Where every cell of node `s` starts (cell_spans of all its cells, flat in row-major
    order), kept with its tree's buffer."""
    buf = s.tree.buffer
    got = getattr(s, "_cell_starts", None)
    if got is None or got[0] is not buf:
        n = _cell_node(s)
        cells = np.indices(n.shape).reshape(len(n.shape), -1).T if n.shape else [()]
        got = s._cell_starts = (buf, cell_spans(s, cells)[0])
    return got[1]


def _plain_lists(s):
    """Whether `s` is a dynamic node with its fields placed right in it, whose lists are few
    enough (at most 2^20) to keep an array of their offsets."""
    if s.kind != "dynamic" or _has_pointer_or_list(s) or \
            any(hasattr(c, "children") for c in s.children):   # (levels below it)
        return False
    return int(np.prod(s.up.shape)) <= 1 << 20


def _deactivate_lists(s, mask, buf):
    """deactivate_all's work for plain lists `s` (see _plain_lists) by arrays over all its
    lists (deactivate_all, above, says what happens to their memory); `mask`: their
    lengths."""
    if list_chunk(s):
        sparse_list_sweep.deactivate_interleaved(s, mask, buf)
        return
    starts = _all_cell_starts(s)
    length = mask.to_numpy().reshape(-1)
    note_allocated(s, length)
    used = length != 0
    ends = starts.copy()
    ends[used] += np.minimum(length[used], s.extents[0]).astype(np.int64) * s.cell_size
    old = getattr(s, "_kept_cells", None)
    if old is not None:
        gone = old[0] & ~used          # (pages of lists not used again: back to the pool)
        gone = (starts[gone], old[1][gone])
    elif getattr(s, "_kept", None) is not None:
        keep = ~np.isin(s._kept[0], starts[used], assume_unique=True)
        gone = (s._kept[0][keep], s._kept[1][keep])
    else:
        gone = None
    s._kept = (starts[used], ends[used])
    s._kept_cells = (used, ends)
    # the lists' elements are zeroed in place, their pages kept: a kernel over the lists
    # (lang/sparse_kernels.py) where it is installed
    clear = sparse_list_sweep.clear_lists
    if clear is not None and clear(s, mask):
        # (as release_runs does: a list's whole pages go back, the page it ends in stays)
        tree_buffer.release_pages(buf, *s._kept)
    else:
        mask.fill(0)
        tree_buffer.release_runs(buf, *s._kept)
    if gone is not None and len(gone[0]):
        tree_buffer.release_runs(buf, *_whole_pages(*_cell_runs(s, [s]), *gone))


# up to this many runs of bytes hold a node's cells, deactivate_all gives each run back whole
# (one system call a run); beyond, only the pages its active cells wrote
_WHOLE_RUNS = 64
# the native call (lang/sparse_sweep.py) looks at each page of a node's cells when it sweeps,
# and keeps a byte for each: it takes nodes of up to this many bytes of cells
_NATIVE_BYTES = 16 << 30
# every this many deactivate_alls of a pointer, all runs of its cells are swept
# (_blocks_to_keep)
_SWEEP_EVERY = sparse_sweep.SWEEP_EVERY


def _plan(node):
    """(the outermost pointer and dynamic nodes at or below `node`, every sparse node
    there, whether a list is among them): the tree's shape, so computed once."""
    plan = getattr(node, "_deactivate_plan", None)
    if plan is None:
        tops, states = [], []

        def visit(n, under_top):
            if getattr(n, "kind", "dense") != "dense":
                states.append(n)
                if n.kind != "bitmasked" and not under_top:
                    tops.append(n)
                    under_top = True
            for c in getattr(n, "children", ()):
                visit(c, under_top)
        visit(node, False)
        plan = node._deactivate_plan = (tops, states,
                                        any(s.kind == "dynamic" for s in states))
    return plan


def deactivate_planned(node, mask_of):
    """deactivate_all of `node` by the native plan it was given at an earlier call, when it
    has one that still holds: whether it did (the step's first work, after an idle pause:
    the checks that lead there cost each call tens of microseconds with cold caches)."""
    got = getattr(node, "_sweep_plan", None)
    if got is None or got[1] is None or got[0] is not node.tree.buffer or not got[1].current():
        return False
    got[1].deactivate(mask_of)
    return True


def _native_plan(node, tops, states, has_lists, mask_of):
    """lang/sparse_sweep.py's Plan for `node`, or None where it does not apply (see there):
    made once per node and tree buffer."""
    buf = node.tree.buffer
    got = getattr(node, "_sweep_plan", None)
    if got is not None and got[0] is buf and (got[1] is None or got[1].current()):
        return got[1]
    plan = None
    s = tops[0]
    n = int(np.prod(s.shape))
    # (states in the blocks of these pointers are cleared with them)
    states = [t for t in states if not sparse_block_states.cleared_with(t, node)]
    simple = not has_lists and len(tops) == 1 and s.kind == "pointer" and \
        all(t._pool is None for t in states) and node.tree.device_ptr is None
    if simple and _has_pointer_or_list(s):
        # (pointers below: the whole runs go back, no block kept, every state cleared)
        runs, masks = _cell_runs(node, tops), [mask_of(t) for t in states]
        if len(runs[0]) <= _WHOLE_RUNS and all(
                m._snode.tree.device_ptr is None and
                sparse_sweep.contiguous_states(m, int(np.prod(t.shape))) is not None
                for t, m in zip(states, masks)):
            plan = sparse_sweep.LevelsPlan(s, states, masks, buf, runs)
    elif simple and states == [s] and 0 < n <= 1 << 22 and n * s.cell_size <= _NATIVE_BYTES:
        # (the states of bitmasked levels below lie in its blocks: cleared with them)
        starts = _all_cell_starts(s)
        r_lo, r_hi = _cell_runs(node, tops)
        base, size = tree_buffer._address(buf) + int(starts[0]), s.cell_size
        fresh = s._active_mask is None
        mask = mask_of(s)
        if len(r_lo) == 1 and r_hi[0] - r_lo[0] == n * size and \
                np.array_equal(starts, starts[0] + size * np.arange(n)) and \
                mask._snode.tree.device_ptr is None and \
                sparse_sweep.contiguous_states(mask, n) is not None:
            plan = sparse_sweep.Plan(s, mask, base, size, n, -1 if fresh else 0)
    elif has_lists and len(states) == len(tops) and node.tree.device_ptr is None and \
            all(_plain_lists(t) and list_chunk(t) and t._pool is None for t in tops):
        plan = sparse_list_sweep.ListsPlan.make(tops, mask_of, buf)
    node._sweep_plan = (buf, plan)
    return plan


def _cell_runs(node, tops):
    """The bytes of the cells of nodes `tops` (every cell, active or not), as merged runs
    (starts, ends): fixed by the tree's layout, so kept with the tree's buffer."""
    buf = node.tree.buffer
    got = getattr(node, "_cell_runs", None)
    if got is not None and got[0] is buf:
        return got[1]
    c_lo, c_hi = [], []
    for s in tops:
        n = _cell_node(s)
        if list_chunk(s):
            a, b = list_region(s)
            c_lo.append(np.array([a], np.int64))
            c_hi.append(np.array([b], np.int64))
            continue
        cells = np.indices(n.shape).reshape(len(n.shape), -1).T if n.shape else [()]
        a, size = cell_spans(s, cells)
        c_lo.append(a)
        c_hi.append(a + size)
    runs = tree_buffer.merge_runs(np.concatenate(c_lo), np.concatenate(c_hi))
    node._cell_runs = (buf, runs)
    return runs


def _whole_pages(r_lo, r_hi, lo, hi):
    """Ranges [lo, hi) widened to the pages they touch, as far as the runs [r_lo, r_hi)
    of the nodes' cells reach (what lies outside them keeps its bytes)."""
    k = np.clip(np.searchsorted(r_lo, lo, side="right") - 1, 0, len(r_lo) - 1)
    page = tree_buffer.PAGE
    return (np.maximum(lo // page * page, r_lo[k]),
            np.minimum(-(-hi // page) * page, r_hi[k]))


def release_spans(buffer, spans):
    """Release (tree_buffer.release_runs) the [(starts, ends)] of `written_spans`."""
    if spans:
        tree_buffer.release_runs(buffer, np.concatenate([a for a, _ in spans]),
                                 np.concatenate([b for _, b in spans]))
