"""Every op of ir/ops.py is covered by each consumer of its facts.

A new op is one line of ir/ops.py's table; these tests then say what else it needs: a
derivative rule if its table entry says it has one, a constant evaluation, and a lowering on
every target (run here through a kernel on each arch of the suite, against NumPy computed in
the test).
"""
import math
import pathlib
import re

import numpy as np
import pytest

import fluxion as ti
from fluxion.autodiff import rules
from fluxion.ir import ops as O
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.ops import Op


def test_every_op_has_its_facts():
    for op in Op:
        info = O.INFO[op]
        assert info.arity in (1, 2), op
        assert info.derivative in ("rule", "zero", "integer", "cast"), op
        assert (op in O.UNARY) == (info.arity == 1), op


def _compared_by_name(text):
    """The op names that `text` compares an `op` with as strings (`op == "add"`,
    `s.op in ("min", "max")`): spelled so, a misspelled name is a comparison that is always
    false; `Op.ADD` fails where it is written."""
    names = {o.value for o in Op}
    found = []
    for m in re.finditer(r'(?<!for )\bop (?:==|!=|in|not in) (\([^)]*\)|"\w+")', text):
        found += [n for n in re.findall(r'"(\w+)"', m.group(1)) if n in names]
    return found


def test_code_compares_ops_with_members_not_names():
    src = pathlib.Path(O.__file__).resolve().parents[1]
    found = []
    for p in sorted(src.rglob("*.py")):
        if p.name == "parser.py":       # (its `op` is the statement kind read from the text)
            continue
        found += [f"{p.relative_to(src)}: {n!r}" for n in _compared_by_name(p.read_text())]
    assert not found, found
    assert _compared_by_name('if s.op in ("min", "max") or op == "add" or op == "LOAD"\n'
                            'for op in ("sin", "cos"):') == \
        ["min", "max", "add"]


def test_a_statement_holds_an_op_and_rejects_a_misspelled_one():
    a = S.ConstStmt(1.0, ret_type=T.f32)
    st = S.UnaryOpStmt(a, "sin", ret_type=T.f32)
    assert st.op is Op.SIN and st.op == "sin" and f"{st.op}" == "sin"
    with pytest.raises(ValueError):
        S.UnaryOpStmt(a, "sinn", ret_type=T.f32)
    with pytest.raises(ValueError):
        S.BinaryOpStmt(a, a, "plus", ret_type=T.f32)


def test_derivative_rules_cover_exactly_the_ops_that_have_one():
    for op in Op:
        has_rule = op in rules.UNARY or op in rules.BINARY
        assert has_rule == (O.INFO[op].derivative == "rule"), op
        if has_rule:
            assert (op in rules.UNARY) == (O.INFO[op].arity == 1), op


# ops that constant folding leaves alone on purpose
_NOT_FOLDED = {Op.BIT_CAST: "the bits of a value of another type",
               Op.STOP_GRAD: "a marker for autodiff, kept until lowering"}


def test_constant_evaluation_covers_every_op():
    for op in Op:
        if op in _NOT_FOLDED:
            continue
        if O.INFO[op].arity == 1:
            dt = T.f64 if O.INFO[op].math or O.INFO[op].real_only else T.i32
            x = 0.5 if dt.is_float else 3
            assert O.eval_unary(op, x, dt) is not None, op
        else:
            assert O.eval_binary(op, 7, 2, T.i32) is not None, op


