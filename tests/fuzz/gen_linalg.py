"""Linear algebra in the random programs (gen.py): matrix and vector fields, vector and matrix
ndarrays, and what programs do with them: `@`, transpose, inverse, determinant, trace, norms,
`ti.math` on vectors (normalize, cross, reflect, distance, clamp), outer products, matrices
built from identities, `ti.polar_decompose`, `ti.svd`, `ti.sym_eig`, kernels returning
vectors and matrices, and Python-scope element reads and writes between launches.

The family's fields are its own (gen.py's statements never touch them) and its kernels are
launched after the program's other kernels; a family kernel reads gen.py's float fields
anywhere (no kernel runs beside it) and writes only its own fields, each thread its own
element. Matrices stay well conditioned: every matrix stored is `3 I + C` with the entries of
C clamped to [-0.5, 0.5] (diagonally dominant, determinant > 0), so inverses, polar and
singular value decompositions are defined and stable, and results are compared with the
tolerances of their type. Decompositions are read only through what does not depend on an
implementation's conventions: the polar factors (unique for a nonsingular matrix), the sum of the singular
values, the reconstruction `U @ S @ V.transpose()`, and the sum, largest and smallest of the
eigenvalues of a symmetric matrix.

Under the taichi oracle no 3x3 `ti.sym_eig`: taichi 1.7.4's gives wrong eigenvalues for a
matrix with a repeated one (seed 13318: [[6, 0, 0], [0, 5.5, 0.5], [0, 0.5, 5.5]] has 5, 6, 6;
taichi returns 5.5, 5.5, 6; fluxion 5, 6, 6, as NumPy).

Whether a program has them, and every choice about them, comes from random streams of their
own (`Gen.with_linalg`, `Gen.rl`), so the programs without them are the programs of before."""
from __future__ import annotations

from dataclasses import dataclass, field

B = 64.0     # results are clamped to [-B, B] (gen.py's rule: values stay small)


@dataclass
class Linalg:
    n: int = 3                  # matrices are n x n, vectors have n entries
    dt: str = "f32"
    size: int = 8               # elements of each field
    arrays: list = field(default_factory=list)   # ndarray arguments: (name, kind)
    kernels: list = field(default_factory=list)  # launch lines for run()
    slots: int = 0              # columns of `lres` (one per stored scalar)


def declare(g):
    """The family's fields, after the program's (in build)."""
    if not g.with_linalg:
        return
    rl = g.rl
    la = g.la = Linalg(rl.choice([2, 3]), rl.choice(["f32", "f64"]), rl.choice([4, 8, 16]))
    la.slots = rl.randint(3, 8)
    g.emit(1, f"mA = ti.Matrix.field({la.n}, {la.n}, ti.{la.dt}, shape=({la.size},))")
    g.emit(1, f"vB = ti.Vector.field({la.n}, ti.{la.dt}, shape=({la.size},))")
    # in the matrices' type: the comparison's tolerance is the stored type's
    g.emit(1, f"lres = ti.field(ti.{la.dt}, shape=({la.size}, {la.slots}))")
    if rl.random() < 0.5:
        la.arrays.append(("aV", "vec"))
    if rl.random() < 0.4:
        la.arrays.append(("aM", "mat"))


def _clamp(e):
    return f"ti.min(ti.max({e}, -{B}), {B})"


def _stable(la, e):
    """A matrix expression made `3 I + C` with C's entries in [-0.5, 0.5]."""
    return f"ti.Matrix.identity(ti.{la.dt}, {la.n}) * 3.0 + ti.math.clamp({e}, -0.5, 0.5)"


