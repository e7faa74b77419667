"""passes/lower_struct_for.py: a struct-for becomes the range-for, index arithmetic, activity
tests and cell loops that the frontend emitted for it before it had a statement of its own.

On IR text (the expected lowering written out), and on whole kernels: the lowering of the
frontend's IR is, for dense kernels, the text that the frontend made before struct-fors had
a statement (before.ir, of e197844; struct_for_cases.py remakes it from
another build when the frontend changes what it emits on purpose), in plain and debug builds;
the code of the driver's order (simplify, lower, simplify's cse and bounds) is that of
lowering first (but for index checks that the loop's space proves in a debug build); the
programs' results are NumPy's."""
import pathlib
import re

import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionInternalError
from fluxion.ir.parser import parse_kernel
from fluxion.lang import runtime
from fluxion.lang.sparse import mask_of
from fluxion.passes import lower_struct_for, verify

from ir.irtext import check_pass
import struct_for_cases

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False)
    yield
    ti.reset()


def run(kernel, cfg):
    return lower_struct_for.run(kernel, cfg or runtime.config())


def test_a_2d_loop_with_an_offset_is_flattened_and_shifted():
    x = ti.field(ti.f32, shape=(5, 4), offset=(-2, 1))
    # 20 iterations; j is the fastest: i = k // 4 - 2, j = k % 4 + 1
    check_pass(run, """
    kernel k() {
      $0 : parallel_struct_for i32 @x [(-2, 3), (1, 5)] block_dim=32
        $1 = struct_index i32 $0[0]
        $2 = struct_index i32 $0[1]
        $3 = global_ptr f32 @x [$1, $2]
        $4 = const f32 1.0
        global_store $3 $4
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 20
      $2 : parallel_for $0 .. $1 block_dim=32
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 4
        $7 = div_nonneg i32 $3 $6
        $8 = const i32 -2
        $9 = add i32 $7 $8
        $10 = const i32 1
        $11 = add i32 $5 $10
        $12 = global_ptr f32 @x [$9, $11]
        $13 = const f32 1.0
        global_store $12 $13
    }""", {"x": x})


def test_a_1d_serial_loop_runs_over_its_bounds_and_a_0d_one_once():
    x = ti.field(ti.i32, shape=8, offset=3)
    s = ti.field(ti.i32, shape=())
    check_pass(run, """
    kernel k() {
      $0 : struct_for i32 @x [(3, 11)]
        $1 = struct_index i32 $0[0]
        $2 = global_ptr i32 @x [$1]
        global_store $2 $1
      $3 : parallel_struct_for i32 @s [] grouped
        $4 = global_ptr i32 @s []
        $5 = const i32 1
        $6 = atomic_add i32 $4 $5
    }""", """
    kernel k() {
      $0 = const i32 3
      $1 = const i32 11
      $2 : for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr i32 @x [$3]
        global_store $4 $3
      $5 = const i32 0
      $6 = const i32 1
      $7 : parallel_for $5 .. $6
        $8 = loop_index i32 $7
        $9 = global_ptr i32 @s []
        $10 = const i32 1
        $11 = atomic_add i32 $9 $10
    }""", {"x": x, "s": s})


