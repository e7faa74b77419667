"""The CPU's uses of LLVM at run time: the host's description as LLVM sees it, machine code
of runtime IR (the thread pool, the serial dispatcher), and MCJIT, the linker of objects that
fluxion's own loader (runtime/object_loader.py) does not link (another system or machine, or
an object it does not handle). runtime/jit.py loads this module by name when one of them is
first needed, so that a process whose machine code all comes from the offline cache never
loads LLVM."""
from __future__ import annotations

import threading

from fluxion._llvm import llvm
from fluxion.codegen import targets
from fluxion.runtime import libcalls

_lock = threading.Lock()
_ready = []


def initialize():
    """LLVM's native target and printer, and libgcc's builtins in MCJIT's search (once)."""
    if _ready:
        return
    with _lock:
        if not _ready:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            libcalls.provide()
            _ready.append(True)


def target_machine():
    """A new target machine of the host (an engine takes ownership of the one it is given)."""
    initialize()
    return targets.host_machine()


def describe_host():
    """What the offline cache's key and the runtime's IR need to know of LLVM and the host
    (runtime/host.py remembers it): plain data."""
    initialize()
    name, features = targets.host_cpu()
    tm = targets.host_machine()
    return {"llvm": list(llvm.llvm_version_info), "process_triple": llvm.get_process_triple(),
            "triple": tm.triple, "datalayout": str(tm.target_data), "cpu": name,
            "features": features}


def emit_object(text):
    """The object file of the IR module `text` (LLVM's code generator, at the machine's
    optimization level; no IR passes)."""
    mod = llvm.parse_assembly(text)
    mod.verify()
    return target_machine().emit_object(mod)


class Engine:
    """Objects linked by MCJIT: `bindings` {name: address} of names they use (set process-wide
    just before, as MCJIT resolves names when it finalizes), `address(name)` as an Image's."""

    def __init__(self, objects, bindings, what):
        initialize()
        for name, addr in bindings.items():
            llvm.add_symbol(name, addr)
        # a name nothing defines would be linked as address 0: an error now, not a jump there
        for k, o in enumerate(objects):
            libcalls.check(o, what, objects[:k] + objects[k + 1:])
        tm = target_machine()
        self.engine = llvm.create_mcjit_compiler(
            llvm.parse_assembly(f'target triple = "{tm.triple}"'), tm)
        for o in objects:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(o))
        self.engine.finalize_object()

    def address(self, name):
        return self.engine.get_function_address(name)


def vector_registers():
    """SIMD registers of the host: 32 with AVX-512, else 16 (AVX2, NEON...)."""
    try:
        return 32 if llvm.get_host_cpu_features().get("avx512f") else 16
    except RuntimeError:
        return 16
