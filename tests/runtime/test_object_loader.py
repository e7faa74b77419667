"""fluxion's own linker of machine code (runtime/object_loader.py) against MCJIT: objects with
every kind of reference LLVM emits for the host (constants, zeroed and initialized data,
tables of code addresses, a jump table, calls of libm, of a name the caller binds, between
two objects) run the same through both, and what it cannot link it says so instead of
linking it wrong."""
import ctypes
import math

import pytest

from fluxion.ir.errors import FluxionCompilationError, FluxionInternalError
from fluxion.runtime import cpu_jit, elf, libcalls, mcjit, object_loader

pytestmark = [pytest.mark.cpu_only,
              pytest.mark.skipif(not object_loader.available(),
                                 reason="the object loader links x86-64 Linux objects")]

PROGRAM = r"""
@table = internal constant [4 x double] [double 1.5, double 2.5, double -3.25, double 8.0]
@counter = internal global i64 0
@start = internal global i64 7
@ops = internal constant [2 x ptr] [ptr @twice, ptr @thrice]
declare double @tan(double)
declare i64 @fx_bound(i64)
declare i64 @other(i64)

define internal i64 @twice(i64 %x) noinline {
  %r = mul i64 %x, 2
  ret i64 %r
}
define internal i64 @thrice(i64 %x) noinline {
  %r = mul i64 %x, 3
  ret i64 %r
}
define double @lookup(i64 %i) {
  %k = and i64 %i, 3
  %p = getelementptr [4 x double], ptr @table, i64 0, i64 %k
  %v = load double, ptr %p
  %t = call double @tan(double %v)
  %s = fadd double %v, %t
  ret double %s
}
define i64 @count() {
  %c = load i64, ptr @counter
  %n = add i64 %c, 1
  store i64 %n, ptr @counter
  %b = load i64, ptr @start
  %r = add i64 %n, %b
  ret i64 %r
}
define i64 @apply(i64 %k, i64 %x) {
  %j = and i64 %k, 1
  %p = getelementptr [2 x ptr], ptr @ops, i64 0, i64 %j
  %f = load ptr, ptr %p
  %r = call i64 %f(i64 %x)
  %b = call i64 @fx_bound(i64 %r)
  %o = call i64 @other(i64 %b)
  ret i64 %o
}
define i64 @pick(i64 %k) {
entry:
  switch i64 %k, label %d [i64 0, label %a0  i64 1, label %a1  i64 2, label %a2
                           i64 3, label %a3  i64 4, label %a4  i64 5, label %a5
                           i64 6, label %a6  i64 7, label %a7]
a0: ret i64 11
a1: ret i64 23
a2: ret i64 37
a3: ret i64 41
a4: ret i64 53
a5: ret i64 67
a6: ret i64 71
a7: ret i64 89
d: ret i64 -1
}
"""

OTHER = r"""
@bias = internal global i64 1000
define i64 @other(i64 %x) {
  %b = load i64, ptr @bias
  %r = add i64 %x, %b
  ret i64 %r
}
"""

BOUND = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(lambda x: x * 10 + 1)


def _module(body):
    tm = mcjit.target_machine()
    return f'target triple = "{tm.triple}"\ntarget datalayout = "{tm.target_data}"\n' + body


@pytest.fixture(scope="module")
def objects():
    return [mcjit.emit_object(_module(PROGRAM)), mcjit.emit_object(_module(OTHER))]


def _symbols():
    return {"fx_bound": ctypes.cast(BOUND, ctypes.c_void_p).value}


def _run(code):
    lookup = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)(code.address("lookup"))
    count = ctypes.CFUNCTYPE(ctypes.c_int64)(code.address("count"))
    apply = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(
        code.address("apply"))
    pick = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(code.address("pick"))
    return ([lookup(i) for i in range(6)], [count() for _ in range(3)],
            [apply(k, x) for k in range(3) for x in (-4, 0, 9)], [pick(k) for k in range(-1, 10)])


def test_the_loader_runs_what_mcjit_runs(objects):
    def resolve(name):
        return _symbols().get(name) or libcalls.address(name)
    flat = object_loader.Image(objects, resolve, "the test program")
    theirs = mcjit.Engine(objects, _symbols(), "the test program")
    got, want = _run(flat), _run(theirs)
    assert got == want
    table = [1.5, 2.5, -3.25, 8.0]
    assert got[0] == [v + math.tan(v) for v in (table * 2)[:6]]
    assert got[1] == [8, 9, 10]                 # initialized data and zeroed data, written
    assert got[2] == [(x * (2, 3)[k & 1]) * 10 + 1 + 1000 for k in range(3) for x in (-4, 0, 9)]
    assert got[3] == [-1, 11, 23, 37, 41, 53, 67, 71, 89, -1, -1]


