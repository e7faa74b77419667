"""Native thread pool for parallel loops, written in LLVM IR and compiled with llvmlite.

JIT-compiled kernels call `fluxion_parallel_for` directly; dispatching a loop then costs about a
microsecond and never touches Python (kernels are entered through ctypes, which releases the GIL).
No C compiler is involved: the pool is IR text, and the few libc functions it needs (pthreads,
`syscall` for futexes, signal masks) are resolved from the running process when its machine
code is linked (runtime/cpu_jit.py's runtime_code).

Protocol (all state is module globals of the pool's own machine code, so pools are independent):
  * one dispatch at a time owns `@lock`; a call that finds it taken (a nested call from a task,
    or a second Python thread) runs its range serially on its own thread, so nothing can deadlock;
  * `@gen` is a seqlock-like generation counter: odd while the dispatcher rewrites the job, even
    once it is published. The dispatcher publishes, wakes sleeping workers, and then takes chunks
    itself (fetch-add on `@job_next`) like every worker that joined;
  * a worker joins by incrementing `@active` and re-checking `@gen`, and leaves by decrementing
    it. The dispatcher returns once it finds no chunk left and `@active` at zero, so it never
    waits for a worker that is asleep or descheduled and holds no chunk; a late worker finds
    the job exhausted. Before rewriting the job, the next dispatch makes `@gen` odd (no one
    can join any more) and waits for `@active` to drain;
  * idle threads spin a little, then sleep on the futex of the word they wait for; the
    `*_sleep*` words let the waking side skip the syscall when nobody sleeps.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import weakref

from fluxion.runtime.thread_steering import steer_ir

MAX_WORKERS = 255      # threads besides the caller
SPIN = 4000            # pause-iterations before sleeping: roughly 50-200 us on current x86


def _arch(triple: str) -> str:
    return triple.split("-", 1)[0].lower()


def _futex_syscall_number(triple):
    arch = _arch(triple)
    if arch in ("x86_64", "amd64"):
        return 202
    if arch in ("aarch64", "arm64", "riscv64", "loongarch64"):   # the generic syscall table
        return 98
    return None


def pool_ir(triple: str, datalayout: str) -> str:
    """LLVM IR text of a module that defines:
       void fluxion_parallel_for(void (*task)(i8* closure, i64 lo, i64 hi, i64 worker),
                                 i8* closure, i64 begin, i64 end, i64 grain)
       (`worker` is the running thread's index: 0 for the caller, 1.. for the workers, so
       a task can keep per-thread data without atomics)
       void fluxion_pool_start(i32 nthreads)   ; idempotent; nthreads<=1: everything on the caller
       void fluxion_pool_stop()                ; joins the workers; may be started again after
       void fluxion_pool_after_fork()          ; in a forked child: forget the parent's workers
    """
    arch = _arch(triple)
    ftz, ftz_decl = "", ""
    if arch in ("x86_64", "amd64", "i386", "i686"):
        relax = "call void @llvm.x86.sse2.pause()"
        relax_decl = "declare void @llvm.x86.sse2.pause()"
        # workers run only kernel code: floating-point results that would be denormal are
        # flushed to zero there, as on the thread that launches (cpu_build.flush_to_zero)
        ftz = FTZ_ON_IR
        ftz_decl = FTZ_DECL_IR
    elif arch in ("aarch64", "arm64"):
        relax = "call void @llvm.aarch64.hint(i32 1)"     # YIELD
        relax_decl = "declare void @llvm.aarch64.hint(i32)"
    else:
        relax, relax_decl = "", ""   # the atomic load in each spin iteration is enough
    nr = _futex_syscall_number(triple)
    if nr is not None:
        # FUTEX_WAIT_PRIVATE = 128, FUTEX_WAKE_PRIVATE = 129; every wait re-checks its condition,
        # so spurious returns (EAGAIN, EINTR) are harmless.
        futex = f"""
define internal void @futex_wait(ptr %addr, i32 %val) {{
  %v = zext i32 %val to i64
  %r = call i64 (i64, ...) @syscall(i64 {nr}, ptr %addr, i64 128, i64 %v, ptr null, ptr null, i64 0)
  ret void
}}
define internal void @futex_wake(ptr %addr, i32 %count) {{
  %c = zext i32 %count to i64
  %r = call i64 (i64, ...) @syscall(i64 {nr}, ptr %addr, i64 129, i64 %c, ptr null, ptr null, i64 0)
  ret void
}}"""
    else:
        # Unknown syscall table: sleeping degrades to yielding, which is still correct.
        futex = """
