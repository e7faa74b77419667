"""The `ti.math` helpers that are straight-line code over matrix entries: 2-D and 3-D
rotations, homogeneous transforms, the complex inverse, and bit counts (`popcnt`, `clz`).
Like the decompositions of linalg.py, they run on kernel values inside kernels and on Python
numbers outside."""
from __future__ import annotations

from fluxion.ir import expr as E
from fluxion.ir import types as T
from fluxion.ir.expr import Expr, library_module as _library_module
from fluxion.lang import builtins as B
from fluxion.lang.linalg import _cross
from fluxion.lang.matrix import Matrix

__all__ = ["cinv", "clz", "popcnt", "rot3", "rot_by_axis", "rot_yaw_pitch_roll", "rotate2d",
           "rotate3d", "rotation3d", "scale", "translate", "vdir"]


def _fvec(xs):
    return Matrix._make(list(xs), len(xs), 1, 1)


def _fmat(rows):
    return Matrix._make([x for row in rows for x in row], len(rows), len(rows[0]), 2)


def vdir(ang):
    """The 2D unit vector at angle `ang` (radians)."""
    return _fvec([B.cos(ang), B.sin(ang)])


def rotate2d(p, ang):
    """`p` rotated counter-clockwise by `ang` radians."""
    c, s = B.cos(ang), B.sin(ang)
    return _fvec([p[0] * c - p[1] * s, p[0] * s + p[1] * c])


def rot3(axis, ang):
    """The 3x3 matrix of the rotation by `ang` radians about the unit vector `axis`
    (right-handed: counter-clockwise looking down the axis)."""
    c, s = B.cos(ang), B.sin(ang)
    x, y, z = axis[0], axis[1], axis[2]
    k = 1.0 - c
    return _fmat([[c + k * x * x, k * x * y - s * z, k * x * z + s * y],
                  [k * y * x + s * z, c + k * y * y, k * y * z - s * x],
                  [k * z * x - s * y, k * z * y + s * x, c + k * z * z]])


def rotate3d(p, axis, ang):
    """`p` rotated by `ang` radians about the unit vector `axis` (Rodrigues' formula)."""
    c, s = B.cos(ang), B.sin(ang)
    x = [p[0], p[1], p[2]]
    u = [axis[0], axis[1], axis[2]]
    along = (x[0] * u[0] + x[1] * u[1] + x[2] * u[2]) * (1.0 - c)
    uxp = _cross(u, x)
    return _fvec([x[i] * c + uxp[i] * s + u[i] * along for i in range(3)])


def _homogeneous(m3):
    return _fmat([list(m3[r]) + [0.0] for r in range(3)] + [[0.0, 0.0, 0.0, 1.0]])


def rot_by_axis(axis, ang):
    """4x4 homogeneous rotation about `axis` (normalized here) by `ang` radians, the same
    matrix as the original system's `ti.math.rot_by_axis` (which is the transpose of the
    right-handed `rot3(axis, ang)`, i.e. `rot3(axis, -ang)` padded to 4x4)."""
    u = [axis[0], axis[1], axis[2]]
    inv = B.rsqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    m = rot3(_fvec([x * inv for x in u]), ang)
    return _homogeneous([[m[c, r] for c in range(3)] for r in range(3)])


def rot_yaw_pitch_roll(yaw, pitch, roll):
    """4x4 homogeneous rotation from Euler angles, the same matrix as the original system's
    `ti.math.rot_yaw_pitch_roll`: the transpose of Ry(yaw) Rx(pitch) Rz(roll) (rotations
    about the Y, X and Z axes), padded to 4x4."""
    cy, sy = B.cos(yaw), B.sin(yaw)
    cp, sp = B.cos(pitch), B.sin(pitch)
    cr, sr = B.cos(roll), B.sin(roll)
    # M = Ry(yaw) Rx(pitch) Rz(roll), multiplied out by hand
    m = [[cy * cr + sy * sp * sr, -cy * sr + sy * sp * cr, sy * cp],
         [cp * sr, cp * cr, -sp],
         [-sy * cr + cy * sp * sr, sy * sr + cy * sp * cr, cy * cp]]
    return _homogeneous([[m[c][r] for c in range(3)] for r in range(3)])


def rotation3d(ang_x, ang_y, ang_z):
    """4x4 homogeneous rotation from angles about the X, Y and Z axes, as the original
    system's `ti.math.rotation3d` (= rot_yaw_pitch_roll(ang_z, ang_x, ang_y))."""
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


def translate(dx, dy, dz):
    """4x4 homogeneous translation by (dx, dy, dz)."""
    return _fmat([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz],
                  [0.0, 0.0, 0.0, 1.0]])


def scale(sx, sy, sz):
    """4x4 homogeneous scaling by (sx, sy, sz)."""
    return _fmat([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0],
                  [0.0, 0.0, 0.0, 1.0]])


def cinv(z):
    """1 / z for a complex number stored as a 2-vector (re, im)."""
    d = z[0] * z[0] + z[1] * z[1]
    return _fvec([z[0] / d, -z[1] / d])


def _bit_width(x):
    if isinstance(x, Expr):
        if x.dtype.is_float:
            raise ValueError("popcnt/clz of a float value")
        return x.dtype.bits
    return 32


def popcnt(x):
    """The number of set bits of an integer (element-wise on vectors)."""
    if isinstance(x, Matrix):
        return x._map(popcnt)
    if not isinstance(x, Expr):
        return (int(x) & 0xFFFFFFFF).bit_count()
    bits = _bit_width(x)
    ut = {8: T.u8, 16: T.u16, 32: T.u32, 64: T.u64}[bits]
    v = E.bit_cast(x, ut) if x.dtype is not ut else x
    # SWAR: sums of bit pairs, nibbles, then bytes gathered by a multiply
    m1, m2, m4 = (int("55" * 8, 16), int("33" * 8, 16), int("0f" * 8, 16))
    mask = (1 << bits) - 1
    v = v - ((v >> 1) & (m1 & mask))
    v = (v & (m2 & mask)) + ((v >> 2) & (m2 & mask))
    v = (v + (v >> 4)) & (m4 & mask)
    if bits > 8:
        v = (v * (int("01" * 8, 16) & mask)) >> (bits - 8)
    return E.cast(v & 0xFF, T.i32)


def clz(x):
    """The number of leading zero bits of an integer (element-wise on vectors)."""
    if isinstance(x, Matrix):
        return x._map(clz)
    if not isinstance(x, Expr):
        v = int(x) & 0xFFFFFFFF
        return 32 - v.bit_length()
    bits = _bit_width(x)
    ut = {8: T.u8, 16: T.u16, 32: T.u32, 64: T.u64}[bits]
    v = E.bit_cast(x, ut) if x.dtype is not ut else x
    # smear the highest set bit to the right, then count the ones
    sh = 1
    while sh < bits:
        v = v | (v >> sh)
        sh *= 2
    return bits - popcnt(v)


# every public function here computes with the caller's float type (see library_code)
_library_module(globals())
