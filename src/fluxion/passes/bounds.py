"""Drop the assertions that hold on every run: bounds checks whose index provably stays in range.

Requires: any IR (it runs in simplify, before autodiff). Guarantees: an AssertStmt is removed
only when its condition is nonzero for every value its operands can take, as computed by an
interval analysis over integers: constants; loop indices of range loops whose bounds are
constants (the index of `for i in x` over a field of n cells lies in [0, n)), and those of
struct-fors and ndrange-fors not lowered yet (their space's bounds); and the pure
integer operations of index arithmetic on them (+, -, *, //, % and their non-negative forms,
min, max, & with a non-negative constant, casts between integer types, comparisons and the
logical combinations of comparisons). Every other value is unknown (any integer), so a
check stays wherever the index comes from memory, an argument, a local variable or a loop
with run-time bounds. A result that could leave its type's range (wraparound) is unknown too.

Why: with bounds checks on (frontend/access.py: an index outside the field is an error,
never a write into someone else's memory), the checks of the common loop `for i in x: ...
x[i] ...` or a stencil over an ndrange of the interior would otherwise cost a branch per
access and stop LLVM from vectorizing the loop (its task runs on a chunk [begin, end) whose
end LLVM cannot relate to the field's size).

A check that stays tells the code after it (in its block and the blocks nested there) that
its condition holds, as a failed check ends the kernel: a check of `x[base + 1]` makes a later
one of `x[base]` or of the same index (the same field's other component, another field of the
same shape) redundant, which removes most of the 18 checks of a 2-D MLS-MPM scatter.

A check at the top level of a range loop's body (serial or parallel) whose condition
compares affine functions of the loop's index (coefficients the same on every iteration; no
wraparound in between, which an index of any field cannot reach) holds on every iteration if
it holds on the first and the last: it moves in front of the loop as one check of both ends
(passing when the loop runs zero times), so an inner loop over taps, or `for i in
range(n): y[i] = ...`, keeps no branch. Preconditions:
the body cannot leave an iteration early (no break, continue, return, while), so the check
runs on every iteration where it stood.

Must not fire: `x[i + 1]` in `for i in x` (the last i reads past the end), an index loaded from
a field, an index in a loop over `range(n)` with `n` an argument (its check may move in front
of the loop, never vanish), a check inside an `if` for
the code after that `if`; no move out of a loop that may break, of a check inside an `if`, or
of an index like u * u or u % 3.
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.ops import Op

T_I32 = T.i32

_BOOL = (0, 1)


def _type_range(t):
    if t is None or t.is_float or not t.bits:
        return None
    if t.bits == 1:
        return (0, 1)
    if t.is_signed:
        return (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1)
    return (0, (1 << t.bits) - 1)


def _fit(iv, t):
    """`iv` if every value of it is a value of type `t`, else None (the operation may wrap)."""
    if iv is None:
        return None
    r = _type_range(t)
    if r is None or iv[0] < r[0] or iv[1] > r[1]:
        return None
    return iv


def _cmp(op, a, b):
    """The interval of a comparison's i32 result: (1, 1) always true, (0, 0) never."""
    if a is None or b is None:
        return _BOOL
    (al, ah), (bl, bh) = a, b
    if op is Op.CMP_LT:
        yes, no = ah < bl, al >= bh
    elif op is Op.CMP_LE:
        yes, no = ah <= bl, al > bh
    elif op is Op.CMP_GT:
        yes, no = al > bh, ah <= bl
    elif op is Op.CMP_GE:
        yes, no = al >= bh, ah < bl
    elif op is Op.CMP_EQ:
        yes, no = al == ah == bl == bh, ah < bl or bh < al
    else:   # CMP_NE
        yes, no = ah < bl or bh < al, al == ah == bl == bh
    return (1, 1) if yes else (0, 0) if no else _BOOL


