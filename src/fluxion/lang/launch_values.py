"""What the layers below need of the language's values, given by the language: the rebuild of
a vector or matrix return (which the launch's specs carry, runtime/args.py and
runtime/launch.py, with a struct's scalar members: frontend/struct.py struct_leaves), and the
hidden fields behind scratch memory and a Tape's access masks (ir/scratch.py's hook,
installed here)."""
from __future__ import annotations

from fluxion.ir.scratch import hooks as scratch_hooks
from fluxion.lang import field as _field_mod
from fluxion.lang import snode as SN
from fluxion.lang import sparse
from fluxion.lang.matrix import Matrix


class MatrixReturn:
    """A kernel's vector or matrix return annotation: the launch rebuilds the value from its
    entries."""
    __slots__ = ("mtype", "n", "m", "ndim", "scalar")

    def __init__(self, mtype):
        self.mtype = mtype
        self.n, self.m, self.ndim = mtype.n, mtype.m, mtype.ndim
        # entries as NumPy scalars of the element type, as a Python-scope vector of that
        # type holds them (frontend/matrix_entries.py's scalar_of)
        dt = mtype.dtype
        self.scalar = dt.np_dtype.type if dt.bits > 1 else None

    def rebuild(self, vals):
        if self.scalar is not None:
            vals = [self.scalar(v) for v in vals]
        return Matrix._make(vals, self.n, self.m, self.ndim)


def _hidden_field(dtype, shape, name="", offset=None, copies_of=None):
    """A materialized field no user names: the memory of scratch requests and Tape access
    masks, which the layers below ask for through ir/scratch.py's hook (fields and their
    trees are the language's). `copies_of`: the field component whose per-thread copies it
    holds (thread first); under pointer or bitmasked levels they are laid out as its cells
    are and reserved (_sparse_copies)."""
    cells = _sparse_cells(copies_of, shape)
    if cells is not None:
        return _sparse_copies(dtype, shape, name, offset, *cells)
    f = _field_mod.field(dtype, shape=shape, name=name, offset=offset)
    f._materialize()
    return f


def _sparse_cells(place, shape):
    """(cells, elements per cell) per axis of the sparse field component `place`, whose
    per-thread copies `shape` holds, when its struct-fors visit it cell by cell; else None."""
    if place is None or not sparse.levels(place.snode):
        return None
    blocks = sparse.block_shape(place.snode)
    if blocks is None or len(blocks) != 2 or tuple(shape[1:]) != tuple(place.field.shape):
        return None
    return blocks


def _sparse_copies(dtype, shape, name, offset, cells, per_cell):
    """Per-thread copies of a field under pointer or bitmasked levels, whose merge visits its
    active cells (passes/scatter.py): each thread's copy holds a cell's elements together,
    as the field does, and its memory is reserved (lang/tree_buffer.py), so that the copies
    commit the pages of the cells scattered into rather than of every row they cross."""
    f = _field_mod.field(dtype, name=name)
    root = SN.Tree(owner=SN.root).root
    root.tree.reserve = True
    n = len(per_cell)
    node = root.dense(SN.axes(*range(n + 1)), (shape[0],) + tuple(cells))
    node.dense(SN.axes(*range(1, n + 1)), tuple(per_cell)).place(f, offset=offset)
    f._place_twins()
    f._materialize()
    f._copy_cells = tuple(cells)        # (lang/sparse_memory.py gives their pages back)
    return f


scratch_hooks.hidden_field = _hidden_field
