"""A CUDA device emulated on the CPU: the CUDA backend's own kernels, run where no GPU exists.

`FLUXION_CUDA_EMULATOR=1` makes `ti.cuda` open this device instead of libcuda. It runs the
LLVM IR that the NVPTX lowering (`codegen/nvptx.py`) produced, compiled for the host: the
same tasks, launches, grid-stride and exact loops, context by value, output and temporaries
buffers, staging of host arrays and device copies of the fields as on a GPU. Only the leaves
that exist solely on a GPU are replaced by host functions of the same meaning:
- the special registers (thread, block, block size, grid size) read the running lane's record;
- `barrier0` is a barrier of the block's live threads (a thread that returned no longer counts,
  as on the device), and `shfl.sync.down` exchanges through the block's buffer between two
  barriers;
- the hardware approximations (`sin.approx.f`, `ex2.approx.f`, ...) and libdevice's `__nv_*`
  functions call the host's libm; `vprintf` formats on the host.

A task that synchronizes (barriers, shuffles) runs every lane of a block on its own OS thread,
one block after another; any other task runs its lanes one after another on the calling thread
(the last lane first, the opposite of the CPU backend's order), which is a valid schedule for
lanes that never wait for each other. A grid-stride loop whose
only synchronization is a warp's shuffles runs on at most two warps per block: any block size
computes the same result there, and each lane costs a thread. A kernel calling a function
that exists on the host but not on a GPU fails to load, naming it.

Device memory is one reserved range of the address space, and every address a kernel makes
from an integer (a context slot) or has built in (a field) is checked against it: host memory
reaching a kernel is an error, as it is on a GPU.

What this cannot check: speed, PTX itself (ptxas does), and races between lanes.
"""
from __future__ import annotations

import collections
import ctypes
import re
import sys
import threading

import llvmlite.binding as llvm
import numpy as np

_MAX_BLOCK = 1024
# libdevice functions the lowering may call (nvptx._LIBDEVICE_UNARY, pow, atan2), by their
# libm name; rsqrt is defined apart
_LIBDEVICE = ("sin", "cos", "tan", "asin", "acos", "atan", "tanh", "exp", "log", "pow", "atan2",
              "sqrt")
_APPROX = {"sin.approx.f": "llvm.sin.f32", "cos.approx.f": "llvm.cos.f32",
           "ex2.approx.f": "llvm.exp2.f32", "lg2.approx.f": "llvm.log2.f32"}


def enabled():
    import os
    return os.environ.get("FLUXION_CUDA_EMULATOR", "") not in ("", "0")


class EmulatorError(RuntimeError):
    pass


