"""The compile worker (runtime/compile_worker.py): a second process that optimizes and emits
part of a cold kernel's LLVM module. It must not change the machine code (each function's
bytes and relocations are compared with those of the module compiled whole), it must be
used when it runs, and every failure of it must end in a right result compiled here. The
paths are checked by the worker's state, never by timing; results against NumPy."""
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import fluxion as ti
from fluxion._llvm import llvm
from fluxion.runtime import compile_worker, cpu_build, object_blobs
from fluxion.runtime.jit import get_jit

pytestmark = pytest.mark.cpu_only

N = 64
ACC = 8          # accumulators of the straight block below
STEPS = 12       # its unrolled steps: ~400 floating-point operations, enough to be split


def make_kernel(c):
    """A kernel with one long straight block of arithmetic (a parallel task worth sending
    to the worker) and a small second task; `c` makes each test's text its own (the
    compiled objects are remembered by text)."""
    @ti.kernel
    def k(x: ti.types.ndarray(dtype=ti.f32, ndim=1), y: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(x.shape[0]):
            a = ti.Vector([x[i] * (j + 1) * 0.125 for j in ti.static(range(ACC))])
            for s in ti.static(range(STEPS)):
                a = ti.Vector([a[j] * 0.75 + a[(j + 1) % ACC] * 0.25 + c
                               for j in ti.static(range(ACC))])
            y[i] = a.sum()
        for i in range(x.shape[0]):
            y[i] += 1.0
    return k


def expected(x, c):
    a = np.stack([x * np.float32((j + 1) * 0.125) for j in range(ACC)]).astype(np.float32)
    for _ in range(STEPS):
        a = (a * np.float32(0.75) + np.roll(a, -1, axis=0) * np.float32(0.25)
             + np.float32(c)).astype(np.float32)
    return a.sum(axis=0) + np.float32(1.0)


def run(c):
    x = np.linspace(-1.0, 1.0, N).astype(np.float32)
    y = np.zeros(N, np.float32)
    k = make_kernel(c)
    k(x, y)
    np.testing.assert_allclose(y, expected(x, c), rtol=1e-5, atol=1e-5)
    return k


@pytest.fixture(autouse=True)
def fresh_worker(monkeypatch):
    # (by default the worker is used only while a core is free: the tests want it always)
    monkeypatch.setenv("FLUXION_COMPILE_WORKER", "1")
    ti.init(arch=ti.cpu, offline_cache=False)
    compile_worker.stop()
    yield
    compile_worker.stop()


def module_text(k):
    (inst,) = k.instances.values()
    return inst.compiled.artifact.llvm_ir


# -- the machine code ------------------------------------------------------------------------
def _sections(obj):
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]
    names = heads[shstrndx]
    out = []
    for h in heads:
        name = obj[names[4] + h[0]:obj.index(b"\0", names[4] + h[0])].decode()
        out.append(dict(name=name, type=h[1], data=obj[h[4]:h[4] + h[5]], link=h[6],
                        info=h[7], entsize=h[9]))
    return out


def functions(obj):
    """{function name: (its bytes, its relocations)} of an ELF object, each relocation as
    (offset in the function, type, what it refers to: a symbol's name, a function at a
    section's offset, or the constant's bytes at a section's offset)."""
    secs = _sections(obj)
    symtab = next(s for s in secs if s["type"] == 2)
    strtab = secs[symtab["link"]]["data"]
    syms = []
    for st_name, info, _o, shndx, value, size in struct.iter_unpack("<IBBHQQ", symtab["data"]):
        syms.append((strtab[st_name:strtab.index(b"\0", st_name)].decode(), info & 0xF, shndx,
                     value, size))
    funcs = {(shndx, value): name for name, kind, shndx, value, _ in syms if kind == 2}
    out = {}
    for name, kind, shndx, value, size in syms:
        if kind != 2:
            continue
        code = secs[shndx]["data"][value:value + size]
        relocs = []
        for rs in secs:
            if rs["type"] != 4 or rs["info"] != shndx:
                continue
            for off, info, addend in struct.iter_unpack("<QQq", rs["data"]):
                if not value <= off < value + size:
                    continue
                tname, tkind, tshndx, _v, _s = syms[info >> 32]
                rtype = info & 0xFFFFFFFF
                if tkind == 3:      # a section: name what lies at the offset
                    pc = 4 if rtype in (2, 4, 9, 24) else 0      # (PC-relative: addend - 4)
                    fname = funcs.get((tshndx, addend + pc))
                    if fname is not None:    # as a reference by name would read
                        relocs.append((off - value, rtype, fname, -pc))
                    else:
                        width = secs[tshndx]["entsize"] or 16
                        relocs.append((off - value, rtype,
                                       secs[tshndx]["data"][addend + pc:addend + pc + width]))
                else:
                    relocs.append((off - value, rtype, tname, addend))
        out[name] = (code, sorted(relocs, key=lambda r: r[0]))
    return out


