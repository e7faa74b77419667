"""Pass-level tests: a small kernel through the frontend, then one pass, checked on the IR."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.ir.printer import print_kernel
from fluxion.lang import runtime
from fluxion.passes import dce, forward, lower_struct_for, offload, reduction, verify


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def frontend_ir(kern, *template_args):
    """Run only the frontend of `kern` (a ti.kernel whose arguments are all templates), with
    its struct-fors lowered as the compile driver lowers them first."""
    src = kern.source()
    names = list(kern.params())
    ir = S.Kernel(kern.name, [], ())
    ctx = BuildContext(ir, runtime.config())
    with building(ctx):
        Transformer(src, kern.globals(), kern.name).build_function(dict(zip(names, template_args)))
    lower_struct_for.run(ir, ctx.cfg)     # (as the compile driver does first)
    return ir


def count(ir, cls, pred=lambda s: True):
    return sum(1 for s in S.walk(ir.body) if isinstance(s, cls) and pred(s))


def test_dce_removes_unused_loads_and_dead_locals():
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            unused = x[i] * 2.0   # noqa: F841  (dead: never read)
            x[i] = 1.0            # the frontend reads x[i] for its address; the load is dead

    ir = frontend_ir(k)
    assert count(ir, S.GlobalLoadStmt) == 2
    assert dce.run(ir) is True
    verify.run(ir)
    assert count(ir, S.GlobalLoadStmt) == 0
    assert count(ir, S.AllocaStmt) == 0
    assert count(ir, S.GlobalStoreStmt) == 1
    assert dce.run(ir) is False  # a fixpoint


def test_forward_replaces_loads_of_a_local_stored_once():
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def k():
        a = 3               # stored once, at the top level: its loads become the value
        b = 1
        b += a              # stored twice: stays a local
        for i in x:
            c = i           # stored once, inside the loop: read after it in the same body
            x[i] = a * 100 + b * 10 + c

    ir = frontend_ir(k)
    loads = count(ir, S.LocalLoadStmt)
    assert forward.run(ir) is True
    dce.run(ir)
    verify.run(ir)
    assert count(ir, S.LocalLoadStmt) == loads - 3      # the two reads of `a`, one of `c`
    assert count(ir, S.AllocaStmt) == 1                 # `b`
    k()
    np.testing.assert_array_equal(x.to_numpy(), 340 + np.arange(8))


def test_forwarding_keeps_mutated_arguments_and_reads_before_a_reassignment():
    x = ti.field(ti.i32, shape=4)

    # (arguments themselves are immutable, as in the original system: a local copy is the
    # variable stored twice)
    @ti.kernel
    def k(n_arg: ti.i32, m: ti.i32) -> ti.i32:
        n = n_arg
        first = n           # forwarded: the argument's value
        n = n * 2           # `n` has two stores now: its reads stay reads
        for i in x:
            x[i] = first + n + m * i
        return first * 1000 + n

    assert k(7, 3) == 7014
    np.testing.assert_array_equal(x.to_numpy(), 21 + 3 * np.arange(4))


def test_reduction_privatizes_fixed_element_and_hoists_pointer():
    x = ti.field(ti.f32, shape=8)
    s = ti.field(ti.f32, shape=())

    @ti.kernel
    def k():
        for i in x:
            s[None] += x[i]

    ir = frontend_ir(k)
    dce.run(ir)
    assert reduction.run(ir) is True
    dce.run(ir)
    verify.run(ir)
    loop = next(st for st in ir.body.stmts if isinstance(st, S.RangeForStmt))
    assert len(loop.reductions) == 1
    ptr, op = loop.reductions[0]
    assert op == "add" and ptr.parent is ir.body     # hoisted before the loop
    atomics = [st for st in S.walk(loop.body) if isinstance(st, S.AtomicOpStmt)]
    assert len(atomics) == 1 and atomics[0].ptr is ptr


def test_reduction_left_alone_when_element_is_also_read():
    x = ti.field(ti.f32, shape=8)
    s = ti.field(ti.f32, shape=())

    @ti.kernel
    def k():
        for i in x:
            s[None] += x[i]
            x[i] = s[None]

    ir = frontend_ir(k)
    dce.run(ir)
    assert reduction.run(ir) is False


def test_reduction_privatizes_a_kernel_level_local():
    x = ti.field(ti.f32, shape=8)
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        s = 0.0
        for i in x:
            y[i] = 1.0      # other memory traffic in the body does not matter
            s += x[i]       # the frontend makes this an atomic on the local
        y[0] = s

    ir = frontend_ir(k)
    dce.run(ir)
    loop = next(st for st in ir.body.stmts if isinstance(st, S.RangeForStmt))
    atomics = [st for st in S.walk(loop.body) if isinstance(st, S.AtomicOpStmt)]
    assert len(atomics) == 1 and isinstance(atomics[0].ptr, S.AllocaStmt)
    assert reduction.run(ir) is True
    verify.run(ir)
    assert loop.reductions == [(atomics[0].ptr, "add")]


@pytest.mark.parametrize("body", ["read", "old_value", "mixed_ops"])
def test_reduction_of_a_local_left_alone_when_the_loop_observes_it(body):
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def k():
        s = 0
        for i in x:
            if ti.static(body == "read"):
                s += 1
                x[i] = s                      # reads the shared local mid-loop
            elif ti.static(body == "old_value"):
                x[i] = ti.atomic_add(s, 1)    # the old value is used
            else:
                s += x[i]
                ti.atomic_max(s, x[i])        # two different operations on one local
        x[0] = s

    ir = frontend_ir(k)
    dce.run(ir)
    assert reduction.run(ir) is False


def test_a_local_inside_the_parallel_loop_is_plain():
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            t = 0
            for j in range(4):
                t += j
            x[i] = t

    ir = frontend_ir(k)
    assert count(ir, S.AtomicOpStmt) == 0


def test_reduction_not_applied_when_index_varies():
    x = ti.field(ti.i32, shape=8)
    h = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            h[i % 4] += 1

    ir = frontend_ir(k)
    dce.run(ir)
    assert reduction.run(ir) is False


@pytest.mark.parametrize("op", ["add", "min", "max"])
def test_privatized_reductions_give_exact_results(op):
    n = 100_003
    x = ti.field(ti.i32, shape=n)
    s = ti.field(ti.i32, shape=())
    vals = (np.arange(n, dtype=np.int64) * 7919 % 10007 - 5000).astype(np.int32)
    x.from_numpy(vals)

    @ti.kernel
    def k():
        for i in x:
            if ti.static(op == "add"):
                s[None] += x[i]
            elif ti.static(op == "min"):
                ti.atomic_min(s[None], x[i])
            else:
                ti.atomic_max(s[None], x[i])

    s[None] = 0
    k()
    ref = {"add": int(vals.sum()), "min": min(0, int(vals.min())), "max": max(0, int(vals.max()))}[op]
    assert s[None] == ref


def test_offload_splits_tasks_in_order():
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        a = 1.0
        for i in x:
            x[i] = a
        a = 2.0
        for i in x:
            x[i] += a
        x[0] = a

    ir = frontend_ir(k)
    offload.run(ir)
    kinds = [t[0] for t in ir.tasks]
    assert kinds == ["serial", "range_for", "serial", "range_for", "serial"]


def test_printer_is_deterministic_and_readable():
    x = ti.field(ti.f32, shape=8, name="x")

    @ti.kernel
    def k():
        for i in x:
            x[i] = x[i] * 2.0

    a = print_kernel(frontend_ir(k))
    b = print_kernel(frontend_ir(k))
    assert a == b
    assert "parallel_for" in a and "global_ptr f32 @x" in a and "mul f32" in a
    assert "test_passes.py:" in a


def test_verifier_rejects_use_before_definition():
    from fluxion.ir.errors import FluxionInternalError
    ir = S.Kernel("bad", [], ())
    c = S.ConstStmt(1, ret_type=ti.i32)
    add = S.BinaryOpStmt(c, c, "add", ret_type=ti.i32)
    ir.body.append(add)
    ir.body.append(c)
    with pytest.raises(FluxionInternalError, match="not defined before"):
        verify.run(ir, after="test")
