"""Guard every write into a field or an ndarray with a check of its index.

Requires: the IR after autodiff (the adjoint's atomics into gradients are writes too) and
before sparse activation (compiler/driver.py: instrument_writes puts a sparse field's
activation right before its store, so the check here comes first and an index outside the
field activates nothing). Guarantees: right before each `GlobalStoreStmt` and `AtomicOpStmt`
whose address is an element of a user's field (`GlobalPtrStmt`, `QuantPtrStmt`) or of an
ndarray argument (`ExternalPtrStmt`, its gradient too) stands an `AssertStmt` that the
element's indices lie inside the field's shape (offset included) or the array's run-time
shape; a failed one ends the kernel before the write with the error a checked access raises
(runtime/cpu_jit.py: FluxionOutOfBoundsError naming the kernel, file and line); the kernel's
`write_check_codes` names those errors. Then
passes/bounds.py removes the checks that hold on every run, so a loop over the field's own
cells keeps none.

Why writes and not reads: a write past a field is what corrupts the process (the heap behind
the field, another field, the allocator's own records), and it is never part of a correct
program. A read past a field can be: the original system's programs read `v[i - 1] if i > 0
else 0.0`, whose both sides are evaluated, and loads whose value is never used; checking
reads is what `check_out_of_bound=True` and `debug=True` do (frontend/access.py).

Must not fire: a write to memory no user names (a Tape's access mask, a pass's scratch copy:
those come after this pass or are marked `_is_mask`), a write through a pointer that is not
an element address (a local variable, a list's length), a kernel built with the frontend's
checks on (they already check every access, reads included).
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.ops import Op
from fluxion.passes import bounds

_WRITES = (S.GlobalStoreStmt, S.AtomicOpStmt)
_type_range = bounds._type_range       # (the values of an integer type: the same facts)


def _field_of(ptr):
    """The user's field a write through `ptr` goes into, or None."""
    if not isinstance(ptr, (S.GlobalPtrStmt, S.QuantPtrStmt)):
        return None
    f = getattr(ptr.place, "field", None)        # (a scratch request has no field)
    if f is None or getattr(f, "_is_mask", False) or not getattr(f, "shape", None):
        return None
    return f


class _Shapes:
    """The run-time extents of the ndarray arguments, read once at the top of the kernel (as
    frontend/access.py reads them: a value at the top dominates every use)."""

    def __init__(self, kernel):
        self.top = kernel.body
        self.read = {}
        self.made = []
        for st in self.top.stmts:
            if isinstance(st, S.ArgLoadStmt):
                self.read.setdefault(st.index, st)

    def extent(self, arg, axis):
        """The extent as an i64 (the context's slot as it is: no truncation to a narrower
        index type, which could turn 1000 into -24)."""
        slot = arg.shape_slot + axis
        st = self.read.get(slot)
        if st is None or st.ret_type != T.i64:
            st = S.ArgLoadStmt(slot, ret_type=T.i64, loc=None)
            st.parent = self.top
            self.top.stmts.insert(0, st)
            self.read[slot] = st
            self.made.append(st)
        return st


def _condition(st, ptr, bounds_of, new):
    """The statements computing whether `ptr`'s indices are inside, appended to `new`; the
    condition, or None where every index is inside by its type alone."""
    cond = None

    def add(x):
        x.loc = st.loc
        new.append(x)
        return x

    for axis, i in enumerate(ptr.indices):
        r = _type_range(i.ret_type)
        if r is None:
            return None
        lo, hi = bounds_of(axis)
        if not isinstance(hi, int) and i.ret_type != T.i64:
            # against a run-time extent (an i64): the index widened, its value kept
            i = add(S.UnaryOpStmt(operand=i, op=Op.CAST, ret_type=T.i64))
            r = _type_range(T.i64)
        t = i.ret_type
        tests = []
        if lo > r[0]:
            tests.append((Op.CMP_GE, add(S.ConstStmt(value=lo, ret_type=t))))
        if isinstance(hi, int):
            if hi <= r[1]:
                tests.append((Op.CMP_LT, add(S.ConstStmt(value=hi, ret_type=t))))
        else:
            tests.append((Op.CMP_LT, hi))
        for op, k in tests:
            c = add(S.BinaryOpStmt(lhs=i, rhs=k, op=op, ret_type=T.i32))
            cond = c if cond is None else add(
                S.BinaryOpStmt(lhs=cond, rhs=c, op=Op.BIT_AND, ret_type=T.i32))
    return cond


