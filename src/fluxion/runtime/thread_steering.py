"""Where the workers run: the thread pool's `@steer` (LLVM IR), on Linux.

A worker that slept on its futex is woken by the dispatching thread, which then takes
chunks of the job itself. Linux puts the woken thread on an idle CPU near the waker's when
it sees one, but in a virtual machine a vCPU that has halted while idle looks busy to the
guest's scheduler (its steal-time record marks it preempted), so the worker is queued on
the waker's own CPU, behind the dispatcher that keeps that CPU busy. It runs only at the
next tick or rebalance, after the dispatcher has done the whole job alone: measured on a
2-vCPU KVM machine, a 1.9 ms parallel loop took 3.8 ms when called 20 ms after the last one
(every call that follows an idle pause: a frame of an interactive program, a step after I/O).
Awake workers can share the dispatcher's CPU too: the scheduler moves the launching thread
where a spinning worker runs and leaves them there for a while (a particle-binning kernel
took 5 to 8 ms for tens of calls in a row instead of 1.9, on main before this module).

So each dispatch keeps the workers off its own CPU: each worker's CPU set becomes the
process's CPU set (taken when the pool starts) less the CPU the dispatcher runs on. A
dispatch costs one `sched_getcpu` (the thread's rseq area in glibc 2.35 and later, else the
vDSO: no system call) and a compare; one `pthread_setaffinity_np` per worker
follows only when the dispatcher has moved to another CPU since the last dispatch (a worker
running elsewhere then moves). With the workers steered, the loop above took 1.95 ms after
the pause. A process restricted to one CPU, or a dispatcher found on a CPU outside the set,
leaves the workers' sets alone.
"""

CPU_SET_BYTES = 128   # glibc's cpu_set_t: 1024 CPUs

STEER_IR = """
@allowed = internal global [16 x i64] zeroinitializer, align 8   ; the process's CPUs at start
@steered = internal global i32 -1   ; the dispatcher's CPU the workers were last kept off

declare i32 @sched_getcpu()
declare i32 @sched_getaffinity(i32, i64, ptr)
declare i32 @pthread_setaffinity_np(i64, i64, ptr)

; At pool start (lock held): remember the CPUs the process may use; nothing steered yet.
define internal void @steer_init() {
  %r = call i32 @sched_getaffinity(i32 0, i64 128, ptr @allowed)
  %ok = icmp eq i32 %r, 0
  br i1 %ok, label %done, label %failed
failed:
  ; (unknown set: an empty one, which steers nothing)
  call void @llvm.memset.p0.i64(ptr @allowed, i8 0, i64 128, i1 false)
  br label %done
done:
  store i32 -1, ptr @steered
  ret void
}

; At each dispatch (lock held): keep the workers off this CPU.
define internal void @steer() {
entry:
  %mask = alloca [16 x i64], align 8
  %cpu = call i32 @sched_getcpu()
  %last = load i32, ptr @steered
  %same = icmp eq i32 %cpu, %last
  %outside = icmp uge i32 %cpu, 1024          ; (also -1: no answer)
  %skip = or i1 %same, %outside
  br i1 %skip, label %out, label %build
build:
  store i32 %cpu, ptr @steered
  call void @llvm.memcpy.p0.p0.i64(ptr %mask, ptr @allowed, i64 128, i1 false)
  %w = lshr i32 %cpu, 6
  %w64 = zext i32 %w to i64
  %wp = getelementptr [16 x i64], ptr %mask, i64 0, i64 %w64
  %word = load i64, ptr %wp
  %b = and i32 %cpu, 63
  %b64 = zext i32 %b to i64
  %bit = shl i64 1, %b64
  %has = and i64 %word, %bit
  %mine = icmp ne i64 %has, 0
  br i1 %mine, label %clear, label %out
clear:
  %nbit = xor i64 %bit, -1
  %word1 = and i64 %word, %nbit
  store i64 %word1, ptr %wp
  br label %any
any:
  ; another CPU left in the set? (else: one CPU, nothing to steer)
  %i = phi i32 [ 0, %clear ], [ %i1, %zero ]
  %ip = getelementptr [16 x i64], ptr %mask, i64 0, i32 %i
  %v = load i64, ptr %ip
  %some = icmp ne i64 %v, 0
  br i1 %some, label %loop, label %zero
zero:
  %i1 = add i32 %i, 1
  %more = icmp ult i32 %i1, 16
  br i1 %more, label %any, label %out
loop:
  %k = phi i32 [ 0, %any ], [ %k1, %set ]
  %nw = load atomic i32, ptr @nworkers monotonic, align 4
  %left = icmp slt i32 %k, %nw
  br i1 %left, label %set, label %out
set:
  %slot = getelementptr [@@MAXW@@ x i64], ptr @workers, i64 0, i32 %k
  %tid = load i64, ptr %slot
  %rc = call i32 @pthread_setaffinity_np(i64 %tid, i64 128, ptr %mask)
  %k1 = add i32 %k, 1
  br label %loop
out:
  ret void
}
"""

# elsewhere (no Linux CPU sets): waking places workers as the system likes
NO_STEER_IR = """
define internal void @steer_init() {
  ret void
}
define internal void @steer() {
  ret void
}
"""

DECLS_IR = """
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
"""


def steer_ir(triple: str) -> str:
    """The `@steer_init` and `@steer` functions for a pool compiled for `triple`."""
    if "linux" not in triple.lower():
        return NO_STEER_IR
    return DECLS_IR + STEER_IR
