"""Scatter privatization (CPU).

Requires: scalar reductions already privatized (passes/reduction), offload not yet run.
Guarantees: in a parallel loop whose only accesses to a field component are atomic adds with
unused results (`grid_m[base + offset] += w * m`, the particle-to-grid scatter of MPM, or the
accumulation into `x.grad` in adjoint kernels), those adds go without atomics into the running
thread's own copy of the component (a scratch buffer with a leading thread axis, requested on
`kernel.scratch` and allocated by the runtime: ir/scratch.py), and a parallel loop placed
right after the loop adds the copies into the field and zeroes them again. Under pointer or
bitmasked levels, thread 0's copy is the field itself: no other thread touches the component
until the merge, so its adds need no atomics there either, and the copies, which commit the
pages of the cells scattered into as the field does, cost one field fewer (half of them on two
threads). A dense field keeps a copy for every thread: the branch between field and copy
doubles the scatter's code (the MLS-MPM substep's scatter 719 -> 1,332 lines of LLVM IR, 24 ms
more of LLVM in a cold compile) for memory that its copies take anyway.

Adds into a contiguous ndarray argument (or its gradient: `kernel.grad` of a gather) get the
same treatment, but the size of an array is known only at launch: each becomes a
PrivateAddStmt, and the launch (runtime/cpu_jit.py) provides zeroed per-thread copies when
they fit a memory budget and the loop's trip count (evaluated at launch) makes enough adds
per element to pay for the merge, or none, and then the same code adds atomically.

Why: on x86 an atomic read-modify-write costs ~20 cycles even uncontended, and a float add
becomes a compare-exchange loop; a scatter-heavy loop spends most of its time there. The
copies cost memory and a merge pass over the field, so a component is privatized only when its
copies are small and the loop does enough adds to pay for the merge.

Must not fire in a loop that calls a real function: the call is opaque, and the callee may
read or store the target, which would then miss the adds waiting in the per-thread copies
(only adds with unused results may go there, and the callee's accesses cannot be checked).

A field under pointer or bitmasked levels gets copies too (laid out by its cells in reserved
memory, so that they commit what the scatter touches: lang/launch_values.py), and its merge is
a struct-for over the field, lowered here (passes/lower_struct_for.py), so that it visits only
the active cells. Requires: the writes' activations already in the loop (lang/sparse_writes.py,
before the pipeline), so that every element a copy holds a sum for lies in a cell active after
the loop. Must not fire on such a field where the loop may deactivate a cell (a write of a
cell state other than the store of a nonzero constant that activates it: `ti.deactivate`),
which would leave partial sums in the copies of a cell the merge skips, nor under a dynamic
level (a list's length is not a cell state the merge reads).

Must not fire on 16-bit floats: their sums round at every add (past 2048 a float16 count
stops growing by 1), so per-thread partial sums give other values than one sequence of
atomic adds, and other values with every thread count.
"""
from __future__ import annotations

import math

from fluxion.ir import stmts as S
from fluxion.ir.scratch import per_thread_copies
from fluxion.ir import types as T
from fluxion.ir.ops import Op
from fluxion.passes import lower_struct_for

MAX_COPY_BYTES = 64 << 20   # all threads' copies of one component
MAX_THREADS = 64            # the merge reads every copy of an element in one unrolled sum
MIN_ADDS_PER_ELEMENT = 0.5  # adds per field element per launch that pay for the merge
MAX_ELEMENTS_UNKNOWN_TRIPS = 1 << 16
# a field under pointer or bitmasked levels: its merge runs over the active cells, taken to
# be at most this fraction of its extent when deciding whether the copies pay
SPARSE_ACTIVE_FRACTION = 1 / 8


def run(kernel, cfg) -> bool:
    nthreads = min(cfg.cpu_max_num_threads, 256)
    # debug: a failed check stops the kernel before the merge, which would leave partial sums
    # in the copies for the next launch to add
    if nthreads <= 1 or nthreads > MAX_THREADS or cfg.debug:
        return False
    changed = False
    for loop in list(kernel.body.stmts):
        if isinstance(loop, S.RangeForStmt) and loop.parallel:
            changed |= _privatize(kernel, loop, nthreads, cfg)
    return changed


