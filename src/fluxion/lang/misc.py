"""Names of the original system's `taichi.lang.misc` that programs import from there."""
from __future__ import annotations


def loop_unique(val, covers=None):
    """A hint that `val` differs between the iterations of the enclosing parallel loop (so a
    write indexed by it needs no atomic). fluxion proves what it relies on itself
    (passes/demote.py), so the hint changes nothing: the value, as it is."""
    return val


__all__ = ["loop_unique"]
