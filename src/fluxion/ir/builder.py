"""Where the frontend emits IR: the current block, source location and kernel being built.

Only one kernel is built at a time (`runtime.compile_lock`); the stack of kernels being built
is the building thread's own, so that Python-scope code running on another thread meanwhile
(a field access, a `ti.func` call) is not taken for kernel code. `Expr` operators and the math
builtins emit through `emit()`.
"""
from __future__ import annotations

import contextlib
import threading

from fluxion.ir.stmts import AllocaStmt, FuncRefArgStmt


class BuildContext:
    def __init__(self, kernel_ir, cfg):
        self.ir = kernel_ir
        self.cfg = cfg
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
    return ctx.block.append(stmt)


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

