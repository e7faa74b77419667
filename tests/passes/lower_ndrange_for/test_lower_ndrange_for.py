"""The ndrange-for statement (ir/stmts.py NdRangeForStmt): what the frontend makes of
`ti.ndrange` loops, its text (printed and parsed back), the verifier's checks, and its lowering
by passes/lower_struct_for.py into the range-for and index arithmetic that the frontend itself
emitted before the loop had a statement (before.ir, made by de9c3f0 from ndrange_cases.py),
with the code of lowering first though the driver simplifies the loops before it; the
programs' results are NumPy's."""
import pathlib

import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.ir.errors import FluxionInternalError
from fluxion.ir.parser import ParseError, parse_kernel
from fluxion.lang import runtime
from fluxion.passes import lower_struct_for, verify

from ir.irtext import check_pass, roundtrip
import ndrange_cases

pytestmark = pytest.mark.cpu_only


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False)
    yield
    ti.reset()


def run(kernel, cfg):
    return lower_struct_for.run(kernel, cfg or runtime.config())


def test_a_2d_loop_with_a_negative_begin_and_a_kernel_value_end_is_flattened():
    x = ti.field(ti.f32, shape=(8, 4))
    # extents max(n - -2, 0) and 4: i = k // 4 - 2, j = k % 4
    check_pass(run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 : parallel_ndrange_for i32 [(-2, $0), (0, 4)] block_dim=32
        $2 = struct_index i32 $1[0]
        $3 = struct_index i32 $1[1]
        $4 = global_ptr f32 @x [$2, $3]
        $5 = const f32 1.0
        global_store $4 $5
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = const i32 -2
      $2 = sub i32 $0 $1
      $3 = const i32 0
      $4 = max i32 $2 $3
      $5 = const i32 4
      $6 = mul i32 $4 $5
      $7 = const i32 0
      $8 : parallel_for $7 .. $6 block_dim=32
        $9 = loop_index i32 $8
        $10 = const i32 4
        $11 = mod_nonneg i32 $9 $10
        $12 = const i32 4
        $13 = div_nonneg i32 $9 $12
        $14 = const i32 -2
        $15 = add i32 $13 $14
        $16 = global_ptr f32 @x [$15, $11]
        $17 = const f32 1.0
        global_store $16 $17
    }""", {"x": x})


def test_constant_bounds_fold_an_empty_dimension_to_zero_trips():
    s = ti.field(ti.i32, shape=())
    check_pass(run, """
    kernel k() {
      $0 : ndrange_for i32 [(5, 2), (0, 3)] grouped
        $1 = struct_index i32 $0[0]
        $2 = global_ptr i32 @s []
        global_store $2 $1
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 0
      $2 : for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 3
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 3
        $7 = div_nonneg i32 $3 $6
        $8 = const i32 5
        $9 = add i32 $7 $8
        $10 = global_ptr i32 @s []
        global_store $10 $9
    }""", {"s": s})


def test_a_1d_loop_runs_over_its_bounds_and_a_0d_one_once():
    s = ti.field(ti.i32, shape=())
    check_pass(run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 : parallel_ndrange_for i32 [(3, $0)]
        $2 = struct_index i32 $1[0]
        $3 = global_ptr i32 @s []
        $4 = atomic_add i32 $3 $2
      $5 : parallel_ndrange_for i32 [] grouped
        $6 = global_ptr i32 @s []
        $7 = const i32 1
        $8 = atomic_add i32 $6 $7
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = const i32 3
      $2 : parallel_for $1 .. $0
        $3 = loop_index i32 $2
        $4 = global_ptr i32 @s []
        $5 = atomic_add i32 $4 $3
      $6 = const i32 0
      $7 = const i32 1
      $8 : parallel_for $6 .. $7
        $9 = loop_index i32 $8
        $10 = global_ptr i32 @s []
        $11 = const i32 1
        $12 = atomic_add i32 $10 $11
    }""", {"s": s})