# --- the runtime: lanes, barriers, shuffles and launchers, in LLVM IR -----------------------------
# %Lane: tid, ctaid, ntid, nctaid, block, entry, ctx, out, temps
# %Block: mutex, condition, live threads, arrived, generation, exchange buffer
_RUNTIME = r"""
%Lane = type {{ i32, i32, i32, i32, ptr, ptr, ptr, ptr, ptr }}
%Block = type {{ [64 x i8], [64 x i8], i32, i32, i32, i32, [{maxb} x i64] }}

declare ptr @pthread_getspecific(i32)
declare i32 @pthread_setspecific(i32, ptr)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare float @llvm.sin.f32(float)
declare float @llvm.cos.f32(float)
declare float @llvm.exp2.f32(float)
declare float @llvm.log2.f32(float)
declare float @llvm.sqrt.f32(float)

@bad_pointer = global i64 0
@arena_lo = global i64 0
@arena_hi = global i64 0

; an address a kernel computed from an integer (a context slot): it must lie in device memory
; (or be null, never dereferenced); the first one that does not is kept for the launch's error
define ptr @emu_device_ptr(i64 %v) {{
entry:
  %lo = load i64, ptr @arena_lo
  %hi = load i64, ptr @arena_hi
  %above = icmp uge i64 %v, %lo
  %below = icmp ult i64 %v, %hi
  %inside = and i1 %above, %below
  %null = icmp eq i64 %v, 0
  %fine = or i1 %inside, %null
  br i1 %fine, label %done, label %bad
bad:
  %seen = load i64, ptr @bad_pointer
  %first = icmp eq i64 %seen, 0
  %keep = select i1 %first, i64 %v, i64 %seen
  store i64 %keep, ptr @bad_pointer
  br label %done
done:
  %p = inttoptr i64 %v to ptr
  ret ptr %p
}}

define internal ptr @lane() {{
  %l = call ptr @pthread_getspecific(i32 {key})
  ret ptr %l
}}

define internal i32 @field(i32 %k) {{
  %l = call ptr @lane()
  %p = getelementptr i32, ptr %l, i32 %k
  %v = load i32, ptr %p
  ret i32 %v
}}

define i32 @emu_sreg_tid() {{
  %v = call i32 @field(i32 0)
  ret i32 %v
}}
define i32 @emu_sreg_ctaid() {{
  %v = call i32 @field(i32 1)
  ret i32 %v
}}
define i32 @emu_sreg_ntid() {{
  %v = call i32 @field(i32 2)
  ret i32 %v
}}
define i32 @emu_sreg_nctaid() {{
  %v = call i32 @field(i32 3)
  ret i32 %v
}}

; one arrival at the block's barrier; %leaving = 1: the thread ended and stops counting
define internal void @arrive(ptr %blk, i32 %leaving) {{
entry:
  %m = getelementptr %Block, ptr %blk, i32 0, i32 0
  %c = getelementptr %Block, ptr %blk, i32 0, i32 1
  %livep = getelementptr %Block, ptr %blk, i32 0, i32 2
  %arrp = getelementptr %Block, ptr %blk, i32 0, i32 3
  %genp = getelementptr %Block, ptr %blk, i32 0, i32 4
  call i32 @pthread_mutex_lock(ptr %m)
  %gen = load i32, ptr %genp
  %live0 = load i32, ptr %livep
  %live = sub i32 %live0, %leaving
  store i32 %live, ptr %livep
  %arr0 = load i32, ptr %arrp
  %staying = sub i32 1, %leaving
  %arr = add i32 %arr0, %staying
  store i32 %arr, ptr %arrp
  %full = icmp sge i32 %arr, %live
  %some = icmp sgt i32 %arr, 0
  %release = and i1 %full, %some
  br i1 %release, label %open, label %check
open:
  store i32 0, ptr %arrp
  %gen1 = add i32 %gen, 1
  store i32 %gen1, ptr %genp
  call i32 @pthread_cond_broadcast(ptr %c)
  br label %done
check:
  %isleaving = icmp ne i32 %leaving, 0
  br i1 %isleaving, label %done, label %wait
wait:
  call i32 @pthread_cond_wait(ptr %c, ptr %m)
  %gen2 = load i32, ptr %genp
  %same = icmp eq i32 %gen2, %gen
  br i1 %same, label %wait, label %done
done:
  call i32 @pthread_mutex_unlock(ptr %m)
  ret void
}}

define internal ptr @block_of(ptr %l) {{
  %bp = getelementptr %Lane, ptr %l, i32 0, i32 4
  %b = load ptr, ptr %bp
  ret ptr %b
}}

define void @emu_barrier() {{
  %l = call ptr @lane()
  %b = call ptr @block_of(ptr %l)
  call void @arrive(ptr %b, i32 0)
  ret void
}}

; shfl.sync.down with a full mask: lane + offset's value when that lane is in the warp (and the
; block), else one's own
define i32 @emu_shfl_down_i32(i32 %mask, i32 %v, i32 %off, i32 %clamp) {{
entry:
  %l = call ptr @lane()
  %b = call ptr @block_of(ptr %l)
  %tid = call i32 @field(i32 0)
  %ntid = call i32 @field(i32 2)
  %slot = getelementptr %Block, ptr %b, i32 0, i32 6, i32 %tid
  %wide = zext i32 %v to i64
  store i64 %wide, ptr %slot
  call void @arrive(ptr %b, i32 0)
  %laneid = and i32 %tid, 31
  %src = add i32 %laneid, %off
  %inwarp = icmp ule i32 %src, %clamp
  %other = add i32 %tid, %off
  %inblock = icmp ult i32 %other, %ntid
  br i1 %inwarp, label %present, label %keep
present:
  br i1 %inblock, label %take, label %absent
absent:
  ; no such lane (a partial warp): the device leaves the value undefined, so make it loud
  br label %keep
take:
  %oslot = getelementptr %Block, ptr %b, i32 0, i32 6, i32 %other
  %ov = load i64, ptr %oslot
  %o32 = trunc i64 %ov to i32
  br label %keep
keep:
  %r = phi i32 [ %v, %entry ], [ %o32, %take ], [ 2143289344, %absent ]
  call void @arrive(ptr %b, i32 0)
  ret i32 %r
}}

define float @emu_shfl_down_f32(i32 %mask, float %v, i32 %off, i32 %clamp) {{
  %bits = bitcast float %v to i32
  %r = call i32 @emu_shfl_down_i32(i32 %mask, i32 %bits, i32 %off, i32 %clamp)
  %f = bitcast i32 %r to float
  ret float %f
}}

define float @emu_rsqrt_approx(float %x) {{
  %s = call float @llvm.sqrt.f32(float %x)
  %r = fdiv float 1.0, %s
  ret float %r
}}
{approx}
{libdevice}

; every lane of every block on the calling thread, one after another, the last first: the CPU
; backend runs indices in order, so a result that depends on the order of lanes (a race on a
; device) comes out differently here
define void @emu_run_serial(ptr %fn, ptr %ctx, ptr %out, ptr %temps, i32 %grid, i32 %block,
                            ptr %l) {{
entry:
  %ntidp = getelementptr %Lane, ptr %l, i32 0, i32 2
  store i32 %block, ptr %ntidp
  %nctaidp = getelementptr %Lane, ptr %l, i32 0, i32 3
  store i32 %grid, ptr %nctaidp
  call i32 @pthread_setspecific(i32 {key}, ptr %l)
  br label %blocks
blocks:
  %bi = phi i32 [ 0, %entry ], [ %bn, %blocks_next ]
  %bmore = icmp slt i32 %bi, %grid
  br i1 %bmore, label %threads, label %done
threads:
  %ti = phi i32 [ 0, %blocks ], [ %tn, %threads ]
  %tidp = getelementptr %Lane, ptr %l, i32 0, i32 0
  %tlast = sub i32 %block, 1
  %trev = sub i32 %tlast, %ti
  store i32 %trev, ptr %tidp
  %ctaidp = getelementptr %Lane, ptr %l, i32 0, i32 1
  %blast = sub i32 %grid, 1
  %brev = sub i32 %blast, %bi
  store i32 %brev, ptr %ctaidp
  call void %fn(ptr %ctx, ptr %out, ptr %temps)
  %tn = add i32 %ti, 1
  %tmore = icmp slt i32 %tn, %block
  br i1 %tmore, label %threads, label %blocks_next
blocks_next:
  %bn = add i32 %bi, 1
  br label %blocks
done:
  call i32 @pthread_setspecific(i32 {key}, ptr null)
  ret void
}}

define internal ptr @thread_main(ptr %l) {{
  call i32 @pthread_setspecific(i32 {key}, ptr %l)
  %ep = getelementptr %Lane, ptr %l, i32 0, i32 5
  %e = load ptr, ptr %ep
  %cp = getelementptr %Lane, ptr %l, i32 0, i32 6
  %c = load ptr, ptr %cp
  %op = getelementptr %Lane, ptr %l, i32 0, i32 7
  %o = load ptr, ptr %op
  %tp = getelementptr %Lane, ptr %l, i32 0, i32 8
  %t = load ptr, ptr %tp
  call void %e(ptr %c, ptr %o, ptr %t)
  %b = call ptr @block_of(ptr %l)
  call void @arrive(ptr %b, i32 1)
  ret ptr null
}}

; each block's lanes on their own threads (they meet at barriers); blocks one after another.
; %lanes: %block Lane records, %tids: %block thread handles, %blk: the block's record,
; %attr: the threads' attributes (their stack size).
; Returns 0, or the error of the first pthread_create that failed.
define i32 @emu_run_threaded(ptr %fn, ptr %ctx, ptr %out, ptr %temps, i32 %grid, i32 %block,
                             ptr %lanes, ptr %tids, ptr %blk, ptr %attr) {{
entry:
  br label %blocks
blocks:
  %bi = phi i32 [ 0, %entry ], [ %bn, %joined ]
  %bmore = icmp slt i32 %bi, %grid
  br i1 %bmore, label %setup, label %done
setup:
  %livep = getelementptr %Block, ptr %blk, i32 0, i32 2
  store i32 %block, ptr %livep
  %arrp = getelementptr %Block, ptr %blk, i32 0, i32 3
  store i32 0, ptr %arrp
  br label %spawn
spawn:
  %ti = phi i32 [ 0, %setup ], [ %tn, %spawned ]
  %l = getelementptr %Lane, ptr %lanes, i32 %ti
  %f0 = getelementptr %Lane, ptr %l, i32 0, i32 0
  store i32 %ti, ptr %f0
  %f1 = getelementptr %Lane, ptr %l, i32 0, i32 1
  store i32 %bi, ptr %f1
  %f2 = getelementptr %Lane, ptr %l, i32 0, i32 2
  store i32 %block, ptr %f2
  %f3 = getelementptr %Lane, ptr %l, i32 0, i32 3
  store i32 %grid, ptr %f3
  %f4 = getelementptr %Lane, ptr %l, i32 0, i32 4
  store ptr %blk, ptr %f4
  %f5 = getelementptr %Lane, ptr %l, i32 0, i32 5
  store ptr %fn, ptr %f5
  %f6 = getelementptr %Lane, ptr %l, i32 0, i32 6
  store ptr %ctx, ptr %f6
  %f7 = getelementptr %Lane, ptr %l, i32 0, i32 7
  store ptr %out, ptr %f7
  %f8 = getelementptr %Lane, ptr %l, i32 0, i32 8
  store ptr %temps, ptr %f8
  %th = getelementptr i64, ptr %tids, i32 %ti
  %err = call i32 @pthread_create(ptr %th, ptr %attr, ptr @thread_main, ptr %l)
  %failed = icmp ne i32 %err, 0
  br i1 %failed, label %fail, label %spawned
spawned:
  %tn = add i32 %ti, 1
  %tmore = icmp slt i32 %tn, %block
  br i1 %tmore, label %spawn, label %join
join:
  %ji = phi i32 [ 0, %spawned ], [ %jn, %join ]
  %jp = getelementptr i64, ptr %tids, i32 %ji
  %jh = load i64, ptr %jp
  call i32 @pthread_join(i64 %jh, ptr null)
  %jn = add i32 %ji, 1
  %jmore = icmp slt i32 %jn, %block
  br i1 %jmore, label %join, label %joined
joined:
  %bn = add i32 %bi, 1
  br label %blocks
fail:
  ret i32 %err
done:
  ret i32 0
}}
"""


