"""Derivative rules: one entry per op, giving the partial derivatives of its result with
respect to each operand, built from `Expr` values (ir/expr.py: they emit IR wherever they are called).

Reverse mode multiplies the output's adjoint by each partial (`adj_i += p_i * adj_out`);
forward mode sums partials times tangents (`t_out = sum(p_i * t_i)`): one table, both modes.
Each rule takes the operands and the op's result and returns one partial per operand.
"""
from __future__ import annotations

from fluxion.ir import expr as E
from fluxion.ir import ops as O


_INF = float("inf")


def _sign(x):
    return E.select(x > 0, 1.0, E.select(x < 0, -1.0, 0.0))


def _sqrt_partial(out):
    # 1 / (2 sqrt(x)) is +inf at x = 0, as in the original system. Written as a select: under
    # fast math LLVM turns `0.5 / sqrt(x)` into a reciprocal-sqrt estimate whose refinement
    # step gives NaN at 0.
    return E.select(out == 0.0, _INF, 0.5 / out)


UNARY = {
    "neg": lambda x, out: -1.0,
    "sin": lambda x, out: E.unary("cos", x),
    "cos": lambda x, out: -E.unary("sin", x),
    "tan": lambda x, out: 1.0 + out * out,
    "asin": lambda x, out: E.unary("rsqrt", 1.0 - x * x),
    "acos": lambda x, out: -E.unary("rsqrt", 1.0 - x * x),
    "atan": lambda x, out: 1.0 / (1.0 + x * x),
    "tanh": lambda x, out: 1.0 - out * out,
    "exp": lambda x, out: out,
    "log": lambda x, out: 1.0 / x,
    "sqrt": lambda x, out: _sqrt_partial(out),
    "rsqrt": lambda x, out: -0.5 * out / x,
    # the subgradient at the kink is 0, as the original system does
    "abs": lambda x, out: _sign(x),
}

BINARY = {
    "add": lambda x, y, out: (1.0, 1.0),
    "sub": lambda x, y, out: (1.0, -1.0),
    "mul": lambda x, y, out: (y, x),
    "truediv": lambda x, y, out: (1.0 / y, -out / y),
    # x**y: y*x**(y-1), and x**y*log(x) where x > 0; at x = 0 the partial in y is 0 (x**y
    # is 0 around any y > 0), for x < 0 it is undefined: NaN, as in the original system
    "pow": lambda x, y, out: (y * E.binary("pow", x, y - 1.0),
                              E.select(x > 0, out * E.unary("log", E.select(x > 0, x, 1.0)),
                                       E.select(x == 0, 0.0, float("nan")))),
    # exactly one operand receives the adjoint; ties go to the second, as in the original
    # system
    "min": lambda x, y, out: (E.select(x < y, 1.0, 0.0), E.select(x < y, 0.0, 1.0)),
    "max": lambda x, y, out: (E.select(y < x, 1.0, 0.0), E.select(y < x, 0.0, 1.0)),
    "atan2": lambda y, x, out: (x / (x * x + y * y), -y / (x * x + y * y)),
    "mod": lambda x, y, out: (1.0, -E.unary("floor", x / y)),
}

# The ops without a rule here, by how ir/ops.py classifies them: piecewise constant (derivative
# zero almost everywhere), defined on integers only (no gradient flows through them), and
# casts, which the transforms handle themselves (the adjoint passes between float types).
ZERO_DERIVATIVE = frozenset(op for op in O.Op if O.INFO[op].derivative == "zero")
INTEGER_ONLY = frozenset(op for op in O.Op if O.INFO[op].derivative == "integer")
STRUCTURAL = frozenset(op for op in O.Op if O.INFO[op].derivative == "cast")


def partials(op, operands, out):
    """Partials of `op` as Expr (or Python numbers), one per operand."""
    if op in UNARY:
        return (UNARY[op](*operands, out),)
    return BINARY[op](*operands, out)