class _Body:
    """Expression menus over the names a family kernel's body holds."""

    def __init__(self, g, mats, vecs, scalars):
        self.g, self.la, self.rl = g, g.la, g.rl
        self.mats, self.vecs, self.scalars = mats, vecs, scalars

    def scalar_leaf(self):
        rl = self.rl
        if self.scalars and rl.random() < 0.5:
            return rl.choice(self.scalars)
        return repr(rl.randint(-8, 8) * 0.25)

    def mat(self, d):
        """A matrix expression (entries bounded)."""
        rl, la = self.rl, self.la
        a = rl.choice(self.mats)
        if d <= 0:
            return a
        k = rl.randrange(8)
        if k == 0:
            return f"{self.mat(d - 1)}.transpose()"
        if k == 1:
            return _clamp(f"{self.mat(d - 1)} @ {self.mat(d - 1)}")
        if k == 2:
            return f"({self.mat(d - 1)} * {self.scalar_leaf()})"
        if k == 3:
            return f"({self.mat(d - 1)} + ti.Matrix.identity(ti.{la.dt}, {la.n}))"
        if k == 4:
            return _clamp(f"{a}.inverse() * 4.0")
        if k == 5:
            return _clamp(f"{self.vec(d - 1)}.outer_product({self.vec(d - 1)})")
        if k == 6:
            return f"({self.mat(d - 1)} - {self.mat(d - 1)} * 0.5)"
        return a

    def vec(self, d):
        """A vector expression of n entries (entries bounded)."""
        rl, la = self.rl, self.la
        a = rl.choice(self.vecs)
        if d <= 0:
            return a
        k = rl.randrange(8)
        if k == 0:
            return _clamp(f"{self.mat(d - 1)} @ {self.vec(d - 1)}")
        if k == 1:
            return f"ti.math.normalize({self.vec(d - 1)} + {'5.0' if rl.random() < 0.5 else '-5.0'})"
        if k == 2 and la.n == 3:
            return _clamp(f"{self.vec(d - 1)}.cross({self.vec(d - 1)})")
        if k == 3:
            nrm = ", ".join(rl.choice(["1.0", "2.0", "-2.0", "0.5"]) for _ in range(la.n))
            return f"ti.math.reflect({self.vec(d - 1)}, ti.math.normalize(ti.Vector([{nrm}], " \
                   f"dt=ti.{la.dt})))"
        if k == 4:
            return f"ti.math.clamp({self.vec(d - 1)}, -1.0, 1.0)"
        if k == 5:
            return f"({self.vec(d - 1)} * {self.scalar_leaf()})"
        if k == 6:
            return f"{self.mat(d - 1)}[{rl.randrange(la.n)}, :]" if rl.random() < 0.5 \
                else f"({self.vec(d - 1)} - {self.vec(d - 1)})"
        return a

    def scalar(self, d):
        """A scalar expression of the matrices and vectors."""
        rl, la = self.rl, self.la
        k = rl.randrange(14)
        m, v = self.mat(d), self.vec(d)
        if k == 0:
            return f"{rl.choice(self.mats)}.determinant()"
        if k == 1:
            return f"{m}.trace()"
        if k == 2:
            return f"{m}.norm()"
        if k == 3:
            return f"{m}.{rl.choice(['sum', 'max', 'min'])}()"
        if k == 4:
            return f"{m}[{rl.randrange(la.n)}, {rl.randrange(la.n)}]"
        if k == 5:
            return f"{v}.dot({self.vec(d)})"
        if k == 6:
            return f"ti.math.length({v})" if rl.random() < 0.5 else f"{v}.norm()"
        if k == 7:
            return f"ti.math.distance({v}, {self.vec(d)})"
        if k == 8:
            return f"{v}[{rl.randrange(la.n)}]"
        if k == 9:
            return f"{v}.{rl.choice(['sum', 'max', 'min'])}()"
        if k == 10:
            return f"{rl.choice(self.mats)}.inverse()[{rl.randrange(la.n)}, {rl.randrange(la.n)}]"
        return self.decomposition()

    def decomposition(self):
        """A scalar read from a decomposition of a stored (well-conditioned) matrix, by way
        of what every correct implementation agrees on."""
        rl, la = self.rl, self.la
        a = rl.choice(self.mats)
        r, c = rl.randrange(la.n), rl.randrange(la.n)
        # the type to compute in, given: the original computes in default_fp (f32) when it
        # is not, an f64 matrix too; fluxion in the matrix's own type (README)
        dt = f"dt=ti.{la.dt}"
        k = rl.randrange(4)
        if k >= 2 and la.n == 3 and self.g.o.taichi:
            k = rl.randrange(2)     # (see the module's docstring)
        if k == 0:
            return f"ti.polar_decompose({a}, {dt})[{rl.randrange(2)}][{r}, {c}]"
        if k == 1:
            # singular values: their sum and product do not depend on their order or signs
            # of the singular vectors; the reconstruction gives the matrix back
            return rl.choice([
                f"ti.svd({a}, {dt})[1].trace()",
                f"(ti.svd({a}, {dt})[0] @ ti.svd({a}, {dt})[1] @ "
                f"ti.svd({a}, {dt})[2].transpose())[{r}, {c}]"])
        if k == 2:
            return f"ti.sym_eig({a} + {a}.transpose(), {dt})[0].sum()"
        return f"ti.sym_eig({a} + {a}.transpose(), {dt})[0].{rl.choice(['max', 'min'])}()"