def test_a_bitmasked_loop_tests_each_element_and_a_pointer_loop_each_cell():
    bm = ti.root.bitmasked(ti.ij, (4, 4))
    xm = ti.field(ti.f32)
    bm.place(xm)
    ptr = ti.root.pointer(ti.i, 8)
    xp = ti.field(ti.f32)
    ptr.dense(ti.i, 4).place(xp)
    env = {"xm": xm, "xp": xp, "bits": mask_of(bm), "cells": mask_of(ptr)}
    # the pointer's cells hold 4 elements: the loop runs over its 8 cells, tests each once
    # and visits its elements in a serial loop
    check_pass(run, """
    kernel k() {
      $0 : parallel_struct_for i32 @xm [(0, 4), (0, 4)]
        $1 = struct_index i32 $0[0]
        $2 = struct_index i32 $0[1]
        $3 = global_ptr f32 @xm [$1, $2]
        $4 = const f32 1.0
        global_store $3 $4
      $5 : parallel_struct_for i32 @xp [(0, 32)]
        $6 = struct_index i32 $5[0]
        $7 = global_ptr f32 @xp [$6]
        $8 = const f32 1.0
        global_store $7 $8
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 16
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 4
        $7 = div_nonneg i32 $3 $6
        $8 = global_ptr u8 @bits [$7, $5]
        $9 = global_load u8 $8
        $10 = const i32 0
        $11 = cast i32 $9
        $12 = cmp_ne i32 $11 $10
        if $12
          $13 = global_ptr f32 @xm [$7, $5]
          $14 = const f32 1.0
          global_store $13 $14
      $15 = const i32 0
      $16 = const i32 8
      $17 : parallel_for $15 .. $16
        $18 = loop_index i32 $17
        $19 = const i32 4
        $20 = mul i32 $18 $19
        $21 = const i32 4
        $22 = div_nonneg i32 $20 $21
        $23 = global_ptr u8 @cells [$22]
        $24 = global_load u8 $23
        $25 = const i32 0
        $26 = cast i32 $24
        $27 = cmp_ne i32 $26 $25
        if $27
          $28 = const i32 4
          $29 = const i32 0
          $30 : for $29 .. $28
            $31 = loop_index i32 $30
            $32 = add i32 $20 $31
            $33 = global_ptr f32 @xp [$32]
            $34 = const f32 1.0
            global_store $33 $34
    }""", env)


_CELLS_2D = """
    kernel k() {
      $0 : parallel_struct_for i32 @xq [(0, 6), (0, 8)]
        $1 = struct_index i32 $0[0]
        $2 = struct_index i32 $0[1]
        $3 = global_ptr f32 @xq [$1, $2]
        $4 = const f32 1.0
        global_store $3 $4
    }"""


def test_bitmasked_cells_of_2x4_elements_are_visited_by_two_nested_loops():
    # elements tested one by one in a cell spanning two dimensions: one serial loop per
    # dimension (the last innermost), whose indices add to the cell's origin undivided
    ptr = ti.root.pointer(ti.ij, (3, 2))
    xq = ti.field(ti.f32)
    bm = ptr.bitmasked(ti.ij, (2, 4))
    bm.place(xq)
    check_pass(run, _CELLS_2D, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 6
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 2
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 2
        $7 = div_nonneg i32 $3 $6
        $8 = const i32 2
        $9 = mul i32 $7 $8
        $10 = const i32 4
        $11 = mul i32 $5 $10
        $12 = const i32 2
        $13 = div_nonneg i32 $9 $12
        $14 = const i32 4
        $15 = div_nonneg i32 $11 $14
        $16 = global_ptr u8 @cells [$13, $15]
        $17 = global_load u8 $16
        $18 = const i32 0
        $19 = cast i32 $17
        $20 = cmp_ne i32 $19 $18
        if $20
          $21 = const i32 0
          $22 = const i32 2
          $23 : for $21 .. $22
            $24 = loop_index i32 $23
            $25 = const i32 0
            $26 = const i32 4
            $27 : for $25 .. $26
              $28 = loop_index i32 $27
              $29 = add i32 $9 $24
              $30 = add i32 $11 $28
              $31 = global_ptr u8 @bits [$29, $30]
              $32 = global_load u8 $31
              $33 = const i32 0
              $34 = cast i32 $32
              $35 = cmp_ne i32 $34 $33
              if $35
                $36 = global_ptr f32 @xq [$29, $30]
                $37 = const f32 1.0
                global_store $36 $37
    }""", {"xq": xq, "cells": mask_of(ptr), "bits": mask_of(bm)})


def test_dense_cells_of_2x4_elements_keep_one_loop():
    # (must not nest: untested elements of a dense cell, whose single loop LLVM vectorizes)
    ptr = ti.root.pointer(ti.ij, (3, 2))
    xq = ti.field(ti.f32)
    ptr.dense(ti.ij, (2, 4)).place(xq)
    check_pass(run, _CELLS_2D, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 6
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 2
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 2
        $7 = div_nonneg i32 $3 $6
        $8 = const i32 2
        $9 = mul i32 $7 $8
        $10 = const i32 4
        $11 = mul i32 $5 $10
        $12 = const i32 2
        $13 = div_nonneg i32 $9 $12
        $14 = const i32 4
        $15 = div_nonneg i32 $11 $14
        $16 = global_ptr u8 @cells [$13, $15]
        $17 = global_load u8 $16
        $18 = const i32 0
        $19 = cast i32 $17
        $20 = cmp_ne i32 $19 $18
        if $20
          $21 = const i32 8
          $22 = const i32 0
          $23 : for $22 .. $21
            $24 = loop_index i32 $23
            $25 = const i32 4
            $26 = mod_nonneg i32 $24 $25
            $27 = const i32 4
            $28 = div_nonneg i32 $24 $27
            $29 = add i32 $9 $28
            $30 = add i32 $11 $26
            $31 = global_ptr f32 @xq [$29, $30]
            $32 = const f32 1.0
            global_store $31 $32
    }""", {"xq": xq, "cells": mask_of(ptr)})


