"""`ti.math`: GLSL-style vector types and helpers, usable in kernels and in Python scope."""
from __future__ import annotations

import math as _m

from fluxion.ir.expr import library_module as _library_module
from fluxion.lang import builtins as B
from fluxion.lang.builtins import (acos, asin, atan2, ceil, cos, exp, floor, log, max, min,  # noqa: F401
                                   pow, round, sin, sqrt, tan, tanh, rsqrt)
from fluxion.lang.matrix import Matrix, MatrixType
from fluxion.ir.types import f32, i32

pi = _m.pi
e = _m.e
inf = float("inf")
nan = float("nan")

vec2, vec3, vec4 = (MatrixType(n, 1, 1) for n in (2, 3, 4))
# integer vectors follow ti.init(default_ip=...), as vec and mat follow default_fp
ivec2, ivec3, ivec4 = (MatrixType(n, 1, 1, "default_ip") for n in (2, 3, 4))
uvec2, uvec3, uvec4 = (MatrixType(n, 1, 1, "default_up") for n in (2, 3, 4))
mat2, mat3, mat4 = (MatrixType(n, n, 2) for n in (2, 3, 4))


def clamp(x, xmin, xmax):
    return min(max(x, xmin), xmax)


def mix(x, y, a):
    return x * (1.0 - a) + y * a


def step(edge, x):
    # 1 where x >= edge, as the original computes it: a NaN is below every edge
    return B.select(x >= edge, 1.0, 0.0)


def smoothstep(edge0, edge1, x):
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def sign(x):
    if isinstance(x, Matrix):
        return x._map(sign)
    return B.select(x > 0, 1.0, B.select(x < 0, -1.0, 0.0)) if not isinstance(x, (int, float)) \
        else float((x > 0) - (x < 0))


def fract(x):
    return x - floor(x)


def dot(a, b):
    return a.dot(b)


def cross(a, b):
    return a.cross(b)


def length(x):
    return x.norm()


def distance(a, b):
    return (a - b).norm()


def normalize(x):
    # (Taichi's: a division by the norm, where Matrix.normalized multiplies by its inverse)
    return x / x.norm()


def reflect(x, n):
    return x - 2.0 * n.dot(x) * n


def refract(x, n, eta):
    dxn = x.dot(n)
    k = 1.0 - eta * eta * (1.0 - dxn * dxn)
    r = eta * x - (eta * dxn + sqrt(k)) * n
    return B.select(k < 0.0, 0.0, 1.0) * r


def degrees(x):
    return x * (180.0 / pi)


def radians(x):
    return x * (pi / 180.0)


def log2(x):
    return log(x) * (1.0 / _m.log(2.0))


def exp2(x):
    return exp(x * _m.log(2.0))


def inverse(m):
    return m.inverse()


def determinant(m):
    return m.determinant()


def transpose(m):
    return m.transpose()


def atan(y, x=None):
    return B.atan(y) if x is None else atan2(y, x)


def isinf(x):
    return B.select(abs(x) == inf, 1, 0)


def isnan(x):
    return x != x


def mod(x, y):
    return x - y * floor(x / y)


def eye(n):
    return Matrix.identity(float, n)


def rot2(ang):
    c, s = cos(ang), sin(ang)
    return Matrix([[c, -s], [s, c]])


def rotation2d(ang):
    return rot2(ang)


def cconj(z):
    return Matrix._make([z[0], -z[1]], 2, 1, 1)


def cmul(a, b):
    return Matrix._make([a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]], 2, 1, 1)


def cdiv(a, b):
    d = b[0] * b[0] + b[1] * b[1]
    return Matrix._make([(a[0] * b[0] + a[1] * b[1]) / d, (a[1] * b[0] - a[0] * b[1]) / d], 2, 1, 1)


def cexp(z):
    r = exp(z[0])
    return Matrix._make([r * cos(z[1]), r * sin(z[1])], 2, 1, 1)


def clog(z):
    return Matrix._make([log(z.norm()), atan2(z[1], z[0])], 2, 1, 1)


def cpow(z, n):
    r = z.norm() ** n
    t = atan2(z[1], z[0]) * n
    return Matrix._make([r * cos(t), r * sin(t)], 2, 1, 1)


def csqrt(z):
    r = sqrt(z.norm())
    t = atan2(z[1], z[0]) * 0.5
    return Matrix._make([r * cos(t), r * sin(t)], 2, 1, 1)


# the decompositions, and the rotations, homogeneous transforms, complex inverse and bit counts
# (straight-line code over entries, as the decompositions)
from fluxion.lang.linalg import eig, polar_decompose, svd, sym_eig  # noqa: E402,F401
from fluxion.lang.transforms import (cinv, clz, popcnt, rot3, rot_by_axis,  # noqa: E402,F401
                                     rot_yaw_pitch_roll, rotate2d, rotate3d, rotation3d, scale,
                                     translate, vdir)



# every public function here computes with the caller's float type (see library_code)
_library_module(globals())
