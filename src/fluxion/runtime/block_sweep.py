"""Native code for `deactivate_all` of a pointer level in the dense layout (lang/sparse_memory.py
decides what it does; this does it in one call): written in LLVM IR and compiled once
(kept in the offline cache's runtime file), as the thread pool is (runtime/thread_pool.py).

Why native: a benchmark step runs after an idle pause, with the CPU's caches and TLB cold,
and then each distinct NumPy operation costs 40-60 us before it does any work (measured here:
`np.count_nonzero` of 16 KiB 4 us warm, 60 us after a 20 ms sleep; five different operations
215 us). The Python and NumPy version of this work, some fifty operations, took 1.0-1.6 ms of
a 4 ms step after the pause, against 0.6-0.8 ms back to back. One call into a few hundred
bytes of machine code touches little: it reads the cells' states once and does every per-cell
and per-page step in one pass each.

`fluxion_block_sweep(state, prev, kept, gone, pages, act, args)` for a pointer node of n cells
whose cell k lies at bytes [base + k * cs, base + (k + 1) * cs) (one run of bytes: the node's
cells are all that lies there):
  * counts the active cells (state != 0) and those active at the previous call too (prev);
    the blocks to keep are those (or every active block, when they are more than half of the
    active ones: a set that persists); each is zeroed in place (consecutive ones in one
    memset), and `kept` receives them;
  * the blocks that changed (active and not kept, or kept before and not active now) are the
    ones whose pages may go back: the pages they touch (every page of the run when sweeping)
    that hold no kept byte and lie inside the run go back in madvise(MADV_DONTNEED) calls, one
    per stretch of consecutive pages; in the other pages they touch, the bytes of the run
    outside kept blocks are zeroed where any is not zero (a write would commit a clean page);
  * clears the states, `prev` := the active cells, `gone` := the cells active before and not
    now, `act` := the flat indices of the active cells, in order;
  * args (i64): n, base, cs, page size, sweep (0/1), the address of madvise, MADV_DONTNEED;
    on return args[7] = active cells, args[8] = gone cells, args[9] = madvise calls, args[10]
    = kept blocks. `pages` is scratch of one byte per page of the run, zero
    between calls.
"""
from __future__ import annotations

import ctypes
import mmap

from fluxion.runtime import sweep_ir

