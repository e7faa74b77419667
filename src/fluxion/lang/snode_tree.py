"""An SNode tree's memory: one buffer per tree, allocated when a field of it is first used
(`materialize`), the addresses of its places, and on CUDA the host and device copies kept
coherent by byte ranges.

A place's address is `base + sum(((I[axis] - offset) // divisor % extent) * stride)` over the
levels above it (`Term`s), which code generation and the numpy views both use.
"""
from __future__ import annotations

from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang import (runtime, sparse_block_states, sparse_lists, sparse_memory, sparse_pool,
                         tree_buffer)
from fluxion.lang.quant import Word
from fluxion.lang.snode_nodes import _ROOT_SENTINEL, Place, QuantArray, SNode


class Term:
    """One dense level's contribution to an address along one axis (`bits`: a quant array's
    level, whose stride counts elements within the word)."""
    __slots__ = ("axis", "divisor", "extent", "stride", "outermost", "bits")

    def __init__(self, axis, divisor, extent, stride, outermost, bits=False):
        self.axis, self.divisor, self.extent, self.stride = axis, divisor, extent, stride
        self.outermost = outermost
        self.bits = bits


class Tree:
    def __init__(self, owner=None):
        self.root = SNode(None, (), ())
        self.root.up = _ROOT_SENTINEL
        self.root.tree = self
        self.owner = owner          # what stands above its first level: ti.root, or a
        # FieldsBuilder's root
        self.id = None              # numbered when materialized, as the original's trees
        self.finalized = False      # by FieldsBuilder.finalize(): no more fields
        self.destroyed = False
        self.buffer = None          # host memory (numpy), the only copy on the CPU
        self.device_ptr = None      # device memory on CUDA, mirrored by `buffer`
        self.device_newer = False   # a kernel wrote the device copy since the last pull
        self.host_newer = False     # Python wrote the host copy since the last push

    def materialize(self):
        if self.buffer is not None:
            return
        if self.destroyed:
            raise FluxionRuntimeError("this SNode tree was destroyed (SNodeTree.destroy()); "
                                      "its fields have no storage")
        r = self.root
        sparse_block_states.place(r)           # (hidden levels of states in pointers' cells)
        size, align = r._layout()
        total = sparse_pool.plan(r, size)      # (pooled nodes' blocks after the dense layout)
        self.buffer, slack = tree_buffer.allocate(r, total, sparse_memory.reserves(r))
        if runtime.on_cuda():
            self.device_ptr = runtime.get_jit().device.alloc(size + slack)
        st = runtime.state()
        st.trees.append(self)
        used = {t.id for t in st.trees if not t.destroyed}
        self.id = next(k for k in range(len(used) + 1) if k not in used)
        self._assign(r, self.buffer.ctypes.data, [])
        for pool in _pools(r):
            sparse_pool.make_fields(pool)

    def destroy(self):
        """Free the tree's memory. Its fields can no longer be used, and the compiled kernel
        instances that access them are dropped from their kernels' caches (a later call
        compiles again, reading the program's fields anew)."""
        if self.destroyed:
            raise FluxionRuntimeError("this SNode tree was already destroyed")
        st = runtime.state()
        with runtime.compile_lock:
            for inst in list(st.instances):
                if self in getattr(inst, "trees", ()):
                    inst.drop("it accesses fields of an SNode tree that was destroyed")
            self.destroyed = True
            if self.device_ptr is not None:
                runtime.get_jit().device.free(self.device_ptr)
                self.device_ptr = None
            for place in _places(self.root):
                place.field._view = None
                place.addr = None
            if self in st.trees:
                st.trees.remove(self)
            self.buffer = None

    # -- keeping host and device copies coherent on CUDA ---------------------------------
    # A tree up to this size moves whole between host and device (a copy costs about its
    # latency then, and one pull serves every later read); a larger one moves only the bytes
    # Python reads or writes, so reading a scalar loss does not copy the simulation's state.
    WHOLE_BYTES = 1 << 16

    def read_span(self, lo, hi):
        """Before Python reads bytes [lo, hi) of the host copy."""
        if not self.device_newer:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.pull()
        elif hi > lo:
            # (host_newer is only set with the whole host copy fresh: device_newer is False)
            runtime.get_jit().device.to_host(self.buffer.ctypes.data + lo, self.device_ptr + lo,
                                             hi - lo)

    def before_write(self, lo, hi, partial):
        """Before Python writes into bytes [lo, hi); `partial`: not every byte of the range
        is written (the rest must be the device's, since the range goes back whole)."""
        if self.device_ptr is None:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.pull()
        elif partial:
            self.read_span(lo, hi)

    def after_write(self, lo, hi):
        """After Python wrote bytes [lo, hi): a small tree is pushed whole before the next
        launch, a range of a large one goes to the device now."""
        if self.device_ptr is None:
            return
        if self.buffer.nbytes <= self.WHOLE_BYTES:
            self.host_newer = True
        elif hi > lo:
            runtime.get_jit().device.to_device(self.device_ptr + lo, self.buffer.ctypes.data + lo,
                                               hi - lo)

    def pull(self):
        """Before Python reads the whole host copy."""
        if self.device_newer:
            runtime.get_jit().device.to_host(self.buffer.ctypes.data, self.device_ptr,
                                             self.buffer.nbytes)
            self.device_newer = False

    def push(self):
        """Before a kernel reads the device copy."""
        if self.host_newer:
            runtime.get_jit().device.to_device(self.device_ptr, self.buffer.ctypes.data,
                                               self.buffer.nbytes)
            self.host_newer = False

    def _assign(self, node, base, terms, pool=None):
        """Addresses of the places under `node`, whose cell 0 lies at `base` (`terms`: those
        of the levels above; `pool`: (the pool of a pooled node above, the address of that
        node's cell 0, how many of `terms` are of it and the levels above it))."""
        for c, off in zip(node.children, node._offsets):
            if isinstance(c, (Place, Word)):
                # terms address the field's dimensions: axis -> its rank among the used axes
                rank = {a: r for r, a in enumerate(sorted({t[0] for t in terms}))}
                ranked = [[rank[t[0]]] + list(t[1:]) for t in terms]
                for p in (c.places if isinstance(c, Word) else (c,)):
                    p.addr = base + off
                    p.terms, p.bit_terms = _finish_terms(ranked)
                    p.pool = None
                    if pool is not None:
                        # (no quantized data under a pooled node: the terms are one a level)
                        sparse_pool.place_pool(p, pool[0], pool[1], p.terms[pool[2]:])
            else:
                new_terms = list(terms)
                bits = isinstance(c, QuantArray)
                own = None if bits else sparse_lists.interleaved_terms(c)
                if own is None:
                    strides = _row_major(c.extents, 1 if bits else c.cell_size)
                    own = zip(c.axes, c.extents, strides)
                for a, e, st in own:
                    new_terms.append([a, e, st, bits])
                below = pool
                if getattr(c, "_pool", None) is not None:
                    below = (c._pool, base + off, len(new_terms))
                self._assign(c, base + off, new_terms, below)