def test_the_split_module_has_the_same_machine_code():
    k = run(0.5)
    text = module_text(k)
    parts = compile_worker.split_module(text)
    assert parts is not None, "the straight block is worth a worker"
    mine, theirs = parts
    moved = [line for line in theirs.splitlines() if line.startswith("define ")]
    assert moved and not any(line.startswith("define internal") for line in moved)
    for line in moved:
        name = line.split("@", 1)[1].split("(", 1)[0]
        assert f"declare void @{name}(" in mine and f"define internal void @{name}(" in text
    jit = get_jit()
    whole = compile_worker.compile_text(llvm, jit.tm, text, True)
    split = {}
    for part in parts:
        split.update(functions(compile_worker.compile_text(llvm, jit.tm, part, True)))
    assert functions(whole) == split
    assert len(split) >= 4          # the entry, its FTZ wrapper, the two tasks


def _sent_texts(monkeypatch):
    """The texts that compile_worker.submit is given from now on, in order."""
    texts = []
    submit = compile_worker.submit

    def spy(full, text):
        texts.append(text)
        return submit(full, text)
    monkeypatch.setattr(compile_worker, "submit", spy)
    return texts


def test_a_task_sent_while_lowering_has_the_same_machine_code(monkeypatch):
    # the big task is lowered first: the worker gets it before the module is whole, its
    # names with the placeholder that the kernel's prefix then replaces in its object
    texts = _sent_texts(monkeypatch)
    k = run(0.53125)
    assert compile_worker.state()["jobs"] == 1 and len(texts) == 1
    (early,) = texts
    assert cpu_build._PREFIX in early and early.count("define ") == 1
    (inst,) = k.instances.values()
    art = inst.compiled.artifact
    prefix = art.meta.entry.split("fluxion_entry")[0]
    assert len(prefix) == len(cpu_build._PREFIX) and cpu_build._PREFIX not in art.llvm_ir
    jit = get_jit()
    # the object given the prefix is, byte for byte, the object of its text with the prefix
    placeholder = compile_worker.compile_text(llvm, jit.tm, early, True)
    final = compile_worker.compile_text(llvm, jit.tm, early.replace(cpu_build._PREFIX, prefix),
                                        True)
    assert placeholder != final
    assert placeholder.replace(cpu_build._PREFIX.encode(), prefix.encode()) == final
    # and the kernel's objects hold each function's code as the module compiled whole
    objs = object_blobs.split_objects(art.obj)
    assert len(objs) == 2
    joined = {}
    for o in objs:
        joined.update(functions(o))
    assert joined == functions(compile_worker.compile_text(llvm, jit.tm, art.llvm_ir, True))


def test_a_tasks_cost_counted_on_its_instructions_is_its_texts(monkeypatch):
    # (_EarlyParts decides on the instructions, split_module on the text: the same numbers)
    from fluxion.codegen import lower, text
    from fluxion.examples.mpm88 import build
    made = []
    plain = lower.ModuleLowering.lower

    def lowered(self):
        made.append(plain(self))
        return made[-1]
    monkeypatch.setattr(lower.ModuleLowering, "lower", lowered)
    run(0.65625)
    sim = build(ti, n_particles=64, n_grid=16)
    sim["substep"]()
    fns = [f for m in made for f in m.functions if f.blocks]
    assert len(fns) >= 8
    for f in fns:
        assert cpu_build.task_cost(f) == compile_worker.cost(text.function_text(f)), f.name


def test_a_task_below_the_early_cost_waits_for_its_module(monkeypatch):
    # worth a worker but not an early send: it goes with the rest, when the module is whole
    texts = _sent_texts(monkeypatch)
    monkeypatch.setattr(compile_worker, "MIN_EARLY_COST", 10 ** 9)
    run(0.46875)
    assert compile_worker.state()["jobs"] == 1 and len(texts) == 1
    assert cpu_build._PREFIX not in texts[0]