def _binary(op, a, b):
    if op in (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE):
        return _cmp(op, a, b)
    if a is None or b is None:
        return None
    (al, ah), (bl, bh) = a, b
    if op is Op.ADD:
        return (al + bl, ah + bh)
    if op is Op.SUB:
        return (al - bh, ah - bl)
    if op is Op.MUL:
        ps = (al * bl, al * bh, ah * bl, ah * bh)
        return (min(ps), max(ps))
    if op is Op.MIN:
        return (min(al, bl), min(ah, bh))
    if op is Op.MAX:
        return (max(al, bl), max(ah, bh))
    if op in (Op.FLOORDIV, Op.DIV_NONNEG) and bl == bh and bl > 0:
        return (al // bl, ah // bl)     # floor division by a positive constant is monotonic
    if op in (Op.MOD, Op.MOD_NONNEG) and bl == bh and bl > 0:
        if al >= 0 and ah < bl:
            return a
        return (0, bl - 1)              # Python's % (and the non-negative form) by c > 0
    if op is Op.BIT_AND:
        if al >= 0 and bl >= 0 and ah <= 1 and bh <= 1:      # booleans: a logical and
            return (1, 1) if al == bl == 1 else (0, 0) if ah == 0 or bh == 0 else _BOOL
        if al >= 0 and bl >= 0:
            return (0, min(ah, bh))
        if bl == bh and bl >= 0:
            return (0, bl)
        if al == ah and al >= 0:
            return (0, al)
        return None
    if op is Op.BIT_OR and al >= 0 and bl >= 0 and ah <= 1 and bh <= 1:
        return (max(al, bl), max(ah, bh))   # booleans: a logical or
    return None


def _interval(st, known):
    """The interval of `st`'s integer value (inclusive bounds), or None for unknown."""
    if isinstance(st, S.ConstStmt):
        v = st.value
        if isinstance(v, (bool, int)):
            return (int(v), int(v))
        return None
    if isinstance(st, S.LoopIndexStmt):
        loop = st.loop
        if isinstance(loop, S.RangeForStmt):
            b, e = known.get(id(loop.begin)), known.get(id(loop.end))
            if b is not None and e is not None and b[0] <= e[1] - 1:
                return (b[0], e[1] - 1)
        return None
    if isinstance(st, S.StructIndexStmt):
        # (a struct-for's space, and an ndrange-for's, before passes/lower_struct_for.py)
        loop = st.loop
        if isinstance(loop, S.StructForStmt):
            b, e = loop.bounds[st.axis]
            return (b, e - 1) if b <= e - 1 else None
        if isinstance(loop, S.NdRangeForStmt):
            b, e = (_bound(v, known) for v in (loop.begins[st.axis], loop.ends[st.axis]))
            if b is not None and e is not None and b[0] <= e[1] - 1:
                return (b[0], e[1] - 1)
        return None
    if isinstance(st, S.BinaryOpStmt):
        iv = _binary(st.op, known.get(id(st.lhs)), known.get(id(st.rhs)))
        return _fit(iv, st.ret_type)
    if isinstance(st, S.UnaryOpStmt):
        a = known.get(id(st.operand))
        if st.op is Op.CAST and a is not None:
            return _fit(a, st.ret_type)
        if st.op is Op.NEG and a is not None:
            return _fit((-a[1], -a[0]), st.ret_type)
        if st.op is Op.LOGIC_NOT and a is not None:
            return (1, 1) if a == (0, 0) else (0, 0) if a[0] > 0 or a[1] < 0 else _BOOL
        return None
    return None


def _bound(v, known):
    """The interval of an ndrange-for's bound: an int, or a statement's known interval."""
    return (v, v) if isinstance(v, int) else known.get(id(v))


def _restrict(st, lo, hi, known, depth=0):
    """After a check passed: `st`'s value lies in [lo, hi] (either may be None: unbounded);
    so do the values it was computed from by adding or subtracting a constant, or widening."""
    r = _type_range(st.ret_type)
    if r is None:
        return
    cur = known.get(id(st), r)
    new = (cur[0] if lo is None else max(cur[0], lo), cur[1] if hi is None else min(cur[1], hi))
    if new[0] > new[1]:
        return          # (a check that cannot pass: the code after it never runs)
    known[id(st)] = new
    if depth > 4:
        return
    if isinstance(st, S.BinaryOpStmt) and st.op in (Op.ADD, Op.SUB):
        a, b = known.get(id(st.lhs)), known.get(id(st.rhs))
        if b is not None and b[0] == b[1]:          # v + c, v - c
            _restrict_shifted(st.lhs, new, b[0] if st.op is Op.ADD else -b[0], known, depth)
        elif st.op is Op.ADD and a is not None and a[0] == a[1]:     # c + v
            _restrict_shifted(st.rhs, new, a[0], known, depth)
    elif isinstance(st, S.UnaryOpStmt) and st.op is Op.CAST:
        src = _type_range(st.operand.ret_type)
        if src is not None and r[0] <= src[0] and src[1] <= r[1]:    # a widening cast
            _restrict(st.operand, new[0], new[1], known, depth + 1)


def _restrict_shifted(v, x_range, c, known, depth):
    """x = v + c lies in `x_range`: so v lies in x_range - c, if that range is all of v's
    type (the sum could have wrapped around otherwise: x >= 0 for x = v - 5 holds for the
    v = -2^31 whose difference wraps to 2^31 - 5)."""
    r = _type_range(v.ret_type)
    lo, hi = x_range[0] - c, x_range[1] - c
    if r is not None and r[0] <= lo and hi <= r[1]:
        _restrict(v, lo, hi, known, depth + 1)


def _assume(cond, known, depth=0):
    """A check of `cond` passed: what that says about the values it compares."""
    if depth > 8 or not isinstance(cond, S.BinaryOpStmt):
        return
    known[id(cond)] = (1, 1)
    a, b = known.get(id(cond.lhs)), known.get(id(cond.rhs))
    op = cond.op
    if op is Op.BIT_AND and a is not None and b is not None and \
            a[0] >= 0 and a[1] <= 1 and b[0] >= 0 and b[1] <= 1:
        _assume(cond.lhs, known, depth + 1)
        _assume(cond.rhs, known, depth + 1)
    elif op is Op.CMP_NE and b == (0, 0):
        _assume(cond.lhs, known, depth + 1)
    elif b is not None and b[0] == b[1]:           # x op k
        k = b[0]
        bounds = {Op.CMP_GE: (k, None), Op.CMP_GT: (k + 1, None), Op.CMP_LT: (None, k - 1),
                  Op.CMP_LE: (None, k), Op.CMP_EQ: (k, k)}.get(op)
        if bounds is not None:
            _restrict(cond.lhs, *bounds, known)


def _walk(block, known, dead):
    """`known`: the intervals of the values defined before, in this block or around it (a
    nested block gets a copy: what a check inside it proves holds only inside)."""
    for st in block.stmts:
        iv = _interval(st, known)
        if iv is not None:
            known[id(st)] = iv
        if isinstance(st, S.AssertStmt):
            c = known.get(id(st.cond))
            if c is not None and (c[0] > 0 or c[1] < 0):
                dead.append(st)
            else:
                # the code after a check runs only where it passed (a failed check ends the
                # kernel): x + 1 < n checked once makes x + 1 < n true below it, and x < n
                _assume(st.cond, known)
        for b in st.blocks():
            _walk(b, dict(known), dead)


# -- checks moved out of range loops --------------------------------------------------------
_EXITS = (S.BreakStmt, S.ContinueStmt, S.ReturnStmt, S.FuncReturnStmt, S.WhileStmt)
_MONOTONE = (Op.ADD, Op.SUB, Op.MUL)


def _inside(loop):
    return {id(st) for st in S.walk(loop.body)}


def _kind(st, loop, inside, memo):
    """"inv": the value is the same on every iteration of `loop`; "aff": an affine function
    of its index (with coefficients the same on every iteration); "cond": a comparison of
    such values, or the logical and of conditions; None: anything else."""
    k = memo.get(id(st), 0)
    if k != 0:
        return k
    if id(st) not in inside or isinstance(st, S.ConstStmt):
        k = "inv"
    elif isinstance(st, S.LoopIndexStmt):
        k = "aff" if st.loop is loop else None
    elif isinstance(st, S.BinaryOpStmt) and not st.ret_type.is_float:
        a, b = _kind(st.lhs, loop, inside, memo), _kind(st.rhs, loop, inside, memo)
        if st.op in (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE):
            k = "cond" if a in ("inv", "aff") and b in ("inv", "aff") else None
        elif st.op is Op.BIT_AND:
            k = "cond" if {a, b} <= {"cond", "inv"} and "cond" in (a, b) else \
                "inv" if a == b == "inv" else None
        elif st.op is Op.CMP_NE:
            k = "cond" if a == "cond" and b == "inv" else "inv" if a == b == "inv" else None
        elif a == b == "inv":
            k = "inv"
        elif st.op in (Op.ADD, Op.SUB) and {a, b} <= {"inv", "aff"}:
            k = "aff"
        elif st.op is Op.MUL and {a, b} == {"inv", "aff"}:
            k = "aff"
        else:
            k = None
    elif isinstance(st, S.UnaryOpStmt) and st.op in (Op.NEG, Op.CAST):
        a = _kind(st.operand, loop, inside, memo)
        src, dst = _type_range(st.operand.ret_type), _type_range(st.ret_type)
        widening = src is not None and dst is not None and dst[0] <= src[0] and src[1] <= dst[1]
        k = a if a == "inv" or (a == "aff" and (st.op is Op.NEG or widening)) else None
    elif st.PURE and not st.BLOCKS and \
            not any(isinstance(getattr(st, n), (list, tuple)) for n in st.OPERANDS) and \
            all(_kind(o, loop, inside, memo) == "inv" for o in st.operands()):
        k = "inv"       # (an argument's value or an array's shape, read in the loop)
    else:
        k = None
    memo[id(st)] = k
    return k


def _clone(st, loop, inside, index, out, memo):
    """`st` computed with `index` for the loop's index, as new statements appended to `out`
    (values from outside the loop are used as they are)."""
    if id(st) not in inside:
        return st
    got = memo.get(id(st))
    if got is not None:
        return got
    if isinstance(st, S.LoopIndexStmt):
        new = index
    else:
        # a pure statement without blocks (what _kind accepts): the same, on cloned operands
        fields = {a: getattr(st, a) for a in st.ATTRS}
        for name in st.OPERANDS:
            fields[name] = _clone(getattr(st, name), loop, inside, index, out, memo)
        new = type(st)(ret_type=st.ret_type, loc=st.loc, **fields)
    if new is not index:
        out.append(new)
    memo[id(st)] = new
    return new


def _hoist(loop, parent):
    """Move the checks of a range loop's body that hold on every iteration if they hold on
    the first and the last in front of the loop (see run). Returns how many moved. A parallel
    loop's move too: its iterations are the same set, only their order differs, and a failed
    check ends the kernel with an error either way (which writes of the loop happened before
    it is unspecified in both places)."""
    body = loop.body
    if any(isinstance(st, _EXITS) for st in S.walk(body)):
        return 0
    inside, kinds = _inside(loop), {}
    moved = [st for st in body.stmts if isinstance(st, S.AssertStmt)
             and _kind(st.cond, loop, inside, kinds) == "cond"
             and all(_kind(a, loop, inside, kinds) in ("inv", "aff") for a in st.args)]
    if not moved:
        return 0
    loc, it = loop.loc, loop.begin.ret_type
    new = []
    one = S.ConstStmt(value=1, ret_type=it, loc=loc)
    last = S.BinaryOpStmt(lhs=loop.end, rhs=one, op=Op.SUB, ret_type=it, loc=loc)
    zero = S.ConstStmt(value=0, ret_type=T_I32, loc=loc)
    empty = S.BinaryOpStmt(lhs=loop.begin, rhs=loop.end, op=Op.CMP_GE, ret_type=T_I32, loc=loc)
    new += [one, last, zero, empty]
    for a in moved:
        first_m, last_m = {}, {}
        c0 = _clone(a.cond, loop, inside, loop.begin, new, first_m)
        c1 = _clone(a.cond, loop, inside, last, new, last_m)
        both = S.BinaryOpStmt(lhs=c0, rhs=c1, op=Op.BIT_AND, ret_type=T_I32, loc=a.loc)
        ok = S.BinaryOpStmt(lhs=both, rhs=empty, op=Op.BIT_OR, ret_type=T_I32, loc=a.loc)
        first0 = S.BinaryOpStmt(lhs=c0, rhs=zero, op=Op.CMP_NE, ret_type=T_I32, loc=a.loc)
        new += [both, ok, first0]
        args = []
        for arg in a.args:
            v0 = _clone(arg, loop, inside, loop.begin, new, first_m)
            v1 = _clone(arg, loop, inside, last, new, last_m)
            # the index at the end that fails (the first iteration's when both do)
            sel = S.TernaryOpStmt(cond=first0, a=v1, b=v0, ret_type=arg.ret_type, loc=a.loc)
            new.append(sel)
            args.append(sel)
        new.append(S.AssertStmt(cond=ok, args=args, code=a.code, loc=a.loc))
        body.stmts.remove(a)
    at = parent.stmts.index(loop)
    for st in new:
        st.parent = parent
    parent.stmts[at:at] = new
    return len(moved)


def _hoist_all(block, parallel):
    n = 0
    for st in list(block.stmts):
        for b in st.blocks():
            n += _hoist_all(b, parallel)    # inner loops first: their checks may move on out
        if isinstance(st, S.RangeForStmt) and (parallel or not st.parallel):
            n += _hoist(st, block)
    return n


def run(kernel, cfg=None, parallel=True) -> bool:
    """`parallel`: whether checks may leave parallel loops too. Not for a GPU, where the
    moved check would be a task of its own, launched as a kernel of one thread before the
    loop (microseconds); a check per element costs the GPU next to nothing."""
    if not any(isinstance(st, S.AssertStmt) for body in S.bodies(kernel) for st in S.walk(body)):
        return False    # nothing to remove or move (no debug checks: most kernels here)
    dead = []
    for body in S.bodies(kernel):
        _walk(body, {}, dead)
    for st in dead:
        st.parent.stmts.remove(st)
    moved = 0
    for body in S.bodies(kernel):
        moved += _hoist_all(body, parallel)
    if moved:
        # what the moved checks prove in front of the loops may remove more
        again = []
        for body in S.bodies(kernel):
            _walk(body, {}, again)
        for st in again:
            st.parent.stmts.remove(st)
        dead += again
    return bool(dead) or bool(moved)