def _libdevice_ir():
    out = []
    for name in _LIBDEVICE:
        two = name in ("pow", "atan2")
        for ty, suffix in (("float", "f"), ("double", "")):
            params = f"{ty} %a, {ty} %b" if two else f"{ty} %a"
            out.append(f"declare {ty} @{name}{suffix}({params})\n"
                       f"define {ty} @__nv_{name}{suffix}({params}) {{\n"
                       f"  %r = call {ty} @{name}{suffix}({params})\n  ret {ty} %r\n}}")
    for ty, suffix in (("float", "f"), ("double", "")):
        out.append(f"define {ty} @__nv_rsqrt{suffix}({ty} %a) {{\n"
                   f"  %s = call {ty} @sqrt{suffix}({ty} %a)\n"
                   f"  %r = fdiv {ty} 1.0, %s\n  ret {ty} %r\n}}")
    return "\n".join(out)


def _approx_ir():
    return "\n".join(
        f"define float @emu_{nv.split('.')[0]}_approx(float %x) {{\n"
        f"  %r = call float @{host}(float %x)\n  ret float %r\n}}"
        for nv, host in _APPROX.items())


def _runtime_text(key):
    return _RUNTIME.format(key=key, maxb=_MAX_BLOCK, approx=_approx_ir(),
                           libdevice=_libdevice_ir())


