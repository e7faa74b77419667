"""Native code for `deactivate_all` of interleaved dynamic lists (lang/sparse_lists.py's layout;
lang/sparse_list_sweep.py decides where it applies and keeps the Python version): in LLVM IR,
compiled once and kept in the offline cache's runtime file, as runtime/block_sweep.py's code for
a pointer level is (see there for why one native call beats NumPy after an idle pause).

`fluxion_list_sweep(args)` for nc lists whose list c has its chunk q (elements [q*g, (q+1)*g),
of e bytes each) at bytes [base + c*g*e + q*row, + g*e):
  * each list that is not empty (its i32 length at `length`) has its elements up to
    min(length, n) zeroed chunk by chunk, the pages of each such chunk's first and last byte
    marked used (bit 1 of `pages`), its length set to 0, and its allocation units (ceil of
    length / unit) counted; on the thread pool's threads where the call has the pool's
    fluxion_parallel_for (ranges of `grain` lists or more);
  * pages (u8): one a page from page p0 on (the pages the lists' bytes touch); bit 0: kept at
    the previous call. Then each page among those wholly inside the lists (indices [first,
    end)) that was kept and is not used now goes back, in one madvise(MADV_DONTNEED) per
    stretch of such pages; every byte := used now (bit 1; 0 outside [first, end));
  * args (i64): nc, base, g, e, n, row, unit, log2 of the page size, p0, first, end, the
    address of madvise, its advice, the number of pages, (out) the units counted, (out) the
    madvise calls, the address of `length`, of `pages`, of fluxion_parallel_for (0: none),
    grain, log2 of the unit where it is a power of two (else -1).
"""
from __future__ import annotations

import ctypes

from fluxion.runtime import sweep_ir

