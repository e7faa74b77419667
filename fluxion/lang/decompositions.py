"""Small-matrix decompositions (2x2, 3x3): `ti.svd`, `ti.polar_decompose`, `ti.sym_eig`.

Straight-line code over matrix entries (Jacobi rotations with a fixed number of sweeps,
branches as `ti.select`), so the same functions run inside kernels, where they are inlined and
scalarized, and in Python scope on numbers.
"""
from __future__ import annotations

from fluxion.lang import builtins as B
from fluxion.lang.matrix import Matrix

_SWEEPS = {2: 1, 3: 6}   # 2x2 is exact after one rotation; 3x3 converges to f32 in ~5 sweeps


def _get(m, r, c):
    return m.entries[r * m.m + c]


def _mat(rows):
    n, m = len(rows), len(rows[0])
    return Matrix._make([x for row in rows for x in row], n, m, 2)


def _jacobi(A, n):
    """Symmetric A -> (eigenvalues list, V as rows list) with A = V diag(l) V^T."""
    a = [[_get(A, r, c) for c in range(n)] for r in range(n)]
    V = [[1.0 if r == c else 0.0 for c in range(n)] for r in range(n)]
    pairs = [(0, 1)] if n == 2 else [(0, 1), (0, 2), (1, 2)]
    for _ in range(_SWEEPS[n]):
        for p, q in pairs:
            apq = a[p][q]
            small = B.abs(apq) < 1e-30
            safe = B.select(small, 1.0, apq)
            theta = (a[q][q] - a[p][p]) / (2.0 * safe)
            sgn = B.select(theta >= 0, 1.0, -1.0)
            t = sgn / (B.abs(theta) + B.sqrt(theta * theta + 1.0))
            t = B.select(small, 0.0, t)
            c = 1.0 / B.sqrt(t * t + 1.0)
            s = t * c
            # a <- J^T a J on rows/columns p and q
            for k in range(n):
                akp, akq = a[k][p], a[k][q]
                a[k][p] = c * akp - s * akq
                a[k][q] = s * akp + c * akq
            for k in range(n):
                apk, aqk = a[p][k], a[q][k]
                a[p][k] = c * apk - s * aqk
                a[q][k] = s * apk + c * aqk
            for k in range(n):
                vkp, vkq = V[k][p], V[k][q]
                V[k][p] = c * vkp - s * vkq
                V[k][q] = s * vkp + c * vkq
    return [a[i][i] for i in range(n)], V


def _sort(vals, V, n, descending):
    """Order eigenpairs with branch-free swaps (a sorting network)."""
    pairs = [(0, 1)] if n == 2 else [(0, 1), (1, 2), (0, 1)]
    for i, j in pairs:
        swap = vals[i] < vals[j] if descending else vals[i] > vals[j]
        vi, vj = vals[i], vals[j]
        vals[i], vals[j] = B.select(swap, vj, vi), B.select(swap, vi, vj)
        for k in range(n):
            a, b = V[k][i], V[k][j]
            V[k][i], V[k][j] = B.select(swap, b, a), B.select(swap, a, b)
    return vals, V


def _check(A):
    if not isinstance(A, Matrix) or A.ndim != 2 or A.n != A.m or A.n not in (2, 3):
        raise ValueError("expected a 2x2 or 3x3 matrix")
    return A.n


def sym_eig(A, dt=None):
    """Eigenvalues (ascending, as a vector) and eigenvectors (as columns) of a symmetric
    2x2 or 3x3 matrix, like numpy.linalg.eigh."""
    n = _check(A)
    vals, V = _jacobi(A, n)
    vals, V = _sort(vals, V, n, descending=False)
    return Matrix._make(vals, n, 1, 1), _mat(V)


def svd(A, dt=None):
    """A = U @ sigma @ V.T with U, V rotations (determinant +1) and sigma diagonal; when
    det(A) < 0 the smallest singular value is negative, as in the original system."""
    n = _check(A)
    AtA = A.transpose() @ A
    vals, V = _jacobi(AtA, n)
    vals, V = _sort(vals, V, n, descending=True)
    # make V a rotation
    Vm = _mat(V)
    flip = B.select(Vm.determinant() < 0, -1.0, 1.0)
    for k in range(n):
        V[k][n - 1] = V[k][n - 1] * flip
    Vm = _mat(V)
    Bm = A @ Vm
    cols = [Matrix._make([_get(Bm, r, c) for r in range(n)], n, 1, 1) for c in range(n)]
    u0 = cols[0] * (1.0 / B.max(cols[0].norm(), 1e-30))
    if n == 2:
        u1 = Matrix._make([-u0.entries[1], u0.entries[0]], 2, 1, 1)
        us = [u0, u1]
    else:
        w = cols[1] - u0.dot(cols[1]) * u0
        # a degenerate second column: any unit vector orthogonal to u0
        alt = u0.cross(Matrix._make([1.0, 0.0, 0.0], 3, 1, 1))
        alt2 = u0.cross(Matrix._make([0.0, 1.0, 0.0], 3, 1, 1))
        alt = B.select(alt.norm_sqr() < 1e-6, alt2, alt)
        wn = w.norm()
        u1 = B.select(wn < 1e-12, alt * (1.0 / B.max(alt.norm(), 1e-30)),
                      w * (1.0 / B.max(wn, 1e-30)))
        u2 = u0.cross(u1)
        us = [u0, u1, u2]
    sig = [us[i].dot(cols[i]) for i in range(n)]
    U = Matrix._make([us[c].entries[r] for r in range(n) for c in range(n)], n, n, 2)
    S = Matrix._make([sig[r] if r == c else 0.0 * sig[0] for r in range(n) for c in range(n)],
                     n, n, 2)
    return U, S, Vm


def polar_decompose(A, dt=None):
    """A = R @ S with R a rotation and S symmetric."""
    U, S, V = svd(A, dt)
    R = U @ V.transpose()
    return R, V @ S @ V.transpose()


def eig(A, dt=None):
    raise NotImplementedError("ti.eig (non-symmetric) is not available; use ti.sym_eig")