# what kernels may call: the runtime's functions and the host's vprintf
_KNOWN = frozenset(re.findall(r'^define (?!internal)(?:\w+ )+@([\w.]+)\(', _runtime_text(0),
                              re.M)) | {"emu_vprintf"}


# --- kernels: the NVPTX module made a host module -------------------------------------------------
_RENAME = {
    "llvm.nvvm.read.ptx.sreg.tid.x": "emu_sreg_tid",
    "llvm.nvvm.read.ptx.sreg.ctaid.x": "emu_sreg_ctaid",
    "llvm.nvvm.read.ptx.sreg.ntid.x": "emu_sreg_ntid",
    "llvm.nvvm.read.ptx.sreg.nctaid.x": "emu_sreg_nctaid",
    "llvm.nvvm.barrier0": "emu_barrier",
    "llvm.nvvm.shfl.sync.down.i32": "emu_shfl_down_i32",
    "llvm.nvvm.shfl.sync.down.f32": "emu_shfl_down_f32",
    "llvm.nvvm.rsqrt.approx.f": "emu_rsqrt_approx",
    "vprintf": "emu_vprintf",
    **{f"llvm.nvvm.{nv}": f"emu_{nv.split('.')[0]}_approx" for nv in _APPROX},
}
_BARRIER, _SHUFFLE = '@"llvm.nvvm.barrier0"', '@"llvm.nvvm.shfl.sync.down.'
_INTTOPTR = re.compile(r'= inttoptr i64 (%"[^"]+"|%[\w.]+) to [^,\n]+')
_ADDRESS_CONSTANT = re.compile(r'inttoptr \(i64 (\d+) to')
_KERNEL_DEF = re.compile(r'^define ptx_kernel void @"([^"]+)"\(\[(\d+) x i64\]\* byval', re.M)
_DECLARE = re.compile(r'^declare [^@]*@"?([\w.$]+)"?\(', re.M)


