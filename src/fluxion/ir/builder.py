"""Where the frontend emits IR: the current block, source location and kernel being built.

Only one kernel is built at a time (`runtime.compile_lock`); the stack of kernels being built
is the building thread's own, so that Python-scope code running on another thread meanwhile
(a field access, a `ti.func` call) is not taken for kernel code. `Expr` operators and the math
builtins emit through `emit()`.
"""
from __future__ import annotations

import contextlib
import os
import threading

from fluxion.ir.stmts import (AllocaStmt, AtomicOpStmt, FuncCallStmt, FuncRefArgStmt,
                              LocalLoadStmt, LocalStoreStmt)


class BuildContext:
    def __init__(self, kernel_ir, cfg, forward_locals=False):
        self.ir = kernel_ir
        self.cfg = cfg
        # `forward_locals`: the frontend's build of a kernel. A local's load then reads the
        # value last stored to it where that store is known to reach the load (see
        # `known_value`): {alloca: (value, block of the store)}; None: every load is emitted
        self.local_values = {} if forward_locals and _forwards(cfg) else None
        # with it: the allocas emitted, the stores into them, and the allocas something reads
        # (a load, or anything else with the alloca as an operand), for drop_unread_locals
        self.allocas, self.local_stores, self.read_locals = [], [], set()
        self.blocks = [kernel_ir.body]
        self.loc = None
        self.loop_depth = 0           # serial loops enclosing the current point
        self.in_parallel_loop = False
        self.parallel_loop = None     # the parallel loop enclosing the current point, if any
        self.pending_loop_config = {}
        self.static_loop_blocks = []  # block depth at each enclosing ti.static loop
        self.nested_scopes = 0        # enclosing `if <constant>:` bodies (not ti.static)
        # why this build's result must not go to the offline cache: it depends on more than
        # the cache key covers (field data read at compile time) or has effects a cache hit
        # would skip (static_print). None when it may be cached.
        self.taint = None
        # (id(SourceInfo), name) of every name the build looked up outside the function's
        # own scope (globals, closure cells, builtins)
        self.outer_reads = set()

    @property
    def block(self):
        return self.blocks[-1]


class _Local(threading.local):
    def __init__(self):
        self.stack: list[BuildContext] = []


_local = _Local()
# kernels being built, on any thread: a launch checks this before the thread's own stack
# (a thread-local lookup costs more than the rest of that check)
active = [0]


def taint(reason):
    """Mark the kernel being built on this thread (if any) as not for the offline cache."""
    ctx = current()
    if ctx is not None and ctx.taint is None:
        ctx.taint = reason


def current():
    stack = _local.stack
    return stack[-1] if stack else None


def in_kernel():
    return bool(_local.stack)


@contextlib.contextmanager
def building(ctx):
    stack = _local.stack
    stack.append(ctx)
    active[0] += 1          # (builds take runtime.compile_lock: no two update it at once)
    try:
        yield ctx
    finally:
        active[0] -= 1
        stack.pop()


@contextlib.contextmanager
def into(block):
    ctx = _local.stack[-1]
    ctx.blocks.append(block)
    try:
        yield block
    finally:
        ctx.blocks.pop()


@contextlib.contextmanager
def function_body(block):
    """Build a real function's body (frontend/real_func.py) into `block`: a block stack of its
    own, outside every loop of the code that calls it (a loop in the function is its own,
    serial loop; the caller's parallel loop does not make its locals shared)."""
    ctx = _local.stack[-1]
    saved = (ctx.blocks, ctx.loc, ctx.loop_depth, ctx.in_parallel_loop, ctx.parallel_loop,
             ctx.pending_loop_config, ctx.static_loop_blocks)
    ctx.blocks, ctx.loop_depth, ctx.in_parallel_loop, ctx.parallel_loop = [block], 0, False, None
    ctx.pending_loop_config, ctx.static_loop_blocks = {}, []
    try:
        yield block
    finally:
        (ctx.blocks, ctx.loc, ctx.loop_depth, ctx.in_parallel_loop, ctx.parallel_loop,
         ctx.pending_loop_config, ctx.static_loop_blocks) = saved


def emit(stmt):
    ctx = _local.stack[-1]
    if stmt.loc is None:
        stmt.loc = ctx.loc
    block = ctx.blocks[-1]
    if ctx.local_values is not None:
        _note(ctx, stmt, block)
    return block.append(stmt)


