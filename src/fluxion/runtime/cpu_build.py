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
from fluxion.codegen.text import function_text, module_text
from fluxion.runtime import compile_worker, object_blobs
from fluxion.runtime.kernel_meta import KernelMeta
from fluxion.runtime.thread_pool import FTZ_DECL_IR, MXCSR_FTZ


def _full(jit):
    return getattr(jit.cfg, "advanced_optimization", True)


def start_worker():
    """Start the compile worker (runtime/compile_worker.py) at the beginning of a cold
    compile, so that it has loaded LLVM when the module is ready."""
    compile_worker.start(targets.host_machine_options())


def optimized_object(jit, text, digest, early=None, prefix=None):
    """Machine code (an object file, or several joined: object_blobs.join_objects) of the
    module `text`, verified and optimized; the compile worker does part of it when it runs
    and the module splits (with the tasks that `early`, an _EarlyParts, sent it while the
    module was lowered, their names to be given `prefix`). Each run of LLVM's optimizer
    through llvmlite leaks 30-80 KB (its PassBuilder allocates pass-instrumentation callbacks
    that nothing frees), so a kernel compiled again (after ti.reset, say: its text is the
    same, fields being addressed through symbols) reuses the object of its first
    compilation; the optimization level is part of the key."""
    key = (_full(jit), digest)
    obj = _object_memo.get(key)
    if obj is not None:
        _object_memo.move_to_end(key)
        return obj
    obj = _compile(jit, text, early, prefix)
    _object_memo[key] = obj
    while len(_object_memo) > _OBJECT_MEMO_SIZE:
        _object_memo.popitem(last=False)
    return obj


def _compile(jit, text, early, prefix):
    full = _full(jit)
    sent = {}
    if early is not None and early.sent:
        sent = {name.replace(_PREFIX, prefix): part for name, part in early.sent.items()}
    parts = None
    if sent:
        parts = compile_worker.split_module(text, {n: p.cost for n, p in sent.items()})
        if parts is None:
            sent = {}       # (a task sent early that cannot move after all: compiled here)
    if not sent:
        parts = compile_worker.split_module(text) if compile_worker.enabled() else None
    job = parts and parts[1] and compile_worker.submit(full, parts[1])
    if not job and not sent:
        return compile_worker.compile_text(llvm, jit.tm, text, full)
    try:
        objs = [compile_worker.compile_text(llvm, jit.tm, parts[0], full)]
    except RuntimeError:
        # (the split text of a module that does not verify: the whole one says why)
        for part in sent.values():
            part.result(prefix)
        if job:
            job.result()
        return compile_worker.compile_text(llvm, jit.tm, text, full)
    for part in sent.values():
        obj = part.result(prefix)
        if obj is None:
            obj = compile_worker.compile_text(llvm, jit.tm, part.final_text(prefix), full)
        objs.append(obj)
    if parts[1]:
        theirs = job.result() if job else None
        if theirs is None:
            theirs = compile_worker.compile_text(llvm, jit.tm, parts[1], full)
        objs.append(theirs)
    return object_blobs.join_objects(objs)


class _EarlyParts:
    """The parallel tasks of a module being lowered that go to the compile worker as soon as
    each is lowered, rather than when the module is whole: the worker starts on them while
    this process lowers the rest, writes the module's text, hashes and splits it (the
    MLS-MPM substep's gather, lowered last of its five tasks and the longer of the two
    parts, goes that much earlier: 12 to 19% of the Python part). A task's names carry the
    placeholder _PREFIX, as long as the kernel's prefix, until the text of the whole module
    gives that prefix; its object file is then given the prefix by replacing the
    placeholder's bytes (it is only in the symbols' names), which is the object that its
    text with the prefix compiles to (the tests compare them).

    A task goes early if it could move in split_module (it refers to nothing the module
    defines: only to itself, the trees' symbols and declared functions, never to a kernel's
    own function declared before its body is lowered), costs at least MIN_EARLY_COST, and
    the tasks sent so far cost no more than those kept: the worker compiles its parts one
    after another, and what is kept here is compiled after the Python part. The rest of the
    module is shared out as before, the tasks sent counting on the worker's side."""

    def __init__(self, jit):
        self.full = _full(jit)
        self.ftz = _x86(jit.triple)
        self.sent = {}          # task name (with _PREFIX) -> _Part
        self.kept_cost = 0
        self.sent_cost = 0

    def task_lowered(self, ml, fn):
        if not compile_worker.is_task(fn.name, fn.linkage):
            return
        # (estimated from the function's instructions: writing its text here, before the
        # text of the task that goes early, would delay that one)
        cost = task_cost(fn)
        if cost < compile_worker.MIN_EARLY_COST or self.sent_cost > self.kept_cost:
            self.kept_cost += cost
            return
        piece = function_text(fn)
        if not all(ml.merely_declares(n) for n in compile_worker.references(fn.name, piece)):
            self.kept_cost += cost
            return
        text = ml.part_text(fn).replace(f'define internal void @"{fn.name}"',
                                        f'define void @"{fn.name}"', 1)
        if self.ftz:
            text = _ftz_marks(text)
        part = _Part(self.full, text, cost)
        if part.job is None and part.obj is None:
            self.kept_cost += cost      # (no worker: the module is compiled as without one)
            return
        self.sent[fn.name] = part
        self.sent_cost += cost