def test_an_ndrange_for_in_a_serial_loop_is_lowered_in_place():
    s = ti.field(ti.i32, shape=())
    check_pass(run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 2
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 : ndrange_for i32 [(0, 2), ($3, 3)]
          $5 = struct_index i32 $4[1]
          $6 = global_ptr i32 @s []
          $7 = atomic_add i32 $6 $5
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 2
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 3
        $5 = sub i32 $4 $3
        $6 = const i32 0
        $7 = max i32 $5 $6
        $8 = const i32 2
        $9 = mul i32 $8 $7
        $10 = const i32 0
        $11 : for $10 .. $9
          $12 = loop_index i32 $11
          $13 = mod_nonneg i32 $12 $7
          $14 = div_nonneg i32 $12 $7
          $15 = add i32 $13 $3
          $16 = global_ptr i32 @s []
          $17 = atomic_add i32 $16 $15
    }""", {"s": s})


def test_the_text_round_trips_and_bad_bounds_are_refused():
    x = ti.field(ti.f32, shape=(8, 4))
    text = """
    kernel k(i32) {
      $0 = arg i32 0
      $1 : parallel_ndrange_for i32 [(-2, $0), ($0, 4)] grouped block_dim=64
        $2 = struct_index i32 $1[0]
        $3 = struct_index i32 $1[1]
        $4 = global_ptr f32 @x [$2, $3]
        global_store $4 $4
    }"""
    k = parse_kernel(text, {"x": x})
    loop = k.body.stmts[1]
    assert isinstance(loop, S.NdRangeForStmt)
    assert loop.begins == [-2, k.body.stmts[0]] and loop.ends == [k.body.stmts[0], 4]
    assert loop.grouped and loop.parallel is True and loop.block_dim == 64
    assert loop.operands() == [k.body.stmts[0], k.body.stmts[0]]
    roundtrip(k, env={"x": x}, text=None)
    with pytest.raises(ParseError, match="ndrange-for's bounds"):
        parse_kernel("""
        kernel k() {
          $0 : ndrange_for i32 [(0, 1.5)]
            $1 = struct_index i32 $0[0]
        }""", {})


def test_the_verifier_wants_an_index_inside_its_loop_and_within_its_dimensions():
    k = parse_kernel("""
    kernel k() {
      $0 : ndrange_for i32 [(0, 4)]
        $1 = struct_index i32 $0[0]
      $2 = struct_index i32 $0[0]
    }""", {})
    with pytest.raises(FluxionInternalError, match="ndrange-for that does not enclose it"):
        verify.run(k)
    k = parse_kernel("""
    kernel k() {
      $0 : ndrange_for i32 [(0, 4)]
        $1 = struct_index i32 $0[1]
    }""", {})
    with pytest.raises(FluxionInternalError, match="no dimension 1"):
        verify.run(k)


def test_the_frontend_makes_one_statement_with_the_loop_configuration(monkeypatch):
    x = ti.field(ti.f32, shape=(6, 5))
    seen = []
    plain = lower_struct_for.run

    def spy(ir, cfg):
        seen.extend(s for s in S.walk(ir.body) if isinstance(s, (S.NdRangeForStmt,
                                                                  S.RangeForStmt)))
        return plain(ir, cfg)

    monkeypatch.setattr(lower_struct_for, "run", spy)

    @ti.kernel
    def k(n: ti.i64):
        ti.loop_config(block_dim=16)
        for I in ti.grouped(ti.ndrange((1, n), 5)):
            x[I] = 1.0
        ti.loop_config(serialize=True)
        for i, j in ti.ndrange(2, 3):
            x[i, j] += 1.0
        for t in range(2):
            x[t, t] += 1.0

    k(6)
    a, b, c = seen
    assert isinstance(a, S.NdRangeForStmt) and a.grouped and a.parallel is True
    assert a.block_dim == 16 and a.begins[0] == 1 and a.ends[1] == 5
    # a kernel-value bound is a value of the index type (the i64 argument cast to i32)
    assert isinstance(a.ends[0], S.UnaryOpStmt) and a.ends[0].ret_type == ti.i32
    assert isinstance(b, S.NdRangeForStmt) and b.parallel is False and not b.grouped
    assert isinstance(c, S.RangeForStmt)      # range(): a range-for from the start
    want = np.zeros((6, 5), np.float32)
    want[1:6, :] = 1.0
    want[:2, :3] += 1.0
    want[0, 0] += 1.0
    want[1, 1] += 1.0
    assert np.array_equal(x.to_numpy(), want)


def test_a_trip_count_that_does_not_fit_the_index_type_is_an_error_at_the_loop():
    # (raised by the frontend, which runs the lowering's arithmetic once at the loop: from
    # the lowering itself the error would name no line of the kernel)
    @ti.kernel
    def k():
        for i, j in ti.ndrange(2**20, 2**20):
            pass

    with pytest.raises(ti.TaichiTypeError, match="exceeded the range of default_ip") as e:
        k()
    assert "for i, j in ti.ndrange(2**20, 2**20):" in str(e.value)


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
def test_kernels_lower_to_what_the_former_frontend_made(monkeypatch, debug):
    # (before.ir is the IR of a frontend that emitted a load for every read of a local:
    # what this build's frontend makes without its forwarding of locals, ir/builder.py)
    monkeypatch.setenv("FLUXION_NO_FRONTEND_FORWARD", "1")
    got = ndrange_cases.capture(monkeypatch.setattr, debug=debug)
    # the cases' file is named in source locations: by a placeholder, wherever the tree is
    where = str(pathlib.Path(ndrange_cases.__file__))
    got = {k: v.replace(where, "<cases>") for k, v in got.items()}
    mode = "debug" if debug else "plain"
    want = {k: v for (m, k), v in _before().items() if m == mode}
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_simplify_before_the_lowering_gives_the_code_of_lowering_first(monkeypatch, debug):
    # (the driver's order since 2026-11-28: simplify on the ndrange-fors, lower them, cse
    # and bounds again; before, the lowering came first)
    with monkeypatch.context() as m:
        first = ndrange_cases.final(m.setattr, debug, lower_first=True)
    got = ndrange_cases.final(monkeypatch.setattr, debug)
    assert sorted(got) == sorted(first)
    for name in got:
        assert got[name] == first[name], name


def test_ndrange_fors_compute_what_numpy_does():
    c = ti.field(ti.i64, shape=())
    y = ti.field(ti.i32, shape=(4, 5))

    @ti.kernel
    def count(b0: ti.i32, e0: ti.i32, b1: ti.i64, e1: ti.i64):
        for i, j in ti.ndrange((b0, e0), (b1, e1)):
            c[None] += (i + 7) * 31 + j

    @ti.kernel
    def fill(n: ti.i32):
        for I in ti.grouped(ti.ndrange((-1, n), (2, 5))):
            y[I + ti.Vector([1, 0])] = I[0] * 10 + I[1]

    for b0, e0, b1, e1 in ((-3, 2, -1, 4), (5, 2, 0, 3), (0, 3, 4, 4), (-7, -5, 3, 9)):
        c[None] = 0
        count(b0, e0, b1, e1)
        want = sum((i + 7) * 31 + j for i in range(b0, e0) for j in range(b1, e1))
        assert c[None] == want, (b0, e0, b1, e1)
    fill(3)
    want = np.zeros((4, 5), np.int32)
    for i in range(-1, 3):
        for j in range(2, 5):
            want[i + 1, j] = i * 10 + j
    assert np.array_equal(y.to_numpy(), want)
