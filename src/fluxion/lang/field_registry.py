"""The fields of the session: which exist (weakly), which are not yet checked for placement
before a launch, and the counter that tells grad and dual instances a new twin field appeared.

Below fields and SNodes, which both ask it (`lazy_grad` walks the fields under a node).
"""
from __future__ import annotations

import weakref

from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang import runtime

_fields = weakref.WeakSet()
# bumped whenever a grad or dual field appears: grad and dual instances compiled before
# it would not know about it, so it is part of their template signature
ad_fields_version = [0]
# fields made since the last launch checked that every field is placed (weak references)
_pending = []


def all_fields():
    return [f for f in list(_fields) if f._generation == runtime.state().generation]


def placed_grad(f):
    """`f`'s gradient field if it has one that is placed (holds memory), else None."""
    g = f._grad
    return g if g is not None and g._snode is not None else None


def placed_dual(f):
    d = f._dual
    return d if d is not None and d._snode is not None else None



def check_placed():
    """Before a launch, as the original system does when it materializes the fields: every
    field made so far is placed, and so are the gradients and duals they asked for."""
    gen = runtime.state().generation
    fields = [f for f in (r() for r in _pending) if f is not None and f._generation == gen]
    unplaced = [f for f in fields if f._snode is None and f._twin_of is None]

    def label(f):
        return f"'{f.name}'" if f.name else f"an unnamed {f.dtype} field"
    twins = {"grad": [], "dual": []}
    for f in fields:
        if f._snode is None and f._twin_of is not None:
            prim, kind = f._twin_of
            if prim._snode is not None and getattr(prim, "needs_" + kind):
                twins[kind].append(prim)
    if unplaced:
        names = ", ".join(label(f) for f in unplaced[:8])
        raise FluxionRuntimeError(
            f"These field(s) are not placed: {names}. Give each a shape (ti.field(..., "
            f"shape=...)) or place it (ti.root.dense(...).place(x)) before launching a kernel")
    for kind, prims in twins.items():
        if prims:
            names = ", ".join(label(f) for f in prims[:8])
            raise FluxionRuntimeError(
                # ("requrie": the original system's words, which its tests match)
                f"These field(s) requrie `needs_{kind}=True`, however their {kind} field(s) are "
                f"not placed: {names}. Place them (ti.root.dense(...).place(x, x.{kind})) or "
                f"call ti.root.lazy_{kind}()")
    del _pending[:]