def host_module_text(text, triple, datalayout):
    """The NVPTX module `text` (from CudaModuleLowering, before optimization) as a host module,
    and its tasks: name -> (context slots, "barrier" | "shuffle" | None: how its lanes wait
    for each other)."""
    tasks = {}
    for m in _KERNEL_DEF.finditer(text):
        start = m.start()
        end = text.find("\n}", start)
        body = text[start:end]
        sync = "barrier" if _BARRIER in body else "shuffle" if _SHUFFLE in body else None
        tasks[m.group(1)] = (int(m.group(2)), sync)
    for old, new in _RENAME.items():
        text = text.replace(f'@"{old}"', f'@"{new}"')
    text = re.sub(r'^target triple = .*$', f'target triple = "{triple}"', text, flags=re.M)
    text = re.sub(r'^target datalayout = .*$', f'target datalayout = "{datalayout}"', text,
                  flags=re.M)
    text = text.replace("define ptx_kernel ", "define ")
    # every address made from an integer at run time is checked against device memory
    text, n = _INTTOPTR.subn(r'= call ptr @"emu_device_ptr"(i64 \1)', text)
    if n:
        text += '\ndeclare ptr @"emu_device_ptr"(i64) nounwind willreturn memory(none)\n'
    stray = sorted({n for n in re.findall(r'llvm\.nvvm\.[\w.]+', text)})
    if stray:
        raise EmulatorError(f"the CUDA emulator has no host version of {', '.join(stray)}")
    used = set(re.findall(r'@"?([\w.$]+)"?\(', text.replace("declare", "")))
    for name in _DECLARE.findall(text):
        if name.startswith("llvm.") or name in _KNOWN or name not in used:
            continue
        if name in ("fluxion_parallel_for", "fluxion_print"):
            continue
        raise EmulatorError(f"a CUDA kernel calls `{name}`, which does not exist on a GPU")
    # a host entry per task: the by-value context copied for each lane, as a launch does
    for name, (slots, _) in tasks.items():
        text += (f'\ndefine void @"emu_lane_{name}"(ptr %c, ptr %o, ptr %t) {{\n'
                 f'  call void @"{name}"(ptr byval([{slots} x i64]) align 8 %c, ptr %o, ptr %t)\n'
                 f'  ret void\n}}\n')
    return text, tasks


# --- vprintf ----------------------------------------------------------------------------------
_SPEC = re.compile(r'%([-+ #0]*\d*(?:\.\d+)?)(ll[duxXo]|[eEfFgG]|%)')


def _vprintf(fmt, args):
    """Device printf's formatting: the values are 8 bytes each (64-bit integers, doubles)."""
    out, k, pos = [], 0, 0
    text = fmt.decode()
    for m in _SPEC.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        flags, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        raw = ctypes.c_int64.from_address(args + 8 * k).value
        k += 1
        if conv[-1] in "eEfFgG":
            v = ctypes.c_double.from_buffer_copy(ctypes.c_int64(raw)).value
        else:
            v = raw if conv == "lld" else raw & ((1 << 64) - 1)
        out.append(("%" + flags + conv[-1].replace("u", "d")) % v)
    out.append(text[pos:])
    sys.stdout.write("".join(out))
    return 0


_VPRINTF = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(_vprintf)
_RUN_SERIAL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)
_RUN_THREADED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                 ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_void_p)
_LANE_BYTES = 16 + 5 * 8
_BLOCK_BYTES = 128 + 16 + 8 * _MAX_BLOCK


