"""A second process that optimizes and emits part of a kernel's LLVM module while this process
does the rest: LLVM's O3 pipeline and code generator are most of a cold compile, and llvmlite
serializes every call under one lock, so threads of one process cannot share the work.

The module is split by functions (`split_module`): some parallel tasks, defined with external
linkage, go to the worker's module; the rest stays here, declaring them. Each function's
machine code is the same as in the whole module (a task is only ever called through the
pointer given to the thread pool, so nothing interprocedural changes it; the tests compare
the code of both builds), and the objects are loaded into one engine
(runtime/object_blobs.py: an Artifact's code may hold several ELF objects). A large task may
also be sent as soon as it is lowered, before the rest of its module exists
(runtime/cpu_build.py's _EarlyParts); the worker answers its parts in the order sent.

The worker is started (`start`) when a process first compiles a kernel, so that it has loaded
LLVM by the time the first module is ready; it is one process per compiling process, fed
through its stdin and answering on its stdout. It exits when its stdin closes (the parent
exited) and, on Linux, is killed when the parent dies (if the main thread started it). Any
failure of the worker (it died, answered an error, or did not answer within `TIMEOUT`
seconds) makes this process compile that part itself, and no worker is used again. It is
used only while a core is free (`enabled`); `FLUXION_COMPILE_WORKER=0` turns it off, `=1`
on whatever the load.

This file is also the worker's program: run as a script, it imports nothing of fluxion
(importing the package costs about 200 ms), only the standard library and llvmlite's
bindings; so the code that both sides run (`make_machine`, `optimize_text`,
`compile_text`) takes llvmlite's binding module as an argument.
"""
from __future__ import annotations

import ast
import ctypes
import os
import pickle
import re
import struct
import subprocess
import sys
import threading

TIMEOUT = 120.0           # seconds to wait for the worker's answer before doing it here
# estimated cost (about 30 us of LLVM time a unit) that a part must have to be sent away:
# below it, the round trip and the worker's fixed cost per module are not worth it
MIN_SPLIT_COST = 1500
# what a task must cost to be sent as soon as it is lowered (runtime/cpu_build.py's
# _EarlyParts): the kind of task that is the longest part of its module's LLVM time, which
# the worker then starts before the module is whole. One that is merely worth a worker sent
# early could leave a larger one lowered after it to this process, on the critical path: the
# MLS-MPM substep's scatter (1,624; 307M instructions of LLVM) is lowered before its gather
# (4,913; 565M), and sending the scatter early made this process's part, the gather, longer
# than the worker's had been
MIN_EARLY_COST = 3000
# what more a part must cost, once the worker already has a task (sent as soon as it was
# lowered): the worker's fixed cost of a module is paid while this process compiles its own
MIN_EXTRA_COST = 150


# ---- shared by both processes -------------------------------------------------------------

def make_machine(llvm, options):
    """The target machine of `options` (codegen/targets.py's host_machine_options)."""
    opts = dict(options)
    target = llvm.Target.from_triple(opts.pop("triple"))
    return target.create_target_machine(**opts)


def optimized(llvm, tm, make, speed_level, **tuning):
    """The module that `make()` builds (fresh at each call) after LLVM's pipeline at
    `speed_level`, with the pipeline tuning options `tuning` (loop_vectorization=..., ...).

    LLVM 22's SLP vectorizer can leave a module whose instructions do not dominate their
    uses (tests/fuzz seed 22132: the forward-mode kernel of 3x3 matrices carried through a
    serial loop and inverted, 470 KB of LLVM text), on which code generation aborts the
    process. So the result is verified (about 1 ms for that module) and, where it is invalid,
    a fresh module is optimized again without the SLP vectorizer, then without the loop
    vectorizer too; a module that no pipeline leaves valid is a Python error."""
    for retry in ({}, {"slp_vectorization": False},
                  {"slp_vectorization": False, "loop_vectorization": False}):
        mod = make()
        pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
        for k, v in {**tuning, **retry}.items():
            setattr(pto, k, v)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        try:
            mod.verify()
            return mod
        except RuntimeError as e:
            err = e
    raise RuntimeError(f"LLVM's optimizer left an invalid module: {err}")


