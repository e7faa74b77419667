"""fluxion: parallel, differentiable kernels embedded in Python (`import fluxion as ti`)."""
from fluxion.ir.types import (i8, i16, i32, i64, u1, u8, u16, u32, u64, f16, f32, f64, int8,
                                int16, int32, int64, uint1, uint8, uint16, uint32, uint64, float16,
                                float32, float64, half, DataType)
from fluxion.lang.runtime import (init, reset, cpu, x64, x86_64, arm64, cuda, gpu, vulkan, metal,
                                  opengl, dx11, dx12, gles, amdgpu)
from fluxion.lang.snode import (i, j, k, l, ij, ik, jk, ijk, ijkl, ijl, ikl, il, jkl, jl, kl, axes,
                                root, SNode, Layout, FieldsBuilder)
from fluxion.lang.field import field, Field, ScalarField, MatrixField
from fluxion.lang.quant import BitpackedFields
from fluxion.lang.matrix import Matrix, Vector
from fluxion.lang.kernel import (kernel, func, pyfunc, template, loop_config, Kernel, Func,
                                 data_oriented)
from fluxion.lang import kernel_methods as _kernel_methods  # noqa: F401  (x.fill(v) in kernels)
from fluxion.lang import sparse_kernels as _sparse_kernels  # noqa: F401  (deactivate_all's)
from fluxion.lang import sparse_list_cells as _list_cells  # noqa: F401  (x[i].append(v))
from fluxion.lang.real_func import real_func, ref, RealFunc
from fluxion.lang.builtins import (sin, cos, tan, asin, acos, atan, tanh, exp, log, sqrt, rsqrt,
                                   abs, floor, ceil, round, atan2, pow, min, max, cast, bit_cast,
                                   select, ifte, random, static, stop_grad, atomic_add, atomic_sub,
                                   atomic_min, atomic_max, atomic_and, atomic_or, atomic_xor,
                                   atomic_mul, logical_not, bit_and, bit_or, bit_xor, bit_shl,
                                   bit_sar, bit_not)
from fluxion.frontend.loops import ndrange, grouped
from fluxion.lang.sparse import (is_active, activate, deactivate, append, length,
                                 deactivate_all_snodes)
from fluxion.lang.ndarray import ndarray, Ndarray, ScalarNdarray, VectorNdarray, MatrixNdarray
from fluxion.lang.texture import Format, Texture
from fluxion.lang.extension import extension
from fluxion.lang.argpack import ArgPack
from fluxion.lang.struct import dataclass, StructNamespace as Struct, StructField
from fluxion.ir.errors import (FluxionError, FluxionCompilationError, FluxionSyntaxError,
                                     FluxionNameError, FluxionTypeError, FluxionIndexError,
                                     FluxionRuntimeError, FluxionRuntimeTypeError,
                                     FluxionAssertionError, FluxionOutOfBoundsError)
from fluxion.lang.extra_ops import (raw_div, raw_mod, bit_shr, zero, one, randn, rescale_index,
                                    get_addr, rgb_to_hex, hex_to_rgb, frexp, assume_in_range)
from fluxion._logging import (TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, set_logging_level,
                              is_logging_effective)
from fluxion import _logging
from fluxion.lang import runtime as _runtime  # (ti.cfg)
_runtime.on_reset(lambda r=root: globals().update(root=r))  # ti.reset() gives back ti.root
from fluxion.lang import impl as _impl  # noqa: F401  (makes ti.lang.impl an attribute)
from fluxion.lang.linalg import eig, polar_decompose, solve, svd, sym_eig
from fluxion.lang.sync import (sync, static_print, static_assert, block_local, cache_read_only,
                               no_activate)
from fluxion import math
from fluxion.lang import simt
from fluxion import tools
from fluxion import cache
from fluxion.gui import GUI
from fluxion import ad
from fluxion import types
from fluxion.types import sparse_matrix_builder  # noqa: F401  (ti.sparse_matrix_builder)
from fluxion import profiler
from fluxion import sparse
from fluxion import graph
from fluxion import experimental
from fluxion import algorithms
from fluxion import linalg
from fluxion.lang import util as _lang_util  # noqa: F401  (makes ti.lang.util an attribute)
# last: its kernels are defined with this module's names (`import fluxion as ti`)
from fluxion import ui  # noqa: E402
from fluxion import _lib  # noqa: E402,F401  (ti._lib.core.with_vulkan() and such)

__version__ = "0.1.0"

# the original system's names for its exceptions
TaichiCompilationError = FluxionCompilationError
TaichiSyntaxError = FluxionSyntaxError
TaichiNameError = FluxionNameError
TaichiTypeError = FluxionTypeError
TaichiIndexError = FluxionIndexError
TaichiRuntimeError = FluxionRuntimeError
TaichiRuntimeTypeError = FluxionRuntimeTypeError
TaichiAssertionError = FluxionAssertionError


def __getattr__(name):
    # `ti.cfg`: the configuration of ti.init, None before it (as in the original system)
    if name == "cfg":
        return _runtime.config() if _runtime.state().initialized else None
    raise AttributeError(f"module 'fluxion' has no attribute '{name}'")
