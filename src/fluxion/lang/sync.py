"""Small public helpers: synchronization and compile-time printing/assertions
(`ti.static_assert` is a builtin of frontend/builtins.py, which the transformer evaluates)."""
from __future__ import annotations

from fluxion.frontend.builtins import static_assert
from fluxion.ir import builder
from fluxion.lang import runtime


def sync():
    """Wait for launched kernels to finish (CPU launches are synchronous already)."""
    if runtime.on_cuda() and runtime.state().jit is not None:
        runtime.get_jit().device.synchronize()


def static_print(*args, **kwargs):
    """Print at compile time (once per compiled instance)."""
    builder.taint("static_print")       # a cache hit would print nothing
    print(*args, **kwargs)


def block_local(*fields):
    """A hint of the original system (cache these fields in fast memory); accepted, no effect."""


def cache_read_only(*fields):
    """A hint of the original system; accepted, no effect."""


def no_activate(*fields):
    """A hint for sparse structures, which are dense here; accepted, no effect."""


__all__ = ["block_local", "cache_read_only", "no_activate", "static_assert", "static_print",
           "sync"]