def optimize_text(llvm, tm, text, full):
    """The module `text` after LLVM's O3 pipeline, or with `full` false
    (advanced_optimization=False) its basic cleanups only (registers for locals, no
    vectorization or unrolling)."""
    def make():
        mod = llvm.parse_assembly(text)
        mod.verify()
        return mod
    return optimized(llvm, tm, make, 3 if full else 1, loop_vectorization=full,
                     slp_vectorization=full, loop_unrolling=full)


def compile_text(llvm, tm, text, full):
    """The object file (bytes) of the module `text`, verified and optimized."""
    return tm.emit_object(optimize_text(llvm, tm, text, full))


# ---- splitting a module ------------------------------------------------------------------

_DEFINE = re.compile(r'define (internal )?[^@]*@"([^"]+)"')
_MOVABLE = re.compile(r'_fluxion_(task|merge)[0-9]+$')
_NAMED = re.compile(r'@"([^"]+)"|@([-a-zA-Z$._][-a-zA-Z$._0-9]*)')
_CALLED = re.compile(r'call [^@\n]*@(?:"([^"]+)"|([-a-zA-Z$._][-a-zA-Z$._0-9]*))\(')
_BLOCK = re.compile(r'^"?[-a-zA-Z$._0-9]+"?:')
_FLOAT_OP = re.compile(r'= f(?:add|sub|mul|div|neg) ')


def _chunks(text):
    """The module's text as top-level pieces: (defined function's name or None, text)."""
    out = []
    cur = None
    for line in text.splitlines(keepends=True):
        if cur is not None:
            cur[1].append(line)
            if line.startswith("}"):
                out.append((cur[0], "".join(cur[1])))
                cur = None
            continue
        m = _DEFINE.match(line)
        if m:
            cur = (m.group(2), [line])
            if line.rstrip().endswith("}"):       # (a one-line definition)
                out.append((cur[0], line))
                cur = None
        else:
            out.append((None, line))
    if cur is not None:
        return None         # not text as the lowering writes it: leave it whole
    return out


def cost(body):
    """Estimated LLVM time of a function, in units of about 30 us: one a line, plus what the
    SLP vectorizer spends on long straight blocks of floating-point arithmetic (it grows with
    the block's length times its arithmetic: the MLS-MPM gather's one block of ~480
    instructions, half of them arithmetic, takes about half of that kernel's LLVM time)."""
    total = 0
    block = arith = 0
    for line in body.splitlines():
        if line.startswith("  "):
            block += 1
            if _FLOAT_OP.search(line):
                arith += 1
        elif _BLOCK.match(line) or line.startswith("}"):
            total += block_cost(block, arith)
            block = arith = 0
    return total


def block_cost(instructions, arith):
    """`cost`'s part for one basic block of `instructions`, `arith` of them floating-point
    arithmetic (the opcodes of FLOAT_OPS)."""
    return instructions + instructions * arith // 20


FLOAT_OPS = frozenset(("fadd", "fsub", "fmul", "fdiv", "fneg"))    # (as _FLOAT_OP matches)


