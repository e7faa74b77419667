"""A thread pool written in LLVM IR: parallel loops are dispatched from JIT-compiled code to
worker threads (pthreads) that wait on a futex, so a dispatch involves no Python and no GIL.

    void fluxion_parallel_for(void (*task)(i8*, i64, i64), i8* closure, i64 begin, i64 end,
                              i64 grain)

splits [begin, end) into chunks taken from a shared atomic counter by the calling thread and
every worker. Each dispatch waits until every worker has seen it, which keeps the protocol
simple: a worker can never run a stale job. Workers spin briefly after a job (dispatches
often come in bursts) and then sleep on the generation counter.
"""
from __future__ import annotations

import llvmlite.binding as llvm

_SPIN = 20000   # polls before sleeping: a few tens of microseconds


def pool_ir(triple, datalayout, max_threads=256):
    futex = 98 if triple.startswith("aarch64") else 202
    pause = ("call void @llvm.x86.sse2.pause()" if triple.startswith("x86_64")
             else "call void asm sideeffect \"yield\", \"\"()" if triple.startswith("aarch64")
             else "")
    pause_decl = "declare void @llvm.x86.sse2.pause()" if triple.startswith("x86_64") else ""
    return f"""
target triple = "{triple}"
target datalayout = "{datalayout}"

@nthreads = internal global i32 1
@generation = internal global i32 0
@pending = internal global i32 0
@quit = internal global i32 0
@busy = internal global i32 0
@job_task = internal global ptr null
@job_closure = internal global ptr null
@job_next = internal global i64 0
@job_end = internal global i64 0
@job_chunk = internal global i64 1
@threads = internal global [{max_threads} x i64] zeroinitializer

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i64 @syscall(i64, ...)
{pause_decl}

define internal void @futex_wait(ptr %addr, i32 %val) {{
  %r = call i64 (i64, ...) @syscall(i64 {futex}, ptr %addr, i32 128, i32 %val, ptr null, ptr null, i32 0)
  ret void
}}

define internal void @futex_wake(ptr %addr, i32 %n) {{
  %r = call i64 (i64, ...) @syscall(i64 {futex}, ptr %addr, i32 129, i32 %n, ptr null, ptr null, i32 0)
  ret void
}}

; take chunks of the current job until it is exhausted
define internal void @run_chunks() {{
entry:
  %task = load ptr, ptr @job_task
  %clo = load ptr, ptr @job_closure
  %end = load i64, ptr @job_end
  %chunk = load i64, ptr @job_chunk
  br label %loop
loop:
  %lo = atomicrmw add ptr @job_next, i64 %chunk monotonic
  %more = icmp slt i64 %lo, %end
  br i1 %more, label %work, label %done
work:
  %hi0 = add i64 %lo, %chunk
  %over = icmp sgt i64 %hi0, %end
  %hi = select i1 %over, i64 %end, i64 %hi0
  call void %task(ptr %clo, i64 %lo, i64 %hi)
  br label %loop
done:
  ret void
}}

define internal ptr @worker(ptr %arg) {{
entry:
  %seen0 = load atomic i32, ptr @generation acquire, align 4
  br label %wait
wait:
  %seen = phi i32 [ %seen0, %entry ], [ %g, %finished ]
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %spin_more ], [ 0, %slept ]
  %cur = load atomic i32, ptr @generation acquire, align 4
  %changed = icmp ne i32 %cur, %seen
  br i1 %changed, label %job, label %spin_check
spin_check:
  %i1 = add i32 %i, 1
  %long = icmp sgt i32 %i1, {_SPIN}
  br i1 %long, label %sleep, label %spin_more
spin_more:
  {pause}
  br label %spin
sleep:
  call void @futex_wait(ptr @generation, i32 %seen)
  br label %slept
slept:
  br label %spin
job:
  %g = phi i32 [ %cur, %spin ]
  %q = load atomic i32, ptr @quit acquire, align 4
  %stop = icmp ne i32 %q, 0
  br i1 %stop, label %exit, label %run
run:
  call void @run_chunks()
  %left = atomicrmw sub ptr @pending, i32 1 acq_rel
  %last = icmp eq i32 %left, 1
  br i1 %last, label %wake, label %finished
wake:
  call void @futex_wake(ptr @pending, i32 1)
  br label %finished
finished:
  br label %wait
exit:
  ret ptr null
}}

define void @fluxion_pool_start(i32 %n) {{
entry:
  %old = load i32, ptr @nthreads
  %running = icmp sgt i32 %old, 1
  br i1 %running, label %done, label %start
start:
  store atomic i32 0, ptr @quit release, align 4
  %cap = icmp sgt i32 %n, {max_threads}
  %n1 = select i1 %cap, i32 {max_threads}, i32 %n
  store i32 %n1, ptr @nthreads
  br label %loop
loop:
  %k = phi i32 [ 1, %start ], [ %k1, %body ]
  %more = icmp slt i32 %k, %n1
  br i1 %more, label %body, label %done
body:
  %slot = getelementptr [{max_threads} x i64], ptr @threads, i32 0, i32 %k
  %r = call i32 @pthread_create(ptr %slot, ptr null, ptr @worker, ptr null)
  %k1 = add i32 %k, 1
  br label %loop
done:
  ret void
}}

define void @fluxion_pool_stop() {{
entry:
  %n = load i32, ptr @nthreads
  %running = icmp sgt i32 %n, 1
  br i1 %running, label %stop, label %done
stop:
  store atomic i32 1, ptr @quit release, align 4
  %g = atomicrmw add ptr @generation, i32 1 acq_rel
  call void @futex_wake(ptr @generation, i32 2147483647)
  br label %loop
loop:
  %k = phi i32 [ 1, %stop ], [ %k1, %body ]
  %more = icmp slt i32 %k, %n
  br i1 %more, label %body, label %joined
body:
  %slot = getelementptr [{max_threads} x i64], ptr @threads, i32 0, i32 %k
  %t = load i64, ptr %slot
  %r = call i32 @pthread_join(i64 %t, ptr null)
  %k1 = add i32 %k, 1
  br label %loop
joined:
  store i32 1, ptr @nthreads
  br label %done
done:
  ret void
}}

define void @fluxion_parallel_for(ptr %task, ptr %closure, i64 %begin, i64 %end, i64 %grain) {{
entry:
  %n = sub i64 %end, %begin
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %check
check:
  %nt = load i32, ptr @nthreads
  %single = icmp sle i32 %nt, 1
  %small = icmp sle i64 %n, %grain
  %serial = or i1 %single, %small
  br i1 %serial, label %inline, label %lock
lock:
  ; a dispatch from inside a task, or from a second host thread, runs on its caller
  %pair = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %pair, 1
  br i1 %got, label %dispatch, label %inline
inline:
  call void %task(ptr %closure, i64 %begin, i64 %end)
  br label %done
dispatch:
  %nt64 = sext i32 %nt to i64
  %parts = mul i64 %nt64, 4
  %c0 = sdiv i64 %n, %parts
  %c1 = icmp sgt i64 %c0, %grain
  %chunk = select i1 %c1, i64 %c0, i64 %grain
  store ptr %task, ptr @job_task
  store ptr %closure, ptr @job_closure
  store i64 %end, ptr @job_end
  store i64 %chunk, ptr @job_chunk
  store i64 %begin, ptr @job_next
  %workers = sub i32 %nt, 1
  store atomic i32 %workers, ptr @pending release, align 4
  %g = atomicrmw add ptr @generation, i32 1 acq_rel
  call void @futex_wake(ptr @generation, i32 2147483647)
  call void @run_chunks()
  br label %wait
wait:
  %i = phi i32 [ 0, %dispatch ], [ %i1, %spin ], [ 0, %sleep ]
  %p = load atomic i32, ptr @pending acquire, align 4
  %all = icmp eq i32 %p, 0
  br i1 %all, label %release, label %spin_check
spin_check:
  %i1 = add i32 %i, 1
  %long = icmp sgt i32 %i1, {_SPIN}
  br i1 %long, label %sleep, label %spin
spin:
  {pause}
  br label %wait
sleep:
  call void @futex_wait(ptr @pending, i32 %p)
  br label %wait
release:
  store atomic i32 0, ptr @busy release, align 4
  br label %done
done:
  ret void
}}
"""


class ThreadPool:
    """The pool compiled into its own execution engine (which owns `target_machine`)."""

    def __init__(self, target_machine, nthreads):
        triple = llvm.get_process_triple()
        mod = llvm.parse_assembly(pool_ir(triple, str(target_machine.target_data)))
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, target_machine)
        self.engine.finalize_object()
        import ctypes
        self.parallel_for_addr = self.engine.get_function_address("fluxion_parallel_for")
        self._start = ctypes.CFUNCTYPE(None, ctypes.c_int32)(
            self.engine.get_function_address("fluxion_pool_start"))
        self._stop = ctypes.CFUNCTYPE(None)(self.engine.get_function_address("fluxion_pool_stop"))
        self.nthreads = nthreads
        self._start(nthreads)

    def stop(self):
        if self._stop is not None:
            self._stop()
            self._stop = None

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass
