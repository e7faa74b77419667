"""Small dense linear algebra for 2x2 and 3x3 matrices: `ti.svd`, `ti.polar_decompose`,
`ti.sym_eig`, `ti.eig`, `ti.solve` (any small n). The `ti.math` rotations, transforms and bit
counts are in lang/transforms.py; the sparse matrices and solvers of `ti.linalg` are in
fluxion.linalg.

Every routine is straight-line Python over matrix entries: branches are `ti.select`, iterations
are a fixed number of unrolled sweeps. Inside a kernel the entries are scalar kernel values, so
a call inlines into scalar IR statements with no control flow (no divergence on GPUs): about
1000 for a 3x3 SVD in f32 (1200 in f64), 600 for a 3x3 sym_eig, around 100 for the 2x2 forms.
In Python scope the entries are Python floats (f64) and the same code runs on them.

Algorithms
  * 3x3 SVD: one-sided (Hestenes) Jacobi on the columns of A, a fixed number of cyclic sweeps.
    It never forms A^T A, so small singular values keep their accuracy (an A^T A eigen solver
    loses about half the digits of the smallest ones, which matters in f32). The columns are
    then sorted by norm, U is completed by Gram-Schmidt and a cross product, so U and V are
    rotations and the last singular value carries the sign of det(A).
  * 2x2 SVD and polar decomposition: closed form, from the split of A into a scaled rotation
    and a scaled reflection, without trigonometric functions.
  * symmetric eigenproblems: cyclic two-sided Jacobi (one exact rotation for 2x2).
  * 3x3 polar decomposition: through the SVD, R = U V^T, S = V sigma V^T.
  * linear solve: Gaussian elimination with partial pivoting, the pivot row chosen and swapped
    in with selects.

Inputs are scaled by their largest entry first, so f32 neither overflows nor underflows on
matrices with very large or very small entries.
"""
from __future__ import annotations

import numbers

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit
from fluxion.ir.expr import Expr, library_module as _library_module
from fluxion.lang import builtins as B
from fluxion.lang.matrix import Matrix

__all__ = ["eig", "polar_decompose", "solve", "svd", "sym_eig"]

# Cyclic sweeps of the 3x3 Jacobi iterations. Convergence is quadratic once the off-diagonal
# part is small; measured over 4e5 random, clustered and graded matrices, the worst remaining
# off-orthogonality of the SVD was 2e-5 after 3 sweeps and 3e-16 after 4 (sym_eig: 3e-5, 1e-20).
# f64 gets one sweep of margin.
_SVD_SWEEPS = {32: 4, 64: 5}
_EIG_SWEEPS = {32: 4, 64: 5}
_PAIRS = ((0, 1), (0, 2), (1, 2))


# -- scalar helpers ----------------------------------------------------------------------------
class _Ctx:
    """The scalar type a decomposition computes in, and whether it emits kernel IR."""

    def __init__(self, dtype, kernel):
        self.dtype, self.kernel = dtype, kernel
        bits = 64 if dtype is None else dtype.bits
        self.bits = 32 if bits < 64 else 64
        # squared norms below this count as zero (the input is scaled to a largest entry of 1)
        self.tiny2 = 1e-30 if self.bits == 32 else 1e-200

    def out(self, x):
        """A result entry: a kernel value of the computation type (or a Python float)."""
        if self.kernel:
            return B.cast(x, self.dtype)
        return float(x)


def _prepare(A, dt, want=None, what="The decomposition"):
    # (the messages begin with the original system's words)
    if not isinstance(A, Matrix) or A.ndim != 2 or A.n != A.m or A.n not in (2, 3):
        shape = A.shape if isinstance(A, Matrix) else type(A).__name__
        raise ValueError(f"{what} only supports 2D and 3D matrices: expected a 2x2 or 3x3 "
                         f"matrix, got {shape}")
    if want is not None and A.n not in want:
        raise ValueError(f"{what} only supports 2D matrices: expected a "
                         f"{' or '.join(f'{k}x{k}' for k in want)} matrix, got {A.n}x{A.n}")
    entries = list(A.entries)
    kernel = builder.in_kernel()
    if not kernel:
        if any(isinstance(e, Expr) for e in entries):
            raise ValueError("a matrix of kernel values outside a kernel")
        dtype = T.normalize(dt) if dt is not None else None
        return _Ctx(dtype, False), [float(e) for e in entries], A.n
    dtype = _compute_type(entries, dt, "decompositions compute")
    return _Ctx(dtype, True), [B.cast(e, dtype) for e in entries], A.n


def _compute_type(entries, dt, what):
    """The float type a kernel-scope decomposition or solve computes in: `dt`, else the
    promoted type of the float entries, else default_fp; f16 computes in f32."""
    if dt is not None:
        dtype = T.normalize(dt)
    else:
        dtype = None
        for e in entries:
            if isinstance(e, Expr) and e.dtype.is_float:
                dtype = e.dtype if dtype is None else T.promote(dtype, e.dtype)
        if dtype is None:
            dtype = builder.current().cfg.default_fp
    if not dtype.is_float:
        raise ValueError(f"{what} in a float type, not {dtype}")
    return T.f32 if dtype.bits < 32 else dtype


def _num(x):
    return isinstance(x, numbers.Number)


def _mul(a, b):
    # fold the constant zeros and ones of the identity the rotations start from
    for x, y in ((a, b), (b, a)):
        if _num(x):
            if x == 0:
                return 0.0
            if x == 1:
                return y
            if x == -1:
                return _neg(y)
    return a * b


def _add(a, b):
    if _num(a) and a == 0:
        return b
    if _num(b) and b == 0:
        return a
    return a + b


def _sub(a, b):
    if _num(b) and b == 0:
        return a
    if _num(a) and a == 0:
        return _neg(b)
    return a - b


def _neg(a):
    return -a


def _sel(cond, a, b):
    if isinstance(cond, Expr):
        return B.select(cond, a, b)
    return a if cond else b


def _xor(a, b):
    if isinstance(a, Expr) or isinstance(b, Expr):
        return a ^ b
    return bool(a) != bool(b)


def _dot(u, v):
    acc = _mul(u[0], v[0])
    for x, y in zip(u[1:], v[1:]):
        acc = _add(acc, _mul(x, y))
    return acc


def _scale_of(entries):
    """(s, 1/s) with s the largest magnitude of the entries, (1, 1) for a zero matrix."""
    m = B.abs(entries[0])
    for e in entries[1:]:
        m = B.max(m, B.abs(e))
    s = _sel(m > 0, m, 1.0)
    return s, 1.0 / s


def _jacobi_rotation(alpha, beta, gamma, tiny2):
    """(c, s, t) of the rotation J = [[c, s], [-s, c]] (t = s / c) that zeroes the off-diagonal
    entry of J^T [[alpha, gamma], [gamma, beta]] J, with |angle| <= pi/4.

    t = tan(angle) is the small root of gamma t^2 + (beta - alpha) t - gamma = 0, written
    without dividing by gamma: t = 2 gamma / (d + sign(d) sqrt(d^2 + 4 gamma^2)), d = beta - alpha.
    `tiny2` under the square root keeps the denominator nonzero, so gamma = 0 gives t = 0; it only
    changes the rotation of columns (or entries) below the working precision.
    """
    d = beta - alpha
    g2 = gamma + gamma
    r = B.sqrt(d * d + g2 * g2 + tiny2)
    t = g2 / _sel(d < 0, d - r, d + r)
    c = B.rsqrt(t * t + 1.0)
    return c, t * c, t


def _rotate(x, y, c, s):
    """Columns (x, y) -> (c x - s y, s x + c y)."""
    return ([_sub(_mul(c, a), _mul(s, b)) for a, b in zip(x, y)],
            [_add(_mul(s, a), _mul(c, b)) for a, b in zip(x, y)])


def _swap_if(cond, x, y):
    """(y, x) where cond holds, else (x, y), entry-wise."""
    if not isinstance(cond, Expr):
        return (list(y), list(x)) if cond else (list(x), list(y))
    return [_sel(cond, b, a) for a, b in zip(x, y)], [_sel(cond, a, b) for a, b in zip(x, y)]


def _cross(u, v):
    return [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]


def _mat(ctx, rows):
    n, m = len(rows), len(rows[0])
    return Matrix._make([ctx.out(x) for row in rows for x in row], n, m, 2)


def _vec(ctx, xs):
    return Matrix._make([ctx.out(x) for x in xs], len(xs), 1, 1)


def _from_cols(ctx, cols):
    n = len(cols)
    return _mat(ctx, [[cols[c][r] for c in range(n)] for r in range(n)])


def _diag(ctx, xs):
    n = len(xs)
    return _mat(ctx, [[xs[r] if r == c else 0.0 for c in range(n)] for r in range(n)])


