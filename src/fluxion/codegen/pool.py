"""Pooled pointer levels (lang/sparse_pool.py says what they are): the address of an element
under one, through its cell's slot, and the taking of a slot before a write.

Mixed into FunctionLowering (codegen/lower.py). The slot table is read with unordered atomic
loads: another thread may be publishing an entry (a program that reads a cell another
thread activates races, but must not read from a torn or undefined value), and LLVM may
still hoist an unordered load out of a loop that writes no table entry, so the loop over a
block's elements loads its slot once. In a kernel that takes no slot the entries do not
change while it runs: plain loads marked invariant, which LLVM shares and hoists freely.
The table lies in its own tree (a global of its own), which LLVM knows no field store can
alias.
"""
from __future__ import annotations

from llvmlite import ir

from fluxion.codegen.llvm_types import I32, I64, llvm_type
from fluxion.ir import stmts as S

BUSY = -1          # a table entry while its slot is being taken


class PooledAddress:
    """What a GlobalPtrStmt of an element under a pooled node lowers to: its address is
    computed where it is used (`FunctionLowering.v`), not where the statement stands. A cell
    gets its slot when first written, so an address computed before that write (a pointer
    the IR shares between a read before it and one after, or one made outside the loop that
    writes) would still point at the zero block."""
    __slots__ = ("stmt",)

    def __init__(self, stmt):
        self.stmt = stmt


def takes_slots(kernel):
    """Whether `kernel` (or a real function it calls) may take a slot of a pool."""
    return any(isinstance(st, S.SlotAcquireStmt) for st in S.walk_all(kernel))


class PoolLowering:
    def pooled_address(self, s):
        """The typed pointer of GlobalPtrStmt `s` (a PooledAddress), computed here."""
        return self.b.bitcast(self.pooled_ptr(s.place, s.indices),
                              llvm_type(s.place.dtype).as_pointer())

    def pooled_ptr(self, place, indices):
        """i8* to element `indices` (IR statements) of `place`, under a pooled node."""
        b, pp = self.b, place.pool
        off = place.field.offset
        idx = []
        for d, i in enumerate(indices):
            v = self.index64(i)
            idx.append(b.sub(v, ir.Constant(I64, off[d])) if off and off[d] else v)
        entry = self.table_entry(pp, idx)
        if self.ml.takes_slots:
            raw = b.load_atomic(entry, "unordered", 4)
        else:
            # no slot is taken while this kernel runs: its table entries stay as they are,
            # and LLVM may load each once (and hoist it out of the loops around it)
            raw = b.load(entry, align=4)
            raw.set_metadata("invariant.load", self.ml.module.add_metadata([]))
        slot = b.sext(raw, I64)
        inner = b.mul(slot, ir.Constant(I64, pp.pool.span))
        for t in pp.terms:
            v = idx[t.axis]
            if t.divisor != 1:
                v = b.udiv(v, ir.Constant(I64, t.divisor))
            if not t.outermost:
                v = b.urem(v, ir.Constant(I64, t.extent))
            inner = b.add(inner, b.mul(v, ir.Constant(I64, t.stride)))
        base = self.ml.buffer_ptr(place.snode.tree, pp.base)
        return b.gep(base, [inner])

    def table_entry(self, pp, idx):
        """i32* to the slot table entry of the cell holding element `idx` (i64 values, the
        field's offset taken off)."""
        b = self.b
        cell = [idx[d] if div == 1 else b.udiv(idx[d], ir.Constant(I64, div))
                for d, div in pp.cells]
        table = pp.pool.table.places[0]
        p = self.ml.place_base(table)
        toff = self.place_offset(table, cell)
        p = p if toff is None else b.gep(p, [toff])
        return b.bitcast(p, I32.as_pointer())

    def lower_SlotAcquireStmt(self, s):
        b = self.b
        entry = self.v(s.ptr)
        pool = s.ptr.place.field._pool_of
        have = self.fn.append_basic_block("slot_have")
        claim = self.fn.append_basic_block("slot_claim")
        wait = self.fn.append_basic_block("slot_wait")
        take = self.fn.append_basic_block("slot_take")
        pop = self.fn.append_basic_block("slot_pop")
        bump = self.fn.append_basic_block("slot_new")
        publish = self.fn.append_basic_block("slot_publish")
        zero = ir.Constant(I32, 0)
        cur = b.load_atomic(entry, "unordered", 4)
        b.cbranch(b.icmp_signed("!=", cur, zero), have, claim)
        b.position_at_end(claim)
        won = b.extract_value(b.cmpxchg(entry, zero, ir.Constant(I32, BUSY), "acquire",
                                        "monotonic"), 1)
        b.cbranch(won, take, wait)
        # another thread is taking this cell's slot: wait until it published it
        b.position_at_end(wait)
        seen = b.load_atomic(entry, "acquire", 4)
        b.cbranch(b.icmp_signed("==", seen, ir.Constant(I32, BUSY)), wait, have)
        b.position_at_end(take)
        counts = b.bitcast(self.ml.place_base(pool.alloc.places[0]), I32.as_pointer())
        free_count = b.gep(counts, [ir.Constant(I32, 1)])
        left = b.atomic_rmw("sub", free_count, ir.Constant(I32, 1), "monotonic")
        b.cbranch(b.icmp_signed(">", left, zero), pop, bump)
        b.position_at_end(pop)
        stack = b.bitcast(self.ml.place_base(pool.free.places[0]), I32.as_pointer())
        popped = b.load(b.gep(stack, [b.sext(b.sub(left, ir.Constant(I32, 1)), I64)]))
        b.branch(publish)
        b.position_at_end(bump)
        new = b.atomic_rmw("add", counts, ir.Constant(I32, 1), "monotonic")
        b.branch(publish)
        b.position_at_end(publish)
        slot = b.phi(I32)
        slot.add_incoming(popped, pop)
        slot.add_incoming(new, bump)
        b.store_atomic(slot, entry, "release", 4)
        b.branch(have)
        b.position_at_end(have)
        return None