define internal void @futex_wait(ptr %addr, i32 %val) {
  %r = call i32 @sched_yield()
  ret void
}
define internal void @futex_wake(ptr %addr, i32 %count) {
  ret void
}"""
    text = _IR.replace("@@FUTEX@@", futex).replace("@@RELAX@@", relax)
    text = text.replace("@@STEER@@", steer_ir(triple))
    text = text.replace("@@RELAX_DECL@@", relax_decl + "\n" + ftz_decl)
    text = text.replace("@@FTZ@@", ftz)
    text = text.replace("@@SPIN@@", str(SPIN)).replace("@@MAXW@@", str(MAX_WORKERS))
    return f'target triple = "{triple}"\ntarget datalayout = "{datalayout}"\n' + text


# MXCSR's flush-to-zero bit (15): SSE/AVX results that would be denormal become zero, as on
# the original system, which sets it (alone: denormal inputs still count, no DAZ)
MXCSR_FTZ = 0x8000
FTZ_DECL_IR = "declare void @llvm.x86.sse.stmxcsr(ptr)\ndeclare void @llvm.x86.sse.ldmxcsr(ptr)"
FTZ_ON_IR = f"""%csr = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %csr)
  %csr0 = load i32, ptr %csr
  %csr1 = or i32 %csr0, {MXCSR_FTZ}
  store i32 %csr1, ptr %csr
  call void @llvm.x86.sse.ldmxcsr(ptr %csr)"""


_IR = r"""
; pthread_t is an unsigned long on Linux (glibc and musl, all 64-bit targets)
@workers = internal global [@@MAXW@@ x i64] zeroinitializer
@nworkers = internal global i32 0, align 64   ; 0: no pool, loops run on the caller
@lock = internal global i32 0, align 64       ; held by the dispatch in flight and by start/stop
@quit = internal global i32 0
; the job: rewritten only while @gen is odd and nobody is @active
@gen = internal global i32 0, align 64        ; futex word of idle workers
@job_task = internal global ptr null
@job_closure = internal global ptr null
@job_begin = internal global i64 0
@job_n = internal global i64 0
@job_chunk = internal global i64 1
@gen_sleepers = internal global i32 0, align 64
@job_next = internal global i64 0, align 64   ; contended fetch-add: its own cache line
@active = internal global i32 0, align 64     ; workers inside the job; futex word of the dispatcher
@active_sleeper = internal global i32 0, align 64

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @sched_yield()
declare i64 @syscall(i64, ...)
declare i32 @sigfillset(ptr)
declare i32 @pthread_sigmask(i32, ptr, ptr)
@@RELAX_DECL@@
@@FUTEX@@
@@STEER@@

define internal void @cpu_relax() alwaysinline {
  @@RELAX@@
  ret void
}

; Start/stop wait for the lock (they are rare); dispatches only try it.
define internal void @lock_acquire() {
entry:
  br label %try
try:
  %r = cmpxchg ptr @lock, i32 0, i32 1 acquire monotonic
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %got, label %wait
wait:
  %y = call i32 @sched_yield()
  br label %try
got:
  ret void
}

define internal void @lock_release() {
  store atomic i32 0, ptr @lock release, align 4
  ret void
}

; Take chunks of the published job until none is left (dispatcher and workers alike).
; acq_rel: a chunk claim happens-before the dispatcher's failing claim, so the dispatcher's
; later look at @active cannot miss a worker that still runs a chunk.
define internal void @run_chunks(i64 %worker) {
entry:
  %task = load ptr, ptr @job_task
  %closure = load ptr, ptr @job_closure
  %begin = load i64, ptr @job_begin
  %n = load i64, ptr @job_n
  %chunk = load i64, ptr @job_chunk
  br label %next
next:
  %off = atomicrmw add ptr @job_next, i64 %chunk acq_rel
  %more = icmp slt i64 %off, %n
  br i1 %more, label %body, label %out
body:
  %stop0 = add i64 %off, %chunk
  %inside = icmp slt i64 %stop0, %n
  %stop = select i1 %inside, i64 %stop0, i64 %n
  %lo = add i64 %begin, %off
  %hi = add i64 %begin, %stop
  call void %task(ptr %closure, i64 %lo, i64 %hi, i64 %worker)
  br label %next
out:
  ret void
}

