"""Machine code loaded without LLVM: the ELF objects that LLVM's code generator emitted for a
kernel (or for the thread pool), linked into the process by fluxion itself.

Why: a process whose kernels all come from the offline cache needs nothing of LLVM but its
linker (MCJIT), and loading LLVM's bindings (a 178 MB library and llvmlite's modules) took
64-76 ms of such a process's first kernel, more than the whole of the rest. What MCJIT does
for these objects is small, because fluxion emits them with the large code model
(`codemodel="jitdefault"` on x86-64): every reference to another section or to an outside
function is an absolute 64-bit address (R_X86_64_64), and only the unwind tables hold
PC-relative ones. So an Image lays the objects' sections out in one anonymous mapping (code,
constants, data, each from a page boundary), fills each relocation with the address it names,
and then makes the code read+execute and the constants read-only.

What it does not link raises Unsupported, and the caller links with MCJIT instead (runtime/
cpu_jit.py): another machine than x86-64 or another system than Linux, thread-local data,
common symbols, a relocation type not listed in `_apply`, a 32-bit field whose value does not
fit. The unwind tables (.eh_frame) are not loaded: nothing unwinds through a kernel (its
errors are codes in its context, and Python's exceptions do not cross ctypes). A name that
nothing defines is an error naming the kernel (libcalls.missing_error), never address 0.
"""
from __future__ import annotations

import ctypes
import platform
import struct
import sys

from fluxion.runtime import elf, libcalls

PAGE = 4096
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20      # (Linux's values)
_MASK64 = (1 << 64) - 1

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_long]
_mprotect = _libc.mprotect
_mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_munmap = _libc.munmap
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Unsupported(Exception):
    """Objects this loader does not link; MCJIT does."""