# Forwarding of locals as the frontend builds a kernel. The frontend emits a local variable as
# an alloca, stores and loads (frontend/variables.py); simplify's forward and store_to_load
# then replace most loads by the values stored. Here a load that store_to_load would replace
# is not emitted at all: the frontend takes the stored value instead (Var.load), so that
# the statements every pass walks before that are fewer. The rule is store_to_load's
# (passes/store_to_load.py): the store and the load are in the same block, with nothing
# emitted between them that may assign the local (another store to it, also in a nested block,
# an atomic on it or anything else that takes its address, a real function's call). The value
# taken keeps the local as its lvalue (assignments through it store to the local), and is
# not a constant to ir/expr.py (which folds operations on constants as it builds them) nor a
# condition as it is to `truth`: what is built from it is what was built from the load.
def _forwards(cfg):
    """Whether the frontend forwards locals: not where simplify is off (the frontend's IR
    is then what the passes get), nor with FLUXION_NO_FRONTEND_FORWARD=1 (to compare)."""
    return (getattr(cfg, "advanced_optimization", True)
            and not os.environ.get("FLUXION_NO_SIMPLIFY")
            and not os.environ.get("FLUXION_NO_FRONTEND_FORWARD"))


def _note(ctx, stmt, block):
    """Keep `ctx.local_values` true of what `stmt`, emitted into `block`, does to locals, and
    note the allocas, the stores and the reads of locals. What reads or writes a local is
    what the passes take to (passes/dce.py's `_reads`, store_to_load's `_assigned_in`): a
    load, a store, an atomic on it and a real function's call (which may assign any local
    passed by reference, and read it)."""
    kind = type(stmt)
    if kind not in _LOCAL_KINDS:
        return
    values = ctx.local_values
    if kind is LocalStoreStmt:
        a, v = stmt.alloca, stmt.value
        ctx.local_stores.append(stmt)
        if type(a) is not AllocaStmt or \
                (ctx.parallel_loop is not None and a.parent is ctx.ir.body):
            # (a reference parameter: the caller's local, which another reference may
            # assign; a kernel-level local stored in a parallel loop: every iteration's)
            values.pop(a, None)
        else:
            values[a] = (v, block)
    elif kind is LocalLoadStmt:
        ctx.read_locals.add(stmt.alloca)
    elif kind is AllocaStmt:
        ctx.allocas.append(stmt)
    elif kind is AtomicOpStmt:
        if isinstance(stmt.ptr, AllocaStmt):
            values.pop(stmt.ptr, None)
            ctx.read_locals.add(stmt.ptr)
    else:
        values.clear()          # (a call, as in store_to_load: it ends what is known)
        ctx.read_locals.update(o for o in stmt.args if isinstance(o, AllocaStmt))


_LOCAL_KINDS = frozenset({LocalStoreStmt, LocalLoadStmt, AllocaStmt, AtomicOpStmt,
                          FuncCallStmt})


def drop_unread_locals():
    """At the end of the frontend's build of a kernel: remove the allocas that nothing reads
    (every read of them was forwarded, see `_note`) and the stores into them, which dce would
    remove at the end of simplify (passes/dce.py: an alloca never loaded loses its stores),
    so that simplify's steps do not walk them first. The values stored stay, for dce."""
    ctx = _local.stack[-1]
    if ctx.local_values is None:
        return
    read = ctx.read_locals
    dead = {id(a) for a in ctx.allocas if a not in read}
    if not dead:
        return
    drop = {id(s) for s in ctx.local_stores if id(s.alloca) in dead} | dead
    blocks = {id(a.parent): a.parent for a in ctx.allocas if id(a) in dead}
    for st in ctx.local_stores:
        if id(st) in drop:
            blocks[id(st.parent)] = st.parent
    for b in blocks.values():
        b.stmts = [s for s in b.stmts if id(s) not in drop]


def known_value(alloca, dtype):
    """The value a load of `alloca` of type `dtype` would read at the point being built, if
    it is known there (see `_note`), else None."""
    ctx = _local.stack[-1]
    values = ctx.local_values
    if not values:
        return None
    known = values.get(alloca)
    if known is None or known[1] is not ctx.blocks[-1] or known[0].ret_type != dtype:
        return None
    return known[0]


def shared_by_iterations(alloca):
    """Whether the local behind `alloca` is one variable for every iteration of the parallel
    loop being built: a kernel-level local (parallel loops sit at the kernel's top level, so
    any local outside the loop is one of the kernel body). Updates of such a local from the
    loop are atomic, as in the original system (`s += x[i]` is a reduction, not a race)."""
    if isinstance(alloca, FuncRefArgStmt):
        # a real function's reference to such a local (frontend/real_func.py)
        return alloca.shared
    ctx = _local.stack[-1]
    return (ctx.parallel_loop is not None and isinstance(alloca, AllocaStmt)
            and alloca.parent is ctx.ir.body)

