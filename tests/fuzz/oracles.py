"""Running one program text on an implementation, and comparing two runs.

An implementation is a module with the language's API (fluxion, or taichi where installed)
and the `ti.init` options of the run. Both packages import into one process; each run starts
with its package's `init` (which drops the previous run's fields and kernels) and loads the
program as a fresh module from a file, since kernels need their source text."""
from __future__ import annotations

import atexit
import importlib.util
import itertools
import os
import shutil
import sys
import tempfile
import traceback
import warnings

import numpy as np

_counter = itertools.count()
_dir = None


def programs_dir():
    """The directory that programs are written to: one a process tree. The process that makes
    it removes it when it exits; a child process given it in FLUXION_FUZZ_DIR (the checking
    servers of tests/fuzz/check.py, which are killed when done) writes there and removes
    nothing. (Each process made a directory of its own and kept it: a day's runs of the suite
    and of the fuzzer had left 70 in the temporary directory.)"""
    global _dir
    if _dir is None:
        _dir = os.environ.get("FLUXION_FUZZ_DIR")
        if _dir:
            os.makedirs(_dir, exist_ok=True)
        else:
            _dir = tempfile.mkdtemp(prefix="fluxion-fuzz-")
            atexit.register(shutil.rmtree, _dir, True)
    return _dir


def load(src):
    """The program `src` as a module (written to a file: kernels read their source)."""
    name = f"fuzzprog_{os.getpid()}_{next(_counter)}"
    path = os.path.join(programs_dir(), name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def taichi_available():
    try:
        import taichi  # noqa: F401
        return True
    except Exception:
        return False


# the configurations compared; FLUXION_FUZZ_ARCH=cuda runs the optimized build on the CUDA
# backend (the GPU where one exists, else the emulator) against the others on the CPU
# (without falling back to the CPU silently)
_FUZZ_ARCH = os.environ.get("FLUXION_FUZZ_ARCH", "cpu")
FLUXION_OPT = ("fluxion", dict(cpu_max_num_threads=4, arch=_FUZZ_ARCH,
                               enable_fallback=_FUZZ_ARCH == "cpu"))
FLUXION_PLAIN = ("fluxion", dict(cpu_max_num_threads=1, advanced_optimization=False))
TAICHI = ("taichi", dict(cpu_max_num_threads=1, offline_cache=False))
# the tie-breaker when taichi disagrees: its own build without its optimizing passes
TAICHI_PLAIN = ("taichi", dict(cpu_max_num_threads=1, offline_cache=False,
                               advanced_optimization=False, cfg_optimization=False))


def _package(name):
    if name == "fluxion":
        import fluxion
        return fluxion
    import taichi
    return taichi


class Outcome:
    def __init__(self, values=None, error=None):
        self.values = values
        self.error = error          # "ExceptionType: first line" when the run raised

    def __repr__(self):
        return f"Outcome(error={self.error!r})" if self.error else f"Outcome({self.values!r})"


_MXCSR = []


def _mxcsr():
    """(get, set) of the calling thread's x86 MXCSR (floating-point mode), JIT-compiled once;
    None off x86-64."""
    if not _MXCSR:
        import ctypes
        import platform
        if platform.machine().lower() not in ("x86_64", "amd64"):
            _MXCSR.append(None)
            return None
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        mod = llvm.parse_assembly("""
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i32 @get_mxcsr() {
  %p = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %p)
  %v = load i32, ptr %p
  ret i32 %v
}
define void @set_mxcsr(i32 %v) {
  %p = alloca i32, align 4
  store i32 %v, ptr %p
  call void @llvm.x86.sse.ldmxcsr(ptr %p)
  ret void
}
""")
        tm = llvm.Target.from_default_triple().create_target_machine()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        get = ctypes.CFUNCTYPE(ctypes.c_uint32)(engine.get_function_address("get_mxcsr"))
        put = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(engine.get_function_address("set_mxcsr"))
        _MXCSR.append((get, put, engine))
    return _MXCSR[0]


def execute(src, impl, entry="build", post=None):
    """Run program `src` on `impl` = (package name, init options): its values, or its error.
    Taichi leaves the flush-to-zero bits of the calling thread set; the thread's
    floating-point mode is put back afterwards, so what runs later in the process (the other
    oracles, other tests) sees IEEE denormals as before."""
    keeper = _mxcsr() if impl[0] == "taichi" else None
    saved = keeper[0]() if keeper else None
    try:
        return _execute(src, impl, entry, post)
    finally:
        if keeper:
            keeper[1](saved)


def _execute(src, impl, entry, post):
    name, opts = impl
    ti = _package(name)
    kw = dict(arch=ti.cpu)
    kw.update(opts)
    if isinstance(kw["arch"], str):
        kw["arch"] = getattr(ti, kw["arch"])
    if name == "taichi":
        kw["log_level"] = ti.ERROR
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ti.init(**kw)
            mod, _ = load(src)
            run = getattr(mod, entry)(ti)
            values = run() if post is None else post(run, ti)
            return Outcome(values=_plain(values))
        except Exception as e:                  # noqa: BLE001 (any failure is an outcome)
            msg = str(e).strip().splitlines()
            last = msg[-1] if msg else ""
            return Outcome(error=f"{type(e).__name__}: {last[:200]}",)
        finally:
            try:
                ti.reset()
            except Exception:
                pass


def _plain(values):
    out = {}
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            out[k] = v.copy()
        elif isinstance(v, (list, tuple)):
            out[k] = np.asarray(v)
        elif hasattr(v, "to_numpy"):
            out[k] = v.to_numpy()
        else:
            out[k] = v
    return out


_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-7}