def split_module(text, sent=None):
    """(this process's module text, the worker's), or None when the module is better compiled
    whole: no movable task worth sending. A task moves only if it refers to no other function
    or global that the module defines (it then needs nothing but declarations).

    `sent` ({name: cost}): tasks whose code was already asked of the worker, as soon as they
    were lowered (runtime/cpu_build.py). They are declared in this process's text and count
    on the worker's side when the rest is shared out; the worker's text is then None where
    nothing more is worth sending. None if one of them could not move after all (its
    compiled code is then not to be used)."""
    chunks = _chunks(text)
    if chunks is None:
        return None
    sent = sent or {}
    defined = {name for name, _ in chunks if name}
    for name, piece in chunks:
        if name is None and piece.startswith("@") and " external global " not in piece:
            defined.add(piece[1:].split("=", 1)[0].strip().strip('"'))
    costs = {}
    movable = []
    for name, piece in chunks:
        if name is None:
            continue
        costs[name] = cost(piece)
        head = piece.split("\n", 1)[0]
        if not head.startswith("define internal ") or not _MOVABLE.search(name):
            continue
        refs = {a or b for a, b in _NAMED.findall(piece)}
        if refs & defined == {name}:
            movable.append(name)
    # one that another function calls directly (rather than handing its address to the
    # pool) could be inlined there: it stays
    called = set()
    for name, piece in chunks:
        if name is not None:
            called.update(a or b for a, b in _CALLED.findall(piece))
    movable = [n for n in movable if n not in called]
    if not set(sent) <= set(movable):
        return None
    # the largest first, each to the lighter side
    here = sum(costs.values()) - sum(costs[n] for n in movable)
    there = sum(sent.values())
    away = set()
    for name in sorted((n for n in movable if n not in sent), key=lambda n: -costs[n]):
        if there < here:
            there += costs[name]
            away.add(name)
        else:
            here += costs[name]
    if not sent and (there < MIN_SPLIT_COST or not away):
        return None
    if sent and sum(costs[n] for n in away) < MIN_EXTRA_COST:
        away = set()
    mine, theirs = [], []
    for name, piece in chunks:
        if name is None:
            mine.append(piece)
            theirs.append(piece)
        elif name in away or name in sent:
            head = piece.split("\n", 1)[0]
            signature = head[len("define internal "):].rstrip().rstrip("{").rstrip()
            mine.append("declare " + signature + "\n")
            if name in away:
                theirs.append("define " + piece[len("define internal "):])
        else:
            mine.append(piece)
    return "".join(mine), ("".join(theirs) if away else None)


def is_task(name, linkage):
    """Whether the function `name` of `linkage` is a task that split_module could move
    (internal, named as a task), as far as those tell."""
    return linkage == "internal" and _MOVABLE.search(name) is not None


def references(name, piece):
    """The names that the function `name` (its text `piece`) refers to besides its own.
    Before its module is whole, a task may be sent to the worker only if all of these are
    names that the module merely declares (the caller checks that)."""
    return {a or b for a, b in _NAMED.findall(piece)} - {name}


# ---- this process's side -------------------------------------------------------------------

def enabled():
    """Whether a worker may be used: FLUXION_COMPILE_WORKER=0 never, =1 always, else (by
    default) when a core is free. A second process only helps if it gets a core of its own:
    on a machine whose cores are all busy it takes its CPU time from the compile it was
    to speed up (the cold first call of the MLS-MPM substep took longer with it at a load
    of 6 on 2 cores), so it is started and given work only while the load average leaves a
    core idle."""
    mode = os.environ.get("FLUXION_COMPILE_WORKER", "auto")
    if mode == "0":
        return False
    if mode == "1":
        return True
    return _free_core()


def running():
    """Whether a worker was started and not given up (it may still be loading LLVM)."""
    return _worker is not None


def _free_core():
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        return False
    return cpus >= 2 and load <= cpus - 1


