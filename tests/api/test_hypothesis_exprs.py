"""Random typed expression trees over f64 and i32 variables (hypothesis).

Each tree is compiled into a kernel that evaluates it element-wise over inputs stored in fields.
The reference evaluates the same tree with NumPy, applying the language's typing rules
explicitly: i32 op i32 stays i32 (wrapping), any f64 operand gives f64, `/` on two ints gives
the default float (f32 here), and Python literals are weakly typed (an int literal adopts the
other operand's type; a float literal adopts a float operand's type, else the default float).

Only integer subtrees decide comparisons and `ti.select` conditions, and float ops are
Lipschitz (no sqrt near 0), so float rounding differences (fast math) stay small; integer
results are compared exactly.
"""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluxion as ti

N = 128
VARS = {"a": "f64", "b": "f64", "i": "i32", "j": "i32"}
LITERALS = [3, -7, 0.5, 2.25]
BINARY = ["+", "-", "*", "min", "max", "sdiv", "//", "%", "&", "|", "^", "<", "=="]
INT_ONLY = {"//": "-", "%": "+", "&": "min", "|": "max", "^": "+", "<": "*", "==": "-"}
UNARY = ["neg", "abs", "sin"]
NP_TYPES = {"i32": np.int32, "f32": np.float32, "f64": np.float64}


def promote(ta, tb):
    for t in ("f64", "f32"):
        if t in (ta, tb):
            return t
    return "i32"


def literal_type(value, other):
    if isinstance(value, int) or other != "i32":
        return other          # weak: adopts the typed operand's type
    return "f32"              # a float literal next to an int: the default float


def trees():
    var = st.sampled_from(sorted(VARS))
    lit = st.sampled_from(LITERALS)

    def extend(sub):
        return st.one_of(
            st.tuples(st.just("bin"), st.sampled_from(BINARY), sub, sub),
            st.tuples(st.just("binlit"), st.sampled_from(BINARY), sub, lit, st.booleans()),
            st.tuples(st.just("un"), st.sampled_from(UNARY), sub),
            st.tuples(st.just("sel"), sub, sub, sub))
    return st.recursive(var, extend, max_leaves=8)


class _Typed:
    """A value with its language-level type tag (NumPy side only)."""

    def __init__(self, arr, t, scale):
        self.arr, self.t, self.scale = arr, t, scale


def _effective(op, ta, tb):
    if op in INT_ONLY and "i32" != promote(ta, tb):
        return INT_ONLY[op]
    return op


# -- kernel side: plain Python operators on kernel values, typed by fluxion -------------------
def k_binop(op, x, y):
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "min":
        return ti.min(x, y)
    if op == "max":
        return ti.max(x, y)
    if op == "sdiv":
        return x / (ti.abs(y) + 1)
    if op == "//":
        return x // (ti.abs(y) + 1)
    if op == "%":
        return x % (ti.abs(y) + 1)
    if op == "&":
        return x & y
    if op == "|":
        return x | y
    if op == "^":
        return x ^ y
    if op == "<":
        return x < y
    if op == "==":
        return x == y
    raise AssertionError(op)


def k_eval(tree, env):
    """Returns (kernel value or literal, type tag)."""
    if isinstance(tree, str):
        return env[tree], VARS[tree]
    kind = tree[0]
    if kind == "bin":
        (x, tx), (y, ty) = k_eval(tree[2], env), k_eval(tree[3], env)
        op = _effective(tree[1], tx, ty)
        return k_binop(op, x, y), _result_type(op, tx, ty)
    if kind == "binlit":
        (x, tx), lit, lit_left = k_eval(tree[2], env), tree[3], tree[4]
        tl = literal_type(lit, tx)
        op = _effective(tree[1], tx, tl)
        if lit_left and op != "sdiv" and op not in ("//", "%"):
            return k_binop(op, lit, x), _result_type(op, tl, tx)
        return k_binop(op, x, lit), _result_type(op, tx, tl)
    if kind == "un":
        x, tx = k_eval(tree[2], env)
        op = tree[1]
        if op == "neg":
            return -x, tx
        if op == "abs":
            return ti.abs(x), tx
        # sin takes floats only (as in the original system): an int operand is cast first
        return ti.sin(ti.cast(x, ti.f32) if tx == "i32" else x), ("f32" if tx == "i32" else tx)
    if kind == "sel":
        (c, tc), (x, tx), (y, ty) = (k_eval(t, env) for t in tree[1:])
        if tc != "i32":
            return ti.max(x, y), promote(tx, ty)
        return ti.select(c > 0, x, y), promote(tx, ty)
    raise AssertionError(kind)


def _result_type(op, ta, tb):
    if op in ("<", "=="):
        return "i32"
    if op == "sdiv":
        t = promote(ta, tb)
        return "f32" if t == "i32" else t
    return promote(ta, tb)


# -- NumPy side: explicit casts following the typing rules ------------------------------------
def _cast(v, t):
    return v.arr.astype(NP_TYPES[t]) if isinstance(v, _Typed) else NP_TYPES[t](v)


def _scale(*vals):
    out = np.zeros(N)
    for v in vals:
        out = np.maximum(out, v.scale if isinstance(v, _Typed) else abs(float(v)))
    return out