# -- SVD -----------------------------------------------------------------------------------------
def _svd2_parts(a, ctx):
    """A = [[a0, a1], [a2, a3]] = rot(phi) diag(s1, s2) rot(theta).

    Writing A = Q rot(a2) + R refl(a1) (a scaled rotation plus a scaled reflection, with
    Q = |(e, h)|, R = |(f, g)|), the singular values are Q + R and Q - R (negative when
    det A = Q^2 - R^2 < 0) and phi = (a1 + a2) / 2, theta = (a2 - a1) / 2. The angles are
    handled as unit vectors: no trigonometric functions.
    Returns (s1, s2, (cos phi, sin phi), (cos theta, sin theta), z2) with z2 the unit vector of
    angle a2 (the polar rotation).
    """
    a0, a1, a2, a3 = a
    e, f = (a0 + a3) * 0.5, (a0 - a3) * 0.5
    g, h = (a2 + a1) * 0.5, (a2 - a1) * 0.5
    q2, r2 = e * e + h * h, f * f + g * g
    q, r = B.sqrt(q2), B.sqrt(r2)
    okq, okr = q2 > ctx.tiny2, r2 > ctx.tiny2
    iq, ir = 1.0 / _sel(okq, q, 1.0), 1.0 / _sel(okr, r, 1.0)
    z2 = (_sel(okq, e * iq, 1.0), _sel(okq, h * iq, 0.0))
    z1 = (_sel(okr, f * ir, 1.0), _sel(okr, g * ir, 0.0))
    # p = z1 z2 (angle a1 + a2); w = a unit vector of half that angle, from whichever of
    # (1 + cos, sin) and (sin, 1 - cos) has no cancellation (both have length >= sqrt(2))
    px = z1[0] * z2[0] - z1[1] * z2[1]
    py = z1[0] * z2[1] + z1[1] * z2[0]
    right = px >= 0
    hx = _sel(right, px + 1.0, py)
    hy = _sel(right, py, 1.0 - px)
    inv = B.rsqrt(hx * hx + hy * hy)
    w = (hx * inv, hy * inv)
    # theta = a2 - phi (either representative of the half angle gives the same product)
    th = (z2[0] * w[0] + z2[1] * w[1], z2[1] * w[0] - z2[0] * w[1])
    return q + r, q - r, w, th, z2


def _svd2(a, ctx):
    s1, s2, w, th, _ = _svd2_parts(a, ctx)
    U = [[w[0], -w[1]], [w[1], w[0]]]
    V = [[th[0], th[1]], [-th[1], th[0]]]           # V = rot(theta)^T
    return U, [s1, s2], V


def _svd3(a, ctx):
    """One-sided Jacobi: rotate the columns of A (and V) until they are orthogonal."""
    cols = [[a[3 * r + c] for r in range(3)] for c in range(3)]
    vs = [[1.0 if r == c else 0.0 for r in range(3)] for c in range(3)]   # columns of V
    for _ in range(_SVD_SWEEPS[ctx.bits]):
        for p, q in _PAIRS:
            c, s, _ = _jacobi_rotation(_dot(cols[p], cols[p]), _dot(cols[q], cols[q]),
                                       _dot(cols[p], cols[q]), ctx.tiny2)
            cols[p], cols[q] = _rotate(cols[p], cols[q], c, s)
            vs[p], vs[q] = _rotate(vs[p], vs[q], c, s)
    # sort the columns by decreasing norm; an odd number of swaps makes det V = -1, undone by
    # negating the last column of V (and of A V, i.e. the last singular value)
    nrm = [_dot(x, x) for x in cols]
    odd = None
    for i, j in _PAIRS:
        swap = nrm[i] < nrm[j]
        cols[i], cols[j] = _swap_if(swap, cols[i], cols[j])
        vs[i], vs[j] = _swap_if(swap, vs[i], vs[j])
        nrm[i], nrm[j] = _sel(swap, nrm[j], nrm[i]), _sel(swap, nrm[i], nrm[j])
        odd = swap if odd is None else _xor(odd, swap)
    vs[2] = [_sel(odd, _neg(x), x) for x in vs[2]]
    # U: normalize the first column, Gram-Schmidt the second, complete with a cross product
    ok1 = nrm[0] > ctx.tiny2
    s1 = B.sqrt(nrm[0])
    i1 = 1.0 / _sel(ok1, s1, 1.0)
    u1 = [_sel(ok1, x * i1, 1.0 if k == 0 else 0.0) for k, x in enumerate(cols[0])]
    k1 = _dot(u1, cols[1])
    w = [x - k1 * y for x, y in zip(cols[1], u1)]
    w2 = _dot(w, w)
    ok2 = w2 > ctx.tiny2
    s2 = B.sqrt(w2)
    i2 = 1.0 / _sel(ok2, s2, 1.0)
    # a rank <= 1 matrix: any unit vector orthogonal to u1 would do; the original system's
    # is e_z x u1 (its Givens rotations in the xy plane, then xz, applied to e_y), or e_y when
    # u1 is +-e_z, so a zero matrix gives U = I as there (e_z x u1 is exact: no cancellation)
    alt = [_neg(u1[1]), u1[0], 0.0]
    a2 = u1[0] * u1[0] + u1[1] * u1[1]
    ok_alt = a2 > ctx.tiny2
    ia = B.rsqrt(_sel(ok_alt, a2, 1.0))
    alt = [_sel(ok_alt, alt[0] * ia, 0.0), _sel(ok_alt, alt[1] * ia, 1.0), 0.0]
    u2 = [_sel(ok2, x * i2, y) for x, y in zip(w, alt)]
    u3 = _cross(u1, u2)
    s3 = _dot(u3, cols[2])
    s3 = _sel(odd, _neg(s3), s3)
    return [u1, u2, u3], [s1, s2, s3], vs