class _Worker:
    def __init__(self, options):
        self.options = options
        # Linux's parent-death signal follows the thread that started the worker: asked for
        # only from the main thread, which lives as long as the process (from another, the
        # closed stdin ends the worker after its current part)
        on_death = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            [_interpreter(), os.path.abspath(__file__), repr(options), str(int(on_death))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        # one part at a time in the pipes: a part sent early may still be in flight when the
        # rest of its module is sent
        self.io = threading.Lock()


_lock = threading.Lock()
_worker = None
_broken = False              # a worker failed: compile everything here from then on
_jobs = 0                    # parts compiled by a worker
_fallbacks = 0               # parts that a worker failed to compile (done here instead)


def _forget_after_fork():
    """A forked child must not talk to its parent's worker (their messages would mix in the
    pipes): it drops its copies of them and starts its own worker if it compiles."""
    global _worker, _lock
    w, _worker = _worker, None
    _lock = threading.Lock()
    if w is not None:
        for stream in (w.proc.stdin, w.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        w.proc.returncode = 0       # (not this process's child: never to be waited for)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _interpreter():
    """The Python interpreter to run the worker with, or None: an application that embeds
    Python (or a frozen one) has its own program as sys.executable."""
    exe = sys.executable
    if not exe or getattr(sys, "frozen", False) or \
            not os.path.basename(exe).lower().startswith("python"):
        return None
    return exe


def start(options):
    """Start the worker for target machines of `options` unless it runs (or is off)."""
    global _worker
    if not enabled() or _broken or _interpreter() is None:
        return
    with _lock:
        if _worker is None:
            try:
                _worker = _Worker(options)
            except OSError:
                _fail()


def _fail():
    """Stop using the worker (called with _lock held)."""
    global _worker, _broken
    _broken = True
    w, _worker = _worker, None
    if w is not None:
        try:
            w.proc.kill()
            w.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def stop():
    """Stop the worker and forget its history (failures, counts): the next cold compile
    starts a new one (tests; a process otherwise keeps its worker until it exits)."""
    global _broken, _jobs, _fallbacks
    with _lock:
        _fail()
        _broken = False
        _jobs = _fallbacks = 0


def state():
    """What the tests inspect: the worker's pid (None when none runs), whether workers were
    given up, and the counts of parts compiled by a worker and of fallbacks."""
    w = _worker
    return {"pid": w.proc.pid if w is not None else None, "broken": _broken,
            "jobs": _jobs, "fallbacks": _fallbacks}


class Job:
    """One part being compiled by the worker; `result()` is its object, or None when the
    worker failed (the caller compiles the part itself)."""

    def __init__(self, worker, full, text):
        self.worker = worker
        self.reply = None
        self.thread = threading.Thread(target=self._run, args=(full, text), daemon=True,
                                       name="fluxion-compile-worker")
        self.thread.start()

    def _run(self, full, text):
        proc = self.worker.proc
        try:
            with self.worker.io:
                _send(proc.stdin, (full, text))
                self.reply = _receive(proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):
            self.reply = None

    def result(self):
        global _jobs, _fallbacks
        self.thread.join(TIMEOUT)
        reply = self.reply if not self.thread.is_alive() else None
        with _lock:
            if reply is not None and reply[0] == "ok" and isinstance(reply[1], bytes):
                _jobs += 1
                return reply[1]
            _fallbacks += 1
            if _worker is self.worker:
                _fail()
        return None


def submit(full, text):
    """A Job compiling the module `text` in the worker, or None when no worker runs."""
    with _lock:
        w = _worker
        if w is None:
            return None
        if w.proc.poll() is not None:       # it died since the last part
            global _fallbacks
            _fallbacks += 1
            _fail()
            return None
    return Job(w, full, text)


def _send(stream, value):
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    size, = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


# ---- the worker's side ---------------------------------------------------------------------

def _die_with_parent():
    """Linux: be killed when the parent dies, even in the middle of a compile."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)            # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:      # it died before prctl
        os._exit(0)


def _serve(options):
    # replies go to the pipe that was stdout; whatever else writes to stdout (LLVM, a stray
    # print) goes to stderr instead of into the answers
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    # (imported here: the parent imports this module too and loads LLVM only when it first
    # compiles, through fluxion/_llvm.py)
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = make_machine(llvm, options)
    while True:
        try:
            full, text = _receive(inp)
        except EOFError:
            return
        try:
            reply = ("ok", compile_text(llvm, tm, text, full))
        except Exception as e:         # noqa: BLE001 (the parent compiles it and reports)
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            _send(out, reply)
        except OSError:
            return


if __name__ == "__main__":
    if sys.argv[2:] == ["1"]:
        _die_with_parent()
    _serve(ast.literal_eval(sys.argv[1]))
