"""Small public helpers: synchronization and compile-time printing/assertions."""
from __future__ import annotations
from fluxion.ir import builder
from fluxion.ir.errors import FluxionCompilationError, FluxionTypeError
from fluxion.ir.expr import Expr


def sync():
    """Wait for launched kernels to finish (CPU launches are synchronous already)."""
    from fluxion.lang import runtime
    if runtime.on_cuda() and runtime.state().jit is not None:
        runtime.get_jit().device.synchronize()


def static_print(*args, **kwargs):
    """Print at compile time (once per compiled instance)."""
    builder.taint("static_print")       # a cache hit would print nothing
    print(*args, **kwargs)


def static_assert(cond, msg=None):
    if isinstance(cond, Expr):
        # (the original's words, which its tests match)
        raise FluxionTypeError("Static assert with non-static condition: ti.static_assert "
                               "needs a condition known at compile time")
    if not cond:
        raise FluxionCompilationError(f"static assertion failed{': ' + msg if msg else ''}")


def block_local(*fields):
    """A hint of the original system (cache these fields in fast memory); accepted, no effect."""


def cache_read_only(*fields):
    """A hint of the original system; accepted, no effect."""


def no_activate(*fields):
    """A hint for sparse structures, which are dense here; accepted, no effect."""
