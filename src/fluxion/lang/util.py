"""`ti.lang.util`: conversions between fluxion's data types and numpy's, under the names of
the original system's module (programs and its tests call `ti.lang.util.to_numpy_type`)."""
from __future__ import annotations

import numpy as np

from fluxion.ir import types as T


def to_numpy_type(dt):
    """The numpy scalar type of a fluxion data type: `to_numpy_type(ti.f32)` is np.float32."""
    return T.normalize(dt).np_dtype.type


def to_taichi_type(dt):
    """The fluxion data type of a numpy dtype or scalar type (or of a fluxion type)."""
    if isinstance(dt, T.DataType):
        return dt
    return T.from_numpy_dtype(np.dtype(dt))
