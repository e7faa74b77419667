"""Matrix-free Krylov solvers over fields: `ti.linalg.MatrixFreeCG` (conjugate gradients, for
a symmetric positive definite operator) and `ti.linalg.MatrixFreeBICGSTAB` (BiCGSTAB, for a
general one). The operator is a kernel `matvec(v, Av)` wrapped in a LinearOperator; the
vectors are scalar fields of any shape. Each step is a few fluxion kernels (axpy updates, dot
products accumulated in f64); the scalars of the iteration live in Python.

Both stop when |b - A x| < tol (absolute, as in the original system) or after maxiter
iterations, and return whether they converged. Unlike the original system, "converged" is
checked on the true residual b - A x, not only on the residual the iteration updates (which
in f32 goes on shrinking long after x stopped improving), and a breakdown (a zero or
non-finite denominator, once rounding errors dominate) restarts from the true residual or
stops with the last good x, where a plain implementation would fill x with NaNs.
"""
from __future__ import annotations

import math

from fluxion.lang import runtime
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionRuntimeError, FluxionTypeError
from fluxion.lang.field import Field, field
from fluxion.lang.kernel import kernel, template
from fluxion.frontend.loops import grouped

__all__ = ["LinearOperator", "MatrixFreeBICGSTAB", "MatrixFreeCG"]


class LinearOperator:
    """A linear operator given by a kernel `matvec_kernel(x, Ax)` that writes A x into Ax."""

    def __init__(self, matvec_kernel):
        self._matvec = matvec_kernel

    def matvec(self, x, Ax):
        if x.shape != Ax.shape:
            raise FluxionRuntimeError(f"Dimension mismatch x.shape{x.shape} != "
                                      f"Ax.shape{Ax.shape}.")
        self._matvec(x, Ax)


# -- the kernels of the iterations (compiled once per set of fields) --------------------------
@kernel
def _dot(a: template(), b: template()) -> T.f64:
    s = T.f64(0.0)
    for I in grouped(a):
        s += T.f64(a[I]) * T.f64(b[I])
    return s


@kernel
def _copy(dst: template(), src: template()):
    for I in grouped(dst):
        dst[I] = src[I]


@kernel
def _sub(out: template(), a: template(), b: template()):
    for I in grouped(out):
        out[I] = a[I] - b[I]


@kernel
def _axpy(y: template(), alpha: T.f64, x: template()):
    """y += alpha x"""
    for I in grouped(y):
        y[I] = y[I] + alpha * x[I]


@kernel
def _lincomb(out: template(), a: template(), beta: T.f64, b: template()):
    """out = a + beta b"""
    for I in grouped(out):
        out[I] = a[I] + beta * b[I]


@kernel
def _bicg_direction(p: template(), r: template(), beta: T.f64, omega: T.f64, v: template()):
    """p = r + beta (p - omega v)"""
    for I in grouped(p):
        p[I] = r[I] + beta * (p[I] - omega * v[I])


@kernel
def _axpbypz(x: template(), alpha: T.f64, p: template(), omega: T.f64, s: template()):
    """x += alpha p + omega s"""
    for I in grouped(x):
        x[I] = x[I] + alpha * p[I] + omega * s[I]


# work fields, kept per (shape, offset, dtype) so that repeated solves allocate nothing and
# reuse the operator's compiled instances; dropped with the session (ti.reset)
_work = {}


def _work_fields(b, count):
    key = (runtime.state().generation, tuple(b.shape), b.offset, b.dtype, count)
    fields = _work.get(key)
    if fields is None:
        for k in [k for k in _work if k[0] != key[0]]:
            del _work[k]
        fields = [field(b.dtype, shape=b.shape, offset=b.offset) for _ in range(count)]
        _work[key] = fields
    return fields


def _check(A, b, x, name):
    if not isinstance(A, LinearOperator):
        raise FluxionTypeError(f"{name}: A must be a ti.linalg.LinearOperator, got "
                               f"{type(A).__name__}")
    for v, what in ((b, "b"), (x, "x")):
        if not isinstance(v, Field) or v.n is not None:
            raise FluxionTypeError(f"{name}: {what} must be a scalar field, got "
                                   f"{type(v).__name__}")
    if b.dtype != x.dtype:
        raise FluxionTypeError(f"Dtype mismatch b.dtype({b.dtype}) != x.dtype({x.dtype}).")
    if b.dtype not in (T.f32, T.f64):
        raise FluxionTypeError(f"{name}: not supported dtype {b.dtype} (ti.f32 or ti.f64)")
    if b.shape != x.shape or b.offset != x.offset:
        raise FluxionRuntimeError(f"Dimension mismatch b.shape{b.shape} != x.shape{x.shape}.")


