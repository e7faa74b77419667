"""Statements of fluxion's hierarchical SSA IR.

A statement is its own value. Control-flow statements own nested `Block`s. Each class declares
`OPERANDS` (names of attributes holding other statements) and `BLOCKS` (names of owned blocks);
generic operand walking, use replacement and cloning are driven by those two tuples.
"""
from __future__ import annotations

import itertools
import operator

from fluxion.ir.ops import Op

_ids = itertools.count()


class Stmt:
    __slots__ = ("ret_type", "loc", "parent", "id")
    OPERANDS: tuple = ()
    BLOCKS: tuple = ()
    # attributes that are neither operands nor blocks but define the statement (for CSE/printing)
    ATTRS: tuple = ()
    # side-effect free and deterministic: may be folded, deduplicated, deleted when unused
    PURE = False

    def __init__(self, ret_type=None, loc=None):
        self.ret_type = ret_type
        self.loc = loc
        self.parent = None
        self.id = next(_ids)

    def operands(self):
        out = []
        for name in self.OPERANDS:
            v = getattr(self, name)
            if isinstance(v, (list, tuple)):
                out.extend(x for x in v if isinstance(x, Stmt))
            elif v is not None:
                out.append(v)
        return out

    def replace_operand(self, old, new):
        for name in self.OPERANDS:
            v = getattr(self, name)
            if isinstance(v, list):
                setattr(self, name, [new if x is old else x for x in v])
            elif v is old:
                setattr(self, name, new)

    def blocks(self):
        return [getattr(self, b) for b in self.BLOCKS if getattr(self, b) is not None]

    def key(self):
        """Identity of the computed value, for common subexpression elimination."""
        ops = tuple(id(o) for o in self.operands())
        return (type(self), self.ret_type, ops) + tuple(getattr(self, a) for a in self.ATTRS)


class Block:
    # stop_gradients: the fields / ndarray arguments named by `ti.stop_grad(x)` in this block;
    # autodiff gives no gradient to their loads here and in the blocks nested in it
    __slots__ = ("stmts", "parent_stmt", "stop_gradients")

    def __init__(self, parent_stmt=None):
        self.stmts: list[Stmt] = []
        self.parent_stmt = parent_stmt
        self.stop_gradients = ()

    def append(self, stmt):
        stmt.parent = self
        self.stmts.append(stmt)
        return stmt

    def __iter__(self):
        return iter(self.stmts)

    def __len__(self):
        return len(self.stmts)


def _stmt(name, operands=(), attrs=(), blocks=(), pure=False, base=Stmt, convert=None):
    """Declare a statement class with keyword constructor over operands, attrs and blocks;
    `convert` maps an attribute to the function that normalizes its value (an op's name to
    its `Op`)."""
    fields = tuple(operands) + tuple(attrs) + tuple(blocks)
    convert = convert or {}
    # the fields with something to do beyond storing the value given (or None), by position:
    # statements are made by the thousand per compile, most of them with neither
    special = tuple((k, f, convert.get(f)) for k, f in enumerate(fields)
                    if f in convert or f in blocks)
    plain = tuple((k, f) for k, f in enumerate(fields) if f not in convert and f not in blocks)
    base_init = None if base is Stmt else base.__init__

    def __init__(self, *args, ret_type=None, loc=None, **kw):
        if base_init is None:
            self.ret_type = ret_type
            self.loc = loc
            self.parent = None
            self.id = next(_ids)
        else:
            base_init(self, ret_type=ret_type, loc=loc)
        n = len(args)
        # (a keyword wins over a positional argument of the same field)
        for k, f in plain:
            setattr(self, f, kw[f] if f in kw else args[k] if k < n else None)
        for k, f, conv in special:
            v = kw[f] if f in kw else args[k] if k < n else None
            if conv is not None:
                if v is not None:
                    v = conv(v)
            elif v is None:
                v = Block(self)
            else:
                v.parent_stmt = self
            setattr(self, f, v)

    cls = type(name, (base,), {
        "__slots__": fields, "OPERANDS": tuple(operands), "ATTRS": tuple(attrs),
        "BLOCKS": tuple(blocks), "PURE": pure, "__init__": __init__,
    })
    # most statements own no block and many have no operand: every pass walks the IR through
    # these two methods, so those get constant answers (a tenth of a cold compile went to them)
    if not operands:
        cls.operands = _none
    else:
        cls.operands = _operands_method(tuple(operands))
    if not blocks:
        cls.blocks = _none
    return cls