def _maps(lo, hi):
    """The protections of this process's mappings that overlap [lo, hi)."""
    out = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            span, prot = line.split()[:2]
            a, b = (int(x, 16) for x in span.split("-"))
            if a < hi and b > lo:
                out.append((max(a, lo), min(b, hi), prot[:3]))
    return out


def test_code_is_not_writable_and_constants_are_read_only(objects):
    image = object_loader.Image(objects, lambda n: _symbols().get(n) or libcalls.address(n),
                                "the test program")
    maps = _maps(image.base, image.base + image.size)
    prots = [p for _, _, p in maps]
    assert "r-x" in prots and "r--" in prots and "rw-" in prots
    assert not any("w" in p and "x" in p for p in prots)
    func = image.address("count")
    assert [p for a, b, p in maps if a <= func < b] == ["r-x"]
    image.close()
    assert image.base == 0


def test_a_name_nothing_defines_is_an_error_naming_the_kernel(objects):
    with pytest.raises(FluxionCompilationError, match="kernel 'k9'.*fx_bound"):
        object_loader.Image(objects, libcalls.address, "k9")


def test_what_it_does_not_link_goes_to_mcjit_or_fails_when_strict(monkeypatch):
    # a common symbol (C's tentative definition): the flat loader does not link it; `link`
    # gives it to MCJIT
    obj = mcjit.emit_object(_module(r"""
@slot = common global i64 0
define i64 @bump() {
  %v = load i64, ptr @slot
  %n = add i64 %v, 1
  store i64 %n, ptr @slot
  ret i64 %n
}"""))
    with pytest.raises(object_loader.Unsupported):
        object_loader.Image([obj], libcalls.address, "common")
    monkeypatch.delenv("FLUXION_OBJECT_LOADER", raising=False)
    code = cpu_jit.link([obj], {}, "common")
    assert isinstance(code, mcjit.Engine)
    bump = ctypes.CFUNCTYPE(ctypes.c_int64)(code.address("bump"))
    assert [bump(), bump()] == [1, 2]
    monkeypatch.setenv("FLUXION_OBJECT_LOADER", "strict")
    with pytest.raises(FluxionInternalError, match="common: the object loader does not link"):
        cpu_jit.link([obj], {}, "common")
    monkeypatch.setenv("FLUXION_OBJECT_LOADER", "mcjit")
    assert isinstance(cpu_jit.link([obj], {}, "common"), mcjit.Engine)


@pytest.mark.parametrize("cut", [0, 3, 60, 200, -1])
def test_a_damaged_object_is_refused_not_run(objects, cut):
    broken = bytearray(objects[1][:cut] if cut >= 0 else objects[1])
    if cut == -1:      # section headers pointing outside the file
        broken[0x28:0x30] = (len(broken) + 4096).to_bytes(8, "little")
    with pytest.raises(object_loader.Unsupported):
        object_loader.Image([bytes(broken)], libcalls.address, "damaged")


def test_an_unknown_relocation_is_refused():
    image = bytearray(16)
    with pytest.raises(object_loader.Unsupported, match="relocation type 99"):
        object_loader._apply(image, 0, 0x1000, 99, 0)
    with pytest.raises(object_loader.Unsupported, match="out of range"):
        object_loader._apply(image, 0, 0x1000, 2, 1 << 40)       # PC32, 1 TiB away
    object_loader._apply(image, 8, 0x1000, 1, -1)                # 64-bit: wraps to 2**64 - 1
    assert image[8:16] == b"\xff" * 8


def test_names_of_an_object(objects):
    undefined, defined = elf.Object(objects[0]).names()
    assert {"tan", "fx_bound", "other"} <= set(undefined)
    assert {"lookup", "count", "apply", "pick"} <= set(defined)
    assert "twice" not in defined            # (internal: not visible to other objects)


def test_an_image_collected_late_in_teardown(objects, monkeypatch):
    # the interpreter's exit clears modules' globals before it collects what is left: an
    # Image collected then still unmaps (the benchmarks printed "Exception ignored in
    # Image.__del__: 'NoneType' object is not callable"), and none is unmapped while the
    # interpreter finalizes (a daemon thread may still run its code)
    def make():
        return object_loader.Image(objects, lambda n: _symbols().get(n) or libcalls.address(n),
                                   "the test program")
    image = make()
    monkeypatch.setattr(object_loader, "_munmap", None)
    monkeypatch.setattr(object_loader, "sys", None)
    image.__del__()
    assert image.base == 0
    monkeypatch.undo()
    kept = make()
    monkeypatch.setattr(object_loader, "sys", None)
    kept.__del__(_finalizing=lambda: True)
    assert kept.base != 0
    monkeypatch.undo()
    kept.close()