def _target_machine():
    # the host's own CPU, as the CPU backend compiles for (half conversions need F16C)
    from fluxion.codegen.cpu_jit import _target_machine as host
    return host()


_device = None


def device():
    """The process's one emulated device (its runtime is compiled once)."""
    global _device
    if _device is None:
        _device = Device()
    return _device


class Device:
    """The emulated device: `cuda_driver.Device`'s interface, with memory in host RAM."""
    name = "fluxion CUDA emulator (CPU)"
    sm = 90
    multiprocessors = 1
    # blocks of a grid-stride launch: two, so that work crosses blocks as on a device
    grid_blocks = 2
    runs_llvm = True

    def __init__(self):
        if not sys.platform.startswith("linux"):
            # glibc's pthread types: a 4-byte key, all-zero static initializers
            raise EmulatorError("the CUDA emulator runs on Linux (glibc) only")
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libc = ctypes.CDLL(None)
        key = ctypes.c_uint32()
        if libc.pthread_key_create(ctypes.byref(key), None) != 0:
            raise EmulatorError("pthread_key_create failed")
        self.triple = llvm.get_process_triple()
        self.datalayout = str(_target_machine().target_data)
        text = _runtime_text(key.value)
        text = f'target triple = "{self.triple}"\ntarget datalayout = "{self.datalayout}"\n' + text
        mod = llvm.parse_assembly(text)
        mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, _target_machine())
        self.engine.finalize_object()
        for name in _KNOWN - {"emu_vprintf"}:
            llvm.add_symbol(name, self.engine.get_function_address(name))
        llvm.add_symbol("emu_vprintf", ctypes.cast(_VPRINTF, ctypes.c_void_p).value)
        self._serial = _RUN_SERIAL(self.engine.get_function_address("emu_run_serial"))
        self._threaded = _RUN_THREADED(self.engine.get_function_address("emu_run_threaded"))
        self._lane = np.zeros(_LANE_BYTES, np.uint8)
        self._lanes = np.zeros(_LANE_BYTES * _MAX_BLOCK, np.uint8)
        self._tids = np.zeros(_MAX_BLOCK, np.uint64)
        # mutex and condition variable all zero bytes: their static initializers (glibc)
        self._block = np.zeros(_BLOCK_BYTES, np.uint8)
        # lane threads with 1 MiB stacks (not the default 8): they start faster
        self._attr = np.zeros(256, np.uint8)
        libc.pthread_attr_init(self._attr.ctypes.data_as(ctypes.c_void_p))
        libc.pthread_attr_setstacksize(self._attr.ctypes.data_as(ctypes.c_void_p),
                                       ctypes.c_size_t(1 << 20))
        self._arena = _Arena()
        for name, value in (("arena_lo", self._arena.lo), ("arena_hi", self._arena.hi)):
            ctypes.c_uint64.from_address(self.engine.get_global_value_address(name)).value = value
        self._bad = ctypes.c_uint64.from_address(self.engine.get_global_value_address(
            "bad_pointer"))
        # one launch at a time, as on one stream (the lane records are shared)
        self._lock = threading.Lock()

    # device memory: one reserved range of host memory, so that an address tells device
    # memory from host memory
    def alloc(self, nbytes):
        return self._arena.alloc(nbytes)

    def free(self, ptr):
        self._arena.free(ptr)

    def _check_address(self, addr, what):
        if addr and not self._arena.lo <= addr < self._arena.hi:
            raise EmulatorError(f"a CUDA kernel {what} {addr:#x}, which is host memory, not "
                                f"device memory (on a GPU: an illegal address)")

    def to_device(self, dptr, host_ptr, nbytes):
        ctypes.memmove(dptr, host_ptr, nbytes)

    def to_host(self, host_ptr, dptr, nbytes):
        ctypes.memmove(host_ptr, dptr, nbytes)

    def synchronize(self):
        pass

    def current(self):
        pass

    def load_llvm(self, text):
        text, tasks = host_module_text(text, self.triple, self.datalayout)
        for m in _ADDRESS_CONSTANT.finditer(text):
            self._check_address(int(m.group(1)), "has the address")
        mod = _optimized(text)
        engine = llvm.create_mcjit_compiler(mod, _target_machine())
        engine.finalize_object()
        # the compiled kernel holds the module (and so its engine): no list here, which
        # would keep every kernel of every ti.init of the process alive
        return Module(engine, tasks)

    def launch(self, func, grid, block, params):
        if not 1 <= block <= _MAX_BLOCK:
            raise EmulatorError(f"block size {block} is outside 1..{_MAX_BLOCK}")
        ctx = params[0]
        out = ctypes.c_uint64.from_address(params[1]).value
        temps = ctypes.c_uint64.from_address(params[2]).value
        for addr in (out, temps):
            self._check_address(addr, "was launched with the buffer")
        with self._lock:
            self._run(func, grid, block, ctx, out, temps)
            bad, self._bad.value = self._bad.value, 0
        if bad:
            self._check_address(bad, "used the address")

    def _run(self, func, grid, block, ctx, out, temps):
        if func.sync:
            if func.sync == "shuffle" and block % 32 == 0:
                block = min(block, 64)
            err = self._threaded(func.entry, ctx, out, temps, grid, block,
                                 self._lanes.ctypes.data, self._tids.ctypes.data,
                                 self._block.ctypes.data, self._attr.ctypes.data)
            if err:
                raise EmulatorError(f"could not start a thread for the emulated block ({err})")
        else:
            self._serial(func.entry, ctx, out, temps, grid, block, self._lane.ctypes.data)


