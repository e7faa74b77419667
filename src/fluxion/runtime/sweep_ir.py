"""LLVM IR functions that the native parts of deactivate_all share (runtime/block_sweep.py,
runtime/list_sweep.py): each module's text starts with these (internal to it) and the
declarations they use."""
from __future__ import annotations

import ctypes

from fluxion.runtime import offline_cache
from fluxion.runtime.jit import jit_module

def load_args(*slots):
    """IR lines loading slots of the function's i64 array `%args` (each `%a<k>`): `(k, name)`
    an i64 `%name`, `(k, name, "ptr")` an address `%name` (read as `%name_i`), `(k, name,
    "i32")` a truncated `%name` (read as `%name64`). No newline after the last line: the
    IR text around a call ends one line before it and starts the next line after it."""
    out = []
    for k, name, *kind in slots:
        read = {(): name, ("ptr",): name + "_i", ("i32",): name + "64"}[tuple(kind)]
        out += [f"  %a{k} = getelementptr i64, ptr %args, i64 {k}",
                f"  %{read} = load i64, ptr %a{k}"]
        if kind == ["ptr"]:
            out.append(f"  %{name} = inttoptr i64 %{read} to ptr")
        elif kind == ["i32"]:
            out.append(f"  %{name} = trunc i64 %{read} to i32")
    return "\n".join(out)


HELPERS = r"""
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)

; [p, p + n) = 0 for a short n (a row of a block's states: 16 bytes for blocks of 16^2),
; by words, without the call to the C library's memset that the intrinsic makes of a length
; not known here (8192 calls for the band's 512 blocks)
define internal void @zero_short(ptr %p, i64 %n) {
entry:
  %words = lshr i64 %n, 3
  br label %w_head
w_head:
  %w = phi i64 [0, %entry], [%w1, %w_body]
  %w_more = icmp ult i64 %w, %words
  br i1 %w_more, label %w_body, label %b_start
w_body:
  %wq = getelementptr i64, ptr %p, i64 %w
  store i64 0, ptr %wq, align 1
  %w1 = add i64 %w, 1
  br label %w_head
b_start:
  %done = shl i64 %words, 3
  br label %b_head
b_head:
  %b = phi i64 [%done, %b_start], [%b1, %b_body]
  %b_more = icmp ult i64 %b, %n
  br i1 %b_more, label %b_body, label %out
b_body:
  %bq = getelementptr i8, ptr %p, i64 %b
  store i8 0, ptr %bq
  %b1 = add i64 %b, 1
  br label %b_head
out:
  ret void
}

; pages[a / P - p0 .. (b - 1) / P - p0] |= bit
define internal void @mark(ptr %pages, i64 %a, i64 %b, i64 %P, i64 %p0, i8 %bit) {
entry:
  %f = udiv i64 %a, %P
  %bl = sub i64 %b, 1
  %l = udiv i64 %bl, %P
  br label %head
head:
  %g = phi i64 [%f, %entry], [%g1, %body]
  %more = icmp ule i64 %g, %l
  br i1 %more, label %body, label %done
body:
  %at = sub i64 %g, %p0
  %q = getelementptr i8, ptr %pages, i64 %at
  %old = load i8, ptr %q
  %new = or i8 %old, %bit
  store i8 %new, ptr %q
  %g1 = add i64 %g, 1
  br label %head
done:
  ret void
}
"""


def runtime_code(ir, what):
    """The machine code of IR text `ir` for this host: compiled at the first call in a process
    that does not find it in the offline cache (runtime/cpu_jit.py's session_runtime_code, as
    the thread pool), then linked without LLVM where the object loader serves."""
    host = offline_cache.host_description()
    text = (f'target triple = "{host["triple"]}"\n'
            f'target datalayout = "{host["datalayout"]}"\n' + ir)
    return jit_module("cpu").session_runtime_code(text, what)


def functions(ir, what, **signatures):
    """(the machine code of `ir` (runtime_code), then for each name=[argument types] of
    `signatures`, in order, that function as a ctypes function returning nothing)."""
    code = runtime_code(ir, what)
    return [code] + [ctypes.CFUNCTYPE(None, *types)(code.address(name))
                     for name, types in signatures.items()]
