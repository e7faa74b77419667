"""Reading an ELF relocatable object (what LLVM's code generator emits for a kernel): its
sections, symbols and relocations, as plain Python values. Only the 64-bit little-endian form
is read (x86-64 and AArch64 Linux); anything else raises NotElf, and its readers fall back to
LLVM. Used by the object loader (runtime/object_loader.py) and by the check of the names a
kernel calls (runtime/libcalls.py), neither of which needs LLVM for it."""
from __future__ import annotations

import struct
from typing import NamedTuple

# section types and flags (the ELF specification's values)
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 1, 2, 3, 4, 8, 9
SHT_X86_64_UNWIND = 0x70000001
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STB_LOCAL, STB_WEAK = 0, 2
STT_SECTION, STT_TLS = 3, 6
EM_X86_64 = 62

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class NotElf(ValueError):
    """Not a 64-bit little-endian relocatable ELF object, or a malformed one."""


class Section(NamedTuple):
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int

    @property
    def alloc(self):
        return bool(self.flags & SHF_ALLOC)


class Symbol(NamedTuple):
    name: str
    bind: int
    type: int
    shndx: int
    value: int


class Object:
    """One object file's sections and symbols; `relocations(section)` reads a RELA section."""

    def __init__(self, data):
        data = bytes(data)
        if len(data) < _HEADER.size or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise NotElf("not a 64-bit little-endian ELF object")
        (_ident, etype, self.machine, _ver, _entry, _phoff, shoff, _flags, _ehsize, _phsz,
         _phnum, shentsize, shnum, shstrndx) = _HEADER.unpack_from(data)
        if etype != 1:
            raise NotElf("not a relocatable object")
        if shentsize != _SECTION.size or shoff + shnum * shentsize > len(data):
            raise NotElf("section headers out of the file")
        self.data = data
        rows = [_SECTION.unpack_from(data, shoff + k * shentsize) for k in range(shnum)]
        # (the section names' table, as (start, size) in the file)
        names = (rows[shstrndx][4], rows[shstrndx][5]) if shstrndx < shnum else None
        self.sections = []
        for k, (name, typ, flags, _addr, offset, size, link, info, align, _ent) in \
                enumerate(rows):
            if typ != SHT_NOBITS and offset + size > len(data):
                raise NotElf(f"section {k} out of the file")
            text = self._string(names, name) if names is not None else ""
            self.sections.append(Section(k, text, typ, flags, offset, size, link, info,
                                         max(1, align)))
        self.symbols = []
        for sec in self.sections:
            if sec.type == SHT_SYMTAB:
                link = self.sections[sec.link]
                strings = (link.offset, link.size)
                for name, info, _other, shndx, value, _size in \
                        _SYMBOL.iter_unpack(self.contents(sec)):
                    self.symbols.append(Symbol(self._string(strings, name), info >> 4,
                                               info & 0xF, shndx, value))
                break

    def _string(self, table, offset):
        """The name at `offset` of the string table `table` ((start, size) in the file)."""
        start, size = table
        if offset >= size:
            raise NotElf("a name out of its string table")
        end = self.data.find(b"\0", start + offset, start + size)
        return self.data[start + offset:end if end >= 0 else start + size].decode()

    def contents(self, sec):
        return self.data[sec.offset:sec.offset + sec.size]

    def relocations(self, sec):
        """(offset, type, symbol index, addend) of a RELA section."""
        if sec.type != SHT_RELA:
            raise NotElf(f"section {sec.name}: REL relocations are not read")
        return [(off, info & 0xFFFFFFFF, info >> 32, addend)
                for off, info, addend in _RELA.iter_unpack(self.contents(sec))]

    def names(self):
        """(names used without a definition, names defined and visible to other objects)."""
        undefined, defined = [], []
        for s in self.symbols:
            if s.name and s.bind != STB_LOCAL:
                (undefined if s.shndx == SHN_UNDEF else defined).append(s.name)
        return undefined, defined