def _drop_unused(made, kernel):
    """Remove the statements this pass made that nothing uses any more (the comparisons of
    the checks that bounds removed or moved), latest first, so a chain goes whole: cheaper
    than a sweep of the kernel by dce, which nothing else here needs."""
    uses = {}
    for st in S.walk_all(kernel):
        for o in st.operands():
            uses[id(o)] = uses.get(id(o), 0) + 1
    # a block's statements as a set, and those to drop from it: one filter of each block at
    # the end instead of a search and a removal in its list per statement (hundreds of
    # checks in a block of hundreds of statements)
    members, gone = {}, {}
    for st in reversed(made):
        blk = st.parent
        if uses.get(id(st), 0) or blk is None:
            continue
        ids = members.get(id(blk))
        if ids is None:
            ids = members[id(blk)] = {id(x) for x in blk.stmts}
        if id(st) not in ids:
            continue
        ids.discard(id(st))
        gone.setdefault(id(blk), (blk, set()))[1].add(id(st))
        for o in st.operands():
            uses[id(o)] -= 1
    for blk, dead in gone.values():
        blk.stmts = [x for x in blk.stmts if id(x) not in dead]


def run(kernel, cfg=None, cpu=True) -> bool:
    """`cpu`: false for a GPU target (see bounds.run: checks stay in parallel loops there)."""
    shapes = None
    added = 0
    first = len(kernel.errors)
    made = []
    for body in S.bodies(kernel):
        in_kernel = body is kernel.body
        for st in list(S.walk(body)):
            if not isinstance(st, _WRITES):
                continue
            ptr = st.ptr
            f = _field_of(ptr)
            if f is not None:
                off = tuple(f.offset or (0,) * len(f.shape))
                if len(off) != len(ptr.indices) or len(f.shape) != len(ptr.indices):
                    continue        # (an element address of another shape: not an index)

                def bounds_of(axis, f=f, off=off):
                    return off[axis], off[axis] + f.shape[axis]
                what = (f"field '{f.name}'" if f.name else "a field") + \
                    f" of shape {tuple(f.shape)}" + (f" and offset {off}" if f.offset else "")
            elif isinstance(ptr, S.ExternalPtrStmt) and in_kernel:
                if shapes is None:
                    shapes = _Shapes(kernel)
                arg = ptr.arg

                def bounds_of(axis, arg=arg):
                    return 0, shapes.extent(arg, axis)
                what = f"ndarray argument '{arg.name}'"
            else:
                continue
            new = []
            cond = _condition(st, ptr, bounds_of, new)
            if cond is None:
                continue
            code = len(kernel.errors)
            kernel.errors.append((f"Out of bound access: index {{}} out of bounds for {what}",
                                  st.loc, len(ptr.indices)))
            check = S.AssertStmt(cond=cond, args=list(ptr.indices)[:8], code=code, loc=st.loc)
            made.extend(new)
            new.append(check)
            blk = st.parent
            at = blk.stmts.index(st)
            for x in new:
                x.parent = blk
            blk.stmts[at:at] = new
            added += 1
    if added:
        # the checks of a loop over the field's own cells, and those an earlier check proves
        bounds.run(kernel, cfg, parallel=cpu)
        _drop_unused((shapes.made if shapes else []) + made, kernel)
        # the messages of removed checks go too (they were appended last): a kernel whose
        # error table is empty needs no look at its error slot after a launch (CUDA's
        # read back)
        used = {st.code for st in S.walk_all(kernel) if isinstance(st, S.AssertStmt)}
        keep = len(kernel.errors)
        while keep > first and keep - 1 not in used:
            keep -= 1
        del kernel.errors[keep:]
        # which error codes are this pass's: a GPU reads only those lazily
        # (runtime/cuda_jit.py; an autodiff stack's overflow, say, is read at the launch)
        kernel.write_check_codes = set(range(first, keep))
    return bool(added)
