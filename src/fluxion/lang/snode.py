"""Structural nodes: how fields are laid out in memory.

`ti.root.dense(ti.ij, (n, m)).place(a, b)` builds a tree; each child of the root is an
independent tree, materialized into one buffer the first time any of its fields is used, so
fields can be created after kernels ran. A scalar component placed in a tree (`Place`) knows
its address as `base + sum(((I[axis] - offset) // divisor % extent) * stride)` over the dense
levels above it, which is exactly what code generation and the numpy views use.

Quantized fields (lang/quant.py) live in unsigned words that are members of cells like
places: a `ti.BitpackedFields` placed here is a `Word`, and a `quant_array` level is one word
of its parent's cell holding its n elements; a component placed there has `terms` that
address its word and `bit_terms` (a quant array's levels, strides counted in elements) that
select its bits.

This module is ti.root and FieldsBuilder, the two owners of trees; the nodes are
lang/snode_nodes.py's and a tree's memory lang/snode_tree.py's (their names are re-exported
here, the SNode API's one address).
"""
from __future__ import annotations

import warnings
import weakref

from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang import runtime
from fluxion.lang.snode_nodes import (Axis, FieldNode, Layout, Place, PlaceSNode, QuantArray,
                                      SNode, axes, i, ij, ijk, ijkl, ijl, ik, ikl, il, j, jk,
                                      jkl, jl, k, kl, l, m, n, o, p)
from fluxion.lang.snode_tree import Term, Tree

# (the SNode API in one place: the nodes' and trees' names are re-exported)
__all__ = ["Axis", "FieldNode", "FieldsBuilder", "Layout", "Place", "PlaceSNode", "QuantArray",
           "Root", "SNode", "SNodeTree", "Term", "Tree", "axes", "i", "ij", "ijk", "ijkl", "ijl",
           "ik", "ikl", "il", "j", "jk", "jkl", "jl", "k", "kl", "l", "m", "n", "o", "p",
           "reset_root", "root"]


class SNodeTree:
    """What `FieldsBuilder.finalize()` returns: the tree's `id`, and `destroy()`."""

    def __init__(self, tree):
        self._tree = tree

    @property
    def id(self):
        return self._tree.id

    def destroy(self):
        self._tree.destroy()


class FieldsBuilder:
    """Builds one SNode tree of its own, like `ti.root` does: `fb.dense(ti.i, n).place(x)`,
    then `fb.finalize()` allocates it (its fields are usable from then on) and returns an
    SNodeTree whose `destroy()` frees it."""

    def __init__(self):
        runtime.ensure_initialized()
        self._tree = Tree()
        self._tree.owner = self._tree.root      # the builder's root is the tree's own
        self.root = self._tree.root
        _builders.add(self)

    @property
    def finalized(self):
        return self._tree.finalized

    @property
    def empty(self):
        return not self._tree.root.children

    def _check_not_finalized(self):
        if self._tree.finalized:
            raise FluxionRuntimeError("this FieldsBuilder is finalized: create a new one to "
                                      "place more fields")

    def dense(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.dense(indices, dimensions)

    def pointer(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.pointer(indices, dimensions)

    def bitmasked(self, indices, dimensions):
        self._check_not_finalized()
        return self.root.bitmasked(indices, dimensions)

    def dynamic(self, index, dimension, chunk_size=None):
        self._check_not_finalized()
        return self.root.dynamic(index, dimension, chunk_size)

    def place(self, *fields, offset=None):
        self._check_not_finalized()
        self.root.place(*fields, offset=offset)
        return self

    def lazy_grad(self):
        self._check_not_finalized()
        self.root.lazy_grad()

    def lazy_dual(self):
        self._check_not_finalized()
        self.root.lazy_dual()

    def deactivate_all(self):
        self.root.deactivate_all()

    def finalize(self, raise_warning=True):
        """Allocate the tree; returns its SNodeTree."""
        self._check_not_finalized()
        if self.empty and raise_warning:
            warnings.warn("finalizing an empty FieldsBuilder", stacklevel=2)
        self._tree.finalized = True
        if not self.empty:
            self._tree.materialize()
        return SNodeTree(self._tree)

    @staticmethod
    def _finalized_roots():
        out = [root]
        out += [b.root for b in list(_builders) if b._tree.finalized and not b._tree.destroyed
                and b._tree.root.generation == runtime.state().generation]
        return out


_builders = weakref.WeakSet()


class Root(SNode):
    """`ti.root`: its children are independent trees."""

    def __init__(self):
        SNode.__init__(self, None, (), ())

    @property
    def shape(self):
        return ()

    def _level_parent(self):
        return Tree(owner=self).root      # every child of ti.root is its own tree

    def _get_children(self):
        return [c for t in runtime.state().trees if t.owner is self and not t.destroyed
                for c in t.root.children if not isinstance(c, Place)]

    def __repr__(self):
        return "ti.root"


root = Root()


@runtime.on_reset
def reset_root():
    root.children = []
