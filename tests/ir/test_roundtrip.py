"""The IR text round-trips: for kernels built by the frontend, at every stage of the pass
pipeline (from the frontend, after each pass, offloaded), print -> parse -> print gives the
same text, and the parsed IR is the original statement for statement (tests/ir/irtext.py).

The kernels cover the statement kinds the frontend, autodiff and the passes make: scalar and
array arguments, returns, fields of scalars / vectors / quantized types, ndrange and struct
fors, control flow, atomics, reductions, per-thread copies of scatters (CPU), prints and
asserts, real functions (recursion, ti.ref), reverse- and forward-mode kernels, the Tape's
logging and its access checks. Each test also checks a value the kernels computed, so that a
test whose kernels did not run cannot pass."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.ir.parser import ParseError, parse_kernel
from fluxion.ir.printer import print_kernel

from ir.irtext import checking_every_stage, roundtrip


@pytest.fixture
def stages(monkeypatch):
    ti.init(arch=ti.cpu, print_ir=True, offline_cache=False)
    with checking_every_stage(monkeypatch) as seen:
        yield seen


def names(seen):
    return {name for name, _ in seen}


def test_arguments_returns_control_flow(stages):
    x = ti.field(ti.f32, shape=(8, 4), name="x")

    @ti.kernel
    def k(a: ti.f32, n: ti.i32) -> ti.f32:
        t = 0.0
        for i, j in x:
            x[i, j] = a * i + j
        for i in range(n):
            if i % 2 == 0:
                t += ti.sin(ti.cast(i, ti.f32))
            elif i > 5:
                continue
            else:
                k = 0
                while True:
                    k += 1
                    if k > 3:
                        break
                t -= k
        return t + ti.select(n > 3, 1.0, 2.0) + ti.random() * 0

    got = k(2.0, 8)
    want = sum(np.sin(np.float32(i)) for i in range(0, 8, 2)) - 4 * 3 + 1.0
    assert abs(got - want) < 1e-4
    assert x[3, 2] == 8.0
    # from the frontend, after each pass, offloaded
    assert len(stages) >= 7 and names(stages) == {"k"}
    assert "offloaded" in stages[-1][1] and "task range_for" in stages[-1][1]


def test_vectors_ndarrays_atomics_and_reductions(stages):
    v = ti.Vector.field(3, ti.f32, shape=16)
    s = ti.field(ti.f32, shape=())
    hist = ti.field(ti.i32, shape=4)
    lo = ti.field(ti.i32, shape=())

    @ti.kernel
    def k(a: ti.types.ndarray(), m: ti.types.ndarray(dtype=ti.math.vec2)) -> ti.f32:
        acc = 0.0
        for i in v:
            v[i] = ti.Vector([a[i], m[i][0], m[i][1]])
            s[None] += v[i].norm_sqr()
            ti.atomic_max(hist[i % 4], i)
            ti.atomic_min(lo[None], -i)   # (a max and a min into one element race)
            acc += a[i]
        return acc

    a = np.arange(16, dtype=np.float32)
    m = np.ones((16, 2), dtype=np.float32)
    assert k(a, m) == a.sum()
    assert abs(s[None] - (a ** 2 + 2).sum()) < 1e-3
    assert hist.to_numpy().tolist() == [12, 13, 14, 15] and lo[None] == -15
    text = stages[-1][1]
    assert "reduce=[" in text and "component=1" in text


def test_cpu_loop_transforms_rows_and_unroll_and_jam(stages):
    a = ti.field(ti.f32, shape=(16, 32))
    w = ti.field(ti.f32, shape=32)
    out = ti.field(ti.f32, shape=16)

    @ti.kernel
    def k():
        for i, j in a:                    # an ndrange: split into rows
            a[i, j] = i + 0.5 * j
        for i in out:                     # a serial reduction per iteration: jammed
            acc = 0.0
            for j in range(32):
                acc += a[i, j] * w[j]
            out[i] = acc

    w.fill(1.0)
    k()
    want = (np.arange(16)[:, None] + 0.5 * np.arange(32)[None, :]).sum(axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5)
    text = stages[-1][1]
    if ti.lang.runtime.config().arch == ti.cpu:
        assert "rows=$" in text and "row_index" in text and "col_index" in text
        assert "jam=" in text and "independent" in text


def test_scatter_privatization_and_array_copies(stages):
    grid = ti.field(ti.f32, shape=64)

    @ti.kernel
    def p2g(pos: ti.types.ndarray(), out: ti.types.ndarray()):
        for p in range(4096):
            grid[(p * 7) % 64] += 1.0
            out[(p * 5) % 32] += 1.0

    out = np.zeros(32, np.float32)
    p2g(np.zeros(4096, np.float32), out)
    assert grid.to_numpy().sum() == 4096 and out.sum() == 4096
    text = stages[-1][1]
    if ti.lang.runtime.config().arch == ti.cpu:
        assert "private_copies" in text and "private_add" in text and "merge_copies" in text


def test_prints_asserts_and_bound_checks(capfd, monkeypatch):
    ti.init(arch=ti.cpu, print_ir=True, offline_cache=False, debug=True)
    with checking_every_stage(monkeypatch) as seen:
        x = ti.field(ti.i32, shape=8)

        @ti.kernel
        def k(n: ti.i32, a: ti.types.ndarray()):
            for i in range(n):
                x[i] = i
                a[i] = i * 0.5
            assert n < 100, "n too big"
            print("n is", n, f"and {n * 2:4d}", ti.Vector([1, 2]))

        k(8, np.zeros(8, np.float32))
        assert "n is 8 and   16 [1, 2]" in capfd.readouterr().out
        text = seen[-1][1]
        assert "assert " in text and "args=[" in text and "print '" in text


def test_quantized_fields(stages):
    q = ti.field(ti.types.quant.int(7))
    ti.root.dense(ti.i, 16).quant_array(ti.i, 4, max_num_bits=32).place(q)

    @ti.kernel
    def k():
        for i in q:
            q[i] = i - 8
            q[i] += 1

    k()
    assert q.to_numpy().tolist() == [i - 7 for i in range(64)]
    assert "quant_ptr" in stages[-1][1]


def test_real_functions_recursion_and_references(stages):
    total = ti.field(ti.i32, shape=())

    @ti.real_func
    def fib(n: ti.i32) -> ti.i32:
        r = n
        if n > 1:
            r = fib(n - 1) + fib(n - 2)
        return r

    @ti.real_func
    def bump(a: ti.ref(ti.i32), by: ti.i32):
        a += by
        total[None] += by

    @ti.kernel
    def k(n: ti.i32) -> ti.i32:
        c = 0
        for i in range(n):
            bump(c, i)
        return fib(10) + c

    assert k(5) == 55 + 10
    text = stages[-1][1]
    assert "function fib#" in text and "function bump#" in text and "ref i32" in text


def test_reverse_mode_forward_mode_and_the_tape(stages):
    x = ti.field(ti.f32, shape=16, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f32, shape=16, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def energy():
        for i in x:
            t = x[i]
            for _ in range(3):               # a loop-carried local: an autodiff stack
                t = ti.sin(t) * t
            y[i] = t
            loss[None] += t ** 2

    @ti.kernel
    def stop():
        ti.stop_grad(x)
        for i in x:
            loss[None] += x[i] * y[i]

    x.from_numpy(np.linspace(0.1, 1.0, 16, dtype=np.float32))
    with ti.ad.Tape(loss=loss):
        energy()
        stop()
    assert np.all(np.isfinite(x.grad.to_numpy())) and np.any(x.grad.to_numpy() != 0)
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] * 16):
        energy()
    assert loss.dual[None] != 0
    seen = names(stages)
    assert {"energy", "energy.grad", "stop.grad", "energy.dual"} <= seen, seen
    grad_text = [t for n, t in stages if n == "energy.grad"][-1]
    assert "ad_stack_alloca" in grad_text and "ad_stack_push" in grad_text
    assert any("stop_grad @" in t for n, t in stages if n == "stop")


def test_tape_validation_logs_and_checks_accesses(monkeypatch):
    ti.init(arch=ti.cpu, print_ir=True, offline_cache=False, debug=True)
    with checking_every_stage(monkeypatch) as seen:
        x = ti.field(ti.f32, shape=8, needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def k():
            for i in x:
                loss[None] += x[i] ** 2

        x.fill(1.0)
        with ti.ad.Tape(loss=loss, validation=True):
            k()
        assert x.grad.to_numpy().tolist() == [2.0] * 8
        assert len(seen) > 0


def test_block_level_programming_through_the_ptx_build(stages):
    a = ti.field(ti.f32, shape=256)

    @ti.kernel
    def k():
        ti.loop_config(block_dim=64)
        for i in range(256):
            pad = ti.simt.block.SharedArray((64,), ti.f32)
            tid = i % 64
            pad[tid] = a[i]
            ti.simt.block.sync()
            a[i] = pad[63 - tid] + ti.simt.block.thread_idx()

    k.ptx()        # the CUDA build path (build_only), on any machine
    text = stages[-1][1]
    assert "shared_array" in text and "block_sync" in text and "block_dim=64" in text


def test_struct_fors_of_every_kind_from_the_frontend(stages):
    x = ti.field(ti.f32, shape=(6, 4), offset=(-2, 1), name="x")
    v = ti.Vector.field(2, ti.i32, shape=(3, 2, 2), name="v")
    s = ti.Struct.field({"a": ti.f32, "b": ti.i32}, shape=5, name="s")
    block = ti.root.pointer(ti.i, 4)
    p = ti.field(ti.i32, name="p")
    block.dense(ti.i, 4).place(p)
    total = ti.field(ti.i32, shape=(), name="total")

    @ti.real_func
    def count() -> ti.i32:
        n = 0
        for i in p:
            n += 1
        return n

    @ti.kernel
    def k():
        for i, j in x:
            x[i, j] = i * j
        for I in ti.grouped(v):
            v[I] = [I[0], I[1] + I[2]]
        for i in s:
            s[i].b = i
        ti.loop_config(block_dim=32)
        for i in block:
            p[i * 4] += 1
        ti.loop_config(serialize=True)
        for i in p:
            total[None] += p[i]
        total[None] += count()

    p[5] = 1
    k()
    frontend = stages[0][1]
    for want in ("parallel_struct_for i32 @x [(-2, 4), (1, 5)]", "@v [(0, 3), (0, 2), (0, 2)] "
                 "grouped", "parallel_struct_for i32 @s [(0, 5)]", "block_dim=32",
                 "$2 = struct_index i32 $0[1]", ": struct_for i32 @p [(0, 16)]"):
        assert want in frontend, want
    assert "struct_for" not in stages[-1][1]
    assert x[-2, 3] == -6 and list(v[2, 1, 1]) == [2, 2] and s.b[4] == 4
    # only the cell of p[5] (elements 4..7) is active: the loop over the blocks bumps p[4],
    # the serial loop adds p[4] and p[5], the function counts the cell's 4 elements
    assert p[0] == 0 and p[4] == 1 and total[None] == 2 + 4


def test_a_struct_for_over_an_snode_parses_with_the_node_from_the_environment():
    x = ti.field(ti.f32, name="x")
    node = ti.root.dense(ti.ij, (2, 3))
    node.place(x)
    text = """
    kernel k() {
      $0 : parallel_struct_for i32 @cells [(0, 2), (0, 3)] grouped block_dim=64
        $1 = struct_index i32 $0[0]
        $2 = struct_index i32 $0[1]
        $3 = global_ptr f32 @x [$1, $2]
        global_store $3 $3
    }"""
    k = parse_kernel(text, {"x": x, "cells": node})
    loop = k.body.stmts[0]
    assert isinstance(loop, S.StructForStmt) and loop.over is node and loop.grouped
    assert loop.bounds == [(0, 2), (0, 3)] and loop.parallel and loop.block_dim == 64
    first = loop.body.stmts[0]
    assert isinstance(first, S.StructIndexStmt) and first.loop is loop and first.axis == 0
    assert loop.body.stmts[2].indices == loop.body.stmts[:2]
    roundtrip(k, print_kernel(k, {"x": x, "cells": node}), {"x": x, "cells": node})


def test_hand_written_text_parses_and_prints_normalized():
    x = ti.field(ti.f32, shape=8, name="x")
    text = """
    # a comment line
    kernel k(f32) {
        $10 = arg f32 0
        $11 = const i32 0
        $12 = const i32 8
        $13 : parallel_for $11 .. $12
            $14 = loop_index i32 $13
            $15 = global_ptr f32 @x [$14]
            global_store $15 $10            # k.py:3
    }
    """
    k = parse_kernel(text, {"x": x})
    loop = k.body.stmts[3]
    assert isinstance(loop, S.RangeForStmt) and loop.parallel and loop.begin is k.body.stmts[1]
    ptr = loop.body.stmts[1]
    assert ptr.place is x.places[0] and ptr.indices[0] is loop.body.stmts[0]
    assert loop.body.stmts[2].value is k.body.stmts[0] and repr(loop.body.stmts[2].loc) == "k.py:3"
    assert print_kernel(k) == "\n".join([
        "kernel k(f32) {",
        "  $0 = arg f32 0",
        "  $1 = const i32 0",
        "  $2 = const i32 8",
        "  $3 : parallel_for $1 .. $2",
        "    $4 = loop_index i32 $3",
        "    $5 = global_ptr f32 @x [$4]",
        f"    {'global_store $5 $0':<48}  # k.py:3",
        "}"])
    roundtrip(k)


@pytest.mark.parametrize("text, message", [
    ("kernel k() {\n  $0 = load f32 $1\n}", "$1 is not defined"),
    ("kernel k() {\n  $0 = global_ptr f32 @y []\n}", "@y is not in the environment"),
    ("kernel k() {\n  $0 = frobnicate f32\n}", "unknown operation 'frobnicate'"),
    ("kernel k() {\n  $0 = const f33 1\n}", "unknown type 'f33'"),
    ("kernel k() {\n  $0 = alloca i32\n  $1 = atomic_frob i32 $0 $0\n}",
     "unknown operation 'frob'"),
    ("kernel k() {\n  $0 = const i32 1\n      $1 = const i32 2\n}", "owns no block"),
    ("kernel k() {\n  $0 = const i32 1\n  $0 = const i32 2\n}", "defined twice"),
    ("kernel k() {\n  $0 = add i32 $1\n}", "expected"),
    ("kernel k() {\n  $0 = const i32 1\n", "no closing"),
    ("kernel k() {\n  $0 : struct_for i32 @x [0, 4]\n}", "bounds are [(begin, end), ...]"),
    ("kernel k() {\n  $0 : struct_for i32 @x [(0, 4)] grouped width=3\n}", "expected block_dim"),
])
def test_bad_text_is_a_parse_error_naming_the_line(text, message):
    with pytest.raises(ParseError, match="line") as ei:
        parse_kernel(text, {"x": object()})
    assert message in str(ei.value)


def test_unnamed_fields_of_one_shape_get_distinct_names():
    a = ti.field(ti.f32, shape=4)
    b = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in a:
            b[i] = a[i]

    seen = []
    from fluxion.lang import kernel as K

    plain = K.Kernel._compile

    def grab(self, *args, **kw):
        ir = plain(self, *args, **kw)
        seen.append(ir)
        return ir

    K.Kernel._compile = grab
    try:
        k.ptx()
    finally:
        K.Kernel._compile = plain
    env = {}
    text = print_kernel(seen[0], env)
    assert '@"field(4,)"' in text and '@"field(4,)#2"' in text
    assert set(env.values()) == {a, b}
    roundtrip(seen[0])


@pytest.mark.parametrize("change", ["block_dim", "ret_type", "operand", "place", "loc",
                                    "reductions", "stop_gradients", "tasks"])
def test_the_structural_comparison_sees_what_equal_text_would_hide(change):
    """`assert_same_ir` compares objects, not text: each change here is one that a printer
    leaving that detail out would print alike on both sides."""
    from ir.irtext import Mismatch, assert_same_ir
    x = ti.field(ti.f32, shape=8, name="x")
    y = ti.field(ti.f32, shape=8, name="y")
    text = """
    kernel k(f32) offloaded {
      task serial
      $0 = arg f32 0
      $1 = const i32 0
      $2 = const i32 8
      $9 = global_ptr f32 @x [$1]
      task range_for
      $3 : parallel_for $1 .. $2 block_dim=32 reduce=[add $9]
        $4 = loop_index i32 $3
        $5 = global_ptr f32 @y [$4]
        $6 = global_load f32 $5      # k.py:4
        $7 = atomic_add f32 $9 $6
    }
    """
    env = {"x": x, "y": y}
    a, b = parse_kernel(text, env), parse_kernel(text, env)
    assert_same_ir(a, b)
    loop = b.body.stmts[4]
    ptr, load = loop.body.stmts[1], loop.body.stmts[2]
    if change == "block_dim":
        loop.block_dim = 64
    elif change == "ret_type":
        load.ret_type = ti.f64
    elif change == "operand":
        load.ptr = b.body.stmts[3]
    elif change == "place":
        ptr.place = x.places[0]
    elif change == "loc":
        load.loc = None
    elif change == "reductions":
        loop.reductions = [(b.body.stmts[3], "max")]
    elif change == "stop_gradients":
        loop.body.stop_gradients = (x,)
    else:
        b.tasks = b.tasks[1:]
    with pytest.raises(Mismatch):
        assert_same_ir(a, b)


def test_the_example_of_the_parsers_docstring_parses_and_round_trips():
    from fluxion.ir import parser
    doc = parser.__doc__
    example = doc.split("::\n", 1)[1].split("\n- ", 1)[0]
    v = ti.Vector.field(2, ti.f32, shape=8, name="v")
    s = ti.field(ti.f32, shape=(), name="s")
    k = parse_kernel(example, {"v": v, "s": s})
    assert [kind for kind, _ in k.tasks] == ["serial", "range_for", "serial"]
    loop = k.tasks[1][1]
    assert loop.block_dim == 128 and loop.reductions == [(k.body.stmts[3], "add")]
    assert loop.body.stmts[1].place is v.places[1]
    assert k.functions[0].name == "f" and loop.body.stmts[3].then_block.stmts[0].func is \
        k.functions[0]
    roundtrip(k)


def test_else_belongs_to_the_statement_just_before_it():
    text = """
    kernel k(i32) {
      $0 = arg i32 0
      if $0
        $1 = const i32 1
      $2 = const i32 2
      else
        $3 = const i32 3
    }"""
    with pytest.raises(ParseError, match="line 7: 'else' follows no statement with blocks"):
        parse_kernel(text, {})