def test_a_task_calling_a_real_function_waits_for_its_module(monkeypatch):
    # the real function's body is lowered after the tasks: a task that calls it is not sent
    # before the module is whole (nor after: it refers to a function the module defines)
    @ti.real_func
    def scale(v: ti.f32) -> ti.f32:
        return v * 0.75 + 0.25

    @ti.kernel
    def k(x: ti.types.ndarray(dtype=ti.f32, ndim=1), y: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(x.shape[0]):
            a = ti.Vector([x[i] * (j + 1) * 0.125 for j in ti.static(range(ACC))])
            for s in ti.static(range(STEPS)):
                a = ti.Vector([a[j] * 0.75 + a[(j + 1) % ACC] * 0.25 + 0.5
                               for j in ti.static(range(ACC))])
            y[i] = scale(a.sum())
    texts = _sent_texts(monkeypatch)
    x = np.linspace(-1.0, 1.0, N).astype(np.float32)
    y = np.zeros(N, np.float32)
    k(x, y)
    np.testing.assert_allclose(y, (expected(x, 0.5) - 1.0) * 0.75 + 0.25, rtol=1e-5, atol=1e-5)
    assert not [t for t in texts if cpu_build._PREFIX in t]


def test_split_module_with_a_task_sent_before():
    k = run(0.59375)
    text = module_text(k)
    names = [line.split('@"', 1)[1].split('"', 1)[0] for line in text.splitlines()
             if line.startswith("define internal")]
    big, small = names          # (in the order lowered)
    mine, theirs = compile_worker.split_module(text, {big: 5000})
    assert theirs is None       # the small task is not worth a second part
    assert f'declare void @"{big}"(' in mine and f'define internal void @"{small}"' in mine
    mine, theirs = compile_worker.split_module(text, {small: 1})
    assert f'declare void @"{small}"(' in mine and f'declare void @"{big}"(' in mine
    assert f'define void @"{big}"' in theirs and f'@"{small}"' not in theirs
    entry = next(line.split('@"', 1)[1].split('"', 1)[0] for line in text.splitlines()
                 if line.startswith("define void"))
    assert compile_worker.split_module(text, {entry: 1}) is None     # (it cannot move)


def test_small_modules_are_not_split():
    @ti.kernel
    def small(x: ti.types.ndarray(dtype=ti.f32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = x[i] * 2.0 + 1.0
    x = np.arange(8, dtype=np.float32)
    small(x)
    np.testing.assert_array_equal(x, np.arange(8, dtype=np.float32) * 2 + 1)
    assert compile_worker.split_module(module_text(small)) is None
    assert compile_worker.state()["jobs"] == 0


def test_objects_join_and_split_back():
    a, b = b"\x7fELF first", b"\x7fELF second one"
    assert object_blobs.join_objects([a]) is a
    blob = object_blobs.join_objects([a, b])
    assert object_blobs.split_objects(blob) == [a, b]
    assert object_blobs.split_objects(a) == [a]
    with pytest.raises(ValueError):
        object_blobs.split_objects(blob[:-1])


# -- the worker's paths ----------------------------------------------------------------------
def test_the_worker_compiles_part_of_a_big_kernel():
    before = compile_worker.state()["jobs"]
    run(0.25)
    st = compile_worker.state()
    assert st["pid"] is not None and not st["broken"]
    assert st["jobs"] == before + 1 and st["fallbacks"] == 0


def test_the_worker_is_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("FLUXION_COMPILE_WORKER", "0")
    run(0.125)
    assert compile_worker.state() == {"pid": None, "broken": False, "jobs": 0, "fallbacks": 0}


def test_by_default_the_worker_needs_a_free_core(monkeypatch):
    monkeypatch.delenv("FLUXION_COMPILE_WORKER")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    assert not compile_worker.enabled()
    run(0.1875)
    assert compile_worker.state() == {"pid": None, "broken": False, "jobs": 0, "fallbacks": 0}
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 1.0, 1.0))
    assert compile_worker.enabled()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not compile_worker.enabled()      # one core: nothing to share it with


def test_a_worker_started_by_a_thread_outlives_the_thread():
    t = threading.Thread(target=run, args=(0.5625,))
    t.start()
    t.join()
    st = compile_worker.state()
    assert st["jobs"] == 1
    run(0.6875)
    after = compile_worker.state()
    assert after["pid"] == st["pid"] and after["jobs"] == 2 and after["fallbacks"] == 0


def test_no_worker_in_a_program_that_embeds_python(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/opt/some-app/bin/app")
    run(0.15625)
    assert compile_worker.state() == {"pid": None, "broken": False, "jobs": 0, "fallbacks": 0}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_use_its_parents_worker():
    run(0.8125)
    st = compile_worker.state()
    pid = os.fork()
    if pid == 0:            # the child only inspects: its thread pool was not forked
        ok = compile_worker.state()["pid"] is None and compile_worker._lock.acquire(timeout=1)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    run(0.9375)             # the parent's worker still answers
    after = compile_worker.state()
    assert after["pid"] == st["pid"] and after["jobs"] == st["jobs"] + 1


def test_a_dead_worker_is_replaced_by_compiling_here():
    run(0.375)                      # starts the worker, and uses it
    st = compile_worker.state()
    os.kill(st["pid"], signal.SIGKILL)
    os.waitpid(st["pid"], 0)        # (dead for sure before the next compile)
    run(0.625)
    after = compile_worker.state()
    assert after["broken"] and after["pid"] is None
    assert after["fallbacks"] == st["fallbacks"] + 1 and after["jobs"] == st["jobs"]
    run(0.875)                      # no new worker: all here, still right
    assert compile_worker.state()["jobs"] == st["jobs"]


def test_a_worker_dying_during_a_part_is_replaced():
    k = run(0.4375)
    st = compile_worker.state()
    os.kill(st["pid"], signal.SIGSTOP)      # alive when the part is sent...
    job = compile_worker.submit(True, module_text(k))
    assert job is not None
    os.kill(st["pid"], signal.SIGKILL)      # ...and gone before it answers
    assert job.result() is None
    assert compile_worker.state()["broken"]


def test_an_error_of_the_worker_is_compiled_here():
    run(0.0625)
    st = compile_worker.state()
    job = compile_worker.submit(True, "this is not LLVM IR")
    assert job is not None and job.result() is None
    after = compile_worker.state()
    assert after["broken"] and after["fallbacks"] == st["fallbacks"] + 1


def test_a_split_kernel_loaded_twice_runs_on_its_own_fields():
    # the same code for fields of the same layout: one object pair, loaded into two engines,
    # each resolving the moved task's name to its own copy
    @ti.kernel
    def k(x: ti.template(), y: ti.template()):
        for i in x:
            a = ti.Vector([x[i] * (j + 1) * 0.125 for j in ti.static(range(ACC))])
            for s in ti.static(range(STEPS)):
                a = ti.Vector([a[j] * 0.75 + a[(j + 1) % ACC] * 0.25 + 0.5
                               for j in ti.static(range(ACC))])
            y[i] = a.sum() + 1.0
    fields = [ti.field(ti.f32, N) for _ in range(4)]
    x1 = np.linspace(-1.0, 1.0, N).astype(np.float32)
    x2 = np.linspace(0.0, 3.0, N).astype(np.float32)
    fields[0].from_numpy(x1)
    fields[2].from_numpy(x2)
    k(fields[0], fields[1])
    k(fields[2], fields[3])
    assert len(k.instances) == 2 and compile_worker.state()["jobs"] == 1
    np.testing.assert_allclose(fields[1].to_numpy(), expected(x1, 0.5), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fields[3].to_numpy(), expected(x2, 0.5), rtol=1e-5, atol=1e-5)


def test_a_split_kernel_loads_from_the_offline_cache(tmp_path):
    ti.init(arch=ti.cpu, offline_cache_file_path=str(tmp_path))
    run(0.75)
    assert compile_worker.state()["jobs"] == 1
    ti.init(arch=ti.cpu, offline_cache_file_path=str(tmp_path))
    k = run(0.75)
    (inst,) = k.instances.values()
    assert inst.cache_note == "loaded"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_worker_dies_with_its_parent():
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import fluxion as ti
        from fluxion.runtime import compile_worker
        ti.init(arch=ti.cpu, offline_cache=False)
        import test_compile_worker as t
        t.run(0.3)
        print(compile_worker.state()["pid"], flush=True)
        os._exit(0)             # no cleanup: the worker must go by itself
    """)
    env = dict(os.environ)
    env["FLUXION_COMPILE_WORKER"] = "1"
    env.pop("FLUXION_ARCH", None)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    pid = int(res.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.05)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"     # a zombie is gone
    except FileNotFoundError:
        return False
