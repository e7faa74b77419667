"""Random arithmetic expressions (hypothesis) compiled as kernels and compared with NumPy,
in float64 and int64 (Python semantics for //, % and comparisons; small inputs and at most
ten leaves keep integer products far from wrapping around)."""
import numpy as np
from hypothesis import given, settings, strategies as st

import fluxion as ti

FLOAT_OPS = ["+", "-", "*", "/", "min", "max", "abs", "neg", "sin", "sqrtabs", "<", "select"]
INT_OPS = ["+", "-", "*", "//", "%", "min", "max", "abs", "neg", "&", "|", "^", "<", "select"]


def exprs(ops):
    leaf = st.sampled_from(["a", "b", "c", "k"])
    return st.recursive(
        leaf,
        lambda sub: st.one_of(st.tuples(st.sampled_from(ops), sub, sub),
                              st.tuples(st.sampled_from(ops), sub, sub, sub)),
        max_leaves=10)


def evaluate(tree, env, lib, is_int):
    """Evaluate `tree` with `lib` = (kernel-side or numpy-side) primitives."""
    if isinstance(tree, str):
        return env[tree]
    op, *args = tree
    x = [evaluate(t, env, lib, is_int) for t in args]
    f = lib[op]
    if op in ("abs", "neg", "sin", "sqrtabs"):
        return f(x[0])
    if op == "select":
        return f(x[0], x[1], x[-1])
    return f(x[0], x[1])


def _safe_div_k(a, b):
    return a / (ti.abs(b) + 1.0)


KLIB = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "/": _safe_div_k, "//": lambda a, b: a // (ti.abs(b) + 1), "%": lambda a, b: a % (ti.abs(b) + 1),
        "min": ti.min, "max": ti.max, "abs": ti.abs, "neg": lambda a: -a, "sin": lambda a: ti.sin(a * 1.0),
        "sqrtabs": lambda a: ti.sqrt(ti.abs(a)), "<": lambda a, b: a < b,
        "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
        "select": lambda c, a, b: ti.select(c > 0, a, b)}
NLIB = {"+": np.add, "-": np.subtract, "*": np.multiply,
        "/": lambda a, b: a / (np.abs(b) + 1.0), "//": lambda a, b: a // (np.abs(b) + 1),
        "%": lambda a, b: a % (np.abs(b) + 1), "min": np.minimum, "max": np.maximum,
        "abs": np.abs, "neg": np.negative, "sin": np.sin, "sqrtabs": lambda a: np.sqrt(np.abs(a)),
        "<": lambda a, b: np.less(a, b).astype(np.int32), "&": np.bitwise_and, "|": np.bitwise_or,
        "^": np.bitwise_xor, "select": lambda c, a, b: np.where(c > 0, a, b)}


@settings(max_examples=30, deadline=None)
@given(exprs(FLOAT_OPS), st.integers(0, 2**31 - 1))
def test_float64_expressions_match_numpy(tree, seed):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    try:
        n = 64
        rng = np.random.default_rng(seed)
        vals = {k: rng.uniform(-3, 3, n) for k in "abc"}
        fields = {k: ti.field(ti.f64, shape=n) for k in "abc"}
        for k in "abc":
            fields[k].from_numpy(vals[k])
        out = ti.field(ti.f64, shape=n)
        fa, fb, fc = fields["a"], fields["b"], fields["c"]

        @ti.kernel
        def k():
            for i in out:
                env = {"a": fa[i], "b": fb[i], "c": fc[i], "k": 1.5}
                out[i] = evaluate(tree, env, KLIB, False) * 1.0

        k()
        ref = evaluate(tree, {"a": vals["a"], "b": vals["b"], "c": vals["c"], "k": 1.5}, NLIB,
                       False) * np.ones(n)
        np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-9, atol=1e-9)
    finally:
        ti.reset()


@settings(max_examples=30, deadline=None)
@given(exprs(INT_OPS), st.integers(0, 2**31 - 1))
def test_int64_expressions_match_numpy(tree, seed):
    ti.init(arch=ti.cpu)
    try:
        n = 64
        rng = np.random.default_rng(seed)
        vals = {k: rng.integers(-20, 20, n).astype(np.int64) for k in "abc"}
        fields = {k: ti.field(ti.i64, shape=n) for k in "abc"}
        for k in "abc":
            fields[k].from_numpy(vals[k])
        out = ti.field(ti.i64, shape=n)
        fa, fb, fc = fields["a"], fields["b"], fields["c"]

        @ti.kernel
        def k():
            for i in out:
                env = {"a": fa[i], "b": fb[i], "c": fc[i], "k": 3}
                out[i] = evaluate(tree, env, KLIB, True)

        k()
        ref = evaluate(tree, {"a": vals["a"], "b": vals["b"], "c": vals["c"], "k": np.int64(3)},
                       NLIB, True) * np.ones(n, np.int64)
        np.testing.assert_array_equal(out.to_numpy(), ref)
    finally:
        ti.reset()