def _privatize(kernel, loop, nthreads, cfg):
    if S.has_call(loop.body):
        return False
    users = {}
    ptrs = {}       # place -> pointers into it inside the loop
    for s in S.walk(loop.body):
        for o in s.operands():
            users.setdefault(id(o), []).append(s)
        if isinstance(s, S.GlobalPtrStmt):
            ptrs.setdefault(s.place, []).append(s)
    # a place reached through a pointer made outside the loop (a privatized reduction's) is
    # left alone
    outside = {s.ptr.place for s in S.walk(loop.body)
               if isinstance(s, (S.AtomicOpStmt, S.GlobalLoadStmt, S.GlobalStoreStmt))
               and isinstance(s.ptr, S.GlobalPtrStmt) and s.ptr.place not in ptrs}
    trips = _trips(loop)
    chosen = []
    grows_only = None
    for place, ps in ptrs.items():
        if place in outside or not place.field.shape or _half(place.dtype):
            continue
        sparse = _sparse_levels(place)
        if sparse is None:
            continue
        if sparse:
            if grows_only is None:
                grows_only = _only_activates(loop)
            if not grows_only:
                continue
        adds = []
        ok = True
        for p in ps:
            for u in users.get(id(p), []):
                if (isinstance(u, S.AtomicOpStmt) and u.op == Op.ADD and u.ptr is p
                        and u.value is not p and not users.get(id(u))
                        and u.value.ret_type == place.dtype):
                    adds.append(u)
                else:
                    ok = False
        if ok and adds and _worth_it(place, sum(_weight(a, loop) for a in adds), trips,
                                     nthreads, bool(sparse)):
            chosen.append((place, adds))
    arrays = _array_candidates(loop, users)
    if not chosen and not arrays:
        return False
    kernel.private_copies = True
    kernel.private_threads = nthreads
    worker = S.WorkerIndexStmt(ret_type=T.i32, loc=loop.loc)
    worker.parent = loop.body
    loop.body.stmts.insert(0, worker)
    pairs = []
    for place, adds in chosen:
        # the copies are requested, not made: the runtime allocates them at load; under
        # sparse levels thread 0 adds into the field itself
        into_field = bool(_sparse_levels(place))
        copy = per_thread_copies(place, nthreads - 1 if into_field else nthreads)
        kernel.scratch.append(copy)
        pairs.append((place, copy))
        for a in adds:
            (_replace_with_field_or_copy_add if into_field else _replace_with_private_add)(
                a, worker, copy)
        if into_field:
            # the adds were the pointers' only users (checked above); each branch has its own
            for p in ptrs[place]:
                p.parent.stmts.remove(p)
    if chosen:
        _insert_merge(kernel, loop, pairs, nthreads, cfg)
    pos = kernel.body.stmts.index(loop) + 1
    for (arg, grad), adds in arrays.items():
        k = len(kernel.private_arrays)
        kernel.private_arrays.append((arg, grad))
        # the launch decides whether copies pay off: iterations x adds against elements
        kernel.private_trips.append((loop.begin, loop.end, sum(_weight(a, loop) for a in adds)))
        for a in adds:
            block = a.parent
            new = S.PrivateAddStmt(a.ptr, a.value, k, loc=a.loc)
            new.parent = block
            block.stmts[block.stmts.index(a)] = new
        merge = S.MergeCopiesStmt(k, loc=loop.loc)
        merge.parent = kernel.body
        kernel.body.stmts.insert(pos, merge)
        pos += 1
    return True


def _half(dt):
    return dt.is_float and dt.bits == 16


def _array_candidates(loop, users):
    """(ArrayArg, grad) -> its atomic adds, for contiguous ndarrays (or their grads) that the
    loop only adds into."""
    found, bad = {}, set()
    for s in S.walk(loop.body):
        if not isinstance(s, S.ExternalPtrStmt):
            continue
        key = (s.arg, s.grad)
        d = s.arg.desc
        for u in users.get(id(s), []):
            if (isinstance(u, S.AtomicOpStmt) and u.op == Op.ADD and u.ptr is s
                    and u.value is not s and not users.get(id(u)) and d.contiguous
                    and u.value.ret_type == d.dtype and not _half(d.dtype)):
                found.setdefault(key, []).append(u)
            else:
                bad.add(key)
        if not users.get(id(s)):
            bad.add(key)
    # a reduction's pointer made outside the loop touches the array too
    inside = {id(s) for s in S.walk(loop.body)}
    for s in S.walk(loop.body):
        if isinstance(s, (S.AtomicOpStmt, S.GlobalLoadStmt, S.GlobalStoreStmt)) and \
                isinstance(s.ptr, S.ExternalPtrStmt) and id(s.ptr) not in inside:
            bad.add((s.ptr.arg, s.ptr.grad))
    return {k: v for k, v in found.items() if k not in bad}


def _weight(stmt, loop):
    """How many times `stmt` runs per iteration of `loop`: serial loops around it multiply by
    their trip count (16 when it is not a constant)."""
    w, block = 1, stmt.parent
    while block is not loop.body and block.parent_stmt is not None:
        outer = block.parent_stmt
        if isinstance(outer, (S.RangeForStmt, S.WhileStmt)):
            trips = _trips(outer) if isinstance(outer, S.RangeForStmt) else None
            w *= 16 if trips is None else max(trips, 1)
        block = outer.parent
    return w