def svd(A, dt=None):
    """Singular value decomposition of a 2x2 or 3x3 matrix: (U, sigma, V), A = U sigma V^T.

    U and V are rotations (determinant +1) and sigma is a diagonal matrix with
    sigma[0, 0] >= sigma[1, 1] >= |sigma[n-1, n-1]|; the last singular value is negative when
    det(A) < 0 (so that U and V stay rotations), as in the original system. `dt` is the type
    to compute in inside kernels (default: the float type of A's entries, or the default float
    type for integer entries); in Python scope the results are Python floats.
    """
    ctx, e, n = _prepare(A, dt, what="SVD")
    scale, inv = _scale_of(e)
    a = [x * inv for x in e]
    if n == 2:
        U, sig, V = _svd2(a, ctx)
        return _mat(ctx, U), _diag(ctx, [x * scale for x in sig]), _mat(ctx, V)
    us, sig, vs = _svd3(a, ctx)
    return _from_cols(ctx, us), _diag(ctx, [x * scale for x in sig]), _from_cols(ctx, vs)


def polar_decompose(A, dt=None):
    """Polar decomposition of a 2x2 or 3x3 matrix: (R, S), A = R S, R a rotation and S
    symmetric (S has a negative eigenvalue when det(A) < 0)."""
    ctx, e, n = _prepare(A, dt, what="Polar decomposition")
    scale, inv = _scale_of(e)
    a = [x * inv for x in e]
    if n == 2:
        # with A = q rot(a2) + r refl(a1) (see _svd2_parts): the rotation is rot(a2), and
        # S = rot(-a2) A = q I + r rot(-a2) refl(a1) is q I plus a scaled reflection, built
        # exactly symmetric
        e_, f = (a[0] + a[3]) * 0.5, (a[0] - a[3]) * 0.5
        g, h = (a[2] + a[1]) * 0.5, (a[2] - a[1]) * 0.5
        q2 = e_ * e_ + h * h
        okq = q2 > ctx.tiny2
        q = B.sqrt(q2)
        iq = 1.0 / _sel(okq, q, 1.0)
        c, s = _sel(okq, e_ * iq, 1.0), _sel(okq, h * iq, 0.0)
        p = (c * f + s * g) * scale
        o = (c * g - s * f) * scale
        qs = q * scale
        return _mat(ctx, [[c, -s], [s, c]]), _mat(ctx, [[qs + p, o], [o, qs - p]])
    us, sig, vs = _svd3(a, ctx)
    R = [[_dot([us[k][r] for k in range(3)], [vs[k][c] for k in range(3)])
          for c in range(3)] for r in range(3)]
    sig = [x * scale for x in sig]
    S = [[None] * 3 for _ in range(3)]
    for r in range(3):
        for c in range(r + 1):
            S[r][c] = S[c][r] = _dot([vs[k][r] * sig[k] for k in range(3)],
                                     [vs[k][c] for k in range(3)])
    return _mat(ctx, R), _mat(ctx, S)


