"""The CUDA emulator's runtime, in LLVM IR: what its lanes run besides the kernels themselves.

The emulated CUDA target (codegen/targets.py) emits calls of these functions where the CUDA
target emits NVVM intrinsics:
- `emu_sreg_*`: the special registers, read from the running lane's record (a thread-local
  pointer, set by the launchers);
- `emu_barrier`: a barrier of the block's live threads (a thread that returned no longer
  counts, as on the device);
- `emu_shfl_down_*`: `shfl.sync.down` with a full mask, exchanged through the block's buffer
  between two barriers;
- `emu_device_ptr`: an address made from an integer, checked against device memory;
and the launchers `emu_run_serial` and `emu_run_threaded` (cuda_emulator.Device._run).
"""
from __future__ import annotations

MAX_BLOCK = 1024
# the functions kernels call (codegen/targets.py's EMULATED_CUDA names them; the device checks
# that each is here when it starts)
EXPORTS = ("emu_sreg_tid", "emu_sreg_ctaid", "emu_sreg_ntid", "emu_sreg_nctaid", "emu_barrier",
           "emu_shfl_down_i32", "emu_shfl_down_f32", "emu_device_ptr")

# --- the runtime: lanes, barriers, shuffles and launchers, in LLVM IR -----------------------------
# %Lane: tid, ctaid, ntid, nctaid, block, entry, ctx, out, temps
# %Block: mutex, condition, live threads, arrived, generation, exchange buffer
_RUNTIME = r"""
%Lane = type {{ i32, i32, i32, i32, ptr, ptr, ptr, ptr, ptr }}
%Block = type {{ [64 x i8], [64 x i8], i32, i32, i32, i32, [{maxb} x i64] }}

declare ptr @pthread_getspecific(i32)
declare i32 @pthread_setspecific(i32, ptr)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)

@bad_pointer = global i64 0
@arena_lo = global i64 0
@arena_hi = global i64 0

; an address a kernel computed from an integer (a context slot): it must lie in device memory
; (or be null, never dereferenced); the first one that does not is kept for the launch's error
define ptr @emu_device_ptr(i64 %v) {{
entry:
  %lo = load i64, ptr @arena_lo
  %hi = load i64, ptr @arena_hi
  %above = icmp uge i64 %v, %lo
  %below = icmp ult i64 %v, %hi
  %inside = and i1 %above, %below
  %null = icmp eq i64 %v, 0
  %fine = or i1 %inside, %null
  br i1 %fine, label %done, label %bad
bad:
  %seen = load i64, ptr @bad_pointer
  %first = icmp eq i64 %seen, 0
  %keep = select i1 %first, i64 %v, i64 %seen
  store i64 %keep, ptr @bad_pointer
  br label %done
done:
  %p = inttoptr i64 %v to ptr
  ret ptr %p
}}

define internal ptr @lane() {{
  %l = call ptr @pthread_getspecific(i32 {key})
  ret ptr %l
}}

define internal i32 @field(i32 %k) {{
  %l = call ptr @lane()
  %p = getelementptr i32, ptr %l, i32 %k
  %v = load i32, ptr %p
  ret i32 %v
}}

define i32 @emu_sreg_tid() {{
  %v = call i32 @field(i32 0)
  ret i32 %v
}}
define i32 @emu_sreg_ctaid() {{
  %v = call i32 @field(i32 1)
  ret i32 %v
}}
define i32 @emu_sreg_ntid() {{
  %v = call i32 @field(i32 2)
  ret i32 %v
}}
define i32 @emu_sreg_nctaid() {{
  %v = call i32 @field(i32 3)
  ret i32 %v
}}

; one arrival at the block's barrier; %leaving = 1: the thread ended and stops counting
define internal void @arrive(ptr %blk, i32 %leaving) {{
entry:
  %m = getelementptr %Block, ptr %blk, i32 0, i32 0
  %c = getelementptr %Block, ptr %blk, i32 0, i32 1
  %livep = getelementptr %Block, ptr %blk, i32 0, i32 2
  %arrp = getelementptr %Block, ptr %blk, i32 0, i32 3
  %genp = getelementptr %Block, ptr %blk, i32 0, i32 4
  call i32 @pthread_mutex_lock(ptr %m)
  %gen = load i32, ptr %genp
  %live0 = load i32, ptr %livep
  %live = sub i32 %live0, %leaving
  store i32 %live, ptr %livep
  %arr0 = load i32, ptr %arrp
  %staying = sub i32 1, %leaving
  %arr = add i32 %arr0, %staying
  store i32 %arr, ptr %arrp
  %full = icmp sge i32 %arr, %live
  %some = icmp sgt i32 %arr, 0
  %release = and i1 %full, %some
  br i1 %release, label %open, label %check
open:
  store i32 0, ptr %arrp
  %gen1 = add i32 %gen, 1
  store i32 %gen1, ptr %genp
  call i32 @pthread_cond_broadcast(ptr %c)
  br label %done
check:
  %isleaving = icmp ne i32 %leaving, 0
  br i1 %isleaving, label %done, label %wait
wait:
  call i32 @pthread_cond_wait(ptr %c, ptr %m)
  %gen2 = load i32, ptr %genp
  %same = icmp eq i32 %gen2, %gen
  br i1 %same, label %wait, label %done
done:
  call i32 @pthread_mutex_unlock(ptr %m)
  ret void
}}

define internal ptr @block_of(ptr %l) {{
  %bp = getelementptr %Lane, ptr %l, i32 0, i32 4
  %b = load ptr, ptr %bp
  ret ptr %b
}}

define void @emu_barrier() {{
  %l = call ptr @lane()
  %b = call ptr @block_of(ptr %l)
  call void @arrive(ptr %b, i32 0)
  ret void
}}

; shfl.sync.down with a full mask: lane + offset's value when that lane is in the warp (and the
; block), else one's own
define i32 @emu_shfl_down_i32(i32 %mask, i32 %v, i32 %off, i32 %clamp) {{
entry:
  %l = call ptr @lane()
  %b = call ptr @block_of(ptr %l)
  %tid = call i32 @field(i32 0)
  %ntid = call i32 @field(i32 2)
  %slot = getelementptr %Block, ptr %b, i32 0, i32 6, i32 %tid
  %wide = zext i32 %v to i64
  store i64 %wide, ptr %slot
  call void @arrive(ptr %b, i32 0)
  %laneid = and i32 %tid, 31
  %src = add i32 %laneid, %off
  %inwarp = icmp ule i32 %src, %clamp
  %other = add i32 %tid, %off
  %inblock = icmp ult i32 %other, %ntid
  br i1 %inwarp, label %present, label %keep
present:
  br i1 %inblock, label %take, label %absent
absent:
  ; no such lane (a partial warp): the device leaves the value undefined, so make it loud
  br label %keep
take:
  %oslot = getelementptr %Block, ptr %b, i32 0, i32 6, i32 %other
  %ov = load i64, ptr %oslot
  %o32 = trunc i64 %ov to i32
  br label %keep
keep:
  %r = phi i32 [ %v, %entry ], [ %o32, %take ], [ 2143289344, %absent ]
  call void @arrive(ptr %b, i32 0)
  ret i32 %r
}}

define float @emu_shfl_down_f32(i32 %mask, float %v, i32 %off, i32 %clamp) {{
  %bits = bitcast float %v to i32
  %r = call i32 @emu_shfl_down_i32(i32 %mask, i32 %bits, i32 %off, i32 %clamp)
  %f = bitcast i32 %r to float
  ret float %f
}}


; every lane of every block on the calling thread, one after another, the last first: the CPU
; backend runs indices in order, so a result that depends on the order of lanes (a race on a
; device) comes out differently here
define void @emu_run_serial(ptr %fn, ptr %ctx, ptr %out, ptr %temps, i32 %grid, i32 %block,
                            ptr %l) {{
entry:
  %ntidp = getelementptr %Lane, ptr %l, i32 0, i32 2
  store i32 %block, ptr %ntidp
  %nctaidp = getelementptr %Lane, ptr %l, i32 0, i32 3
  store i32 %grid, ptr %nctaidp
  call i32 @pthread_setspecific(i32 {key}, ptr %l)
  br label %blocks
blocks:
  %bi = phi i32 [ 0, %entry ], [ %bn, %blocks_next ]
  %bmore = icmp slt i32 %bi, %grid
  br i1 %bmore, label %threads, label %done
threads:
  %ti = phi i32 [ 0, %blocks ], [ %tn, %threads ]
  %tidp = getelementptr %Lane, ptr %l, i32 0, i32 0
  %tlast = sub i32 %block, 1
  %trev = sub i32 %tlast, %ti
  store i32 %trev, ptr %tidp
  %ctaidp = getelementptr %Lane, ptr %l, i32 0, i32 1
  %blast = sub i32 %grid, 1
  %brev = sub i32 %blast, %bi
  store i32 %brev, ptr %ctaidp
  call void %fn(ptr %ctx, ptr %out, ptr %temps)
  %tn = add i32 %ti, 1
  %tmore = icmp slt i32 %tn, %block
  br i1 %tmore, label %threads, label %blocks_next
blocks_next:
  %bn = add i32 %bi, 1
  br label %blocks
done:
  call i32 @pthread_setspecific(i32 {key}, ptr null)
  ret void
}}

define internal ptr @thread_main(ptr %l) {{
  call i32 @pthread_setspecific(i32 {key}, ptr %l)
  %ep = getelementptr %Lane, ptr %l, i32 0, i32 5
  %e = load ptr, ptr %ep
  %cp = getelementptr %Lane, ptr %l, i32 0, i32 6
  %c = load ptr, ptr %cp
  %op = getelementptr %Lane, ptr %l, i32 0, i32 7
  %o = load ptr, ptr %op
  %tp = getelementptr %Lane, ptr %l, i32 0, i32 8
  %t = load ptr, ptr %tp
  call void %e(ptr %c, ptr %o, ptr %t)
  %b = call ptr @block_of(ptr %l)
  call void @arrive(ptr %b, i32 1)
  ret ptr null
}}

; each block's lanes on their own threads (they meet at barriers); blocks one after another.
; %lanes: %block Lane records, %tids: %block thread handles, %blk: the block's record,
; %attr: the threads' attributes (their stack size).
; Returns 0, or the error of the first pthread_create that failed.
define i32 @emu_run_threaded(ptr %fn, ptr %ctx, ptr %out, ptr %temps, i32 %grid, i32 %block,
                             ptr %lanes, ptr %tids, ptr %blk, ptr %attr) {{
entry:
  br label %blocks
blocks:
  %bi = phi i32 [ 0, %entry ], [ %bn, %joined ]
  %bmore = icmp slt i32 %bi, %grid
  br i1 %bmore, label %setup, label %done
setup:
  %livep = getelementptr %Block, ptr %blk, i32 0, i32 2
  store i32 %block, ptr %livep
  %arrp = getelementptr %Block, ptr %blk, i32 0, i32 3
  store i32 0, ptr %arrp
  br label %spawn
spawn:
  %ti = phi i32 [ 0, %setup ], [ %tn, %spawned ]
  %l = getelementptr %Lane, ptr %lanes, i32 %ti
  %f0 = getelementptr %Lane, ptr %l, i32 0, i32 0
  store i32 %ti, ptr %f0
  %f1 = getelementptr %Lane, ptr %l, i32 0, i32 1
  store i32 %bi, ptr %f1
  %f2 = getelementptr %Lane, ptr %l, i32 0, i32 2
  store i32 %block, ptr %f2
  %f3 = getelementptr %Lane, ptr %l, i32 0, i32 3
  store i32 %grid, ptr %f3
  %f4 = getelementptr %Lane, ptr %l, i32 0, i32 4
  store ptr %blk, ptr %f4
  %f5 = getelementptr %Lane, ptr %l, i32 0, i32 5
  store ptr %fn, ptr %f5
  %f6 = getelementptr %Lane, ptr %l, i32 0, i32 6
  store ptr %ctx, ptr %f6
  %f7 = getelementptr %Lane, ptr %l, i32 0, i32 7
  store ptr %out, ptr %f7
  %f8 = getelementptr %Lane, ptr %l, i32 0, i32 8
  store ptr %temps, ptr %f8
  %th = getelementptr i64, ptr %tids, i32 %ti
  %err = call i32 @pthread_create(ptr %th, ptr %attr, ptr @thread_main, ptr %l)
  %failed = icmp ne i32 %err, 0
  br i1 %failed, label %fail, label %spawned
spawned:
  %tn = add i32 %ti, 1
  %tmore = icmp slt i32 %tn, %block
  br i1 %tmore, label %spawn, label %join
join:
  %ji = phi i32 [ 0, %spawned ], [ %jn, %join ]
  %jp = getelementptr i64, ptr %tids, i32 %ji
  %jh = load i64, ptr %jp
  call i32 @pthread_join(i64 %jh, ptr null)
  %jn = add i32 %ji, 1
  %jmore = icmp slt i32 %jn, %block
  br i1 %jmore, label %join, label %joined
joined:
  %bn = add i32 %bi, 1
  br label %blocks
fail:
  ret i32 %err
done:
  ret i32 0
}}
"""


def runtime_text(key, triple, datalayout):
    """The runtime module; `key`: the pthread key of the lanes' records."""
    return (f'target triple = "{triple}"\ntarget datalayout = "{datalayout}"\n'
            + _RUNTIME.format(key=key, maxb=MAX_BLOCK))
