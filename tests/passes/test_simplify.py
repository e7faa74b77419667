"""The simplify passes (passes/simplify.py: fold, cse, store_to_load, then dce): a kernel
through the frontend, then the pass, counted on the IR; where a pass must fire and where its
preconditions forbid it, and the kernels' values against numpy."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import (cse, dce, fold, forward, lower_struct_for, simplify, store_to_load,
                            verify)


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, offline_cache=False)
    yield
    ti.reset()


def frontend_ir(kern):
    """Only the frontend of `kern` (a ti.kernel without arguments), its struct-fors lowered."""
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(kern.source(), kern.globals(), kern.name).build_function({})
    lower_struct_for.run(ir, runtime.config())     # (as the compile driver does first)
    return ir


def count(ir, cls, pred=lambda s: True):
    return sum(1 for s in S.walk(ir.body) if isinstance(s, cls) and pred(s))


def after(kern, *passes):
    ir = frontend_ir(kern)
    for p in passes:
        p.run(ir, runtime.config())
        verify.run(ir, after=p.__name__)
    dce.run(ir)
    verify.run(ir, after="dce")
    return ir


def loads_of(field):
    return lambda s: s.ptr.place.field is field


# -- constant folding --------------------------------------------------------------------------
def test_fold_computes_constants_that_forwarding_exposes():
    # (without bounds checks, whose comparisons would be counted too: passes/bounds.py
    # removes them later, in simplify, not in these two passes)
    ti.init(arch=ti.cpu, check_out_of_bound=False)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        a = 2.5
        b = 4
        for i in x:
            x[i] = a * 3.0 + (b * 5 - 1)

    before = after(k, forward)
    assert count(before, S.BinaryOpStmt) >= 2
    ir = after(k, forward, fold)
    assert count(ir, S.BinaryOpStmt) == 0
    assert any(isinstance(s, S.ConstStmt) and s.value == 26.5 for s in S.walk(ir.body))
    k()
    np.testing.assert_allclose(x.to_numpy(), np.full(4, 2.5 * 3.0 + 19, np.float32))


def test_fold_leaves_transcendentals_and_undefined_operations_to_the_target():
    x = ti.field(ti.f32, shape=2)
    y = ti.field(ti.i32, shape=2)

    @ti.kernel
    def k():
        a = 0.7
        zero = 0
        for i in x:
            x[i] = ti.sin(a) + ti.exp(a)    # the target's math library rounds these
            y[i] = 7 // zero                # defined by the target (0), raises in debug

    ir = after(k, forward, fold)
    assert count(ir, S.UnaryOpStmt, lambda s: s.op in ("sin", "exp")) == 2
    assert count(ir, S.BinaryOpStmt, lambda s: s.op == "floordiv") == 1
    k()
    np.testing.assert_allclose(x.to_numpy(), np.sin(np.float32(0.7)) + np.exp(np.float32(0.7)),
                               rtol=1e-6)


def test_frontend_folds_float_constants_only_where_the_target_computes_the_same():
    """The frontend folds an operation of literals as it builds (ir/expr.py) by the rule of
    passes/fold.py: exact operations fold (one rounding of the double: +, *, /, sqrt), mod,
    floordiv and transcendentals stay for the target. The frontend used to fold them all in
    double precision: f32(1) % f32(0.001) was 0.00099995255 where the kernel computing it
    from fields gives 0.00099992752, and f32(1) // f32(0.1) was 9 against 10 (the f32
    quotient rounds to 10.0 before the floor)."""
    x = ti.field(ti.f32, shape=8)
    y = ti.field(ti.f32, shape=2)

    @ti.kernel
    def k():
        x[0] = ti.f32(1.0) % ti.f32(0.001)
        x[1] = ti.f32(1.0) // ti.f32(0.1)
        x[2] = ti.sin(ti.f32(0.7))
        x[3] = ti.f32(2.5) * ti.f32(3.0) + ti.sqrt(ti.f32(2.0))   # folds
        x[4] = y[0] % y[1]
        x[5] = y[0] // ti.f32(0.1)

    ir = frontend_ir(k)
    assert count(ir, S.BinaryOpStmt, lambda s: s.op == "mod") == 2
    assert count(ir, S.BinaryOpStmt, lambda s: s.op == "floordiv") == 2
    assert count(ir, S.UnaryOpStmt, lambda s: s.op == "sin") == 1
    assert count(ir, S.BinaryOpStmt, lambda s: s.op in ("add", "mul")) == 0
    assert count(ir, S.UnaryOpStmt, lambda s: s.op == "sqrt") == 0
    y.from_numpy(np.array([1.0, 0.001], np.float32))
    k()
    got = x.to_numpy()
    one, milli, tenth = np.float32(1), np.float32(0.001), np.float32(0.1)
    assert got[0] == got[4] == one - milli * np.floor(one / milli)    # all in f32
    assert got[1] == got[5] == np.floor(one / tenth) == 10
    assert got[3] == np.float32(7.5) + np.sqrt(np.float32(2))


# -- common subexpression elimination ----------------------------------------------------------
def test_cse_merges_repeated_arithmetic_and_loads_of_one_element():
    x = ti.field(ti.f32, shape=8)
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            x[i] = y[i] * y[i] + ti.cast(i * 3, ti.f32) + ti.cast(i * 3, ti.f32)

    plain = after(k)
    assert count(plain, S.GlobalLoadStmt, loads_of(y)) == 2
    ir = after(k, cse)
    assert count(ir, S.GlobalLoadStmt, loads_of(y)) == 1
    assert count(ir, S.BinaryOpStmt, lambda s: s.op == "mul" and s.ret_type == ti.i32) == 1
    assert count(ir, S.UnaryOpStmt, lambda s: s.op == "cast") == 1
    yv = np.linspace(-2, 2, 8).astype(np.float32)
    y.from_numpy(yv)
    k()
    i = np.arange(8, dtype=np.float32)
    np.testing.assert_allclose(x.to_numpy(), yv * yv + 6 * i, rtol=1e-6)


def test_cse_keeps_both_loads_around_a_store_an_atomic_or_a_branch():
    x = ti.field(ti.f32, shape=8)
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            a = y[i]
            y[i] = a + 1.0           # a store between the loads
            b = y[i]
            ti.atomic_add(y[i], 2.0)  # an atomic between the loads
            c = y[i]
            if c > 100.0:             # a branch that may store
                y[i] = 0.0
            d = y[i]
            x[i] = a * 1000.0 + b * 100.0 + c * 10.0 + d

    ir = after(k, forward, store_to_load, fold, cse)
    assert count(ir, S.GlobalLoadStmt, loads_of(y)) == 4
    yv = np.arange(8, dtype=np.float32) * 30
    y.from_numpy(yv)
    k()
    a = yv
    b = a + 1
    c = b + 2
    d = np.where(c > 100, 0, c)
    np.testing.assert_allclose(x.to_numpy(), a * 1000 + b * 100 + c * 10 + d, rtol=1e-6)


def test_cse_keeps_loads_around_a_real_function_call():
    y = ti.field(ti.i32, shape=())
    out = ti.field(ti.i32, shape=2)

    @ti.real_func
    def bump(v: ti.i32):
        y[None] += v

    @ti.kernel
    def k():
        a = y[None]
        bump(5)                       # opaque: it may write y
        b = y[None]
        out[0] = a
        out[1] = b

    ir = after(k, forward, store_to_load, fold, cse)
    assert count(ir, S.GlobalLoadStmt, loads_of(y)) == 2
    y[None] = 3
    k()
    np.testing.assert_array_equal(out.to_numpy(), [3, 8])


def test_cse_never_merges_random_numbers_nor_zeros_of_two_signs():
    x = ti.field(ti.f32, shape=64)
    z = ti.field(ti.f32, shape=2)

    @ti.kernel
    def k():
        for i in x:
            x[i] = ti.random() - ti.random()
        z[0] = 1.0 / 0.0 if False else 0.0    # (noqa: the frontend folds the branch)
        z[1] = -0.0

    ir = after(k, forward, store_to_load, fold, cse)
    assert count(ir, S.RandStmt) == 2
    k()
    assert np.count_nonzero(x.to_numpy()) > 32
    zs = z.to_numpy()
    assert not np.signbit(zs[0]) and np.signbit(zs[1])


def test_cse_does_not_reuse_a_load_in_a_nested_block_nor_merge_addresses():
    x = ti.field(ti.f32, shape=8)
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            a = y[i]
            if a > 0.0:
                x[i] = y[i] * 2.0    # its own load: ti.stop_grad blocks need their own
            else:
                x[i] = a

    before = after(k)
    ir = after(k, cse)
    assert count(ir, S.GlobalLoadStmt, loads_of(y)) == 2
    # every access keeps its own address statement (demote, reduction and scatter count them)
    assert count(ir, S.GlobalPtrStmt) == count(before, S.GlobalPtrStmt)


def test_cse_does_not_reach_into_a_parallel_loop():
    x = ti.field(ti.i32, shape=8)
    s = ti.field(ti.i32, shape=())

    @ti.kernel
    def k():
        s[None] = 3 * 7 + s[None]
        for i in x:
            x[i] = i * 5
        for i in x:
            x[i] += i * 5            # (a second task: its own i * 5)

    ir = after(k, cse)
    loops = [st for st in ir.body.stmts if isinstance(st, S.RangeForStmt)]
    for loop in loops:
        inside = {id(st) for st in S.walk(loop.body)}
        for st in S.walk(loop.body):
            assert all(id(o) in inside or isinstance(o, (S.ConstStmt, S.ArgLoadStmt))
                       or o is loop for o in st.operands()), st


# -- store to load forwarding ------------------------------------------------------------------
def test_store_to_load_forwards_locals_of_a_loop_body():
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def k():
        for i in x:
            t = x[i] * 2.0
            t = t + 1.0
            x[i] = t * t

    ir = after(k, store_to_load)
    assert count(ir, S.LocalLoadStmt) == 0
    assert count(ir, S.AllocaStmt) == 0
    x.from_numpy(np.arange(8, dtype=np.float32))
    k()
    v = np.arange(8, dtype=np.float32) * 2 + 1
    np.testing.assert_allclose(x.to_numpy(), v * v)


def test_store_to_load_keeps_locals_assigned_in_a_branch_or_shared_by_iterations():
    x = ti.field(ti.i32, shape=16)
    total = ti.field(ti.i32, shape=())

    @ti.kernel
    def k():
        s = 0
        for i in x:
            t = i
            if i % 2 == 0:
                t = -i               # the branch assigns t: the load after it stays
            x[i] = t
            s += t                   # shared by the iterations: an atomic update
        total[None] = s

    ir = after(k, store_to_load)
    assert count(ir, S.LocalLoadStmt) == 2        # t after the branch, s after the loop
    k()
    i = np.arange(16)
    t = np.where(i % 2 == 0, -i, i)
    np.testing.assert_array_equal(x.to_numpy(), t)
    assert total[None] == t.sum()


# -- the whole step, in the compile driver ----------------------------------------------------
def test_simplify_is_off_without_advanced_optimization_but_dce():
    ti.init(arch=ti.cpu, offline_cache=False, advanced_optimization=False)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            x[i] = x[i] * x[i]

    ir = frontend_ir(k)
    simplify.run(ir, runtime.config())
    assert count(ir, S.GlobalLoadStmt) == 2
    x.from_numpy(np.arange(4, dtype=np.float32))
    k()
    np.testing.assert_allclose(x.to_numpy(), np.arange(4) ** 2)


@pytest.mark.parametrize("needs_grad", [False, True])
def test_simplified_kernels_and_their_gradients_agree_with_numpy(needs_grad):
    n = 32
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    y = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            a = x[i] * x[i]
            b = x[i] * x[i] + 1.0
            y[i] = a * b + ti.sin(x[i]) * ti.sin(x[i])
        for i in y:
            loss[None] += y[i]

    xv = np.linspace(-1, 1, n).astype(np.float32)
    x.from_numpy(xv)
    if needs_grad:
        with ti.ad.Tape(loss=loss):
            k()
        x64 = xv.astype(np.float64)
        expect = 4 * x64 ** 3 + 2 * x64 + 2 * np.sin(x64) * np.cos(x64)
        np.testing.assert_allclose(x.grad.to_numpy(), expect, rtol=1e-4, atol=1e-5)
    else:
        k()
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(y.to_numpy(), x64 ** 2 * (x64 ** 2 + 1) + np.sin(x64) ** 2,
                               rtol=1e-5, atol=1e-6)