def _trips(loop):
    if isinstance(loop.begin, S.ConstStmt) and isinstance(loop.end, S.ConstStmt):
        return max(0, loop.end.value - loop.begin.value)
    return None


def _worth_it(place, adds_per_iteration, trips, nthreads, sparse=False):
    n = math.prod(place.field.shape)
    if n * place.dtype.nbytes * nthreads > MAX_COPY_BYTES:
        return False
    if trips is None:
        return n <= MAX_ELEMENTS_UNKNOWN_TRIPS
    # the merge of a sparse field visits its active cells only: a fraction of its extent
    per_element = MIN_ADDS_PER_ELEMENT * (SPARSE_ACTIVE_FRACTION if sparse else 1)
    return trips * adds_per_iteration >= per_element * n


def _sparse_levels(place):
    """The sparse levels above field component `place` (empty: a dense field), or None when
    its copies could not be merged over its active cells (a dynamic list above it)."""
    try:
        lv = lower_struct_for.sparse.levels(lower_struct_for.sparse.node_of(place.field))
    except TypeError:          # (no language layer: IR built by hand, a dense field)
        return []
    if any(s.kind == "dynamic" for s in lv):
        return None
    return lv


def _only_activates(loop):
    """Whether `loop` leaves every active cell active: its writes of cell states (made by
    lang/sparse_writes.py before this pass) only set a flag to a nonzero constant. The merge
    visits the cells active after the loop; a cell deactivated inside it would keep its
    partial sums in the copies."""
    for s in S.walk(loop.body):
        place = getattr(s, "ptr", None) if isinstance(s, (S.GlobalStoreStmt,
                                                          S.AtomicOpStmt)) else None
        place = getattr(place, "place", None)
        if not getattr(getattr(place, "field", None), "_is_mask", False):
            continue
        if not (isinstance(s, S.GlobalStoreStmt) and isinstance(s.value, S.ConstStmt)
                and s.value.value != 0):
            return False
    return True


def _replace_with_private_add(a, worker, copy):
    """`field[I] += v` (atomic) -> `copy[worker, I] = copy[worker, I] + v` (plain)."""
    block = a.parent
    pos = block.stmts.index(a)
    p = S.GlobalPtrStmt([worker] + list(a.ptr.indices), copy, ret_type=a.ptr.ret_type,
                        loc=a.ptr.loc)
    old = S.GlobalLoadStmt(p, ret_type=copy.dtype, loc=a.loc)
    new = S.BinaryOpStmt(old, a.value, "add", ret_type=copy.dtype, loc=a.loc)
    store = S.GlobalStoreStmt(p, new, loc=a.loc)
    for k, st in enumerate((p, old, new, store)):
        st.parent = block
        block.stmts.insert(pos + k, st)
    block.stmts.remove(a)


def _replace_with_field_or_copy_add(a, worker, copy):
    """`field[I] += v` (atomic) -> `if worker == 0: field[I] = field[I] + v` else
    `copy[worker - 1, I] = copy[worker - 1, I] + v` (plain adds; the branch is the same for
    every iteration a thread runs)."""
    block = a.parent
    pos = block.stmts.index(a)
    ip, loc = T.i32, a.loc
    zero = S.ConstStmt(0, ret_type=ip, loc=loc)
    first = S.BinaryOpStmt(worker, zero, "cmp_eq", ret_type=ip, loc=loc)
    branch = S.IfStmt(first, S.Block(), S.Block(), loc=loc)
    for k, st in enumerate((zero, first, branch)):
        st.parent = block
        block.stmts.insert(pos + k, st)
    block.stmts.remove(a)
    mine = S.GlobalPtrStmt(list(a.ptr.indices), a.ptr.place, ret_type=a.ptr.ret_type,
                           loc=a.ptr.loc)
    _add_into(branch.then_block, mine, a.value, a.ptr.place.dtype, loc)
    one = S.ConstStmt(1, ret_type=ip, loc=loc)
    other = S.BinaryOpStmt(worker, one, "sub", ret_type=ip, loc=loc)
    branch.else_block.append(one)
    branch.else_block.append(other)
    p = S.GlobalPtrStmt([other] + list(a.ptr.indices), copy, ret_type=a.ptr.ret_type,
                        loc=a.ptr.loc)
    _add_into(branch.else_block, p, a.value, copy.dtype, loc)