; Its argument is the (even) generation current when the worker was created, in the low 32
; bits, and the worker's index (1, 2, ...; the dispatcher is 0) above them.
define internal ptr @worker(ptr %arg) {
entry:
  @@FTZ@@
  %packed = ptrtoint ptr %arg to i64
  %g0 = trunc i64 %packed to i32
  %index = lshr i64 %packed, 32
  br label %wait
wait:
  %seen = phi i32 [ %g0, %entry ], [ %g, %left ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %relax ], [ 0, %slept ]
  %g = load atomic i32, ptr @gen acquire, align 4
  %changed = icmp ne i32 %g, %seen
  %parity = and i32 %g, 1
  %published = icmp eq i32 %parity, 0
  %new = and i1 %changed, %published
  br i1 %new, label %woken, label %idle
idle:
  %i1 = add i32 %i, 1
  %patient = icmp ult i32 %i1, @@SPIN@@
  br i1 %patient, label %relax, label %sleep
relax:
  call void @cpu_relax()
  br label %spin
sleep:
  ; announce, then re-check (both seq_cst): the dispatcher bumps @gen, then reads @gen_sleepers,
  ; so either it sees us and wakes us or we see its bump
  %s0 = atomicrmw add ptr @gen_sleepers, i32 1 seq_cst
  %g2 = load atomic i32, ptr @gen seq_cst, align 4
  %same = icmp eq i32 %g2, %seen
  br i1 %same, label %futex, label %slept
futex:
  call void @futex_wait(ptr @gen, i32 %seen)
  br label %slept
slept:
  %s1 = atomicrmw sub ptr @gen_sleepers, i32 1 seq_cst
  br label %spin
woken:
  %q = load atomic i32, ptr @quit monotonic, align 4
  %quit = icmp ne i32 %q, 0
  br i1 %quit, label %exit, label %join
join:
  ; enter, then make sure the job is still generation %g: if the next dispatch has made @gen
  ; odd since, it may be rewriting the job, so leave without reading it; if not, that dispatch
  ; will wait for us to leave before touching the job
  %a0 = atomicrmw add ptr @active, i32 1 seq_cst
  %g3 = load atomic i32, ptr @gen seq_cst, align 4
  %current = icmp eq i32 %g3, %g
  br i1 %current, label %run, label %leave
run:
  call void @run_chunks(i64 %index)
  br label %leave
leave:
  ; release: our task's writes travel to the dispatcher with this decrement
  %a1 = atomicrmw sub ptr @active, i32 1 seq_cst
  %last = icmp eq i32 %a1, 1
  br i1 %last, label %check_sleeper, label %left
check_sleeper:
  %ds = load atomic i32, ptr @active_sleeper seq_cst, align 4
  %asleep = icmp ne i32 %ds, 0
  br i1 %asleep, label %wake, label %left
wake:
  call void @futex_wake(ptr @active, i32 1)
  br label %left
left:
  br label %wait
exit:
  ret ptr null
}

; Wait until no worker is inside the job: spin, then sleep on @active (the dispatcher only).
define internal void @wait_inactive() {
entry:
  br label %check
check:
  %i = phi i32 [ 0, %entry ], [ %i1, %relax ], [ 0, %slept ]
  %a = load atomic i32, ptr @active acquire, align 4
  %none = icmp eq i32 %a, 0
  br i1 %none, label %out, label %idle
idle:
  %i1 = add i32 %i, 1
  %patient = icmp ult i32 %i1, @@SPIN@@
  br i1 %patient, label %relax, label %sleep
relax:
  call void @cpu_relax()
  br label %check
sleep:
  ; mirror of the workers' sleep: announce, re-check, sleep on the value seen
  store atomic i32 1, ptr @active_sleeper seq_cst, align 4
  %a2 = load atomic i32, ptr @active seq_cst, align 4
  %none2 = icmp eq i32 %a2, 0
  br i1 %none2, label %slept, label %futex
futex:
  call void @futex_wait(ptr @active, i32 %a2)
  br label %slept
slept:
  store atomic i32 0, ptr @active_sleeper monotonic, align 4
  br label %check
out:
  ret void
}