_IR = sweep_ir.HELPERS + r"""

; a task of the thread pool's parallel_for (or the whole call without a pool): lists [lo, hi)
; zeroed up to their lengths, chunk by chunk, their chunks' pages marked, their lengths
; cleared and their units added to args[14]
define internal void @clear_lists(ptr %args, i64 %lo, i64 %hi, i64 %worker) {
entry:
""" + sweep_ir.load_args((1, "base"), (2, "g"), (3, "e"), (4, "nmax"), (5, "row"),
    (6, "unit"), (7, "sh"), (8, "p0"), (16, "length", "ptr"), (17, "pages", "ptr")) + r"""
  %ge = mul i64 %g, %e
  %ge1 = sub i64 %ge, 1
  %unit1 = sub i64 %unit, 1
""" + sweep_ir.load_args((20, "ush")) + r"""
  %ushifts = icmp sge i64 %ush, 0
  br label %c_head

; pass 1: the units of the lists' lengths
c_head:
  %c = phi i64 [%lo, %entry], [%c1, %c_next]
  %units = phi i64 [0, %entry], [%units_n, %c_next]
  %c_more = icmp slt i64 %c, %hi
  br i1 %c_more, label %c_body, label %c_done
c_body:
  %lq = getelementptr i32, ptr %length, i64 %c
  %l32 = load i32, ptr %lq
  %c1 = add i64 %c, 1
  %empty = icmp sle i32 %l32, 0
  br i1 %empty, label %c_next, label %c_used
c_used:
  %l = zext i32 %l32 to i64
  %u0 = add i64 %l, %unit1
  ; (a shift where the unit is a power of two: a division per list cost 0.2 ms of 16384)
  br i1 %ushifts, label %u_shift, label %u_div
u_shift:
  %us = lshr i64 %u0, %ush
  br label %u_done
u_div:
  %ud = udiv i64 %u0, %unit
  br label %u_done
u_done:
  %u = phi i64 [%us, %u_shift], [%ud, %u_div]
  %units1 = add i64 %units, %u
  br label %c_next
c_next:
  %units_n = phi i64 [%units, %c_body], [%units1, %u_done]
  br label %c_head
c_done:
  %a14 = getelementptr i64, ptr %args, i64 14
  %old = atomicrmw add ptr %a14, i64 %units monotonic
  br label %r_head

; pass 2: list by list, each list's elements zeroed chunk by chunk (row by row instead, in
; order of address, measured no faster: it scans the lists once a row)
r_head:
  br label %k_head
k_head:
  %k = phi i64 [%lo, %r_head], [%k1, %k_next]
  %k_more = icmp slt i64 %k, %hi
  br i1 %k_more, label %k_body, label %l_start
k_body:
  %kq = getelementptr i32, ptr %length, i64 %k
  %kl32 = load i32, ptr %kq
  %kl = sext i32 %kl32 to i64
  %kbig = icmp sgt i64 %kl, %nmax
  %km = select i1 %kbig, i64 %nmax, i64 %kl
  %k1 = add i64 %k, 1
  %at = mul i64 %k, %ge
  %a0 = add i64 %base, %at
  br label %q_head
q_head:
  %a = phi i64 [%a0, %k_body], [%an, %q_body]
  %left = phi i64 [%km, %k_body], [%left1, %q_body]
  %q_more = icmp sgt i64 %left, 0
  br i1 %q_more, label %q_body, label %k_next
q_body:
  %short = icmp slt i64 %left, %g
  %cnt = select i1 %short, i64 %left, i64 %g
  %kb = mul i64 %cnt, %e
  %ap = inttoptr i64 %a to ptr
  call void @zero_short(ptr %ap, i64 %kb)
  ; (the pages of the chunk's first and last byte, as lang/sparse_lists.py's chunk_pages)
  %pa0 = lshr i64 %a, %sh
  %pa = sub i64 %pa0, %p0
  call void @mark_used(ptr %pages, i64 %pa)
  %al = add i64 %a, %ge1
  %pb0 = lshr i64 %al, %sh
  %pb = sub i64 %pb0, %p0
  call void @mark_used(ptr %pages, i64 %pb)
  %an = add i64 %a, %row
  %left1 = sub i64 %left, %g
  br label %q_head
k_next:
  br label %k_head

; pass 3: the lengths cleared
l_start:
  br label %l_head
l_head:
  %j = phi i64 [%lo, %l_start], [%j1, %l_next]
  %l_more = icmp slt i64 %j, %hi
  br i1 %l_more, label %l_body, label %out
l_body:
  %jq = getelementptr i32, ptr %length, i64 %j
  %jv = load i32, ptr %jq
  %j1 = add i64 %j, 1
  %jnz = icmp ne i32 %jv, 0
  br i1 %jnz, label %l_clear, label %l_next
l_clear:
  store i32 0, ptr %jq
  br label %l_next
l_next:
  br label %l_head
out:
  ret void
}

; pages[i] |= 2, by each task where it is not set yet (tasks mark the same pages: only bit 1
; changes while they run, so a plain store of the byte loses nothing; the read first keeps
; the page's line shared)
define internal void @mark_used(ptr %pages, i64 %i) {
entry:
  %q = getelementptr i8, ptr %pages, i64 %i
  %v = load atomic i8, ptr %q monotonic, align 1
  %b = and i8 %v, 2
  %set = icmp ne i8 %b, 0
  br i1 %set, label %out, label %store
store:
  %v1 = or i8 %v, 2
  store atomic i8 %v1, ptr %q monotonic, align 1
  br label %out
out:
  ret void
}

; madvise(MADV_DONTNEED) of pages [p0 + from, p0 + to)
define internal void @give_back(ptr %madv, i32 %adv, i64 %p0, i64 %from, i64 %to, i64 %sh) {
  %a0 = add i64 %p0, %from
  %a = shl i64 %a0, %sh
  %n0 = sub i64 %to, %from
  %n = shl i64 %n0, %sh
  %p = inttoptr i64 %a to ptr
  %r = call i32 %madv(ptr %p, i64 %n, i32 %adv)
  ret void
}

define void @fluxion_list_sweep(ptr %args) {
entry:
  %nc = load i64, ptr %args
""" + sweep_ir.load_args((8, "p0"), (7, "sh"), (9, "first"), (10, "end"), (11, "madv", "ptr"),
    (12, "adv", "i32"), (13, "np")) + r"""
  %a14 = getelementptr i64, ptr %args, i64 14
  store i64 0, ptr %a14
""" + sweep_ir.load_args((17, "pages", "ptr"), (18, "pool", "ptr"), (19, "grain")) + r"""
  %pool_on = icmp ne i64 %pool_i, 0
  br i1 %pool_on, label %par, label %one
par:
  call void %pool(ptr @clear_lists, ptr %args, i64 0, i64 %nc, i64 %grain)
  br label %p_start
one:
  call void @clear_lists(ptr %args, i64 0, i64 %nc, i64 0)
  br label %p_start

; the pages: kept and not used now go back, by stretches; each := used now
p_start:
  br label %p_head
p_head:
  %i = phi i64 [0, %p_start], [%i8, %p_skip], [%i1, %p_next]
  %run = phi i64 [-1, %p_start], [-1, %p_skip], [%run_n, %p_next]
  %calls = phi i64 [0, %p_start], [%calls, %p_skip], [%calls_n, %p_next]
  %p_more = icmp slt i64 %i, %np
  br i1 %p_more, label %p_word, label %p_flush
p_word:
  ; (eight pages at a time where none was kept or is used and no stretch is open: most of
  ; the pages of a grid's lists)
  %i8 = add i64 %i, 8
  %fits = icmp sle i64 %i8, %np
  %closed = icmp slt i64 %run, 0
  %can = and i1 %fits, %closed
  br i1 %can, label %p_wload, label %p_body
p_wload:
  %wq = getelementptr i8, ptr %pages, i64 %i
  %w = load i64, ptr %wq, align 1
  %wz = icmp eq i64 %w, 0
  br i1 %wz, label %p_skip, label %p_body
p_skip:
  br label %p_head
p_body:
  %q = getelementptr i8, ptr %pages, i64 %i
  %v = load i8, ptr %q
  %in0 = icmp sge i64 %i, %first
  %in1 = icmp slt i64 %i, %end
  %in = and i1 %in0, %in1
  %v1 = lshr i8 %v, 1
  %nv = select i1 %in, i8 %v1, i8 0
  store i8 %nv, ptr %q
  %was = icmp eq i8 %v, 1
  %gone = and i1 %in, %was
  %i1 = add i64 %i, 1
  %open = icmp sge i64 %run, 0
  br i1 %gone, label %p_gone, label %p_kept
p_gone:
  %run_g = select i1 %open, i64 %run, i64 %i
  br label %p_next
p_kept:
  br i1 %open, label %p_madvise, label %p_next
p_madvise:
  call void @give_back(ptr %madv, i32 %adv, i64 %p0, i64 %run, i64 %i, i64 %sh)
  %calls1 = add i64 %calls, 1
  br label %p_next
p_next:
  %run_n = phi i64 [%run_g, %p_gone], [-1, %p_kept], [-1, %p_madvise]
  %calls_n = phi i64 [%calls, %p_gone], [%calls, %p_kept], [%calls1, %p_madvise]
  br label %p_head
p_flush:
  %f_open = icmp sge i64 %run, 0
  br i1 %f_open, label %f_madvise, label %out
f_madvise:
  call void @give_back(ptr %madv, i32 %adv, i64 %p0, i64 %run, i64 %np, i64 %sh)
  %fcalls = add i64 %calls, 1
  br label %out
out:
  %calls_out = phi i64 [%calls, %p_flush], [%fcalls, %f_madvise]
  %a15 = getelementptr i64, ptr %args, i64 15
  store i64 %calls_out, ptr %a15
  ret void
}
"""

ARGS = 21          # the i64 slots of fluxion_list_sweep's args
_fns = []          # (the machine code holding it, list_sweep), once built


def function():
    """fluxion_list_sweep as a ctypes function (compiled as runtime/block_sweep.py's are)."""
    if not _fns:
        _fns.extend(sweep_ir.functions(_IR, "deactivate_all's list sweep",
                                       fluxion_list_sweep=[ctypes.c_void_p]))
    return _fns[1]
