"""`ti.types`: annotations and constructors for kernel arguments and locals."""
from fluxion.lang.types import (i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64,  # noqa: F401
                                int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
                                float32, float64)
from fluxion.lang.kernel import template  # noqa: F401
from fluxion.lang.real_func import RefType, ref  # noqa: F401
from fluxion.lang.matrix import MatrixType
from fluxion.lang import quant_types as quant  # noqa: F401


def vector(n, dtype=None):
    return MatrixType(n, 1, 1, dtype)


def matrix(n, m, dtype=None):
    return MatrixType(n, m, 2, dtype)


from fluxion.lang.ndarray import NdarrayType as ndarray  # noqa: E402,F401


def struct(**members):
    from fluxion.lang.struct import StructType
    return StructType(members)


def sparse_matrix_builder():
    """Annotation of a `ti.linalg.SparseMatrixBuilder` kernel argument."""
    from fluxion.linalg.sparse_matrix import sparse_matrix_builder as annotation
    return annotation()