_OPTIMIZED_CACHE_SIZE = 256
_optimized_cache = collections.OrderedDict()     # host module text -> optimized text


def _optimized(text):
    """The host module of `text`, optimized. Each run of LLVM's optimizer through llvmlite
    leaks 30-80 KB (see cpu_jit._optimized), and a kernel compiled again after ti.reset has the
    same text here (CUDA kernels carry no per-compilation prefix, and the arena gives freed
    fields their addresses back), so the optimized text of recent modules is kept."""
    opt = _optimized_cache.get(text)
    if opt is not None:
        _optimized_cache.move_to_end(text)
        return llvm.parse_assembly(opt)
    mod = llvm.parse_assembly(text)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(_target_machine(), pto)
    pb.getModulePassManager().run(mod, pb)
    _optimized_cache[text] = str(mod)
    while len(_optimized_cache) > _OPTIMIZED_CACHE_SIZE:
        _optimized_cache.popitem(last=False)
    return mod


class _Arena:
    """Device allocations from one reserved range of address space (pages are committed as
    they are touched): blocks of power-of-two sizes from 256 bytes, reused after a free."""
    def __init__(self):
        import mmap
        for gib in (64, 16, 4, 1):
            try:
                # MAP_NORESERVE (0x4000 on Linux): reserve address space, not memory
                self.map = mmap.mmap(-1, gib << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                                     | getattr(mmap, "MAP_NORESERVE", 0x4000))
                break
            except OSError:
                continue
        else:
            raise EmulatorError("could not reserve address space for the emulated device")
        self.lo = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.hi = self.lo + len(self.map)
        self.top = self.lo
        self.free_blocks = {}      # size -> addresses
        self.size_of = {}

    def alloc(self, nbytes):
        size = 256
        while size < nbytes:
            size *= 2
        blocks = self.free_blocks.get(size)
        if blocks:
            addr = blocks.pop()
            if size < 1 << 20:          # (larger blocks were given back: already zeros)
                ctypes.memset(addr, 0, size)
        else:
            # blocks of a page or more start on a page (they are given back by pages)
            align = min(size, 4096)
            addr = (self.top + align - 1) & ~(align - 1)
            if addr + size > self.hi:
                raise EmulatorError(f"the emulated device is out of memory ({nbytes} bytes)")
            self.top = addr + size
        self.size_of[addr] = size
        return addr

    def free(self, addr):
        size = self.size_of.pop(addr, None)
        if size is None:
            return
        if size >= 1 << 20:
            # give the pages back (they read as zeros when touched again)
            import mmap
            self.map.madvise(mmap.MADV_DONTNEED, addr - self.lo, size)
        self.free_blocks.setdefault(size, []).append(addr)


class Function:
    __slots__ = ("entry", "sync")

    def __init__(self, entry, sync):
        self.entry, self.sync = entry, sync


class Module:
    def __init__(self, engine, tasks):
        self.engine = engine
        self.tasks = tasks

    def function(self, name):
        return Function(self.engine.get_function_address(f"emu_lane_{name}"),
                        self.tasks[name][1])
