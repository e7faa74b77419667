"""Native code for `deactivate_all` of a pointer with pointer levels below it (lang/sparse_memory.py
decides what it does, lang/sparse_sweep.py's LevelsPlan calls this): in LLVM IR, compiled once
and kept in the offline cache's runtime file, as runtime/block_sweep.py's code for a single
pointer level is (see there for why one native call beats the NumPy version after an idle
pause: each distinct NumPy operation then costs tens of microseconds).

Such a tree keeps no block (a block of the top pointer holds whole pointers: kept whole or not
at all), so the work is: count and clear the states of every sparse level, and give back every
whole page of the runs of bytes the top pointer's cells lie in, zeroing the bytes of the runs
in their partial end pages where one is not zero (a write would commit a clean page).

`fluxion_levels_sweep(levels, nlev, runs, nruns, sys)`:
  * levels (i64): nlev pairs (address of a level's u8 states, how many): each is zeroed where
    not zero, and its slot of `how many` receives the count of those that were not (the
    active cells; the caller restores the size);
  * runs (i64): nruns pairs (first byte, end) of absolute addresses, merged and sorted;
  * sys (i64): page size, the address of madvise, MADV_DONTNEED, (out) the number of runs
    given back by madvise, the address of the thread pool's fluxion_parallel_for (0: none)
    and the bytes of a chunk it takes: a run of at least that many bytes goes back in such
    chunks on the pool's threads.
"""
from __future__ import annotations

import ctypes

from fluxion.runtime import sweep_ir