_IR = sweep_ir.HELPERS + r"""

; whether a byte of [p, p + n) is not zero
define internal i1 @any_set(i64 %p, i64 %n) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i1, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %no
body:
  %a = add i64 %p, %i
  %q = inttoptr i64 %a to ptr
  %b = load i8, ptr %q
  %nz = icmp ne i8 %b, 0
  br i1 %nz, label %yes, label %next
next:
  %i1 = add i64 %i, 1
  br label %head
yes:
  ret i1 1
no:
  ret i1 0
}

define internal void @zero(i64 %a, i64 %n) {
  %p = inttoptr i64 %a to ptr
  call void @llvm.memset.p0.i64(ptr %p, i8 0, i64 %n, i1 false)
  ret void
}

define void @fluxion_block_sweep(ptr %state, ptr %prev, ptr %kept, ptr %gone, ptr %pages,
                                 ptr %act, ptr %args) {
entry:
  %n = load i64, ptr %args
""" + sweep_ir.load_args((1, "base"), (2, "cs"), (3, "P"), (4, "sweep64")) + r"""
  %sweep = icmp ne i64 %sweep64, 0
  %sweep_off = xor i1 %sweep, 1
""" + sweep_ir.load_args((5, "madv", "ptr"), (6, "adv", "i32")) + r"""
  %size = mul i64 %n, %cs
  %end = add i64 %base, %size
  %p0 = udiv i64 %base, %P
  %endr = add i64 %end, %P
  %endr1 = sub i64 %endr, 1
  %p1 = udiv i64 %endr1, %P
  %npg = sub i64 %p1, %p0
  br label %c_head

; pass 1: how many cells are active, how many of them were at the previous call
; (eight cells at a time where none is active now or was: most of a sparse grid)
c_head:
  %ck = phi i64 [0, %entry], [%ck1, %c_body], [%ck8, %c_word]
  %cnt = phi i64 [0, %entry], [%cnt1, %c_body], [%cnt, %c_word]
  %both = phi i64 [0, %entry], [%both1, %c_body], [%both, %c_word]
  %c_more = icmp slt i64 %ck, %n
  br i1 %c_more, label %c_check, label %c_done
c_check:
  %ck8 = add i64 %ck, 8
  %c_al0 = and i64 %ck, 7
  %c_al = icmp eq i64 %c_al0, 0
  %c_fits = icmp sle i64 %ck8, %n
  %c_try = and i1 %c_al, %c_fits
  br i1 %c_try, label %c_wload, label %c_body
c_wload:
  %cwsq = getelementptr i8, ptr %state, i64 %ck
  %cws = load i64, ptr %cwsq, align 1
  %cwpq = getelementptr i8, ptr %prev, i64 %ck
  %cwp = load i64, ptr %cwpq, align 1
  %cwor = or i64 %cws, %cwp
  %cwz = icmp eq i64 %cwor, 0
  br i1 %cwz, label %c_word, label %c_body
c_word:
  br label %c_head
c_body:
  %csq = getelementptr i8, ptr %state, i64 %ck
  %csv = load i8, ptr %csq
  %cs_on = icmp ne i8 %csv, 0
  %cpq = getelementptr i8, ptr %prev, i64 %ck
  %cpv = load i8, ptr %cpq
  %cp_on = icmp ne i8 %cpv, 0
  %cb = and i1 %cs_on, %cp_on
  %cs_z = zext i1 %cs_on to i64
  %cb_z = zext i1 %cb to i64
  %cnt1 = add i64 %cnt, %cs_z
  %both1 = add i64 %both, %cb_z
  %ck1 = add i64 %ck, 1
  br label %c_head
c_done:
  %both2 = shl i64 %both, 1
  %persist = icmp sgt i64 %both2, %cnt
  br label %k_head

; pass 2: each cell's fate; kept blocks zeroed, stretch by stretch
; (eight cells at a time where none is active, was at the previous call or kept then:
; nothing changes there but `gone`, 0)
k_head:
  %k = phi i64 [0, %c_done], [%k1, %k_next], [%k8, %k_word]
  %nact = phi i64 [0, %c_done], [%nact1, %k_next], [%nact, %k_word]
  %left = phi i64 [0, %c_done], [%left1, %k_next], [%left, %k_word]
  %nkept = phi i64 [0, %c_done], [%nkept1, %k_next], [%nkept, %k_word]
  %zlo = phi i64 [0, %c_done], [%zlo1, %k_next], [%zlo, %k_word]
  %zhi = phi i64 [0, %c_done], [%zhi1, %k_next], [%zhi, %k_word]
  %k_more = icmp slt i64 %k, %n
  br i1 %k_more, label %k_check, label %k_done
k_check:
  %k8 = add i64 %k, 8
  %k_al0 = and i64 %k, 7
  %k_al = icmp eq i64 %k_al0, 0
  %k_fits = icmp sle i64 %k8, %n
  %k_try = and i1 %k_al, %k_fits
  br i1 %k_try, label %k_wload, label %k_body
k_wload:
  %kwsq = getelementptr i8, ptr %state, i64 %k
  %kws = load i64, ptr %kwsq, align 1
  %kwpq = getelementptr i8, ptr %prev, i64 %k
  %kwp = load i64, ptr %kwpq, align 1
  %kwkq = getelementptr i8, ptr %kept, i64 %k
  %kwk = load i64, ptr %kwkq, align 1
  %kwor0 = or i64 %kws, %kwp
  %kwor = or i64 %kwor0, %kwk
  %kwz = icmp eq i64 %kwor, 0
  br i1 %kwz, label %k_word, label %k_body
k_word:
  %kwgq = getelementptr i8, ptr %gone, i64 %k
  store i64 0, ptr %kwgq, align 1
  br label %k_head
k_body:
  %sq = getelementptr i8, ptr %state, i64 %k
  %sv = load i8, ptr %sq
  %s_on = icmp ne i8 %sv, 0
  %pq = getelementptr i8, ptr %prev, i64 %k
  %pv = load i8, ptr %pq
  %p_on = icmp ne i8 %pv, 0
  %kq = getelementptr i8, ptr %kept, i64 %k
  %kv = load i8, ptr %kq
  %k_on = icmp ne i8 %kv, 0
  %gq = getelementptr i8, ptr %gone, i64 %k
  %keepable = or i1 %persist, %p_on
  %ag = and i1 %s_on, %keepable
  %s_off = xor i1 %s_on, 1
  %ag_off = xor i1 %ag, 1
  %new_unkept = and i1 %s_on, %ag_off
  %kept_gone = and i1 %k_on, %s_off
  %ch = or i1 %new_unkept, %kept_gone
  %gn = and i1 %p_on, %s_off
  %gn8 = zext i1 %gn to i8
  store i8 %gn8, ptr %gq
  %s8 = zext i1 %s_on to i8
  store i8 %s8, ptr %pq
  %ag8 = zext i1 %ag to i8
  store i8 %ag8, ptr %kq
  store i8 0, ptr %sq
  %gn_z = zext i1 %gn to i64
  %left1 = add i64 %left, %gn_z
  %actq = getelementptr i64, ptr %act, i64 %nact
  br i1 %s_on, label %k_act, label %k_kept
k_act:
  store i64 %k, ptr %actq
  br label %k_kept
k_kept:
  %s_z = zext i1 %s_on to i64
  %nact1 = add i64 %nact, %s_z
  %off = mul i64 %k, %cs
  %lo = add i64 %base, %off
  %hi = add i64 %lo, %cs
  br i1 %ag, label %k_keep, label %k_nokeep
k_keep:
  call void @mark(ptr %pages, i64 %lo, i64 %hi, i64 %P, i64 %p0, i8 2)
  %joins = icmp eq i64 %zhi, %lo
  br i1 %joins, label %k_keepdone, label %k_flushz
k_flushz:
  %zn = sub i64 %zhi, %zlo
  %zany = icmp sgt i64 %zn, 0
  br i1 %zany, label %k_zero, label %k_keepdone
k_zero:
  call void @zero(i64 %zlo, i64 %zn)
  br label %k_keepdone
k_keepdone:
  %zlo_k = phi i64 [%zlo, %k_keep], [%lo, %k_flushz], [%lo, %k_zero]
  br label %k_nokeep
k_nokeep:
  %zlo1 = phi i64 [%zlo, %k_kept], [%zlo_k, %k_keepdone]
  %zhi1 = phi i64 [%zhi, %k_kept], [%hi, %k_keepdone]
  %ag_z = zext i1 %ag to i64
  %nkept1 = add i64 %nkept, %ag_z
  %chmark = and i1 %ch, %sweep_off
  br i1 %chmark, label %k_mark, label %k_next
k_mark:
  call void @mark(ptr %pages, i64 %lo, i64 %hi, i64 %P, i64 %p0, i8 1)
  br label %k_next
k_next:
  %k1 = add i64 %k, 1
  br label %k_head
k_done:
  %zn_f = sub i64 %zhi, %zlo
  %zany_f = icmp sgt i64 %zn_f, 0
  br i1 %zany_f, label %k_zero_f, label %g_start
k_zero_f:
  call void @zero(i64 %zlo, i64 %zn_f)
  br label %g_start

; pass 3: the pages the changed blocks touch (all, sweeping), in order
g_start:
  br label %g_head
; (eight pages at a time where none is marked: not sweeping, they end a stretch; sweeping,
; they are whole pages to give back where they lie inside the run)
g_head:
  %g = phi i64 [0, %g_start], [%g1, %g_next], [%g8, %g_word], [%g8, %g_wextend],
               [%g8, %g_wstarted]
  %mlo = phi i64 [0, %g_start], [%mlo1, %g_next], [0, %g_word], [%mlo, %g_wextend],
                 [%wpa, %g_wstarted]
  %mhi = phi i64 [0, %g_start], [%mhi1, %g_next], [0, %g_word], [%wpb, %g_wextend],
                 [%wpb, %g_wstarted]
  %calls = phi i64 [0, %g_start], [%calls1, %g_next], [%calls_w, %g_word],
                   [%calls, %g_wextend], [%calls_s, %g_wstarted]
  %g_more = icmp slt i64 %g, %npg
  br i1 %g_more, label %g_check, label %g_done
g_check:
  %g8 = add i64 %g, 8
  %g_al0 = and i64 %g, 7
  %g_al = icmp eq i64 %g_al0, 0
  %g_fits = icmp sle i64 %g8, %npg
  %g_try = and i1 %g_al, %g_fits
  br i1 %g_try, label %g_wload, label %g_body
g_wload:
  %gwq = getelementptr i8, ptr %pages, i64 %g
  %gw = load i64, ptr %gwq, align 1
  %gwz = icmp eq i64 %gw, 0
  br i1 %gwz, label %g_wzero, label %g_body
g_wzero:
  br i1 %sweep, label %g_wsweep, label %g_wflush
g_wsweep:
  %wpg = add i64 %p0, %g
  %wpa = mul i64 %wpg, %P
  %w8P = shl i64 %P, 3
  %wpb = add i64 %wpa, %w8P
  %win_lo = icmp sge i64 %wpa, %base
  %win_hi = icmp sle i64 %wpb, %end
  %win = and i1 %win_lo, %win_hi
  br i1 %win, label %g_wrun, label %g_body
g_wrun:
  %wext = icmp eq i64 %mhi, %wpa
  br i1 %wext, label %g_wextend, label %g_wstart
g_wextend:
  br label %g_head
g_wstart:
  %smn = sub i64 %mhi, %mlo
  %smany = icmp sgt i64 %smn, 0
  br i1 %smany, label %g_wsmadv, label %g_wstarted
g_wsmadv:
  %smp = inttoptr i64 %mlo to ptr
  %sr = call i32 %madv(ptr %smp, i64 %smn, i32 %adv)
  br label %g_wstarted
g_wstarted:
  %sdid = phi i64 [0, %g_wstart], [1, %g_wsmadv]
  %calls_s = add i64 %calls, %sdid
  br label %g_head
g_wflush:
  %wmn = sub i64 %mhi, %mlo
  %wmany = icmp sgt i64 %wmn, 0
  br i1 %wmany, label %g_wmadvise, label %g_word
g_wmadvise:
  %wmp = inttoptr i64 %mlo to ptr
  %wr = call i32 %madv(ptr %wmp, i64 %wmn, i32 %adv)
  br label %g_word
g_word:
  %wdid = phi i64 [0, %g_wflush], [1, %g_wmadvise]
  %calls_w = add i64 %calls, %wdid
  br label %g_head
g_body:
  %fq = getelementptr i8, ptr %pages, i64 %g
  %f = load i8, ptr %fq
  store i8 0, ptr %fq                ; (left zero for the next call)
  %pg = add i64 %p0, %g
  %pa = mul i64 %pg, %P
  %pb = add i64 %pa, %P
  %f_c = and i8 %f, 1
  %f_c_on = icmp ne i8 %f_c, 0
  %cand = or i1 %f_c_on, %sweep
  %f_k = and i8 %f, 2
  %no_kept = icmp eq i8 %f_k, 0
  %in_lo = icmp sge i64 %pa, %base
  %in_hi = icmp sle i64 %pb, %end
  %inside = and i1 %in_lo, %in_hi
  %whole0 = and i1 %cand, %no_kept
  %whole = and i1 %whole0, %inside
  br i1 %whole, label %g_whole, label %g_flush
g_whole:
  %extends = icmp eq i64 %mhi, %pa
  br i1 %extends, label %g_next, label %g_flush
g_flush:
  %mn = sub i64 %mhi, %mlo
  %many = icmp sgt i64 %mn, 0
  br i1 %many, label %g_madvise, label %g_after
g_madvise:
  %mp = inttoptr i64 %mlo to ptr
  %r = call i32 %madv(ptr %mp, i64 %mn, i32 %adv)
  br label %g_after
g_after:
  %did = phi i64 [0, %g_flush], [1, %g_madvise]
  %calls_f = add i64 %calls, %did
  br i1 %whole, label %g_next, label %g_part
g_part:
  br i1 %cand, label %g_partial, label %g_next
g_partial:
  ; a touched page with kept bytes, or reaching outside the run: the run's bytes there
  ; outside kept blocks are zeroed where one is not zero
  %x0 = icmp sgt i64 %pa, %base
  %x = select i1 %x0, i64 %pa, i64 %base
  %y0 = icmp slt i64 %pb, %end
  %y = select i1 %y0, i64 %pb, i64 %end
  %xo = sub i64 %x, %base
  %kb0 = udiv i64 %xo, %cs
  %yo = sub i64 %y, %base
  %yo1 = sub i64 %yo, 1
  %kb1 = udiv i64 %yo1, %cs
  br label %b_head
b_head:
  %kb = phi i64 [%kb0, %g_partial], [%kb2, %b_next]
  %b_more = icmp ule i64 %kb, %kb1
  br i1 %b_more, label %b_body, label %g_next
b_body:
  %bkq = getelementptr i8, ptr %kept, i64 %kb
  %bkv = load i8, ptr %bkq
  %bk_on = icmp ne i8 %bkv, 0
  br i1 %bk_on, label %b_next, label %b_check
b_check:
  %boff = mul i64 %kb, %cs
  %blo = add i64 %base, %boff
  %bhi = add i64 %blo, %cs
  %u0 = icmp sgt i64 %blo, %x
  %u = select i1 %u0, i64 %blo, i64 %x
  %v0 = icmp slt i64 %bhi, %y
  %v = select i1 %v0, i64 %bhi, i64 %y
  %un = sub i64 %v, %u
  %dirty = call i1 @any_set(i64 %u, i64 %un)
  br i1 %dirty, label %b_zero, label %b_next
b_zero:
  call void @zero(i64 %u, i64 %un)
  br label %b_next
b_next:
  %kb2 = add i64 %kb, 1
  br label %b_head
g_next:
  %mlo1 = phi i64 [%mlo, %g_whole], [%pa, %g_after], [%pa, %g_part], [%pa, %b_head]
  %mhi1 = phi i64 [%pb, %g_whole], [%pb, %g_after], [%pa, %g_part], [%pa, %b_head]
  %calls1 = phi i64 [%calls, %g_whole], [%calls_f, %g_after], [%calls_f, %g_part],
                    [%calls_f, %b_head]
  %g1 = add i64 %g, 1
  br label %g_head
g_done:
  %mn_f = sub i64 %mhi, %mlo
  %many_f = icmp sgt i64 %mn_f, 0
  br i1 %many_f, label %g_madvise_f, label %out
g_madvise_f:
  %mp_f = inttoptr i64 %mlo to ptr
  %r_f = call i32 %madv(ptr %mp_f, i64 %mn_f, i32 %adv)
  br label %out
out:
  %did_f = phi i64 [0, %g_done], [1, %g_madvise_f]
  %calls_t = add i64 %calls, %did_f
  %o7 = getelementptr i64, ptr %args, i64 7
  store i64 %nact, ptr %o7
  %o8 = getelementptr i64, ptr %args, i64 8
  store i64 %left, ptr %o8
  %o9 = getelementptr i64, ptr %args, i64 9
  store i64 %calls_t, ptr %o9
  %o10 = getelementptr i64, ptr %args, i64 10
  store i64 %nkept, ptr %o10
  ret void
}
"""

ARGS = 11          # the i64 slots of fluxion_block_sweep's args
_fns = []          # (the machine code holding it, block_sweep), once built


def function():
    """fluxion_block_sweep as a ctypes function: compiled at the first call in a
    process that does not find them in the offline cache (runtime/cpu_jit.py's
    session_runtime_code, as the thread pool), then linked without LLVM where the object
    loader serves."""
    if not _fns:
        p = ctypes.c_void_p
        _fns.extend(sweep_ir.functions(
            _IR, "deactivate_all's block sweep", fluxion_block_sweep=[p] * 7))
    return _fns[1]


def madvise():
    """(the address of the C library's madvise, MADV_DONTNEED): looked up when a plan is
    made, not at import (reserved trees, and so plans, exist only where both do)."""
    return (ctypes.cast(ctypes.CDLL(None, use_errno=True).madvise, ctypes.c_void_p).value,
            mmap.MADV_DONTNEED)
