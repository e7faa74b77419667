"""`ti.types`: annotations and constructors for kernel arguments and locals."""
import sys as _sys

from fluxion.ir.types import (i8, i16, i32, i64, u1, u8, u16, u32, u64, f16, f32, f64,  # noqa: F401
                                int8, int16, int32, int64, uint1, uint8, uint16, uint32, uint64,
                                float16, float32, float64)
from fluxion.lang import primitive_types  # noqa: F401
from fluxion.lang.type_utils import is_integral, is_real, is_signed, is_tensor  # noqa: F401
from fluxion.lang.kernel import template  # noqa: F401
from fluxion.lang.real_func import RefType, ref  # noqa: F401
from fluxion.lang.matrix import MatrixType
from fluxion.lang import quant_types as quant  # noqa: F401


def vector(n=None, dtype=None):
    """A vector type; `ti.types.vector()` (no size) annotates ndarrays of any vectors."""
    return MatrixType(n, 1, 1, dtype)


def matrix(n=None, m=None, dtype=None):
    """A matrix type; `ti.types.matrix()` (no shape) annotates ndarrays of any matrices."""
    return MatrixType(n, m, 2, dtype)


from fluxion.lang.ndarray import NdarrayType as ndarray  # noqa: E402,F401


def struct(**members):
    from fluxion.lang.struct import StructType
    return StructType(members)


def sparse_matrix_builder():
    """Annotation of a `ti.linalg.SparseMatrixBuilder` kernel argument."""
    from fluxion.linalg.sparse_matrix import sparse_matrix_builder as annotation
    return annotation()


# `ti.types.primitive_types` and `from fluxion.types.primitive_types import f32` (this module
# is no package: the submodule is registered under its dotted name)
_sys.modules[__name__ + ".primitive_types"] = primitive_types

from fluxion.lang.argpack import argpack  # noqa: E402,F401
from fluxion.lang.texture import rw_texture, texture  # noqa: E402,F401
