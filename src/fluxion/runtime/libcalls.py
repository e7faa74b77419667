"""The functions a kernel's machine code calls that no module of fluxion defines.

LLVM's code generator turns some operations into calls of compiler runtime functions (the
"builtins" of compiler-rt and libgcc): a conversion from f64 to f16 (`__truncdfhf2`, which it
makes of fluxion's f64 -> f32 -> f16 when the first step is exact), f16 conversions on a CPU
without F16C, `llvm.powi`, 128-bit division. A C program gets them from the linker; a JIT
resolves a name through the symbols it was given and the libraries loaded into the process, and
nothing loads libgcc there. MCJIT then resolves a missing name to address 0 without a word: a
kernel using it jumped to 0 and the process died (found by the fuzz: an f16 field assigned an
f64 product). So:

- `provide()` loads libgcc (where the system has one) into the process's symbol search once,
  before the first kernel is loaded;
- `check(obj, kernel)` reads the names an object file leaves undefined and raises a clear
  error naming the kernel for any that nothing resolves, before the object is linked.

fluxion's own loader (runtime/object_loader.py, no LLVM) asks `address(name)` for each such
name: the process's symbols (the C library, libm), then libgcc's, opened on first need.
"""
from __future__ import annotations

import ctypes
import threading

from fluxion._llvm import llvm
from fluxion.ir.errors import FluxionCompilationError
from fluxion.runtime import elf

_lock = threading.Lock()
_provided = False
_process = ctypes.CDLL(None)
_known = set()          # names found resolvable already (the checks repeat for every kernel)
_addresses = {}         # name -> address, for the object loader
_libgcc = []            # libgcc's handle once opened (None when the system has none)


def provide():
    """Make libgcc's builtins resolvable in the JIT (once per process)."""
    global _provided
    if _provided:
        return
    with _lock:
        if _provided:
            return
        try:
            llvm.load_library_permanently(_SONAME)
        except RuntimeError:
            name = _find_libgcc()
            if name:
                try:
                    llvm.load_library_permanently(name)
                except RuntimeError:
                    pass        # then `check` names what stays missing
        _provided = True


# libgcc's name on Linux, opened as is (the dynamic loader finds it in its cache): this spares
# find_library, which runs `ldconfig -p` in a subprocess, 2-7 ms of every process's first
# kernel; elsewhere the open fails and find_library looks
_SONAME = "libgcc_s.so.1"


def undefined_symbols(obj):
    """The names that the ELF object file `obj` (bytes) uses without defining them."""
    return _symbols(obj)[0]


def _symbols(obj):
    """(names used without a definition, names defined and visible to other objects) of
    the ELF object `obj`."""
    try:
        return elf.Object(obj).names()
    except elf.NotElf:
        return [], []   # (another object format: nothing to read)


def resolvable(name):
    if name in _known:
        return True
    if llvm.address_of_symbol(name) or hasattr(_process, name):
        _known.add(name)
        return True
    return False


def check(obj, kernel_name, siblings=()):
    """Raise if the object calls a function that nothing in this process defines, nor one of
    the objects `siblings` loaded with it (a module compiled in parts:
    runtime/compile_worker.py)."""
    others = {n for o in siblings for n in _symbols(o)[1]}
    missing = [n for n in undefined_symbols(obj) if n not in others and not resolvable(n)]
    if missing:
        raise missing_error(kernel_name, sorted(missing))


def missing_error(kernel_name, names):
    return FluxionCompilationError(
        f"kernel '{kernel_name}': its machine code calls {', '.join(names)}, which this "
        f"process does not have (a compiler runtime function: install libgcc, or avoid the "
        f"operation that needs it, e.g. an f64 -> f16 cast)")


def address(name):
    """The address of `name` in the process or in libgcc, or None."""
    a = _addresses.get(name)
    if a is not None:
        return a
    a = _lookup(_process, name)
    if a is None:
        if not _libgcc:
            _libgcc.append(_open_libgcc())
        if _libgcc[0] is not None:
            a = _lookup(_libgcc[0], name)
    if a is not None:
        _addresses[name] = a
    return a


def _lookup(lib, name):
    try:
        return ctypes.cast(lib[name], ctypes.c_void_p).value
    except AttributeError:
        return None


def _open_libgcc():
    try:
        return ctypes.CDLL(_SONAME)
    except OSError:
        name = _find_libgcc()
        try:
            return ctypes.CDLL(name) if name else None
        except OSError:
            return None


def _find_libgcc():
    """libgcc's file where it is not `_SONAME` (not Linux): ctypes.util's search, imported
    here because it loads subprocess and more (7 ms of a process's first kernel) and runs
    `ldconfig -p`, for a name Linux never needs."""
    import ctypes.util
    return ctypes.util.find_library("gcc_s")