def n_binop(op, x, y, tx, ty):
    rt = _result_type(op, tx, ty)
    ct = promote(tx, ty) if op not in ("sdiv",) else rt
    if op in ("sdiv", "//", "%"):
        # the divisor abs(y) + 1 is computed in y's type first
        yt = NP_TYPES[ty]
        den = (np.abs(_cast(y, ty)) + yt(1)).astype(yt)
        a, d = _cast(x, ct), den.astype(NP_TYPES[ct])
        r = a / d if op == "sdiv" else (a // d if op == "//" else a % d)
        return r.astype(NP_TYPES[rt])
    a, b = _cast(x, ct), _cast(y, ct)
    r = {"+": np.add, "-": np.subtract, "*": np.multiply, "min": np.minimum, "max": np.maximum,
         "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
         "<": np.less, "==": np.equal}[op](a, b)
    return np.asarray(r).astype(NP_TYPES[rt])


def n_eval(tree, env):
    if isinstance(tree, str):
        a = env[tree]
        return _Typed(a, VARS[tree], np.abs(a).astype(np.float64))
    kind = tree[0]
    if kind in ("bin", "binlit"):
        x = n_eval(tree[2], env)
        if kind == "bin":
            y = n_eval(tree[3], env)
            ty = y.t
        else:
            y, ty = tree[3], literal_type(tree[3], x.t)
        op = _effective(tree[1], x.t, ty)
        if kind == "binlit" and tree[4] and op != "sdiv" and op not in ("//", "%"):
            r = n_binop(op, y, x, ty, x.t)
            rt = _result_type(op, ty, x.t)
        else:
            r = n_binop(op, x, y, x.t, ty)
            rt = _result_type(op, x.t, ty)
    elif kind == "un":
        x = n_eval(tree[2], env)
        op = tree[1]
        if op == "neg":
            r, rt = (-x.arr).astype(x.arr.dtype), x.t
        elif op == "abs":
            r, rt = np.abs(x.arr).astype(x.arr.dtype), x.t
        else:
            rt = "f32" if x.t == "i32" else x.t
            r = np.sin(_cast(x, rt))
        y = x
    else:
        c, x, y = (n_eval(t, env) for t in tree[1:])
        rt = promote(x.t, y.t)
        if c.t != "i32":
            r = np.maximum(_cast(x, rt), _cast(y, rt))
        else:
            r = np.where(c.arr > 0, _cast(x, rt), _cast(y, rt))
        r = r.astype(NP_TYPES[rt])
        return _Typed(r, rt, np.maximum.reduce([c.scale, x.scale, y.scale,
                                                np.abs(r).astype(np.float64)]))
    scale = np.maximum(_scale(x, y), np.abs(r).astype(np.float64))
    return _Typed(r, rt, scale)


def _uses_f32(tree):
    """Whether any intermediate of the tree is an f32 (looser tolerance)."""
    found = []

    def walk(t):
        if isinstance(t, str):
            return VARS[t]
        kind = t[0]
        if kind == "bin":
            ta, tb = walk(t[2]), walk(t[3])
            r = _result_type(_effective(t[1], ta, tb), ta, tb)
        elif kind == "binlit":
            ta = walk(t[2])
            tb = literal_type(t[3], ta)
            r = _result_type(_effective(t[1], ta, tb), ta, tb)
        elif kind == "un":
            ta = walk(t[2])
            r = "f32" if (t[1] == "sin" and ta == "i32") else ta
        else:
            walk(t[1])
            r = promote(walk(t[2]), walk(t[3]))
        found.append(r)
        return r

    walk(tree)
    return "f32" in found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trees(), st.integers(0, 2 ** 32 - 1))
def test_random_mixed_type_expressions_match_numpy(tree, seed):
    ti.init(arch=ti.cpu)
    rng = np.random.default_rng(seed)
    env = {"a": rng.uniform(-3, 3, N), "b": rng.uniform(-3, 3, N),
           "i": rng.integers(-20, 21, N).astype(np.int32),
           "j": rng.integers(-20, 21, N).astype(np.int32)}
    env["a"][:3] = [0.0, -1.0, 2.5]
    env["i"][:3] = [0, -1, 20]
    fields = {k: ti.field(ti.f64 if VARS[k] == "f64" else ti.i32, shape=N) for k in VARS}
    for k, f in fields.items():
        f.from_numpy(env[k])
    out = ti.field(ti.f64, shape=N)
    fa, fb, fi, fj = fields["a"], fields["b"], fields["i"], fields["j"]

    @ti.kernel
    def run():
        for p in range(N):
            value, _ = k_eval(tree, {"a": fa[p], "b": fb[p], "i": fi[p], "j": fj[p]})
            out[p] = value

    run()
    got = out.to_numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        ref = n_eval(tree, env)
    if ref.t == "i32":
        np.testing.assert_array_equal(got, ref.arr.astype(np.float64))
    else:
        rtol = 2e-5 if _uses_f32(tree) else 1e-11
        err = np.abs(got - ref.arr.astype(np.float64))
        assert (err <= rtol * ref.scale + 1e-300).all(), (tree, got[err > rtol * ref.scale],
                                                          ref.arr[err > rtol * ref.scale])
