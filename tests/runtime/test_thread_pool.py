"""The LLVM-IR thread pool on its own: tasks written in IR are dispatched through
`fluxion_parallel_for` (from ctypes and from JIT code) and every index must be visited exactly
once. A deadlock must fail the run, not hang it: a faulthandler watchdog kills the process."""
import ctypes
import faulthandler
import os
import threading
import time
import warnings

import llvmlite.binding as llvm
import numpy as np
import pytest

from fluxion.runtime import libcalls, mcjit, object_loader
from fluxion.runtime.thread_pool import ThreadPool, pool_ir

# the CPU backend's own machinery, independent of the session's backend: one run is enough
pytestmark = pytest.mark.cpu_only

WATCHDOG_S = 120

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()


def _tm():
    # an engine owns its target machine: one per engine
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)


def _code(linker="flat"):
    """The pool's machine code linked by fluxion's object loader (where it runs: x86-64
    Linux) or by MCJIT."""
    tm = _tm()
    obj = mcjit.emit_object(pool_ir(tm.triple, str(tm.target_data)))
    if linker == "flat" and object_loader.available():
        return object_loader.Image([obj], libcalls.address, "the thread pool")
    return mcjit.Engine([obj], {}, "the thread pool")


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class Closure(ctypes.Structure):
    _fields_ = [("counts", ctypes.c_void_p),   # i32 per index, atomically incremented
                ("out", ctypes.c_void_p),      # i64 per index: i*i
                ("calls", ctypes.c_void_p),    # i64: number of task calls (chunks)
                ("tids", ctypes.c_void_p),     # i64 per call: pthread_self()
                ("ntids", ctypes.c_int64),
                ("base", ctypes.c_int64),      # index of counts[0]
                ("shift", ctypes.c_int64)]     # 0: no extra work; else (i-base)>>shift spins


class NestedClosure(ctypes.Structure):
    _fields_ = [("pf", ctypes.c_void_p), ("counts", ctypes.c_void_p), ("inner", ctypes.c_int64)]


TASKS_IR = r"""
%closure = type { ptr, ptr, ptr, ptr, i64, i64, i64 }
%nested = type { ptr, ptr, i64 }
declare i64 @pthread_self()

define void @record(ptr %c, i64 %lo, i64 %hi) {
entry:
  %countsp = getelementptr %closure, ptr %c, i32 0, i32 0
  %counts = load ptr, ptr %countsp
  %outp = getelementptr %closure, ptr %c, i32 0, i32 1
  %out = load ptr, ptr %outp
  %callsp = getelementptr %closure, ptr %c, i32 0, i32 2
  %calls = load ptr, ptr %callsp
  %tidsp = getelementptr %closure, ptr %c, i32 0, i32 3
  %tids = load ptr, ptr %tidsp
  %ntidsp = getelementptr %closure, ptr %c, i32 0, i32 4
  %ntids = load i64, ptr %ntidsp
  %basep = getelementptr %closure, ptr %c, i32 0, i32 5
  %base = load i64, ptr %basep
  %shiftp = getelementptr %closure, ptr %c, i32 0, i32 6
  %shift = load i64, ptr %shiftp
  %k = atomicrmw add ptr %calls, i64 1 monotonic
  %fits = icmp slt i64 %k, %ntids
  br i1 %fits, label %tid, label %loop
tid:
  %self = call i64 @pthread_self()
  %slot = getelementptr i64, ptr %tids, i64 %k
  store i64 %self, ptr %slot
  br label %loop
loop:
  %i = phi i64 [ %lo, %entry ], [ %lo, %tid ], [ %i1, %worked ]
  %idx = sub i64 %i, %base
  %cp = getelementptr i32, ptr %counts, i64 %idx
  %old = atomicrmw add ptr %cp, i32 1 monotonic
  %op = getelementptr i64, ptr %out, i64 %idx
  %sq = mul i64 %i, %i
  store i64 %sq, ptr %op
  %heavy = icmp ne i64 %shift, 0
  %amount = lshr i64 %idx, %shift
  %spins = select i1 %heavy, i64 %amount, i64 0
  br label %work
work:
  %j = phi i64 [ 0, %loop ], [ %j1, %spin ]
  %more = icmp slt i64 %j, %spins
  br i1 %more, label %spin, label %worked
spin:
  %v = load volatile i64, ptr %op
  %j1 = add i64 %j, 1
  br label %work
worked:
  %i1 = add i64 %i, 1
  %again = icmp slt i64 %i1, %hi
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

; out[i] = the index of the worker that ran i (a 4th argument, ignored by the other tasks)
define void @whoami(ptr %out, i64 %lo, i64 %hi, i64 %worker) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %lo, %entry ], [ %i1, %loop ]
  %p = getelementptr i64, ptr %out, i64 %i
  store i64 %worker, ptr %p
  %i1 = add i64 %i, 1
  %again = icmp slt i64 %i1, %hi
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

define void @empty(ptr %c, i64 %lo, i64 %hi) {
  ret void
}

; task of the inner loops: closure = a row of i32 counters
define void @inner(ptr %row, i64 %lo, i64 %hi) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %lo, %entry ], [ %i1, %loop ]
  %p = getelementptr i32, ptr %row, i64 %i
  %old = atomicrmw add ptr %p, i32 1 monotonic
  %i1 = add i64 %i, 1
  %again = icmp slt i64 %i1, %hi
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

; every outer index runs a parallel loop of its own
define void @outer(ptr %c, i64 %lo, i64 %hi) {
entry:
  %pfp = getelementptr %nested, ptr %c, i32 0, i32 0
  %pf = load ptr, ptr %pfp
  %countsp = getelementptr %nested, ptr %c, i32 0, i32 1
  %counts = load ptr, ptr %countsp
  %innerp = getelementptr %nested, ptr %c, i32 0, i32 2
  %inner = load i64, ptr %innerp
  br label %loop
loop:
  %i = phi i64 [ %lo, %entry ], [ %i1, %loop ]
  %off = mul i64 %i, %inner
  %row = getelementptr i32, ptr %counts, i64 %off
  call void %pf(ptr @inner, ptr %row, i64 0, i64 %inner, i64 1)
  %i1 = add i64 %i, 1
  %again = icmp slt i64 %i1, %hi
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

; back-to-back dispatches from JIT code, with no ctypes in between
define void @bench(ptr %pf, i64 %iters, i64 %n, i64 %grain) {
entry:
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
  call void %pf(ptr @empty, ptr null, i64 0, i64 %n, i64 %grain)
  %k1 = add i64 %k, 1
  %again = icmp slt i64 %k1, %iters
  br i1 %again, label %loop, label %exit
exit:
  ret void
}
"""