def _operands_method(names):
    """`Stmt.operands` for a class whose operand attributes are `names`, with the attributes
    read by one attrgetter instead of a getattr each (a cold compile calls it some 20,000
    times); the result is the generic method's, a new list each call."""
    if len(names) == 1:
        get = operator.attrgetter(names[0])

        def operands(self):
            v = get(self)
            if v is None:
                return []
            if isinstance(v, (list, tuple)):
                return [x for x in v if isinstance(x, Stmt)]
            return [v]
        return operands
    get = operator.attrgetter(*names)

    def operands(self):
        out = []
        for v in get(self):
            if isinstance(v, (list, tuple)):
                out.extend(x for x in v if isinstance(x, Stmt))
            elif v is not None:
                out.append(v)
        return out
    return operands


def _none(self):
    return ()


def _op(value, _members=Op._value2member_map_):
    """`Op(value)` (an op's name or the op itself), by the enumeration's own table of values
    first: an Enum call costs about a microsecond, and the frontend makes thousands of
    operations per kernel."""
    try:
        op = _members.get(value)
    except TypeError:           # (unhashable: Op says why it is not an op)
        op = None
    return op if op is not None else Op(value)


ConstStmt = _stmt("ConstStmt", attrs=("value",), pure=True)
ArgLoadStmt = _stmt("ArgLoadStmt", attrs=("index",), pure=True)
UnaryOpStmt = _stmt("UnaryOpStmt", operands=("operand",), attrs=("op",), pure=True,
                    convert={"op": _op})
BinaryOpStmt = _stmt("BinaryOpStmt", operands=("lhs", "rhs"), attrs=("op",), pure=True,
                     convert={"op": _op})
TernaryOpStmt = _stmt("TernaryOpStmt", operands=("cond", "a", "b"), pure=True)
RandStmt = _stmt("RandStmt")
# A mutable local variable; LLVM's mem2reg turns it into registers.
AllocaStmt = _stmt("AllocaStmt")
LocalLoadStmt = _stmt("LocalLoadStmt", operands=("alloca",))
LocalStoreStmt = _stmt("LocalStoreStmt", operands=("alloca", "value"))
# Address of one scalar element of a field component (`place` holds the layout).
GlobalPtrStmt = _stmt("GlobalPtrStmt", operands=("indices",), attrs=("place",), pure=True)
# A quantized element of a field component (`place.quant`, lang/quant.py): its value is a bit
# address, 8 * the address of the word holding it + its bit offset in that word (one i64, so
# it crosses task boundaries like any integer). Loads, stores and atomics through it decode,
# encode and merge the element's bits (codegen/quant.py).
QuantPtrStmt = _stmt("QuantPtrStmt", operands=("indices",), attrs=("place",), pure=True)
# Address of one scalar of an ndarray argument (`arg` holds its context slots); `grad`
# addresses the same element of the argument's gradient array.
ExternalPtrStmt = _stmt("ExternalPtrStmt", operands=("indices",),
                        attrs=("arg", "component", "grad"), pure=True)
GlobalLoadStmt = _stmt("GlobalLoadStmt", operands=("ptr",))
GlobalStoreStmt = _stmt("GlobalStoreStmt", operands=("ptr", "value"))
AtomicOpStmt = _stmt("AtomicOpStmt", operands=("ptr", "value"), attrs=("op",),
                     convert={"op": _op})
