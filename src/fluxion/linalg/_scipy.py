"""scipy, imported on first use: the sparse matrices and their solvers need it, nothing else
in fluxion does (`pip install 'fluxion[sparse]'`)."""
from __future__ import annotations

import numpy as np

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionTypeError


def sparse():
    """The scipy.sparse module, or an ImportError that says how to get it."""
    try:
        import scipy.sparse
    except ImportError:
        raise ImportError("ti.linalg's sparse matrices and solvers need scipy: "
                          "pip install 'fluxion[sparse]' (or pip install scipy)") from None
    return scipy.sparse


def sparse_linalg():
    sparse()
    import scipy.sparse.linalg
    return scipy.sparse.linalg


def value_dtype(dtype, what):
    """The fluxion float type (f32 or f64) of a sparse matrix's values."""
    try:
        dt = T.normalize(dtype)
    except TypeError:
        dt = None
    if dt not in (T.f32, T.f64):
        raise FluxionTypeError(f"{what}: sparse matrices hold ti.f32 or ti.f64 values, "
                               f"not {dtype}")
    return dt


def np_dtype(dt):
    return np.dtype(np.float32) if dt is T.f32 else np.dtype(np.float64)
