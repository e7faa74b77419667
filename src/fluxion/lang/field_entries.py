"""The entries of a vector or matrix field placed one by one: `v.get_scalar_field(k)` of a
field not placed yet is an entry to place on its own (`S.place(v.get_scalar_field(0))`); the
field is placed once all its entries are.

Its entries must share one SNode tree and one shape: a fluxion field addresses one tree (each
child of ti.root is a tree of its own), so `b = ti.root.dense(ti.i, n)` then
`b.place(v.get_scalar_field(0))`, `b.dense(...).place(v.get_scalar_field(1))`."""
from __future__ import annotations

from fluxion.ir.errors import FluxionError, FluxionRuntimeError
from fluxion.lang import snode as SN


def check_not_begun(field):
    """Before placing `field` whole: none of its entries was placed alone."""
    if any(p is not None for p in field.places):
        raise FluxionError(f"field {field._label()}: some of its entries are placed one by "
                           f"one (get_scalar_field); place the others so too")


def place_entry(field, c, snode, offset):
    """Place entry `c` of matrix field `field` alone in `snode`; its Place."""
    n = field.n * field.m
    if len(field.places) != n:
        field.places = [None] * n
    if field.places[c] is not None:
        raise FluxionError(f"entry {c} of field {field._label()} is placed already")
    others = [p for p in field.places if p is not None]
    if others:
        first = others[0].snode
        if snode.shape != first.shape:
            raise FluxionRuntimeError(
                f"Members of the following field have different shapes: field "
                f"{field._label()}: its entries are placed with shapes {first.shape} and "
                f"{snode.shape}; they need one shape")
        if snode.tree is not first.tree:
            raise FluxionError(
                f"the entries of field {field._label()} are placed in different SNode trees: "
                f"fluxion needs them under one child of ti.root (b = ti.root.dense(...); "
                f"b.place(v.get_scalar_field(0)); b.dense(...).place(v.get_scalar_field(1)))")
    p = SN.Place(field, c, field.dtype, snode)
    snode.children.append(p)
    field.places[c] = p
    if offset is not None:
        offset = (offset,) if isinstance(offset, int) else tuple(offset)
        if len(offset) != len(snode.shape):
            raise ValueError(f"offset {offset} does not match the field's "
                             f"{len(snode.shape)} dimensions")
        if field.offset is not None and field.offset != offset:
            raise FluxionError(f"the entries of field {field._label()} are placed with "
                               f"offsets {field.offset} and {offset}")
        field.offset = offset
    if all(q is not None for q in field.places):
        field._snode = field.places[0].snode
    return p