PF = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                      ctypes.c_int64)
BENCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


@pytest.fixture(scope="module")
def tasks():
    tm = _tm()
    mod = llvm.parse_assembly(f'target triple = "{tm.triple}"\n'
                              f'target datalayout = "{tm.target_data}"\n' + TASKS_IR)
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    addrs = {name: engine.get_function_address(name)
             for name in ("record", "empty", "inner", "outer", "bench", "whoami")}
    addrs["engine"] = engine   # keeps the code alive
    return addrs


@pytest.fixture(params=[(1, "flat"), (2, "flat"), (4, "flat"), (2, "mcjit")],
                ids=lambda p: f"threads{p[0]}-{p[1]}")
def pool(request):
    p = ThreadPool(_code(request.param[1]), request.param[0])
    yield p
    p.stop()


def run_record(pool, tasks, begin, end, grain, shift=0, ntids=1024):
    """Dispatch @record over [begin, end); returns (counts, out, calls, tids seen)."""
    size = max(end - begin, 0)
    counts = np.zeros(size + 1, np.int32)   # +1: never a zero-length buffer
    out = np.full(size + 1, -1, np.int64)
    calls = np.zeros(1, np.int64)
    tids = np.zeros(ntids, np.uint64)
    cl = Closure(counts.ctypes.data, out.ctypes.data, calls.ctypes.data, tids.ctypes.data,
                 ntids, begin, shift)
    PF(pool.parallel_for_addr)(tasks["record"], ctypes.addressof(cl), begin, end, grain)
    ncalls = int(calls[0])
    return counts[:size], out[:size], ncalls, set(tids[:min(ncalls, ntids)].tolist())


def check_exactly_once(counts, out, begin, end):
    idx = np.arange(begin, end, dtype=np.int64)
    np.testing.assert_array_equal(counts, np.ones(len(idx), np.int32))
    np.testing.assert_array_equal(out, idx * idx)


GRAIN = 64
RANGES = [(0, 0), (5, 3), (0, 1), (0, GRAIN - 1), (0, GRAIN), (0, GRAIN + 1), (0, 1_000_000),
          (-37, 1001), (3, 100_003), (1, 2 * GRAIN + 1)]