# -- symmetric eigenproblems --------------------------------------------------------------------
def _sym_jacobi(a, n, ctx):
    """Two-sided Jacobi on a symmetric matrix (row-major entries; only the upper triangle is
    read): eigenvalues and the eigenvectors as columns."""
    m = [[a[n * min(r, c) + max(r, c)] for c in range(n)] for r in range(n)]
    vs = [[1.0 if r == c else 0.0 for r in range(n)] for c in range(n)]
    sweeps, pairs = (1, ((0, 1),)) if n == 2 else (_EIG_SWEEPS[ctx.bits], _PAIRS)
    for _ in range(sweeps):
        for p, q in pairs:
            gamma = m[p][q]
            c, s, t = _jacobi_rotation(m[p][p], m[q][q], gamma, ctx.tiny2)
            m[p][p], m[q][q] = m[p][p] - t * gamma, m[q][q] + t * gamma
            m[p][q] = m[q][p] = 0.0
            for r in range(n):
                if r not in (p, q):
                    x, y = m[r][p], m[r][q]
                    m[r][p] = m[p][r] = _sub(_mul(c, x), _mul(s, y))
                    m[r][q] = m[q][r] = _add(_mul(s, x), _mul(c, y))
            vs[p], vs[q] = _rotate(vs[p], vs[q], c, s)
    return [m[i][i] for i in range(n)], vs


def sym_eig(A, dt=None):
    """Eigen-decomposition of a symmetric 2x2 or 3x3 matrix: (eigenvalues, eigenvectors), the
    eigenvalues as a vector in ascending order (like numpy.linalg.eigh) and the unit
    eigenvectors as the columns of a matrix, so A = Q diag(eigenvalues) Q^T. Only the upper
    triangle of A is read."""
    ctx, e, n = _prepare(A, dt, what="Symmetric eigen solver")
    scale, inv = _scale_of([e[n * r + c] for r in range(n) for c in range(r, n)])
    lam, vs = _sym_jacobi([x * inv for x in e], n, ctx)
    for i, j in ((0, 1),) if n == 2 else _PAIRS:
        swap = lam[i] > lam[j]
        vs[i], vs[j] = _swap_if(swap, vs[i], vs[j])
        lam[i], lam[j] = _sel(swap, lam[j], lam[i]), _sel(swap, lam[i], lam[j])
    return _vec(ctx, [x * scale for x in lam]), _from_cols(ctx, vs)


def eig(A, dt=None):
    """Eigenvalues and eigenvectors of a real 2x2 matrix, as in the original system.

    Returns (values, vectors): `values` is 2x2, row i the (real, imaginary) parts of
    eigenvalue i; `vectors` is 4x2, column i the unit eigenvector of eigenvalue i as
    (re x, im x, re y, im y). Real eigenvalues come larger first; complex ones with the
    positive imaginary part first.
    """
    ctx, e, _ = _prepare(A, dt, want=(2,), what="Eigen solver")
    scale, inv = _scale_of(e)
    a, b, c, d = [x * inv for x in e]
    mean = (a + d) * 0.5
    half = (a - d) * 0.5
    disc = half * half + b * c          # ((tr/2)^2 - det), without the cancellation of tr^2
    real = disc >= 0
    root = B.sqrt(B.abs(disc))
    re_off = _sel(real, root, 0.0)      # lambda_{1,2} = mean +- re_off +- i im_off
    im_off = _sel(real, 0.0, root)
    # (A - l2 I)(A - l1 I) = 0: the columns of A - l_other I are eigenvectors of l
    vectors = []
    for sign in (1.0, -1.0):
        # l_other = mean - sign re_off - i sign im_off ; A - l_other I, complex entries
        dre = _mul(sign, re_off)
        dim = _mul(sign, im_off)
        c0 = [half + dre, dim, c, 0.0]            # first column (re x, im x, re y, im y)
        c1 = [b, 0.0, dre - half, dim]            # second column
        n0, n1 = _dot(c0, c0), _dot(c1, c1)
        first = n0 >= n1
        v = [_sel(first, x, y) for x, y in zip(c0, c1)]
        nv = B.max(n0, n1)
        ok = nv > ctx.tiny2
        iv = B.rsqrt(_sel(ok, nv, 1.0))
        unit = [1.0, 0.0, 0.0, 0.0] if sign > 0 else [0.0, 0.0, 1.0, 0.0]
        vectors.append([_sel(ok, x * iv, u) for x, u in zip(v, unit)])
    values = [[(mean + re_off) * scale, im_off * scale],
              [(mean - re_off) * scale, -im_off * scale]]
    return _mat(ctx, values), _from_cols4(ctx, vectors)