define void @fluxion_parallel_for(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain) {
entry:
  %empty = icmp sle i64 %end, %begin
  br i1 %empty, label %return, label %sized
sized:
  %n = sub i64 %end, %begin
  %small = icmp sle i64 %n, %grain
  br i1 %small, label %serial, label %check_pool
check_pool:
  %nw0 = load atomic i32, ptr @nworkers monotonic, align 4
  %nopool = icmp eq i32 %nw0, 0
  br i1 %nopool, label %serial, label %trylock
trylock:
  ; taken: nested call from a task, or another thread is dispatching -> run on this thread
  %r = cmpxchg ptr @lock, i32 0, i32 1 acquire monotonic
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %locked, label %serial
locked:
  %nw = load atomic i32, ptr @nworkers monotonic, align 4   ; stable while we hold the lock
  %gone = icmp eq i32 %nw, 0
  br i1 %gone, label %unlock_serial, label %dispatch
unlock_serial:
  call void @lock_release()
  br label %serial
dispatch:
  ; keep the workers off this CPU (runtime/thread_steering.py): a compare when it has not
  ; changed since the last dispatch
  call void @steer()
  ; close the previous job, and let late workers that found it exhausted leave
  %g0 = atomicrmw add ptr @gen, i32 1 seq_cst
  call void @wait_inactive()
  ; chunk = ceil(n / (4 * threads)): a few chunks per thread balance uneven work. When the
  ; grain (iterations worth a fetch-add) is longer, there are as many chunks as the grain
  ; allows, of equal length: 1024 iterations of grain 312 are 4 chunks of 256, not 312, 312,
  ; 312 and 88 (on 2 threads one of them did 624). (ceil keeps chunks >= 1)
  %t = add i32 %nw, 1
  %t64 = zext i32 %t to i64
  %parts = mul i64 %t64, 4
  %nm1 = sub i64 %n, 1
  %q = udiv i64 %nm1, %parts
  %share = add i64 %q, 1
  %bigger = icmp sgt i64 %grain, %share
  ; (a grain of 0 or less never divides: it is not the bigger one)
  %gsafe = select i1 %bigger, i64 %grain, i64 1
  %ng = add i64 %nm1, %gsafe
  %k = udiv i64 %ng, %gsafe
  %qe = udiv i64 %nm1, %k
  %even = add i64 %qe, 1
  %chunk = select i1 %bigger, i64 %even, i64 %share
  store ptr %task, ptr @job_task
  store ptr %closure, ptr @job_closure
  store i64 %begin, ptr @job_begin
  store i64 %n, ptr @job_n
  store i64 %chunk, ptr @job_chunk
  store atomic i64 0, ptr @job_next monotonic, align 8
  %g1 = atomicrmw add ptr @gen, i32 1 seq_cst   ; even again: publishes the job (release)
  %sl = load atomic i32, ptr @gen_sleepers seq_cst, align 4
  %anyasleep = icmp ne i32 %sl, 0
  br i1 %anyasleep, label %wake, label %participate
wake:
  call void @futex_wake(ptr @gen, i32 2147483647)
  br label %participate
participate:
  call void @run_chunks(i64 0)
  ; no chunk is left: wait for the workers still running one (acquire: their writes)
  call void @wait_inactive()
  call void @lock_release()
  br label %return
serial:
  call void %task(ptr %closure, i64 %begin, i64 %end, i64 0)
  br label %return
return:
  ret void
}

define void @fluxion_pool_start(i32 %nthreads) {
entry:
  call void @lock_acquire()
  %nw = load atomic i32, ptr @nworkers monotonic, align 4
  %running = icmp ne i32 %nw, 0
  %want0 = sub i32 %nthreads, 1
  %toomany = icmp sgt i32 %want0, @@MAXW@@
  %want = select i1 %toomany, i32 @@MAXW@@, i32 %want0
  %none = icmp slt i32 %want, 1
  %skip = or i1 %running, %none
  br i1 %skip, label %out, label %spawn
spawn:
  store atomic i32 0, ptr @quit monotonic, align 4
  call void @steer_init()
  %g = load atomic i32, ptr @gen monotonic, align 4
  %g64 = zext i32 %g to i64
  ; workers inherit a blocked signal mask, so asynchronous signals (Ctrl-C) keep going to
  ; threads that Python knows
  %all = alloca [128 x i8], align 8   ; sigset_t
  %old = alloca [128 x i8], align 8
  %f = call i32 @sigfillset(ptr %all)
  %m = call i32 @pthread_sigmask(i32 2, ptr %all, ptr %old)   ; SIG_SETMASK
  br label %loop
loop:
  %k = phi i32 [ 0, %spawn ], [ %k1, %created ]
  %more = icmp slt i32 %k, %want
  br i1 %more, label %create, label %spawned
create:
  %slot = getelementptr [@@MAXW@@ x i64], ptr @workers, i64 0, i32 %k
  %k64 = zext i32 %k to i64
  %index = add i64 %k64, 1
  %hi = shl i64 %index, 32
  %packed = or i64 %hi, %g64
  %arg = inttoptr i64 %packed to ptr
  %rc = call i32 @pthread_create(ptr %slot, ptr null, ptr @worker, ptr %arg)
  %created_ok = icmp eq i32 %rc, 0
  br i1 %created_ok, label %created, label %spawned
created:
  %k1 = add i32 %k, 1
  br label %loop
spawned:
  ; a failed pthread_create leaves a smaller pool, never a broken one
  %count = phi i32 [ %k, %loop ], [ %k, %create ]
  %m2 = call i32 @pthread_sigmask(i32 2, ptr %old, ptr null)
  store atomic i32 %count, ptr @nworkers monotonic, align 4
  br label %out
out:
  call void @lock_release()
  ret void
}

