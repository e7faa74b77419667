"""`ti.types.is_integral/is_signed/is_real/is_tensor`: questions about a data type."""
from fluxion.ir import types as T
from fluxion.lang.matrix import MatrixType


def _scalar(dt, what):
    if isinstance(dt, T.DataType):
        return dt
    if dt in (int, float, bool):
        return T.normalize(dt)
    raise TypeError(f"ti.types.{what}({dt!r}): not a scalar data type")


def is_integral(dt):
    """True for the integer types (u1 included)."""
    return _scalar(dt, "is_integral").is_int


def is_real(dt):
    """True for f16, f32, f64."""
    return _scalar(dt, "is_real").is_float


def is_signed(dt):
    """True for i8..i64; an error for a floating-point type, as in the original system."""
    dt = _scalar(dt, "is_signed")
    if dt.is_float:
        raise TypeError(f"ti.types.is_signed({dt}): only integer types are signed or unsigned")
    return dt.is_signed


def is_tensor(dt):
    """True for vector and matrix types; False for scalar types."""
    return isinstance(dt, MatrixType)
