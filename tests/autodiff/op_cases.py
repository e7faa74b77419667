"""The differentiable ops with a kernel-side and a NumPy version and a safe input domain,
shared by the reverse- and forward-mode tests."""
import numpy as np

import fluxion as ti

UNARY_CASES = {
    # name: (kernel-side function, numpy function, input domain)
    "neg": (lambda a: -a, lambda a: -a, (-2, 2)),
    "sin": (ti.sin, np.sin, (-3, 3)),
    "cos": (ti.cos, np.cos, (-3, 3)),
    "tan": (ti.tan, np.tan, (-1.2, 1.2)),
    "asin": (ti.asin, np.arcsin, (-0.9, 0.9)),
    "acos": (ti.acos, np.arccos, (-0.9, 0.9)),
    "atan": (ti.atan, np.arctan, (-3, 3)),
    "tanh": (ti.tanh, np.tanh, (-2, 2)),
    "exp": (ti.exp, np.exp, (-2, 2)),
    "log": (ti.log, np.log, (0.1, 3)),
    "sqrt": (ti.sqrt, np.sqrt, (0.1, 3)),
    "rsqrt": (ti.rsqrt, lambda a: 1 / np.sqrt(a), (0.1, 3)),
    "abs": (abs, np.abs, (-2, 2)),
}


BINARY_CASES = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, (-2, 2), (-2, 2)),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, (-2, 2), (-2, 2)),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, (-2, 2), (-2, 2)),
    "truediv": (lambda a, b: a / b, lambda a, b: a / b, (-2, 2), (0.5, 2)),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b, (0.5, 2), (-1.5, 2.5)),
    "min": (ti.min, np.minimum, (-2, 2), (-2, 2)),
    "max": (ti.max, np.maximum, (-2, 2), (-2, 2)),
    "atan2": (ti.atan2, np.arctan2, (-2, 2), (0.3, 2)),
    "mod": (lambda a, b: a % b, lambda a, b: a - b * np.floor(a / b), (0.1, 5), (0.7, 1.3)),
}


def fd(f, xs, h=1e-6):
    """Central differences of a scalar function of a vector, coordinate by coordinate."""
    g = np.zeros_like(xs)
    for k in range(xs.size):
        e = np.zeros_like(xs)
        e.flat[k] = h
        g.flat[k] = (f(xs + e) - f(xs - e)) / (2 * h)
    return g
