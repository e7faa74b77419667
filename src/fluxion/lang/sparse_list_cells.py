"""`x[I]` of a field under a dynamic node, without the list's own dimension: the list in cell
`I`, with `.append(v)`, `.length()` and `.deactivate()`, as in the original system. The
frontend reaches `list_cell` through `places.sparse`, which this module fills (the package
imports it at its start, fluxion/__init__.py)."""
from __future__ import annotations

from fluxion.frontend import places
from fluxion.lang.sparse import (_div, _node_of, append, deactivate, index_map, length, levels,
                                 list_position)


class ListCell:
    """`x[I]` of a field under a dynamic node, indexed without the list's dimension: the list
    in cell `I`, with `.append(v)` and `.length()`, as in the original."""

    def __init__(self, field, node, parent_idx):
        self.field, self.node, self.parent_idx = field, node, parent_idx

    def append(self, value):
        return append(self.node, list(self.parent_idx), value, field=self.field)

    def length(self):
        return length(self.node, list(self.parent_idx))

    def deactivate(self):
        deactivate(self.node, list(self.parent_idx))


def list_cell(field, flat):
    """A ListCell when `flat` indexes `field` (under a dynamic node) without the list's own
    dimension; None otherwise."""
    t = _node_of(field)
    dyn = [s for s in levels(t) if s.kind == "dynamic"]
    if not dyn or len(flat) != len(t.shape) - 1:
        return None
    node = dyn[-1]
    d_dyn = list_position(t, node)[0]
    off = field.offset or (0,) * len(t.shape)
    p_dims = [d for d, _ in index_map(t, node.up)]
    if sorted(p_dims + [d_dyn]) != list(range(len(t.shape))):
        return None
    rest = [d for d in range(len(t.shape)) if d != d_dyn]
    parent = [None] * len(p_dims)
    for k, d in zip(flat, rest):
        v = k - off[d] if off[d] else k
        parent[p_dims.index(d)] = _div(v, dict(index_map(t, node.up))[d])
    return ListCell(field, node, tuple(parent))


vars(places.sparse).update(list_cell=list_cell)