IfStmt = _stmt("IfStmt", operands=("cond",), blocks=("then_block", "else_block"))
# `parallel` marks a top-level loop that the offload pass turns into a parallel task.
# `reductions`: [(pointer or local, op)] accumulated per thread (passes/reduction.py). The CPU
# loop passes set how codegen runs a parallel loop's iterations: `rows`, the width W of the
# rows its index is split into (passes/rows.py, with RowIndexStmts in the body); `jam`, how
# many iterations' inner loops are fused (passes/jam.py); `independent`, that its iterations
# touch memory independently, which codegen tells LLVM (passes/independent.py).
RangeForStmt = _stmt("RangeForStmt", operands=("begin", "end"),
                     attrs=("parallel", "block_dim", "reductions", "rows", "jam", "independent"),
                     blocks=("body",))
LoopIndexStmt = _stmt("LoopIndexStmt", attrs=("loop",))
# A struct-for: the loop over the index space of a field, struct field or SNode (`over`),
# visiting only the elements whose cells are active when sparse SNodes are above it;
# `bounds`: [(begin, end)] per dimension (a field's offset included); `grouped`: the body
# sees its indices as one vector (`ti.grouped(x)`); `parallel`, `block_dim` as a range-for's
# (`ti.loop_config`). `ret_type` is the type of its indices, which StructIndexStmts give
# (`axis`: the dimension). passes/lower_struct_for.py makes range-fors of it before the
# passes that do not know it. `errors_at`: how many entries the kernel's error table had
# when the frontend made the loop (not in the text), so that the checks its lowering adds
# take their places in that table as if made there.
class StructForStmt(_stmt("StructForStmt", attrs=("over", "bounds", "grouped", "parallel",
                                                 "block_dim"), blocks=("body",))):
    __slots__ = ("errors_at",)

    def __init__(self, *args, errors_at=None, **kw):
        super().__init__(*args, **kw)
        self.errors_at = errors_at


# An ndrange-for: the loop over the product of the ranges [begins[k], ends[k]) (`ti.ndrange`,
# `ti.grouped(ti.ndrange(...))`, the indices of an ndarray), a dimension with end <= begin
# emptying the whole space; each bound a Python int or a statement of the index type (a
# kernel value). `grouped`, `parallel`, `block_dim` as a struct-for's; `ret_type` the type of
# its indices, which StructIndexStmts give. passes/lower_struct_for.py makes a range-for of
# it, as of a struct-for. A statement of its own, not a struct-for without `over`: its bounds
# are values (operands) where a struct-for's are constants of a layout, and none of a
# struct-for's sparse machinery applies to it.
NdRangeForStmt = _stmt("NdRangeForStmt", operands=("begins", "ends"),
                       attrs=("grouped", "parallel", "block_dim"), blocks=("body",))
# The index along dimension `axis` of the struct-for or ndrange-for `loop` that encloses it.
StructIndexStmt = _stmt("StructIndexStmt", attrs=("loop", "axis"))
# The loops whose body runs once per point of an index space (a range-for, and until
# passes/lower_struct_for.py lowers them a struct-for and an ndrange-for), and the statements
# that read the point: what passes that do not lower loops treat alike.
INDEX_LOOPS = (RangeForStmt, StructForStmt, NdRangeForStmt)
LOOP_INDICES = (LoopIndexStmt, StructIndexStmt)
# In a loop split into rows (`loop.rows` is `width`): the row (`kind` "row", the loop index
# // width) or the column ("col", the index % width) of the current iteration, which codegen
# keeps as counters of their own (passes/rows.py).
RowIndexStmt = _stmt("RowIndexStmt", operands=("width",), attrs=("loop", "kind"))
WhileStmt = _stmt("WhileStmt", blocks=("body",))
BreakStmt = _stmt("BreakStmt")
ContinueStmt = _stmt("ContinueStmt")
# Kernel return value number `index`.
ReturnStmt = _stmt("ReturnStmt", operands=("value",), attrs=("index",))
# entries: list of str and Stmt; the Stmt ones are operands.
PrintStmt = _stmt("PrintStmt", operands=("values",), attrs=("fmt",))
# Raises error `code` (registered in the kernel's error table) with `args` if cond is 0.
AssertStmt = _stmt("AssertStmt", operands=("cond", "args"), attrs=("code",))
# Before a recorded kernel overwrites a field element: if a recorded kernel read it (or, for a
# plain store, wrote it), log its address and old value so the Tape can restore it before the
# earlier kernels' gradients run. `read`/`written` address the element's access marks; `grad`
# is the address of its gradient (zeroed on restore after a plain store), or None.
TapeLogStmt = _stmt("TapeLogStmt", operands=("ptr", "read", "written", "grad"), attrs=("kind",))