def test_a_serial_pointer_loop_tests_every_element():
    # (a `break` in a serial loop must leave the whole loop: no inner loop over a cell)
    ptr = ti.root.pointer(ti.i, 2)
    xp = ti.field(ti.f32)
    ptr.dense(ti.i, 4).place(xp)
    check_pass(run, """
    kernel k() {
      $0 : struct_for i32 @xp [(0, 8)]
        $1 = struct_index i32 $0[0]
        break
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = div_nonneg i32 $3 $4
        $6 = global_ptr u8 @cells [$5]
        $7 = global_load u8 $6
        $8 = const i32 0
        $9 = cast i32 $7
        $10 = cmp_ne i32 $9 $8
        if $10
          break
    }""", {"xp": xp, "cells": mask_of(ptr)})


def test_a_kernel_without_struct_for_is_left_alone():
    x = ti.field(ti.f32, shape=4)
    check_pass(run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 4
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        global_store $4 $4
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 4
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        global_store $4 $4
    }""", {"x": x}, changed=False)


def test_the_verifier_wants_a_struct_index_inside_its_loop():
    x = ti.field(ti.f32, shape=4)
    k = parse_kernel("""
    kernel k() {
      $0 : parallel_struct_for i32 @x [(0, 4)]
        $1 = struct_index i32 $0[0]
      $2 = struct_index i32 $0[0]
    }""", {"x": x})
    with pytest.raises(FluxionInternalError, match="struct-for that does not enclose it"):
        verify.run(k)
    k = parse_kernel("""
    kernel k() {
      $0 : parallel_struct_for i32 @x [(0, 4)]
        $1 = struct_index i32 $0[1]
    }""", {"x": x})
    with pytest.raises(FluxionInternalError, match="no dimension 1"):
        verify.run(k)


def _before():
    text = (pathlib.Path(__file__).parent / "before.ir").read_text()
    out, key = {}, None
    for line in text.splitlines():
        if line.startswith("# == "):
            key = tuple(line[5:].split())
            out[key] = []
        elif key is not None:
            out[key].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_dense_kernels_lower_to_what_the_former_frontend_made(monkeypatch, debug):
    # (before.ir is the IR of a frontend that emitted a load for every read of a local:
    # what this build's frontend makes without its forwarding of locals, ir/builder.py)
    monkeypatch.setenv("FLUXION_NO_FRONTEND_FORWARD", "1")
    got = struct_for_cases.capture(monkeypatch.setattr, debug=debug, locs=False)
    want = _before()
    mode = "debug" if debug else "plain"
    assert sorted(k for m, k in want if m == mode) == sorted(struct_for_cases.DENSE)
    for name in struct_for_cases.DENSE:
        # (debug builds print source locations: the cases' file, wherever the checkout is)
        assert _here(got[name]["lowered"]) == _here(want[mode, name]), name


def _here(text):
    return re.sub(r'File "[^"]*struct_for_cases\.py"', 'File "struct_for_cases.py"', text)


def test_checks_the_lowering_adds_keep_the_codes_they_had_before_the_body(monkeypatch):
    # debug build: the read of the pointer's cell is bounds-checked (code 0, made first by
    # the frontend of before), the checks of the body come after it: that of `x[i]` (code 1,
    # which simplify removes before the lowering: i lies in the loop's space) and the
    # program's own assert (code 2)
    ti.init(arch=ti.cpu, offline_cache=False, debug=True)
    ptr = ti.root.pointer(ti.i, 4)
    x = ti.field(ti.i32)
    ptr.dense(ti.i, 4).place(x)
    seen = []
    plain = lower_struct_for.run

    def spy(ir, cfg):
        changed = plain(ir, cfg)
        if ir.name == "k":
            seen.append(([(s.code, ir.errors[s.code][0]) for s in S.walk(ir.body)
                          if isinstance(s, S.AssertStmt)], [e[0] for e in ir.errors]))
        return changed

    monkeypatch.setattr(lower_struct_for, "run", spy)

    @ti.kernel
    def k():
        for i in x:
            assert x[i] < 5, "too big"

    x[5] = 7
    with pytest.raises(AssertionError, match="too big"):
        k()
    codes, table = seen[0]
    assert [c for c, _ in codes] == [0, 2]
    assert codes[0][1].startswith("Out of bound access") and "too big" in codes[-1][1]
    assert "'<active cells of a pointer node>'" in table[0] and "field 'x'" in table[1]


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_simplify_before_the_lowering_gives_the_code_of_lowering_first(monkeypatch, debug):
    # (the driver's order since 2026-11-28: simplify on the struct-fors, lower them, cse and
    # bounds again; before, the lowering came first)
    with monkeypatch.context() as m:
        first = struct_for_cases.final(m.setattr, debug, lower_first=True)
    got = struct_for_cases.final(monkeypatch.setattr, debug)
    assert sorted(got) == sorted(first)
    differ = [k for k in got if got[k] != first[k]]
    # but for the checks of a debug build's indices into a dynamic list, which the loop's
    # space proves (0 <= j < 64), and the lowered loop's bounds (a list's length) do not
    assert differ == (["dynamic"] if debug else [])
    if debug:
        def before_access(text):
            lines = text.splitlines()
            at = next(k for k, line in enumerate(lines) if "global_ptr i32 @xd" in line)
            return lines[at - 1].split()[0]

        def checks(text):
            return len(re.findall(r"\bassert\b", text))
        assert before_access(first["dynamic"]) == "assert"
        assert before_access(got["dynamic"]) != "assert"
        assert checks(got["dynamic"]) == checks(first["dynamic"]) - 1


def test_struct_fors_of_every_kind_compute_what_numpy_does():
    ptr = ti.root.pointer(ti.ij, (3, 2))
    xp = ti.field(ti.i32)
    ptr.dense(ti.ij, (2, 4)).place(xp, offset=(-1, 2))
    dyn = ti.root.dense(ti.i, 3).dynamic(ti.j, 16, chunk_size=4)
    xd = ti.field(ti.i32)
    dyn.place(xd)
    total = ti.field(ti.i32, shape=())

    @ti.kernel
    def fill():
        xp[-1, 2] = 1
        xp[4, 9] = 2
        for i in range(3):
            for j in range(i * 5):
                ti.append(xd.parent(), i, j)

    @ti.kernel
    def visit():
        for i, j in xp:
            total[None] += xp[i, j] * 100 + (i + 1) * (j - 2) + 1
        for I in ti.grouped(xd):
            total[None] += xd[I] + 1000

    fill()
    visit()
    want = 0
    # active cells: the one holding (-1, 2) (rows -1..0, columns 2..5) and (4, 9)'s
    # (rows 3..4, columns 6..9): every element of an active cell is visited, zero or not
    for rows, cols in (((-1, 1), (2, 6)), ((3, 5), (6, 10))):
        for i in range(*rows):
            for j in range(*cols):
                v = {(-1, 2): 1, (4, 9): 2}.get((i, j), 0)
                want += v * 100 + (i + 1) * (j - 2) + 1
    lists = [np.arange(i * 5) for i in range(3)]
    want += sum(int(v) + 1000 for lst in lists for v in lst)
    assert total[None] == want