_IR = r"""
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare i64 @llvm.ctpop.i64(i64)

; the bytes of [p, p + n) that are not zero: counted, then zeroed (a word at a time; a zero
; word is only read: most of a sparse level's states)
define internal i64 @count_clear(ptr %p, i64 %n) {
entry:
  %words = lshr i64 %n, 3
  br label %w_head
w_head:
  %w = phi i64 [0, %entry], [%w1, %w_next], [%w1, %w_set]
  %cw = phi i64 [0, %entry], [%cw, %w_next], [%cw1, %w_set]
  %w_more = icmp ult i64 %w, %words
  br i1 %w_more, label %w_body, label %b_start
w_body:
  %wq = getelementptr i64, ptr %p, i64 %w
  %v = load i64, ptr %wq, align 1
  %w1 = add i64 %w, 1
  %vz = icmp eq i64 %v, 0
  br i1 %vz, label %w_next, label %w_set
w_next:
  br label %w_head
w_set:
  ; bit 0 of each byte := whether the byte is not zero (only bits 0-3 of a byte feed bit 0
  ; after the first step, so no bit crosses into another byte's count)
  %s4 = lshr i64 %v, 4
  %t1 = or i64 %v, %s4
  %s2 = lshr i64 %t1, 2
  %t2 = or i64 %t1, %s2
  %s1 = lshr i64 %t2, 1
  %t3 = or i64 %t2, %s1
  %ones = and i64 %t3, 72340172838076673
  %c = call i64 @llvm.ctpop.i64(i64 %ones)
  %cw1 = add i64 %cw, %c
  store i64 0, ptr %wq, align 1
  br label %w_head
b_start:
  %done = shl i64 %words, 3
  br label %b_head
b_head:
  %b = phi i64 [%done, %b_start], [%b1, %b_next]
  %cb = phi i64 [%cw, %b_start], [%cb1, %b_next]
  %b_more = icmp ult i64 %b, %n
  br i1 %b_more, label %b_body, label %out
b_body:
  %bq = getelementptr i8, ptr %p, i64 %b
  %bv = load i8, ptr %bq
  %bnz = icmp ne i8 %bv, 0
  %bz = zext i1 %bnz to i64
  %cb1 = add i64 %cb, %bz
  store i8 0, ptr %bq
  %b1 = add i64 %b, 1
  br label %b_next
b_next:
  br label %b_head
out:
  ret i64 %cb
}

; [a, b) = 0 when a byte there is not zero (a write to a clean page would commit it)
define internal void @zero_dirty(i64 %a, i64 %b) {
entry:
  %n = sub i64 %b, %a
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %clean
body:
  %x = add i64 %a, %i
  %q = inttoptr i64 %x to ptr
  %v = load i8, ptr %q
  %nz = icmp ne i8 %v, 0
  br i1 %nz, label %dirty, label %next
next:
  %i1 = add i64 %i, 1
  br label %head
dirty:
  %p = inttoptr i64 %a to ptr
  call void @llvm.memset.p0.i64(ptr %p, i8 0, i64 %n, i1 false)
  ret void
clean:
  ret void
}

; a task of the thread pool's parallel_for: madvise chunks [lo, hi) of the range the closure
; describes (i64: first byte, chunk bytes, end, the address of madvise, its advice)
define internal void @madvise_chunks(ptr %c, i64 %lo, i64 %hi, i64 %worker) {
  %a = load i64, ptr %c
  %q1 = getelementptr i64, ptr %c, i64 1
  %chunk = load i64, ptr %q1
  %q2 = getelementptr i64, ptr %c, i64 2
  %end = load i64, ptr %q2
  %q3 = getelementptr i64, ptr %c, i64 3
  %madv_i = load i64, ptr %q3
  %madv = inttoptr i64 %madv_i to ptr
  %q4 = getelementptr i64, ptr %c, i64 4
  %adv64 = load i64, ptr %q4
  %adv = trunc i64 %adv64 to i32
  %x0 = mul i64 %lo, %chunk
  %x = add i64 %a, %x0
  %y0 = mul i64 %hi, %chunk
  %y1 = add i64 %a, %y0
  %y_in = icmp ult i64 %y1, %end
  %y = select i1 %y_in, i64 %y1, i64 %end
  %n = sub i64 %y, %x
  %p = inttoptr i64 %x to ptr
  %r = call i32 %madv(ptr %p, i64 %n, i32 %adv)
  ret void
}

define void @fluxion_levels_sweep(ptr %levels, i64 %nlev, ptr %runs, i64 %nruns, ptr %sys) {
entry:
  %P = load i64, ptr %sys
  %s1 = getelementptr i64, ptr %sys, i64 1
  %madv_i = load i64, ptr %s1
  %madv = inttoptr i64 %madv_i to ptr
  %s2 = getelementptr i64, ptr %sys, i64 2
  %adv64 = load i64, ptr %s2
  %adv = trunc i64 %adv64 to i32
  %s4 = getelementptr i64, ptr %sys, i64 4
  %pool_i = load i64, ptr %s4
  %pool = inttoptr i64 %pool_i to ptr
  %s5 = getelementptr i64, ptr %sys, i64 5
  %split = load i64, ptr %s5
  %clo = alloca i64, i64 5
  br label %l_head

l_head:
  %l = phi i64 [0, %entry], [%l1, %l_body]
  %l_more = icmp slt i64 %l, %nlev
  br i1 %l_more, label %l_body, label %r_start
l_body:
  %la = mul i64 %l, 2
  %lq = getelementptr i64, ptr %levels, i64 %la
  %lp_i = load i64, ptr %lq
  %lp = inttoptr i64 %lp_i to ptr
  %lnq = getelementptr i64, ptr %lq, i64 1
  %ln = load i64, ptr %lnq
  %cnt = call i64 @count_clear(ptr %lp, i64 %ln)
  store i64 %cnt, ptr %lnq
  %l1 = add i64 %l, 1
  br label %l_head

; each run: its whole pages back in one madvise, its partial end pages zeroed where dirty
r_start:
  br label %r_head
r_head:
  %r = phi i64 [0, %r_start], [%r1, %r_next]
  %calls = phi i64 [0, %r_start], [%calls1, %r_next]
  %r_more = icmp slt i64 %r, %nruns
  br i1 %r_more, label %r_body, label %done
r_body:
  %ra = mul i64 %r, 2
  %rq = getelementptr i64, ptr %runs, i64 %ra
  %lo = load i64, ptr %rq
  %rhq = getelementptr i64, ptr %rq, i64 1
  %hi = load i64, ptr %rhq
  %lo_up0 = add i64 %lo, %P
  %lo_up1 = sub i64 %lo_up0, 1
  %pa0 = udiv i64 %lo_up1, %P
  %pa = mul i64 %pa0, %P
  %pb0 = udiv i64 %hi, %P
  %pb = mul i64 %pb0, %P
  %whole = icmp ugt i64 %pb, %pa
  br i1 %whole, label %r_whole, label %r_part
r_whole:
  call void @zero_dirty(i64 %lo, i64 %pa)
  call void @zero_dirty(i64 %pb, i64 %hi)
  %mn = sub i64 %pb, %pa
  %big = icmp uge i64 %mn, %split
  %pool_on = icmp ne i64 %pool_i, 0
  %par = and i1 %big, %pool_on
  br i1 %par, label %r_par, label %r_one
r_one:
  %mp = inttoptr i64 %pa to ptr
  %mr = call i32 %madv(ptr %mp, i64 %mn, i32 %adv)
  br label %r_next
r_par:
  ; (the range in chunks of `split` bytes, on the pool's threads: the system frees pages
  ; on each thread at once, about 1.4 times as fast on two cores)
  store i64 %pa, ptr %clo
  %cq1 = getelementptr i64, ptr %clo, i64 1
  store i64 %split, ptr %cq1
  %cq2 = getelementptr i64, ptr %clo, i64 2
  store i64 %pb, ptr %cq2
  %cq3 = getelementptr i64, ptr %clo, i64 3
  store i64 %madv_i, ptr %cq3
  %cq4 = getelementptr i64, ptr %clo, i64 4
  store i64 %adv64, ptr %cq4
  %nc0 = add i64 %mn, %split
  %nc1 = sub i64 %nc0, 1
  %nchunks = udiv i64 %nc1, %split
  call void %pool(ptr @madvise_chunks, ptr %clo, i64 0, i64 %nchunks, i64 1)
  br label %r_next
r_part:
  call void @zero_dirty(i64 %lo, i64 %hi)
  br label %r_next
r_next:
  %did = phi i64 [1, %r_one], [1, %r_par], [0, %r_part]
  %calls1 = add i64 %calls, %did
  %r1 = add i64 %r, 1
  br label %r_head
done:
  %s3 = getelementptr i64, ptr %sys, i64 3
  store i64 %calls, ptr %s3
  ret void
}
"""

SYS = 6            # the i64 slots of fluxion_levels_sweep's sys
_fns = []          # (the machine code holding it, levels_sweep), once built


def function():
    """fluxion_levels_sweep as a ctypes function: compiled at the first call in a process
    that does not find it in the offline cache (as runtime/block_sweep.py's functions)."""
    if not _fns:
        p = ctypes.c_void_p
        _fns.extend(sweep_ir.functions(_IR, "deactivate_all's levels sweep",
                                       fluxion_levels_sweep=[p, ctypes.c_int64, p,
                                                             ctypes.c_int64, p]))
    return _fns[1]