# Real functions (`@ti.real_func`, frontend/real_func.py): called, not inlined. A call passes
# `args` (scalar values; for a `ti.ref` parameter, the caller's local itself) to one
# specialization `func` (a Function below) and yields its scalar results through
# CallResultStmt. A call is opaque to the passes: the callee may touch any field or array.
FuncCallStmt = _stmt("FuncCallStmt", operands=("args",), attrs=("func",))
CallResultStmt = _stmt("CallResultStmt", operands=("call",), attrs=("index",), pure=True)
# Inside a function: scalar parameter number `index`, and the end of the function with its
# scalar results (any number of them, on any path: returns inside loops are plain exits).
FuncArgStmt = _stmt("FuncArgStmt", attrs=("index",), pure=True)
FuncReturnStmt = _stmt("FuncReturnStmt", operands=("values",))

# Block-level programming on CUDA (`ti.simt.block`): an array in the block's shared memory,
# the address of one of its elements, a barrier, and the thread's position.
SharedArrayStmt = _stmt("SharedArrayStmt", attrs=("shape", "dtype"))
SharedPtrStmt = _stmt("SharedPtrStmt", operands=("array", "indices"), pure=True)
BlockSyncStmt = _stmt("BlockSyncStmt")
ThreadIndexStmt = _stmt("ThreadIndexStmt", attrs=("kind",))
# The index of the CPU worker thread running the enclosing parallel task (0 in serial code):
# which private copy a privatized scatter writes (passes/scatter.py).
WorkerIndexStmt = _stmt("WorkerIndexStmt", pure=True)
# `*ptr += value` into ndarray number `copy` of kernel.private_arrays: a plain add into the
# running thread's copy when the launch provided copies, else an atomic add (passes/scatter.py).
PrivateAddStmt = _stmt("PrivateAddStmt", operands=("ptr", "value"), attrs=("copy",))
# Add the threads' copies of private array `copy` into the array and zero them.
MergeCopiesStmt = _stmt("MergeCopiesStmt", attrs=("copy",))
# Give the cell of a pooled pointer node whose slot table entry `ptr` points to a block of the
# node's pool when it has none (lang/sparse_pool.py; put before writes by sparse_writes.py).
SlotAcquireStmt = _stmt("SlotAcquireStmt", operands=("ptr",))

# A `ti.ref(dtype)` parameter: the caller's local variable, read and assigned through its
# address. An AllocaStmt to everything that treats locals (loads, stores, passing it on), but
# owned by the caller: dead code elimination keeps its stores, forwarding leaves it alone.
# `shared`: the local is one variable of every iteration of a parallel loop (a kernel-level
# local passed from inside the loop), so that `a += v` on it is atomic, as in the caller.
FuncRefArgStmt = _stmt("FuncRefArgStmt", attrs=("index", "shared"), base=AllocaStmt)