# how a user reaches each op in a kernel, and NumPy's value for it (float64 operands a > 0, b > 0)
_F = {
    Op.SQRT: (lambda a, b: ti.sqrt(a), lambda a, b: np.sqrt(a)),
    Op.RSQRT: (lambda a, b: ti.rsqrt(a), lambda a, b: 1 / np.sqrt(a)),
    Op.SIN: (lambda a, b: ti.sin(a), lambda a, b: np.sin(a)),
    Op.COS: (lambda a, b: ti.cos(a), lambda a, b: np.cos(a)),
    Op.TAN: (lambda a, b: ti.tan(a), lambda a, b: np.tan(a)),
    Op.ASIN: (lambda a, b: ti.asin(a / 4), lambda a, b: np.arcsin(a / 4)),
    Op.ACOS: (lambda a, b: ti.acos(a / 4), lambda a, b: np.arccos(a / 4)),
    Op.ATAN: (lambda a, b: ti.atan(a), lambda a, b: np.arctan(a)),
    Op.TANH: (lambda a, b: ti.tanh(a), lambda a, b: np.tanh(a)),
    Op.EXP: (lambda a, b: ti.exp(a), lambda a, b: np.exp(a)),
    Op.LOG: (lambda a, b: ti.log(a), lambda a, b: np.log(a)),
    Op.NEG: (lambda a, b: -a, lambda a, b: -a),
    Op.ABS: (lambda a, b: abs(a - b), lambda a, b: np.abs(a - b)),
    Op.FLOOR: (lambda a, b: ti.floor(a * 3), lambda a, b: np.floor(a * 3)),
    Op.CEIL: (lambda a, b: ti.ceil(a * 3), lambda a, b: np.ceil(a * 3)),
    Op.ROUND: (lambda a, b: ti.round(a * 3), lambda a, b: np.floor(a * 3 + 0.5)),
    Op.CAST: (lambda a, b: ti.cast(ti.cast(a * 10, ti.i32), ti.f64), lambda a, b: np.trunc(a * 10)),
    Op.ADD: (lambda a, b: a + b, lambda a, b: a + b),
    Op.SUB: (lambda a, b: a - b, lambda a, b: a - b),
    Op.MUL: (lambda a, b: a * b, lambda a, b: a * b),
    Op.TRUEDIV: (lambda a, b: a / b, lambda a, b: a / b),
    Op.FLOORDIV: (lambda a, b: a // b, lambda a, b: np.floor(a / b)),
    Op.MOD: (lambda a, b: a % b, lambda a, b: a - b * np.floor(a / b)),
    Op.POW: (lambda a, b: a ** b, lambda a, b: a ** b),
    Op.MIN: (lambda a, b: ti.min(a, b), lambda a, b: np.minimum(a, b)),
    Op.MAX: (lambda a, b: ti.max(a, b), lambda a, b: np.maximum(a, b)),
    Op.ATAN2: (lambda a, b: ti.atan2(a, b), lambda a, b: np.arctan2(a, b)),
    Op.CMP_LT: (lambda a, b: ti.cast(a < b, ti.f64), lambda a, b: (a < b) * 1.0),
    Op.CMP_LE: (lambda a, b: ti.cast(a <= b, ti.f64), lambda a, b: (a <= b) * 1.0),
    Op.CMP_GT: (lambda a, b: ti.cast(a > b, ti.f64), lambda a, b: (a > b) * 1.0),
    Op.CMP_GE: (lambda a, b: ti.cast(a >= b, ti.f64), lambda a, b: (a >= b) * 1.0),
    Op.CMP_EQ: (lambda a, b: ti.cast(a == b, ti.f64), lambda a, b: (a == b) * 1.0),
    Op.CMP_NE: (lambda a, b: ti.cast(a != b, ti.f64), lambda a, b: (a != b) * 1.0),
}
# on int32 operands a >= 0, b > 0
_I = {
    Op.BIT_NOT: (lambda a, b: ~a, lambda a, b: ~a),
    Op.LOGIC_NOT: (lambda a, b: ti.logical_not(a - 3), lambda a, b: (a == 3) * 1),
    Op.BIT_CAST: (lambda a, b: ti.bit_cast(ti.bit_cast(a, ti.f32), ti.i32), lambda a, b: a),
    Op.BIT_AND: (lambda a, b: a & b, lambda a, b: a & b),
    Op.BIT_OR: (lambda a, b: a | b, lambda a, b: a | b),
    Op.BIT_XOR: (lambda a, b: a ^ b, lambda a, b: a ^ b),
    Op.SHL: (lambda a, b: a << (b % 8), lambda a, b: a << (b % 8)),
    Op.SHR: (lambda a, b: a >> (b % 8), lambda a, b: a >> (b % 8)),
}
# ops no user code emits directly
_INTERNAL = {
    Op.SGN: "folding only; ti.math.sign is built from selects",
    Op.STOP_GRAD: "emitted by ti.stop_grad, covered by the autodiff tests",
    Op.DIV_NONNEG: "loop index decomposition, covered by every ndrange test",
    Op.MOD_NONNEG: "loop index decomposition, covered by every ndrange test",
}


def test_every_op_is_reached_by_the_lowering_tests():
    missing = [op for op in Op if op not in _F and op not in _I and op not in _INTERNAL]
    assert not missing, f"add a user-level use of {missing} to this test"


def _run(table, dtype, a, b):
    n = len(a)
    out = ti.field(dtype, shape=(len(table), n))
    fa, fb = ti.field(dtype, n), ti.field(dtype, n)
    fa.from_numpy(a)
    fb.from_numpy(b)
    uses = [table[op][0] for op in table]

    @ti.kernel
    def k():
        for i in range(n):
            for j in ti.static(range(len(uses))):
                out[j, i] = uses[j](fa[i], fb[i])

    k()
    return out.to_numpy()


def test_every_op_lowers_on_this_target(fluxion_arch):
    rng = np.random.default_rng(7)
    a = rng.uniform(0.1, 3.0, 64)
    b = rng.uniform(0.1, 3.0, 64)
    b[:4] = a[:4]                      # equal operands for the comparisons
    got = _run(_F, ti.f64, a, b)
    for row, op in enumerate(_F):
        np.testing.assert_allclose(got[row], _F[op][1](a, b), rtol=1e-12, atol=1e-12,
                                   err_msg=str(op))
    ia = rng.integers(0, 1000, 64).astype(np.int32)
    ib = rng.integers(1, 1000, 64).astype(np.int32)
    ia[:3] = 3
    got = _run(_I, ti.i32, ia, ib)
    for row, op in enumerate(_I):
        np.testing.assert_array_equal(got[row], _I[op][1](ia, ib), err_msg=str(op))


def test_f32_rounding_of_folded_constants_is_numpys():
    # ops._to_f32 (struct's packing) in place of NumPy's float32 scalar: the same bits for
    # every double, the overflows to infinity and the NaN payloads too
    import math
    import random
    import struct

    import numpy as np

    from fluxion.ir import ops
    from fluxion.ir import types as T

    def numpy_f32(v):
        with np.errstate(over="ignore"):
            return float(np.float32(v))
    rng = random.Random(14)
    edge = [3.4028235677973366e38, 3.4028235677973367e38, 3.402823567797337e38, 3.4028236e38,
            -3.4028236e38, 1e39, -1e39, 1e-46, -1e-46, 1.4e-45, 0.1, 0.0, -0.0, math.inf,
            -math.inf, math.nan, 2.0 ** 128 * (1 - 2 ** -25), 2.0 ** 128 * (1 - 2 ** -24)]
    bits = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            for _ in range(20000)]
    for v in edge + bits + [rng.uniform(-1e6, 1e6) for _ in range(5000)]:
        assert struct.pack("<d", ops._to_type(v, T.f32)) == struct.pack("<d", numpy_f32(v)), v
    # (an int is left to NumPy)
    big = 2 ** 60 + 2 ** 36 + 1
    assert ops._to_type(big, T.f32) == numpy_f32(big)