def available():
    """Whether this process's objects can be loaded here: x86-64 Linux."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def _align(n, a):
    return -(-n // a) * a


class Image:
    """The objects `objects` (bytes of ELF relocatable objects, which may call each other)
    linked at one place in memory. `resolve(name)`: the address of a name they use and do
    not define, or None; `what`: the kernel they are, for errors. `address(name)` is a
    defined global's address. The memory is unmapped when the Image is collected: whoever
    calls its code keeps it."""

    def __init__(self, objects, resolve, what):
        self.base = 0
        objs = []
        for data in objects:
            try:
                o = elf.Object(data)
            except elf.NotElf as e:
                raise Unsupported(str(e)) from None
            if o.machine != elf.EM_X86_64:
                raise Unsupported(f"machine {o.machine}")
            objs.append(o)
        groups = ([], [], [])       # code, constants, data: (object number, section)
        for k, o in enumerate(objs):
            for sec in o.sections:
                if not sec.alloc or sec.size == 0 or sec.type == elf.SHT_X86_64_UNWIND or \
                        sec.name.startswith(".eh_frame"):
                    continue
                if sec.flags & elf.SHF_TLS:
                    raise Unsupported(f"thread-local section {sec.name}")
                g = 0 if sec.flags & elf.SHF_EXECINSTR else 2 if sec.flags & elf.SHF_WRITE else 1
                groups[g].append((k, sec))
        placed = {}
        bounds = []
        size = 0
        for g in groups:
            size = start = _align(size, PAGE)
            for k, sec in g:
                size = _align(size, sec.align)
                placed[k, sec.index] = size
                size += sec.size
            bounds.append((start, size))
        self.size = max(PAGE, _align(size, PAGE))
        base = _mmap(None, self.size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS,
                     -1, 0)
        if base is None or base == _MASK64:
            raise MemoryError(f"kernel '{what}': no memory for its machine code "
                              f"(mmap: errno {ctypes.get_errno()})")
        self.base = base
        try:
            self.symbols = self._link(objs, placed, resolve, what)
            for (start, end), prot in zip(bounds, (_PROT_READ | _PROT_EXEC, _PROT_READ)):
                if end > start and _mprotect(base + start, _align(end, PAGE) - start, prot):
                    raise OSError(ctypes.get_errno(), "mprotect of a kernel's code failed")
        except BaseException:
            self.close()
            raise

    def _link(self, objs, placed, resolve, what):
        base = self.base
        image = bytearray(self.size)
        for (k, index), off in placed.items():
            sec = objs[k].sections[index]
            if sec.type != elf.SHT_NOBITS:
                image[off:off + sec.size] = objs[k].contents(sec)
        defined = {}
        for k, o in enumerate(objs):
            for s in o.symbols:
                if s.name and s.bind != elf.STB_LOCAL and s.shndx not in (
                        elf.SHN_UNDEF, elf.SHN_ABS, elf.SHN_COMMON) and (k, s.shndx) in placed:
                    # (the first definition stands, as for the halves of a split module)
                    defined.setdefault(s.name, base + placed[k, s.shndx] + s.value)
        missing = []
        for k, o in enumerate(objs):
            addrs = []
            for s in o.symbols:
                if s.shndx == elf.SHN_UNDEF:
                    a = None if not s.name else defined.get(s.name)
                    if a is None and s.name:
                        a = resolve(s.name)
                        if a is None and s.bind != elf.STB_WEAK:
                            missing.append(s.name)
                    addrs.append(a or 0)
                elif s.shndx == elf.SHN_ABS:
                    addrs.append(s.value)
                elif s.shndx == elf.SHN_COMMON:
                    raise Unsupported(f"common symbol {s.name}")
                elif s.type == elf.STT_TLS:
                    raise Unsupported(f"thread-local symbol {s.name}")
                else:
                    off = placed.get((k, s.shndx))
                    addrs.append(None if off is None else base + off + s.value)
            if missing:
                continue
            for sec in o.sections:
                if sec.type == elf.SHT_REL:
                    raise Unsupported("REL relocations")
                if sec.type != elf.SHT_RELA or (k, sec.info) not in placed:
                    continue
                at = placed[k, sec.info]
                for off, typ, sym, addend in o.relocations(sec):
                    target = addrs[sym] if sym < len(addrs) else None
                    if target is None:
                        raise Unsupported(f"a relocation against a section not loaded "
                                          f"({sec.name})")
                    _apply(image, at + off, base + at + off, typ, target + addend)
        if missing:
            raise libcalls.missing_error(what, sorted(set(missing)))
        ctypes.memmove(base, (ctypes.c_char * self.size).from_buffer(image), self.size)
        return defined

    def address(self, name):
        return self.symbols.get(name, 0)

    def close(self, _unmap=_munmap):
        # (the default argument keeps munmap for a call from __del__ late in teardown)
        if self.base:
            _unmap(self.base, self.size)
            self.base = 0

    def __del__(self, _finalizing=sys.is_finalizing):
        # not while the interpreter exits: a daemon thread may still be in the code, and the
        # system takes the memory back with the process anyway (module globals such as `sys`
        # may be None by then: hence the default argument)
        if not _finalizing():
            self.close()


_U64, _I32, _U32 = struct.Struct("<Q"), struct.Struct("<i"), struct.Struct("<I")


def _apply(image, pos, place, typ, value):
    """Relocation `typ` (x86-64 psABI numbers) at image offset `pos` (address `place`),
    `value` being S + A."""
    if typ == 1:                              # R_X86_64_64: S + A
        _U64.pack_into(image, pos, value & _MASK64)
    elif typ == 24:                           # R_X86_64_PC64: S + A - P
        _U64.pack_into(image, pos, (value - place) & _MASK64)
    elif typ in (2, 4):                       # R_X86_64_PC32, PLT32 (no PLT here: direct)
        _fit32(image, pos, value - place, _I32)
    elif typ == 10:                           # R_X86_64_32
        _fit32(image, pos, value, _U32)
    elif typ == 11:                           # R_X86_64_32S
        _fit32(image, pos, value, _I32)
    elif typ != 0:                            # (R_X86_64_NONE: nothing)
        raise Unsupported(f"relocation type {typ}")


def _fit32(image, pos, value, form):
    try:
        form.pack_into(image, pos, value)
    except struct.error:
        raise Unsupported("a 32-bit relocation out of range") from None