def kernels(g):
    """Declare the family's kernels (after the program's); their launches go to run()."""
    if not g.with_linalg:
        return
    rl, la = g.rl, g.la
    for _ in range(rl.randint(1, 2)):
        name = g.fresh("lk")
        params = ["c: ti.f32"]
        for a, kind in la.arrays:
            el = f"ti.types.vector({la.n}, ti.f32)" if kind == "vec" \
                else f"ti.types.matrix({la.n}, {la.n}, ti.f32)"
            params.append(f"{a}: ti.types.ndarray(dtype={el}, ndim=1)")
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}({', '.join(params)}):")
        header = rl.choice(["for i in mA:", f"for i in range({la.size}):",
                            "for I in ti.grouped(vB):"])
        g.emit(2, header)
        ind = 3
        if header.startswith("for I"):
            g.emit(ind, "i = I[0]")
        g.emit(ind, "M = mA[i]")
        g.emit(ind, "v = vB[i]")
        mats, vecs, scalars = ["M"], ["v"], ["c"]
        floats = [f for f in g.fields if f.dt in ("f32", "f64") and not f.vec and not f.sparse
                  and not f.arg]
        if floats and rl.random() < 0.7:
            f = rl.choice(floats)
            idx = "None" if not f.shape else ", ".join(f"(i * {rl.randint(1, 7)} + {k}) % {n}"
                                                      for k, n in enumerate(f.shape))
            g.emit(ind, f"s = ti.cast(ti.min(ti.max({f.name}[{idx}], -8.0), 8.0), ti.{la.dt})")
            scalars.append("s")
        for a, kind in la.arrays:
            if kind == "vec":
                g.emit(ind, f"w = ti.cast({a}[i], ti.{la.dt})")
                vecs.append("w")
            else:
                g.emit(ind, f"P = ti.Matrix.identity(ti.{la.dt}, {la.n}) * 3.0 + "
                            f"ti.math.clamp(ti.cast({a}[i], ti.{la.dt}), -0.5, 0.5)")
                mats.append("P")
        body = _Body(g, mats, vecs, scalars)
        for slot in range(la.slots):
            if rl.random() < 0.3:
                u = g.fresh("u")
                g.emit(ind, f"{u} = {body.vec(rl.randint(0, 2))}")
                vecs.append(u)
            g.emit(ind, f"lres[i, {slot}] = {_clamp(body.scalar(rl.randint(0, 2)))}")
        if rl.random() < 0.7:
            g.emit(ind, f"mA[i] = {_stable(la, body.mat(rl.randint(0, 2)))}")
        if rl.random() < 0.6:
            g.emit(ind, f"vB[i] = {body.vec(rl.randint(0, 2))}")
        for a, kind in la.arrays:
            if rl.random() < 0.7:
                e = body.vec(1) if kind == "vec" else f"ti.math.clamp({body.mat(1)}, -0.5, 0.5)"
                g.emit(ind, f"{a}[i] = ti.cast({e}, ti.f32)")
        g.emit(0, "")
        args = [repr(rl.randint(-8, 8) * 0.25)] + [a for a, _ in la.arrays]
        la.kernels.append(f"{name}({', '.join(args)})")
    # a kernel returning a matrix or a vector
    name = g.fresh("lr")
    if rl.random() < 0.5:
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}(j: ti.i32) -> ti.types.matrix({la.n}, {la.n}, ti.{la.dt}):")
        g.emit(2, f"return {_clamp(f'mA[j] @ mA[(j + 1) % {la.size}].inverse()')}")
    else:
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}(j: ti.i32) -> ti.types.vector({la.n}, ti.{la.dt}):")
        g.emit(2, f"return {_clamp('mA[j] @ vB[j] - vB[j] * mA[j].determinant()')}")
    g.emit(0, "")
    la.kernels.append(f"{name}({rl.randrange(la.size)})")


def fill(g):
    """Data for the family's fields and arrays (in run(), with the other fields')."""
    if not g.with_linalg:
        return
    la = g.la
    n, m = la.n, la.size
    np_dt = "np.float32" if la.dt == "f32" else "np.float64"
    g.emit(2, f"mA.from_numpy((np.eye({n}) * 3.0 + rng.integers(-2, 3, size=({m}, {n}, {n})) "
              f"* 0.25).astype({np_dt}))")
    g.emit(2, f"vB.from_numpy((rng.integers(-8, 9, size=({m}, {n})) * 0.25).astype({np_dt}))")
    for a, kind in la.arrays:
        shape = f"({m}, {n})" if kind == "vec" else f"({m}, {n}, {n})"
        g.emit(2, f"{a} = (rng.integers(-4, 5, size={shape}) * 0.125).astype(np.float32)")


def launch(g, ind):
    """The family's launches, with Python-scope reads and writes of elements between them."""
    if not g.with_linalg:
        return
    rl, la = g.rl, g.la
    for k, line in enumerate(la.kernels):
        if rl.random() < 0.3:
            j = rl.randrange(la.size)
            rows = ", ".join("[" + ", ".join(repr((3.0 if r == c else 0.0)
                                                  + rl.randint(-2, 2) * 0.25)
                                             for c in range(la.n)) + "]" for r in range(la.n))
            g.emit(ind, f"mA[{j}] = [{rows}]")
        if rl.random() < 0.3:
            j = rl.randrange(la.size)
            g.emit(ind, f"vB[{j}] = [{', '.join(repr(rl.randint(-4, 4) * 0.5) for _ in range(la.n))}]")
        g.emit(ind, f"out['{g.fresh('L')}'] = {line}")
        if rl.random() < 0.3:
            j = rl.randrange(la.size)
            g.emit(ind, f"out['{g.fresh('L')}'] = mA[{j}].to_numpy()")
            g.emit(ind, f"out['{g.fresh('L')}'] = vB[{j}][{rl.randrange(la.n)}]")


def results(g):
    if not g.with_linalg:
        return
    g.emit(2, "out['mA'] = mA.to_numpy()")
    g.emit(2, "out['vB'] = vB.to_numpy()")
    g.emit(2, "out['lres'] = lres.to_numpy()")
    for a, _ in g.la.arrays:
        g.emit(2, f"out['{a}'] = {a}")
