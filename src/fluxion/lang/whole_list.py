"""`x.append(v)`, `x.length()`, `x.deactivate()` on a field or struct field placed directly in
a dynamic node under no other dimension: the list itself, as in the original (in a kernel)."""
from __future__ import annotations

from fluxion.ir.errors import FluxionError
from fluxion.frontend.places import sparse


class WholeList:
    """The list methods of Field and StructField (each names itself with `_list_label`)."""

    def append(self, value):
        return self._whole_list().append(value)

    def length(self):
        return self._whole_list().length()

    def deactivate(self):
        return self._whole_list().deactivate()

    def _whole_list(self):
        cell = sparse.list_cell(self, [])
        if cell is None:
            raise FluxionError(f"{self._list_label()}: append/length/deactivate need one whose "
                               f"only dimension is a dynamic node's list (else index it: "
                               f"x[i].append(v))")
        return cell