def _usable(*values):
    return all(math.isfinite(v) and v != 0.0 for v in values)


class _TrueResidual:
    """The check behind every "converged": the residual an iteration updates drifts from
    b - A x once rounding dominates (in f32 it keeps shrinking far below what x can reach),
    so convergence is confirmed on r = b - A x, recomputed into `r`. When that residual is
    not small enough the solver restarts from it, unless it did not improve since the last
    restart: then x is as good as the precision allows and the solver gives up."""

    def __init__(self, A, b, x, r, scratch):
        self.A, self.b, self.x, self.r, self.scratch = A, b, x, r, scratch
        self.best = math.inf

    def __call__(self, tol):
        """(r.r of the true residual, now in r; 'converged', 'restart' or 'stuck')."""
        self.A.matvec(self.x, self.scratch)
        _sub(self.r, self.b, self.scratch)
        rr = _dot(self.r, self.r)
        if math.sqrt(rr) < tol:
            return rr, "converged"
        if not rr < self.best:
            return rr, "stuck"
        self.best = rr
        return rr, "restart"


def MatrixFreeCG(A, b, x, tol=1e-6, maxiter=5000, quiet=True):  # noqa: N802 (original name)
    """Solve A x = b by conjugate gradients, starting from and writing into the field x.
    A must be symmetric positive definite. Returns True if |b - A x| < tol was reached."""
    _check(A, b, x, "MatrixFreeCG")
    r, p, Ap = _work_fields(b, 3)
    check = _TrueResidual(A, b, x, r, Ap)
    rr, state = check(tol)
    if not quiet:
        print(f">>> Initial residual = {math.sqrt(rr):e}")
    it = 0
    while state == "restart" and it < maxiter:
        _copy(p, r)
        while it < maxiter:
            A.matvec(p, Ap)
            pAp = _dot(p, Ap)
            if not (_usable(pAp, rr) and pAp > 0):
                break                # breakdown: only the true residual can tell
            alpha = rr / pAp
            _axpy(x, alpha, p)
            _axpy(r, -alpha, Ap)
            rr_new = _dot(r, r)
            it += 1
            if not quiet:
                print(f">>> Iter = {it:4}, Residual = {math.sqrt(rr_new):e}")
            if math.sqrt(rr_new) < tol:
                break
            _lincomb(p, r, rr_new / rr, p)
            rr = rr_new
        rr, state = check(tol)
    converged = state == "converged"
    if not quiet:
        print(">>> Conjugate Gradient method converged." if converged else
              f">>> Conjugate Gradient method failed to converge in {it} iterations: "
              f"Residual = {math.sqrt(rr):e}")
    return converged


def MatrixFreeBICGSTAB(A, b, x, tol=1e-6, maxiter=5000, quiet=True):  # noqa: N802
    """Solve A x = b by BiCGSTAB (A need not be symmetric), starting from and writing into the
    field x. Returns True if |b - A x| < tol was reached."""
    _check(A, b, x, "MatrixFreeBICGSTAB")
    r, r0, p, v, s, t = _work_fields(b, 6)
    check = _TrueResidual(A, b, x, r, v)
    rr, state = check(tol)
    if not quiet:
        print(f">>> Initial residual = {math.sqrt(rr):e}")
    it = 0
    while state == "restart" and it < maxiter:
        _copy(r0, r)           # the shadow residual of this (re)start
        _copy(p, r)
        rho = rr
        while it < maxiter:
            A.matvec(p, v)
            r0v = _dot(r0, v)
            if not _usable(r0v, rho):
                break
            alpha = rho / r0v
            _lincomb(s, r, -alpha, v)
            it += 1
            if math.sqrt(_dot(s, s)) < tol:
                _axpy(x, alpha, p)
                break
            A.matvec(s, t)
            tt = _dot(t, t)
            if not _usable(tt):
                _axpy(x, alpha, p)
                break
            omega = _dot(t, s) / tt
            _axpbypz(x, alpha, p, omega, s)
            _lincomb(r, s, -omega, t)
            rr = _dot(r, r)
            if not quiet:
                print(f">>> Iter = {it:4}, Residual = {math.sqrt(rr):e}")
            if math.sqrt(rr) < tol:
                break
            rho_new = _dot(r0, r)
            if not _usable(omega, rho_new):
                break
            _bicg_direction(p, r, (rho_new / rho) * (alpha / omega), omega, v)
            rho = rho_new
        rr, state = check(tol)
    converged = state == "converged"
    if not quiet:
        print(">>> BiCGSTAB method converged." if converged else
              f">>> BiCGSTAB method failed to converge in {it} iterations: "
              f"Residual = {math.sqrt(rr):e}")
    return converged