def _from_cols4(ctx, cols):
    return _mat(ctx, [[cols[c][r] for c in range(len(cols))] for r in range(len(cols[0]))])


# -- linear solve ---------------------------------------------------------------------------------
def _solve_operands(A, b, dt):
    """(ctx, rows of the augmented matrix [A | b], n), entries cast to the computation type."""
    if not isinstance(A, Matrix) or A.ndim != 2 or A.n != A.m:
        shape = A.shape if isinstance(A, Matrix) else type(A).__name__
        raise ValueError(f"ti.solve: A must be a square matrix, got {shape}")
    if isinstance(b, (list, tuple)):
        b = Matrix(list(b), ndim=1)
    if not isinstance(b, Matrix) or b.m != 1 or b.n != A.n:
        shape = b.shape if isinstance(b, Matrix) else type(b).__name__
        raise ValueError(f"ti.solve: b must be a vector of {A.n} entries to match the "
                         f"{A.n}x{A.n} matrix A, got {shape}")
    n = A.n
    entries = list(A.entries) + list(b.entries)
    kernel = builder.in_kernel()
    if not kernel:
        if any(isinstance(e, Expr) for e in entries):
            raise ValueError("ti.solve: a matrix of kernel values outside a kernel")
        ctx = _Ctx(T.normalize(dt) if dt is not None else None, False)
        conv = float
    else:
        dtype = _compute_type(entries, dt, "ti.solve computes")
        ctx = _Ctx(dtype, True)
        conv = lambda e: B.cast(e, dtype)    # noqa: E731
    rows = [[conv(A.entries[r * n + c]) for c in range(n)] + [conv(b.entries[r])]
            for r in range(n)]
    return ctx, rows, n


def _check_pivot(ctx, pivot):
    """A zero pivot means a singular matrix: an error in Python scope, an assertion inside
    kernels compiled with debug=True (without it, as in the original system, the solution has
    infinities or NaNs)."""
    if not ctx.kernel:
        if pivot == 0.0:
            raise ValueError("ti.solve: the matrix is singular")
        return
    bc = builder.current()
    if not bc.cfg.debug:
        return
    code = len(bc.ir.errors)
    bc.ir.errors.append(("Matrix is singular in linear solve (ti.solve)", bc.loc, []))
    emit(S.AssertStmt(E.truth(pivot != 0.0).stmt, [], code))


def solve(A, b, dt=None):
    """The solution x of A x = b for a small square matrix A (n x n) and an n-vector b.

    Gaussian elimination with partial pivoting, unrolled (about n^3/3 multiply-adds and n^2/2
    selects for the pivoting: meant for the 2x2 and 3x3 systems of simulations). `dt` is the
    type to compute in inside kernels (default: the float type of the entries of A and b, or
    the default float type for integer entries); in Python scope the result holds Python
    floats and a singular matrix raises ValueError.

    >>> x = ti.solve(ti.Matrix([[2.0, 1.0], [1.0, 3.0]]), ti.Vector([3.0, 5.0]))
    """
    ctx, ab, n = _solve_operands(A, b, dt)
    for i in range(n):
        # the pivot: the first of the rows i.. with the largest |entry| in column i
        best, idx = B.abs(ab[i][i]), i
        for r in range(i + 1, n):
            mag = B.abs(ab[r][i])
            better = mag > best
            best, idx = _sel(better, mag, best), _sel(better, r, idx)
        if isinstance(idx, Expr):
            # swap rows i and idx entry by entry (columns left of i are zero already)
            old = ab[i][i:]
            new = list(old)
            for r in range(i + 1, n):
                at = idx == r
                new = [_sel(at, x, y) for x, y in zip(ab[r][i:], new)]
                ab[r][i:] = [_sel(at, x, y) for x, y in zip(old, ab[r][i:])]
            ab[i][i:] = new
        elif idx != i:
            ab[i], ab[idx] = ab[idx], ab[i]
        _check_pivot(ctx, ab[i][i])
        for r in range(i + 1, n):
            f = ab[r][i] / ab[i][i]
            ab[r][i] = 0.0
            for c in range(i + 1, n + 1):
                ab[r][c] = ab[r][c] - ab[i][c] * f
    x = [None] * n
    for i in range(n - 1, -1, -1):
        acc = ab[i][n]
        for k in range(i + 1, n):
            acc = acc - ab[i][k] * x[k]
        x[i] = acc / ab[i][i]
    return _vec(ctx, x)


# every public function here computes with the caller's float type (see library_code)
_library_module(globals())
