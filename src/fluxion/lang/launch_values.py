"""What the layers below need of the language's values, given by the language: the rebuild of
a vector or matrix return (which the launch's specs carry, runtime/args.py and
runtime/launch.py, with a struct's scalar members: frontend/struct.py struct_leaves), and the
hidden fields behind scratch memory and a Tape's access masks (ir/scratch.py's hook,
installed here)."""
from __future__ import annotations

from fluxion.ir.scratch import hooks as scratch_hooks
from fluxion.lang import field as _field_mod
from fluxion.lang.matrix import Matrix


class MatrixReturn:
    """A kernel's vector or matrix return annotation: the launch rebuilds the value from its
    entries."""
    __slots__ = ("mtype", "n", "m", "ndim")

    def __init__(self, mtype):
        self.mtype = mtype
        self.n, self.m, self.ndim = mtype.n, mtype.m, mtype.ndim

    def rebuild(self, vals):
        return Matrix._make(vals, self.n, self.m, self.ndim)


def _hidden_field(dtype, shape, name="", offset=None):
    """A materialized field no user names: the memory of scratch requests and Tape access
    masks, which the layers below ask for through ir/scratch.py's hook (fields and their
    trees are the language's)."""
    f = _field_mod.field(dtype, shape=shape, name=name, offset=offset)
    f._materialize()
    return f


scratch_hooks.hidden_field = _hidden_field
