"""The CPU target's compile side: a kernel's IR lowered to LLVM IR (codegen/), optimized by
LLVM's O3 pipeline and emitted as an object file, the Artifact that runtime/cpu_jit.py's
CpuJit loads (`jit` below is that CpuJit). It is kept apart from the loading so that a
process whose kernels all come from the offline cache imports neither this nor codegen's
lowering: runtime/jit.py loads it by name when the first kernel is compiled."""
from __future__ import annotations

import collections
import hashlib
import re

from fluxion._llvm import llvm
from fluxion.codegen import targets
from fluxion.codegen.lower import ModuleLowering, finish_text
from fluxion.runtime import compile_worker, object_blobs
from fluxion.runtime.kernel_meta import KernelMeta
from fluxion.runtime.thread_pool import FTZ_DECL_IR, MXCSR_FTZ


def _full(jit):
    return getattr(jit.cfg, "advanced_optimization", True)


def start_worker():
    """Start the compile worker (runtime/compile_worker.py) at the beginning of a cold
    compile, so that it has loaded LLVM when the module is ready."""
    compile_worker.start(targets.host_machine_options())


def optimized_object(jit, text, digest):
    """Machine code (an object file, or several joined: object_blobs.join_objects) of the
    module `text`, verified and optimized; the compile worker does part of it when it runs
    and the module splits. Each run of LLVM's optimizer through llvmlite leaks 30-80 KB (its
    PassBuilder allocates pass-instrumentation callbacks that nothing frees), so a kernel
    compiled again (after ti.reset, say: its text is the same, fields being addressed through
    symbols) reuses the object of its first compilation; the optimization level is part of
    the key."""
    key = (_full(jit), digest)
    obj = _object_memo.get(key)
    if obj is not None:
        _object_memo.move_to_end(key)
        return obj
    obj = _compile(jit, text)
    _object_memo[key] = obj
    while len(_object_memo) > _OBJECT_MEMO_SIZE:
        _object_memo.popitem(last=False)
    return obj


def _compile(jit, text):
    full = _full(jit)
    parts = compile_worker.split_module(text) if compile_worker.enabled() else None
    job = parts and compile_worker.submit(full, parts[1])
    if not job:
        return compile_worker.compile_text(llvm, jit.tm, text, full)
    try:
        mine = compile_worker.compile_text(llvm, jit.tm, parts[0], full)
    except RuntimeError:
        # (the split text of a module that does not verify: the whole one says why)
        job.result()
        return compile_worker.compile_text(llvm, jit.tm, text, full)
    theirs = job.result()
    if theirs is None:
        theirs = compile_worker.compile_text(llvm, jit.tm, parts[1], full)
    return object_blobs.join_objects([mine, theirs])


def build(jit, kernel):
    """The Artifact of a kernel's IR (after the passes): its machine code as an object
    file whose only outside references are symbols (the trees of the fields it addresses,
    the pool's dispatcher, the print callback, libm), and the KernelMeta a launch needs.
    Function and tree names start with a hash of the module's text, so the same kernel
    built in two processes is the same object, and different kernels never clash."""
    prints = []
    ml = ModuleLowering(kernel, targets.CPU, jit.datalayout, prints,
                        jit.cfg.fast_math, prefix=_PREFIX, symbolic_trees=True)
    module = ml.lower()
    text = finish_text(str(module))
    entry = ml.entry_name
    if _x86(jit.triple):
        text, entry = flush_to_zero(text, entry)
    digest = hashlib.blake2b(text.encode(), digest_size=20).hexdigest()
    prefix = "fx" + digest[:20] + "_"
    text = text.replace(_PREFIX, prefix)
    obj = optimized_object(jit, text, digest)
    trees = [(name.replace(_PREFIX, prefix), tree) for name, tree in ml.tree_symbols()]
    meta = KernelMeta.of(kernel, ml, entry.replace(_PREFIX, prefix), prints)
    # process-specific numbers left in the code (an address made into a constant) would
    # make the object wrong in another process
    portable = not any(int(a) >= 1 << 16 for a in _ADDRESS.findall(text))
    return Artifact(obj, meta, trees, text, portable)


class Artifact:
    """A kernel's machine code and launch metadata, and the trees its symbols name (in order:
    `<prefix>tree<k>` is trees[k])."""
    __slots__ = ("obj", "meta", "trees", "llvm_ir", "portable")

    def __init__(self, obj, meta, trees, llvm_ir, portable):
        self.obj, self.meta, self.trees = obj, meta, trees
        self.llvm_ir, self.portable = llvm_ir, portable

    def bindings(self):
        return {name: tree.buffer.ctypes.data for name, tree in self.trees}


_PREFIX = "fluxionPREFIX_"            # stands for the kernel's prefix until its text is known
_OBJECT_MEMO_SIZE = 256
_object_memo = collections.OrderedDict()   # (opt level, hash of module text) -> object file
_ADDRESS = re.compile(r'inttoptr \(i64 (\d+) to ')


def _x86(triple):
    return triple.split("-", 1)[0].lower() in ("x86_64", "amd64", "i386", "i686")


_DEFINE = re.compile(r'^(define [^\n]*)(?=\n\{)', re.M)
_FTZ_GROUP = 7001


def flush_to_zero(text, entry):
    """Kernels run with floating-point results that would be denormal flushed to zero, as in
    the original system (which sets MXCSR's FTZ bit on the thread that launches): the module
    with an entry that sets the bit for the launch and restores the caller's MXCSR after it
    (Python code keeps IEEE denormals), and every function marked so that LLVM's constant
    folding flushes as the hardware will. The pool's workers set the bit when they start
    (runtime/thread_pool.py). Returns (text, the new entry's name)."""
    text = _DEFINE.sub(rf"\1 #{_FTZ_GROUP}", text)
    wrapper = f"""
{FTZ_DECL_IR}
define void @"{entry}_ftz"(ptr %ctx) #{_FTZ_GROUP} {{
  %saved = alloca i32, align 4
  %csr = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %saved)
  %old = load i32, ptr %saved
  %new = or i32 %old, {MXCSR_FTZ}
  store i32 %new, ptr %csr
  call void @llvm.x86.sse.ldmxcsr(ptr %csr)
  call void @"{entry}"(ptr %ctx)
  call void @llvm.x86.sse.ldmxcsr(ptr %saved)
  ret void
}}
attributes #{_FTZ_GROUP} = {{ "denormal-fp-math"="preserve-sign,ieee" "denormal-fp-math-f32"="preserve-sign,ieee" }}
"""
    return text + wrapper, f"{entry}_ftz"