@pytest.mark.parametrize("begin,end", RANGES, ids=[f"{b}:{e}" for b, e in RANGES])
def test_every_index_exactly_once(pool, tasks, begin, end):
    counts, out, calls, _ = run_record(pool, tasks, begin, end, GRAIN)
    check_exactly_once(counts, out, begin, end)
    n = max(end - begin, 0)
    if n == 0:
        assert calls == 0
    elif n <= GRAIN or pool.nthreads == 1:
        assert calls == 1    # run directly on the caller, in one piece
    else:
        assert calls >= 2    # split into at most ceil(n / grain) chunks (of equal length)
        assert calls <= -(-n // GRAIN)


@pytest.mark.parametrize("grain", [-5, 0, 1, 3, 10**12])
def test_grain_extremes(pool, tasks, grain):
    counts, out, calls, _ = run_record(pool, tasks, 10, 10_010, grain)
    check_exactly_once(counts, out, 10, 10_010)
    assert calls >= 1


def test_unbalanced_work(pool, tasks):
    # the cost of index i grows with i: dynamic chunks must still cover everything once
    counts, out, _, _ = run_record(pool, tasks, 0, 30_000, 16, shift=4)
    check_exactly_once(counts, out, 0, 30_000)


def test_workers_take_part(tasks):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores")
    p = ThreadPool(_code(), 2)
    try:
        seen = set()
        for _ in range(50):   # a heavy loop; the worker only needs to win one chunk once
            counts, out, _, tids = run_record(p, tasks, 0, 20_000, 16, shift=3)
            check_exactly_once(counts, out, 0, 20_000)
            seen |= tids
            if len(seen) >= 2:
                break
        assert len(seen) >= 2
    finally:
        p.stop()


def test_many_small_dispatches(pool, tasks):
    n, reps = 200, 10_000
    counts = np.zeros(n, np.int32)
    out = np.zeros(n, np.int64)
    calls = np.zeros(1, np.int64)
    cl = Closure(counts.ctypes.data, out.ctypes.data, calls.ctypes.data, 0, 0, 0, 0)
    pf = PF(pool.parallel_for_addr)
    for _ in range(reps):
        pf(tasks["record"], ctypes.addressof(cl), 0, n, 8)
    np.testing.assert_array_equal(counts, np.full(n, reps, np.int32))
    # and from JIT code, back to back
    BENCH(tasks["bench"])(pool.parallel_for_addr, 100_000, 1000, 8)


def test_stop_and_restart(tasks):
    p = ThreadPool(_code(), 2)
    try:
        for _ in range(3):
            counts, out, calls, _ = run_record(p, tasks, 0, 50_000, 100)
            check_exactly_once(counts, out, 0, 50_000)
            assert calls > 1
            p.stop()
            p.stop()   # idempotent
            counts, out, calls, _ = run_record(p, tasks, 0, 50_000, 100)
            check_exactly_once(counts, out, 0, 50_000)
            assert calls == 1   # stopped: runs on the caller
            p.start()
            p.start()  # idempotent
    finally:
        p.stop()


def test_nested_calls_do_not_deadlock(pool, tasks):
    outer, inner = 300, 500
    counts = np.zeros(outer * inner, np.int32)
    cl = NestedClosure(pool.parallel_for_addr, counts.ctypes.data, inner)
    for _ in range(20):
        PF(pool.parallel_for_addr)(tasks["outer"], ctypes.addressof(cl), 0, outer, 1)
    np.testing.assert_array_equal(counts, np.full(outer * inner, 20, np.int32))


def test_concurrent_python_threads(pool, tasks):
    errors = []

    def client(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(100):
                begin = int(rng.integers(-1000, 1000))
                end = begin + int(rng.integers(0, 20_000))
                counts, out, _, _ = run_record(pool, tasks, begin, end, 32)
                check_exactly_once(counts, out, begin, end)
        except Exception as e:   # noqa: BLE001 -- reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=client, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_kernel_module_resolves_symbol(tasks):
    """The documented use: a module declares fluxion_parallel_for and MCJIT resolves it."""
    p = ThreadPool(_code(), 2)
    previous = llvm.address_of_symbol("fluxion_parallel_for")
    try:
        llvm.add_symbol("fluxion_parallel_for", p.parallel_for_addr)
        tm = _tm()
        mod = llvm.parse_assembly(f'target triple = "{tm.triple}"\n' + r"""
declare void @fluxion_parallel_for(ptr, ptr, i64, i64, i64)
define void @launch(ptr %task, ptr %closure, i64 %n) {
  call void @fluxion_parallel_for(ptr %task, ptr %closure, i64 0, i64 %n, i64 16)
  ret void
}""")
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        n = 100_000
        counts = np.zeros(n, np.int32)
        out = np.zeros(n, np.int64)
        calls = np.zeros(1, np.int64)
        cl = Closure(counts.ctypes.data, out.ctypes.data, calls.ctypes.data, 0, 0, 0, 0)
        launch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
            engine.get_function_address("launch"))
        launch(tasks["record"], ctypes.addressof(cl), n)
        check_exactly_once(counts, out, 0, n)
        assert calls[0] > 1
    finally:
        if previous:   # other runtimes in this process resolve through the same symbol
            llvm.add_symbol("fluxion_parallel_for", previous)
        p.stop()


def _thread_ids():
    return set(os.listdir("/proc/self/task"))


def _state(tid):
    """The scheduler's state of thread `tid` of this process: 'R' running, 'S' asleep..."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_idle_workers_sleep(tasks):
    # idle workers spin briefly, then sleep on a futex: the kernel reports them asleep (a
    # worker that kept spinning would stay runnable). No time is measured: the check waits,
    # with a generous bound, for the state the workers must reach.
    before = _thread_ids()
    p = ThreadPool(_code(), 3)
    try:
        workers = _thread_ids() - before
        assert len(workers) == 2
        run_record(p, tasks, 0, 100_000, 16)
        states = None
        for _ in range(3000):
            states = [_state(t) for t in workers]
            if all(s == "S" for s in states):
                break
            time.sleep(0.01)
        assert all(s == "S" for s in states), states
        # and sleeping workers wake up for the next loop
        counts, out, _, _ = run_record(p, tasks, 0, 100_000, 16)
        check_exactly_once(counts, out, 0, 100_000)
    finally:
        p.stop()


def _wait_asleep(workers):
    for _ in range(3000):
        if all(_state(t) == "S" for t in workers):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or not hasattr(os, "sched_getaffinity")
                    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two CPUs")
def test_woken_workers_are_kept_off_the_dispatchers_cpu(tasks):
    # (runtime/thread_steering.py) a dispatch gives each worker the process's CPUs less the
    # one the dispatcher runs on, so that the scheduler cannot queue a woken worker behind
    # the dispatcher nor leave them on one CPU; this thread is pinned to know which that is
    allowed = os.sched_getaffinity(0)
    before = _thread_ids()
    p = ThreadPool(_code(), 3)
    try:
        workers = [int(t) for t in _thread_ids() - before]
        assert len(workers) == 2
        assert all(os.sched_getaffinity(t) == allowed for t in workers)   # (none woken yet)
        for cpu in (max(allowed), min(allowed)):
            os.sched_setaffinity(0, {cpu})
            sets = None
            for _ in range(20):
                assert _wait_asleep(workers)
                counts, out, _, _ = run_record(p, tasks, 0, 100_000, 16)
                check_exactly_once(counts, out, 0, 100_000)
                sets = [os.sched_getaffinity(t) for t in workers]
                if all(s == allowed - {cpu} for s in sets):
                    break
            assert sets == [allowed - {cpu}] * 2, (cpu, sets)
        # and dispatches microseconds apart (the workers mostly still spinning), the
        # dispatcher moving between them
        n = 2000
        counts, out, calls = np.zeros(n, np.int32), np.zeros(n, np.int64), np.zeros(1, np.int64)
        cl = Closure(counts.ctypes.data, out.ctypes.data, calls.ctypes.data, 0, 0, 0, 0)
        pf, at, task = PF(p.parallel_for_addr), ctypes.addressof(cl), tasks["record"]
        two = (min(allowed), max(allowed))
        seen = []
        for k in range(200):
            os.sched_setaffinity(0, {two[k % 2]})
            pf(task, at, 0, n, 8)
            if k % 20 == 19:
                seen.append([os.sched_getaffinity(t) for t in workers])
        np.testing.assert_array_equal(counts, np.full(n, 200, np.int32))
        assert all(s == [allowed - {two[1]}] * 2 for s in seen), seen
    finally:
        p.stop()
        os.sched_setaffinity(0, allowed)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or not hasattr(os, "sched_getaffinity")
                    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two CPUs")
def test_workers_of_a_one_cpu_process_are_not_steered(tasks):
    # must not fire: with one CPU allowed there is no other CPU to send a worker to, and a
    # worker's set must never become empty
    allowed = os.sched_getaffinity(0)
    one = {min(allowed)}
    os.sched_setaffinity(0, one)           # this thread, which starts the pool and dispatches
    before = _thread_ids()
    p = ThreadPool(_code(), 3)
    try:
        workers = [int(t) for t in _thread_ids() - before]
        for _ in range(3):
            assert _wait_asleep(workers)
            counts, out, _, _ = run_record(p, tasks, 0, 100_000, 16)
            check_exactly_once(counts, out, 0, 100_000)
            assert all(os.sched_getaffinity(t) == one for t in workers)
    finally:
        p.stop()
        os.sched_setaffinity(0, allowed)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_serially(tasks):
    p = ThreadPool(_code(), 2)
    try:
        run_record(p, tasks, 0, 10_000, 16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # fork with threads
            pid = os.fork()
        if pid == 0:   # child: the workers did not survive the fork
            status = 1
            try:
                counts, out, calls, _ = run_record(p, tasks, 0, 10_000, 16)
                status = 0 if (counts == 1).all() and calls == 1 else 2
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        counts, out, _, _ = run_record(p, tasks, 0, 10_000, 16)
        check_exactly_once(counts, out, 0, 10_000)
    finally:
        p.stop()


@pytest.mark.parametrize("triple", ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu",
                                    "riscv64-unknown-linux-gnu", "powerpc64le-unknown-linux-gnu",
                                    "x86_64-apple-darwin", "aarch64-unknown-freebsd"])
def test_ir_parses_for_other_targets(triple):
    mod = llvm.parse_assembly(pool_ir(triple, ""))
    mod.verify()
    names = {f.name for f in mod.functions if not f.is_declaration}
    assert {"fluxion_parallel_for", "fluxion_pool_start", "fluxion_pool_stop"} <= names


def test_dispatch_overhead(tasks, capsys):
    """Measured, not asserted: an empty loop above the grain, with 2 threads."""
    p = ThreadPool(_code(), 2)
    serial = ThreadPool(_code(), 1)
    try:
        bench = BENCH(tasks["bench"])
        lines = []
        for name, pool, grain in (("2 threads", p, 1), ("caller only", serial, 1)):
            bench(pool.parallel_for_addr, 10_000, 1000, grain)   # warm up
            iters = 200_000
            t0 = time.perf_counter()
            bench(pool.parallel_for_addr, iters, 1000, grain)
            jit_us = (time.perf_counter() - t0) / iters * 1e6
            pf = PF(pool.parallel_for_addr)
            iters = 50_000
            t0 = time.perf_counter()
            for _ in range(iters):
                pf(tasks["empty"], None, 0, 1000, grain)
            ctypes_us = (time.perf_counter() - t0) / iters * 1e6
            lines.append(f"  {name}: {jit_us:.3f} us per dispatch from JIT code, "
                         f"{ctypes_us:.3f} us per call from Python via ctypes")
        with capsys.disabled():
            print("\nfluxion_parallel_for overhead, empty task over [0, 1000), grain 1:")
            print("\n".join(lines))
    finally:
        p.stop()
        serial.stop()


def test_tasks_get_the_index_of_their_thread(pool, tasks):
    # per-thread copies (passes/scatter.py) are indexed by it: it must stay below the thread
    # count
    n, grain = 200_000, 1000
    out = np.full(n, -1, np.int64)
    PF(pool.parallel_for_addr)(tasks["whoami"], out.ctypes.data, 0, n, grain)
    assert out.min() >= 0 and out.max() < pool.nthreads


def test_the_pool_is_compiled_once_a_process(monkeypatch):
    # every ti.init makes a new pool; its machine code is made once a process (it was
    # compiled again at each ti.init without the offline cache: about 45 ms each)
    import fluxion as ti
    from fluxion._llvm import llvm as lazy_llvm
    from fluxion.runtime import cpu_jit

    compiled = []                       # the pool's IR read by LLVM: it is compiled
    real = llvm.parse_assembly

    def parse(text, *a, **kw):
        if "fluxion_pool_start" in text:
            compiled.append(1)
        return real(text, *a, **kw)

    monkeypatch.setattr(lazy_llvm, "parse_assembly", parse)
    monkeypatch.setattr(cpu_jit, "_runtime_objects", {})
    for _ in range(3):
        ti.init(arch=ti.cpu, offline_cache=False, cpu_max_num_threads=2)
        x = ti.field(ti.i32, shape=1000)

        @ti.kernel
        def fill():
            for i in x:
                x[i] = i * 3

        fill()
        np.testing.assert_array_equal(x.to_numpy(), np.arange(1000) * 3)
        ti.reset()
    assert compiled == [1]
