"""Kernels launched from several Python threads: the first call compiles one instance, launches
keep their own arguments, the fields' host and device copies stay coherent, and `ti.reset`
waits for launches in flight. The windows in which threads could interleave are widened with
pauses inside the runtime (that only make a wrong interleaving certain, never a right one
fail); nothing here measures time."""
import threading
import time

import numpy as np
import pytest

import fluxion as ti
from fluxion.runtime import cpu_jit, cuda_jit
from fluxion.lang import kernel as kernel_mod
from fluxion.lang import runtime
from fluxion.ir.errors import FluxionRuntimeError


def _run_threads(targets):
    errors = []

    def guarded(fn):
        try:
            fn()
        except BaseException as e:   # noqa: BLE001 - reported by the test below
            errors.append(e)

    ts = [threading.Thread(target=guarded, args=(fn,)) for fn in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return errors


def _slow_runs(monkeypatch, pause=0.002):
    """Every launch pauses (GIL released) between packing its arguments and running."""
    for cls in (cpu_jit.CompiledKernel, cuda_jit.CudaCompiledKernel):
        plain = cls.run

        def run(self, _plain=plain):
            time.sleep(pause)
            return _plain(self)

        monkeypatch.setattr(cls, "run", run)


def test_first_call_from_several_threads_compiles_one_instance(monkeypatch, no_offline_cache):
    x = ti.field(ti.f32, 64)
    compiles = []
    plain = kernel_mod.Kernel._compile

    def counted(self, *args, **kwargs):
        compiles.append(self.name)
        time.sleep(0.02)     # every thread reaches the cache before the first build ends
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(kernel_mod.Kernel, "_compile", counted)

    @ti.kernel
    def k(a: ti.f32):
        for i in range(64):
            t = a * i
            if t > 3:
                t = t - 1
            x[i] = t

    start = threading.Barrier(4)

    def call():
        start.wait()
        k(2.0)

    assert _run_threads([call] * 4) == []
    assert compiles == ["k"]
    assert len(k.instances) == 1
    i = np.arange(64, dtype=np.float32)
    expect = np.where(2 * i > 3, 2 * i - 1, 2 * i)
    np.testing.assert_array_equal(x.to_numpy(), expect)


def test_builds_on_many_threads_at_once_stay_correct():
    # several different kernels built at the same time: each must see only its own IR
    # (before, the builders shared one stack and mixed statements of two kernels)
    import sys
    n = 6
    outs = [ti.field(ti.i32, 32) for _ in range(n)]

    def make(out):
        @ti.kernel
        def k(a: ti.i32):
            for i in range(32):
                v = a + i
                if v % 3 == 0:
                    v = -v
                out[i] = v
        return k

    kernels = [make(out) for out in outs]
    start = threading.Barrier(n)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)       # switch threads as often as possible while building
    try:
        errors = _run_threads([lambda j=j: (start.wait(), kernels[j](j)) for j in range(n)])
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    for j in range(n):
        v = j + np.arange(32)
        np.testing.assert_array_equal(outs[j].to_numpy(), np.where(v % 3 == 0, -v, v))


def test_python_scope_code_on_another_thread_is_not_taken_for_kernel_code(monkeypatch):
    # while one thread builds a kernel, another one reads a field from Python
    from fluxion.ir import builder
    from fluxion.frontend import transformer
    x = ti.field(ti.i32, 4)
    x[1] = 5
    seen = []
    plain = transformer.Transformer.build_function
    building = threading.Event()
    read = threading.Event()

    def pausing(self, *args, **kwargs):
        building.set()           # inside the build: the builder's stack holds the kernel
        read.wait(10)
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(transformer.Transformer, "build_function", pausing)

    @ti.kernel
    def k():
        x[0] = 1

    def reader():
        building.wait(10)
        seen.append((builder.in_kernel(), x[1]))
        read.set()

    assert _run_threads([k, reader]) == []
    assert seen == [(False, 5)]


def test_launches_of_one_kernel_from_two_threads_keep_their_arguments(monkeypatch):
    @ti.kernel
    def fill(a: ti.i32, out: ti.types.ndarray()):
        for i in out:
            out[i] = a * 3 + i

    n = 1000
    fill(0, np.zeros(n, np.int32))
    _slow_runs(monkeypatch)
    start = threading.Barrier(2)
    wrong = []

    def work(a):
        out = np.zeros(n, np.int32)
        start.wait()
        for _ in range(10):
            out[:] = -1
            fill(a, out)
            if not np.array_equal(out, a * 3 + np.arange(n)):
                wrong.append(a)

    assert _run_threads([lambda: work(1), lambda: work(2)]) == []
    assert wrong == []


def test_two_kernels_launched_from_two_threads_keep_every_add(monkeypatch):
    # after Python writes a field, the next launch copies it to the device (CUDA); a second
    # thread's launch must not copy it again over the first one's adds
    bins = 8
    hist = ti.field(ti.i64, bins)

    @ti.kernel
    def ones():
        for i in range(4096):
            hist[i % bins] += 1

    @ti.kernel
    def twos():
        for i in range(4096):
            hist[(i * 3) % bins] += 2

    ones()
    twos()
    if runtime.on_cuda():
        dev = runtime.get_jit().device
        plain = dev.to_device

        def slow_copy(dptr, hptr, nbytes):
            time.sleep(0.002)
            return plain(dptr, hptr, nbytes)

        monkeypatch.setattr(dev, "to_device", slow_copy)
    rounds = 5
    for _ in range(4):
        hist.fill(0)                 # a Python write: the next launch copies the field over
        start = threading.Barrier(2)

        def work(k):
            start.wait()
            for _ in range(rounds):
                k()

        assert _run_threads([lambda: work(ones), lambda: work(twos)]) == []
        np.testing.assert_array_equal(hist.to_numpy(),
                                      np.full(bins, rounds * 3 * 4096 // bins))


def test_reset_waits_for_a_launch_in_flight(monkeypatch):
    x = ti.field(ti.f32, 1 << 16)

    @ti.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    bump()
    started, release = threading.Event(), threading.Event()
    for cls in (cpu_jit.CompiledKernel, cuda_jit.CudaCompiledKernel):
        plain = cls.run

        def run(self, _plain=plain):
            started.set()
            release.wait(10)
            return _plain(self)

        monkeypatch.setattr(cls, "run", run)
    reset_done = threading.Event()
    launched = []

    def launcher():
        bump()
        launched.append(True)

    def resetter():
        started.wait(10)
        ti.reset()
        reset_done.set()

    ts = [threading.Thread(target=launcher), threading.Thread(target=resetter)]
    for t in ts:
        t.start()
    started.wait(10)
    # the launch is held inside its run: reset must not have gone ahead
    still_waiting = not reset_done.wait(0.2)
    release.set()
    for t in ts:
        t.join()
    assert still_waiting
    assert launched == [True] and reset_done.is_set()


def test_an_instance_of_before_a_reset_refuses_to_launch():
    x = ti.field(ti.f32, 16)

    @ti.kernel
    def bump():
        for i in x:
            x[i] += 1.0

    bump()
    inst = next(iter(bump.instances.values()))
    ti.reset()
    ti.init(arch=ti.cpu)
    with pytest.raises(FluxionRuntimeError, match="bump.*ti.reset"):
        inst.launch(())