define void @fluxion_pool_stop() {
entry:
  call void @lock_acquire()
  %nw = load atomic i32, ptr @nworkers monotonic, align 4
  %running = icmp ne i32 %nw, 0
  br i1 %running, label %signal, label %out
signal:
  store atomic i32 1, ptr @quit monotonic, align 4
  %g = atomicrmw add ptr @gen, i32 2 seq_cst   ; a new even generation, whose job is "quit"
  call void @futex_wake(ptr @gen, i32 2147483647)
  br label %loop
loop:
  %k = phi i32 [ 0, %signal ], [ %k1, %join ]
  %more = icmp slt i32 %k, %nw
  br i1 %more, label %join, label %joined
join:
  %slot = getelementptr [@@MAXW@@ x i64], ptr @workers, i64 0, i32 %k
  %tid = load i64, ptr %slot
  %rc = call i32 @pthread_join(i64 %tid, ptr null)
  %k1 = add i32 %k, 1
  br label %loop
joined:
  store atomic i32 0, ptr @nworkers monotonic, align 4
  store atomic i32 0, ptr @quit monotonic, align 4
  br label %out
out:
  call void @lock_release()
  ret void
}

; A forked child has only the forking thread: the workers, and any dispatch in flight in another
; thread, are gone. Forget them; an odd @gen (job being written) is rounded to even.
define void @fluxion_pool_after_fork() {
  store atomic i32 0, ptr @nworkers monotonic, align 4
  store atomic i32 0, ptr @active monotonic, align 4
  store atomic i32 0, ptr @gen_sleepers monotonic, align 4
  store atomic i32 0, ptr @active_sleeper monotonic, align 4
  %g = load atomic i32, ptr @gen monotonic, align 4
  %g1 = add i32 %g, 1
  %even = and i32 %g1, -2
  store atomic i32 %even, ptr @gen monotonic, align 4
  store atomic i32 0, ptr @lock monotonic, align 4
  ret void
}
"""

_live = weakref.WeakSet()   # pools to stop at exit / to reset in forked children


class ThreadPool:
    """The pool running from `code`, the machine code of `pool_ir` linked into the process
    (runtime/cpu_jit.py's runtime_code: an object_loader.Image or an mcjit.Engine, anything
    with `address(name)`).

    Kernels call `fluxion_parallel_for` at `parallel_for_addr` (their objects are linked with
    it). `code` holds the workers' code, so it lives exactly as long as this object, and the
    workers are joined first. In a forked child the pool runs everything serially until
    `start()` is called again.
    """

    def __init__(self, code, nthreads: int):
        self.nthreads = max(1, int(nthreads))
        self._code = code
        addr = code.address
        self.parallel_for_addr = addr("fluxion_parallel_for")
        self.start_addr = addr("fluxion_pool_start")
        self.stop_addr = addr("fluxion_pool_stop")
        # CFUNCTYPE calls release the GIL: stop() blocks in pthread_join
        self._start = ctypes.CFUNCTYPE(None, ctypes.c_int32)(self.start_addr)
        self._stop = ctypes.CFUNCTYPE(None)(self.stop_addr)
        self._after_fork = ctypes.CFUNCTYPE(None)(addr("fluxion_pool_after_fork"))
        _live.add(self)
        self.start()

    def start(self, nthreads: int | None = None):
        """Start the workers (no-op while running); after stop() this restarts the pool."""
        if nthreads is not None:
            self.nthreads = max(1, int(nthreads))
        self._start(min(self.nthreads, MAX_WORKERS + 1))

    def stop(self):
        """Join the workers; later loops run on the caller until start(). Idempotent."""
        if getattr(self, "_stop", None) is not None:
            self._stop()

    def __del__(self):
        self.stop()


@atexit.register
def _stop_all():
    # Workers spin inside the pool's machine code: join them before interpreter teardown frees it.
    for pool in list(_live):
        pool.stop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: [p._after_fork() for p in list(_live)])
