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
from fluxion.lang.struct import StructType as _StructType
from fluxion.linalg.sparse_matrix import sparse_matrix_builder as _builder_annotation
from fluxion.lang import quant_types as quant  # noqa: F401


def vector(n=None, dtype=None):
    """A vector type; `ti.types.vector()` (no size) annotates ndarrays of any vectors."""
    return MatrixType(n, 1, 1, dtype)


def matrix(n=None, m=None, dtype=None):
    """A matrix type; `ti.types.matrix()` (no shape) annotates ndarrays of any matrices."""
    return MatrixType(n, m, 2, dtype)


from fluxion.lang.ndarray import NdarrayType as ndarray  # noqa: E402,F401


def struct(**members):
    return _StructType(members)


def sparse_matrix_builder():
    """Annotation of a `ti.linalg.SparseMatrixBuilder` kernel argument."""
    return _builder_annotation()


# `ti.types.primitive_types` and `from fluxion.types.primitive_types import f32` (this module
# is no package: the submodule is registered under its dotted name)
_sys.modules[__name__ + ".primitive_types"] = primitive_types

from fluxion.lang.argpack import argpack  # noqa: E402,F401
from fluxion.lang.texture import rw_texture, texture  # noqa: E402,F401

from fluxion.lang.texture import RWTextureType as _RWTextureType  # noqa: E402
from fluxion.lang.texture import TextureType as _TextureType  # noqa: E402

_Module = type(_sys)


def _submodule(name, doc, **names):
    """A namespace registered as `fluxion.types.<name>`, so that Taichi programs' imports of
    the original's submodules (`from taichi.types.ndarray_type import NdarrayType`) work
    here: it holds the same objects as `ti.types`."""
    m = _Module(f"{__name__}.{name}", doc)
    m.__dict__.update(names)
    m.__all__ = list(names)
    _sys.modules[m.__name__] = m
    return m


annotations = _submodule("annotations", "Kernel argument annotations.", template=template,
                         Template=template, sparse_matrix_builder=sparse_matrix_builder)
compound_types = _submodule("compound_types", "Vector, matrix, struct and argpack types.",
                            matrix=matrix, vector=vector, struct=struct, argpack=argpack)
ndarray_type = _submodule("ndarray_type", "The ndarray annotation.", ndarray=ndarray,
                          NdarrayType=ndarray)
texture_type = _submodule("texture_type", "The texture annotations.", texture=texture,
                          rw_texture=rw_texture, TextureType=_TextureType,
                          RWTextureType=_RWTextureType)