def _pools(node):
    for c in getattr(node, "children", ()):
        if getattr(c, "_pool", None) is not None:
            yield c._pool
        yield from _pools(c)


def _places(node):
    for c in node.children:
        if isinstance(c, Place):
            yield c
        else:
            yield from _places(c)


def _row_major(extents, cell):
    strides, acc = [], cell
    for e in reversed(extents):
        strides.append(acc)
        acc *= e
    return strides[::-1]


def _finish_terms(raw):
    """Turn (axis, extent, stride, bits) from outer to inner into Terms with divisors: the
    byte terms and the quant-array (bit) terms."""
    out = []
    seen_axis = {}
    for idx in range(len(raw) - 1, -1, -1):     # inner levels first: their extents divide outer
        a, e, st, bits = raw[idx]
        div = seen_axis.get(a, 1)
        seen_axis[a] = div * e
        out.append(Term(a, div, e, st, False, bits))
    out.reverse()
    # the field's index k is the k-th axis the tree splits (ti.j alone is index 0)
    position = {a: k for k, a in enumerate(sorted({t.axis for t in out}))}
    for t in out:
        t.axis = position[t.axis]
    first = set()
    for t in out:
        if t.axis not in first:
            t.outermost = True
            first.add(t.axis)
    return [t for t in out if not t.bits], [t for t in out if t.bits]