# Per-thread stacks that keep the history of loop-carried locals for reverse-mode autodiff.
AdStackAllocaStmt = _stmt("AdStackAllocaStmt", attrs=("dtypes", "capacity"))
AdStackPushStmt = _stmt("AdStackPushStmt", operands=("stack", "values"))
AdStackTopStmt = _stmt("AdStackTopStmt", operands=("stack",), attrs=("slot",))
AdStackPopStmt = _stmt("AdStackPopStmt", operands=("stack",))
AdStackSizeStmt = _stmt("AdStackSizeStmt", operands=("stack",))


def walk_one(stmt):
    """`stmt` and every statement nested in it."""
    yield stmt
    for b in stmt.blocks():
        yield from walk(b)


def walk(block):
    """Every statement of `block`, depth first, in program order. One generator with a stack
    of the open blocks' iterators, not one generator per nesting level: each statement is
    handed up once instead of through every enclosing level. As in a recursive walk, a
    block's list of statements is read when the walk reaches it."""
    stack = [iter(block.stmts)]
    while stack:
        for s in stack[-1]:
            yield s
            bs = s.blocks()
            if bs:
                stack.append(iter(bs[0].stmts) if len(bs) == 1 else
                             (x for b in bs for x in b.stmts))
                break
        else:
            stack.pop()


class Kernel:
    """The IR of one kernel instance: a body block plus its argument and return types."""

    def __init__(self, name, arg_types, ret_types):
        self.name = name
        self.arg_types = arg_types
        self.ret_types = ret_types
        self.body = Block()
        self.functions = []       # the real functions its calls reach (Function), any depth
        self.errors = []          # messages of AssertStmt codes
        self.prints = []          # per PrintStmt: list of format pieces
        self.tasks = None         # set by the offload pass
        self.private_copies = False   # set by passes/scatter: launches must not overlap
        self.private_arrays = []      # (ArrayArg, grad) whose adds go to per-thread copies
        self.private_trips = []       # per private array: (loop begin, loop end, adds)
        self.private_fields = []      # hidden fields of per-thread copies this kernel uses
        self.scratch = []             # ScratchBuffer requests of passes (ir/scratch.py)
        self.private_threads = 1
        # the lowered sparse struct-fors: (the index values of the visited element, the SNode,
        # the field's offset, the body's block), whose cells are active where the body
        # starts (passes/lower_struct_for.py; lang/sparse_writes.py reads them)
        self.visited_cells = []


class Function:
    """One specialization of a real function (a `@ti.real_func` for one template / argument
    signature): its own body, scalar parameter types (`ref_params`: which of them are
    `ti.ref` addresses) and scalar result types. Owned by the kernel that calls it
    (`Kernel.functions`); recursion is a call to a Function whose body is still being built."""

    def __init__(self, name, param_types, ref_params, ret_types, loc=None):
        self.name = name
        self.param_types = list(param_types)
        self.ref_params = list(ref_params)
        self.ret_types = list(ret_types)
        self.body = Block()
        self.loc = loc


def bodies(kernel):
    """The kernel's body and those of its functions: every block of code the kernel runs."""
    yield kernel.body
    for f in getattr(kernel, "functions", ()):
        yield f.body


def walk_all(kernel):
    """Every statement of the kernel and of its functions."""
    for body in bodies(kernel):
        yield from walk(body)


def has_call(block):
    """Whether `block` calls a real function: code the passes cannot see, which may access
    any field or array (the passes that transform loops do not fire across one)."""
    return any(isinstance(s, FuncCallStmt) for s in walk(block))


def calls_in(block):
    """The functions called in `block` (directly), in first-call order."""
    out = []
    for s in walk(block):
        if isinstance(s, FuncCallStmt) and s.func not in out:
            out.append(s.func)
    return out


def reachable(block):
    """The functions that code in `block` may run: called there, or by those, at any depth."""
    out = []
    todo = calls_in(block)
    while todo:
        f = todo.pop()
        if f in out:
            continue
        out.append(f)
        todo.extend(calls_in(f.body))
    return out