def task_cost(fn):
    """compile_worker.cost of an ir.Function's text, counted on its instructions."""
    ops = compile_worker.FLOAT_OPS
    return sum(compile_worker.block_cost(len(b.instructions),
                                         sum(1 for i in b.instructions if i.opname in ops))
               for b in fn.blocks)


class _Part:
    """A task compiled apart from its module: by the worker (`job`), or found in the memo of
    parts compiled before (`obj`), its names with the placeholder _PREFIX."""

    def __init__(self, full, text, cost):
        self.text, self.cost = text, cost
        self.key = (full, hashlib.blake2b(text.encode(), digest_size=20).digest())
        self.full = full
        self.obj = _part_memo.get(self.key)
        self.job = compile_worker.submit(full, text) if self.obj is None else None

    def result(self, prefix):
        """Its object with the kernel's prefix, or None where the worker failed."""
        obj = self.obj
        if obj is None and self.job is not None:
            obj = self.job.result()
            if obj is not None:
                _part_memo[self.key] = obj
                while len(_part_memo) > _OBJECT_MEMO_SIZE:
                    _part_memo.popitem(last=False)
        if obj is None:
            return None
        return obj.replace(_PREFIX.encode(), prefix.encode())

    def final_text(self, prefix):
        return self.text.replace(_PREFIX, prefix)


def build(jit, kernel):
    """The Artifact of a kernel's IR (after the passes): its machine code as an object
    file whose only outside references are symbols (the trees of the fields it addresses,
    the pool's dispatcher, the print callback, libm), and the KernelMeta a launch needs.
    Function and tree names start with a hash of the module's text, so the same kernel
    built in two processes is the same object, and different kernels never clash."""
    prints = []
    # (whether the worker runs: asked once, at the start of the compile)
    early = _EarlyParts(jit) if compile_worker.enabled() and compile_worker.running() else None
    ml = ModuleLowering(kernel, targets.CPU, jit.datalayout, prints, jit.cfg.fast_math,
                        prefix=_PREFIX, symbolic_trees=True,
                        on_task=early.task_lowered if early is not None else None)
    module = ml.lower()
    text = finish_text(module_text(module))
    entry = ml.entry_name
    if _x86(jit.triple):
        text, entry = flush_to_zero(text, entry)
    digest = hashlib.blake2b(text.replace(_PREFIX, _HASHED_AS).encode(),
                             digest_size=20).hexdigest()
    prefix = "fx" + digest[:20] + "_"
    text = text.replace(_PREFIX, prefix)
    obj = optimized_object(jit, text, digest, early, prefix)
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


# stands for the kernel's prefix ("fx" + 20 hex digits + "_") until its text is known: as long
# as it, so that an object compiled with it takes the prefix by a replacement of its bytes
# (_EarlyParts), and with capitals, which the prefix's hex digits never are
_PREFIX = "fx" + "PENDINGKERNELPREFIX".ljust(20, "X") + "_"
# what the placeholder reads as in the text that is hashed: its spelling before it had to be as
# long as the prefix, so that kernels keep the names (and objects) they had
_HASHED_AS = "fluxionPREFIX_"
_OBJECT_MEMO_SIZE = 256
_object_memo = collections.OrderedDict()   # (opt level, hash of module text) -> object file
_part_memo = collections.OrderedDict()     # (opt level, hash of a part's text) -> its object
_ADDRESS = re.compile(r'inttoptr \(i64 (\d+) to ')


def _x86(triple):
    return triple.split("-", 1)[0].lower() in ("x86_64", "amd64", "i386", "i686")


_DEFINE = re.compile(r'^(define [^\n]*)(?=\n\{)', re.M)
_FTZ_GROUP = 7001
_FTZ_ATTRIBUTES = (f'attributes #{_FTZ_GROUP} = {{ "denormal-fp-math"="preserve-sign,ieee" '
                   f'"denormal-fp-math-f32"="preserve-sign,ieee" }}')


def _ftz_marks(text):
    """`text` with every function it defines marked as flush_to_zero marks them."""
    return _DEFINE.sub(rf"\1 #{_FTZ_GROUP}", text) + "\n" + _FTZ_ATTRIBUTES + "\n"


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
{_FTZ_ATTRIBUTES}
"""
    return text + wrapper, f"{entry}_ftz"