def compare(a, b, tol_scale=1.0, scalar_tol=1e-3, tol_floor=0.0, slack=None):
    """None when outcomes `a` and `b` agree, else a short description of the first difference.
    Integers compare exactly; floats within a tolerance of their type relative to the
    largest magnitude of the value (cancellation makes relative errors of small elements big),
    plus `slack[key]` (an absolute bound an oracle gives of its own error: finite
    differences), NaN only with NaN."""
    if a.error or b.error:
        if a.error and b.error:
            return None
        return f"error: {a.error or 'ok'} | {b.error or 'ok'}"
    if set(a.values) != set(b.values):
        return f"keys differ: {sorted(set(a.values) ^ set(b.values))}"
    for k in a.values:
        x, y = a.values[k], b.values[k]
        if x is None or y is None:
            continue        # a value one implementation does not compute (see gen_ad)
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return f"{k}: shape {x.shape} | {y.shape}"
        fl = x.dtype.kind == "f" or y.dtype.kind == "f"
        if not fl:
            if x.dtype != y.dtype and x.dtype.kind in "iu" and y.dtype.kind in "iu" and x.ndim:
                return f"{k}: dtype {x.dtype} | {y.dtype}"
            if not np.array_equal(x.astype(object) if x.ndim == 0 else x,
                                  y.astype(object) if y.ndim == 0 else y):
                return _first(k, x, y)
            continue
        tol = max(tol_floor, tol_scale * max(_TOL.get(x.dtype, 1e-4), _TOL.get(y.dtype, 1e-4))) \
            if x.ndim else max(tol_floor, scalar_tol)
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        nx, ny = np.isnan(xf), np.isnan(yf)
        if (nx != ny).any():
            return _first(k, x, y, nx != ny)
        fin = np.isfinite(xf) & np.isfinite(yf)
        if ((~fin) & ~nx & (xf != yf)).any():
            return _first(k, x, y, (~fin) & ~nx & (xf != yf))
        scale = max(1.0, float(np.abs(xf[fin]).max(initial=0)), float(np.abs(yf[fin]).max(initial=0)))
        extra = 0.0 if not slack or k not in slack else np.asarray(slack[k], np.float64)
        bad = fin & (np.abs(xf - yf) > tol * scale + extra)
        if bad.any():
            return _first(k, x, y, bad)
    return None


def _first(k, x, y, mask=None):
    if x.ndim == 0:
        return f"{k}: {x!r} | {y!r}"
    if mask is None:
        mask = x != y
    at = tuple(int(v) for v in np.argwhere(mask)[0])
    return f"{k}{list(at)}: {x[at]!r} | {y[at]!r} ({int(mask.sum())} of {x.size} differ)"


def crash_report():
    return traceback.format_exc()


if __name__ == "__main__":   # run one program file on one implementation (for debugging)
    src = open(sys.argv[1]).read()
    impl = {"opt": FLUXION_OPT, "plain": FLUXION_PLAIN, "taichi": TAICHI,
            "taichi_plain": TAICHI_PLAIN}[sys.argv[2]]
    print(execute(src, impl))