def _add_into(block, p, value, dt, loc):
    """Append `*p = *p + value` (a plain add) to `block`, with `p` itself."""
    old = S.GlobalLoadStmt(p, ret_type=dt, loc=loc)
    new = S.BinaryOpStmt(old, value, "add", ret_type=dt, loc=loc)
    for st in (p, old, new, S.GlobalStoreStmt(p, new, loc=loc)):
        block.append(st)


def _insert_merge(kernel, loop, pairs, nthreads, cfg):
    """After `loop`: for every element, field += sum of the copies; copies = 0. One parallel
    loop per field shape; consecutive elements of the innermost axis go to one thread. Under
    pointer or bitmasked levels the loop is a struct-for over the field, which visits only
    its active cells: a write activates its cell (lang/sparse_writes.py, in the loop), and
    nothing in the loop deactivates one (_only_activates), so every copy that holds a sum
    lies in an active cell."""
    by_shape = {}
    for place, copy in pairs:
        lv = tuple(id(s) for s in _sparse_levels(place))
        by_shape.setdefault((tuple(place.field.shape), place.field.offset, lv), []).append(
            (place, copy))
    pos = kernel.body.stmts.index(loop) + 1
    ip = T.i32
    for (shape, off, lv), group in by_shape.items():
        if lv:
            bounds = [(o, o + n) for o, n in zip(off or (0,) * len(shape), shape)]
            merge = S.StructForStmt(group[0][0].field, bounds, False, True, None, ret_type=ip,
                                    loc=loop.loc)
            indices = []
            for d in range(len(shape)):
                ix = S.StructIndexStmt(merge, d, ret_type=ip, loc=loop.loc)
                ix.parent = merge.body
                merge.body.stmts.append(ix)
                indices.append(ix)
            _merge_body(merge.body, indices, group, nthreads)
            merge.parent = kernel.body
            kernel.body.stmts.insert(pos, merge)
            before = len(kernel.body.stmts)
            lower_struct_for.lower_one(merge, kernel, cfg)
            pos += 1 + len(kernel.body.stmts) - before
            continue
        new = []

        def emit(st, block):
            st.parent = block
            block.stmts.append(st)
            return st

        begin = S.ConstStmt(0, ret_type=ip, loc=loop.loc)
        end = S.ConstStmt(math.prod(shape), ret_type=ip, loc=loop.loc)
        new += [begin, end]
        merge = S.RangeForStmt(begin, end, True, None, None, loc=loop.loc)
        new.append(merge)
        body = merge.body
        rest = emit(S.LoopIndexStmt(merge, ret_type=ip, loc=loop.loc), body)
        indices = [None] * len(shape)
        for d in range(len(shape) - 1, -1, -1):
            if d == 0:
                local = rest
            else:
                ext = emit(S.ConstStmt(shape[d], ret_type=ip), body)
                local = emit(S.BinaryOpStmt(rest, ext, "mod_nonneg", ret_type=ip), body)
                rest = emit(S.BinaryOpStmt(rest, ext, "div_nonneg", ret_type=ip), body)
            if off and off[d]:
                o = emit(S.ConstStmt(off[d], ret_type=ip), body)
                local = emit(S.BinaryOpStmt(local, o, "add", ret_type=ip), body)
            indices[d] = local
        _merge_body(body, indices, group, nthreads)
        for k, st in enumerate(new):
            st.parent = kernel.body
            kernel.body.stmts.insert(pos + k, st)
        pos += len(new)


def _merge_body(body, indices, group, nthreads):
    """Into `body`: the element at `indices` of each (place, copies) of `group` gains the sum
    of its copies, which are zeroed."""
    ip = T.i32

    def emit(st, block):
        st.parent = block
        block.stmts.append(st)
        return st

    for place, copy in group:
        dt = place.dtype
        zero = emit(S.ConstStmt(0.0 if dt.is_float else 0, ret_type=dt), body)
        total = None
        for k in range(copy.shape[0]):       # (a copy a thread, or but thread 0's)
            kk = emit(S.ConstStmt(k, ret_type=ip), body)
            p = emit(S.GlobalPtrStmt([kk] + indices, copy, ret_type=dt), body)
            v = emit(S.GlobalLoadStmt(p, ret_type=dt), body)
            emit(S.GlobalStoreStmt(p, zero), body)
            total = v if total is None else emit(S.BinaryOpStmt(total, v, "add", ret_type=dt),
                                                 body)
        q = emit(S.GlobalPtrStmt(list(indices), place, ret_type=dt), body)
        old = emit(S.GlobalLoadStmt(q, ret_type=dt), body)
        emit(S.GlobalStoreStmt(q, emit(S.BinaryOpStmt(old, total, "add", ret_type=dt),
                                       body)), body)
