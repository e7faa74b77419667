"""ti.solve: small dense systems inside kernels (f32, f64, n = 1..5) and in Python scope,
against numpy.linalg.solve computed here. Partial pivoting matters: the families include
matrices whose leading entries are zero or tiny, where elimination without row swaps fails."""
import numpy as np
import pytest

import fluxion as ti


def _systems(n, count, seed):
    rng = np.random.default_rng(seed)
    mats = rng.standard_normal((count, n, n))
    # well conditioned enough that f32 can be compared: shift away from singularity
    mats += np.eye(n) * rng.choice([-1.0, 1.0], (count, 1, 1)) * 0.5 * n
    if n > 1:
        mats[: count // 4, 0, 0] = 0.0                  # a zero first pivot: needs a row swap
        mats[count // 4: count // 2, :, 0] *= 1e-3       # tiny first column
        # a permutation of a diagonal matrix: every column's pivot is off the diagonal
        for k in range(count // 2, count // 2 + count // 8):
            perm = rng.permutation(n)
            mats[k] = np.eye(n)[perm] * rng.uniform(1, 2, n)
    rhs = rng.standard_normal((count, n))
    return mats, rhs


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_solve_in_kernel_matches_numpy(n, dt):
    dtype = getattr(ti, dt)
    npdt = np.float32 if dt == "f32" else np.float64
    count = 64
    mats, rhs = _systems(n, count, seed=n)
    mats, rhs = mats.astype(npdt), rhs.astype(npdt)
    A = ti.Matrix.field(n, n, dtype, shape=count)
    b = ti.Vector.field(n, dtype, shape=count)
    x = ti.Vector.field(n, dtype, shape=count)
    A.from_numpy(mats)
    b.from_numpy(rhs)

    @ti.kernel
    def run():
        for k in A:
            x[k] = ti.solve(A[k], b[k])

    run()
    want = np.linalg.solve(mats.astype(np.float64), rhs.astype(np.float64)[..., None])[..., 0]
    got = x.to_numpy()
    assert got.dtype == npdt
    cond = np.linalg.cond(mats.astype(np.float64))
    eps = np.finfo(npdt).eps
    err = np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)
    assert np.all(err <= 50 * n * eps * cond), (err / (eps * cond)).max()


def test_solve_matches_the_original_example_values():
    # x + 2y = 5, 3x + 4y = 6 (a00 is not the largest: the rows are swapped)
    @ti.kernel
    def run() -> ti.types.vector(2, ti.f32):
        return ti.solve(ti.Matrix([[1.0, 2.0], [3.0, 4.0]]), ti.Vector([5.0, 6.0]))

    np.testing.assert_allclose(run().to_numpy(), np.linalg.solve([[1, 2], [3, 4]], [5, 6]),
                               rtol=1e-6)


def test_solve_default_type_and_dt_argument():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    M = np.array([[4.0, 1.0, 2.0], [1.0, 5.0, 3.0], [2.0, 3.0, 6.0]])
    rhs = np.array([1.0, 2.0, 3.0])
    out64 = ti.Vector.field(3, ti.f64, shape=())
    out32 = ti.Vector.field(3, ti.f32, shape=())

    @ti.kernel
    def run():
        A = ti.Matrix([[4, 1, 2], [1, 5, 3], [2, 3, 6]])       # integer entries
        out64[None] = ti.solve(A, ti.Vector([1, 2, 3]))        # in default_fp (f64)
        out32[None] = ti.solve(A, ti.Vector([1, 2, 3]), ti.f32)

    run()
    want = np.linalg.solve(M, rhs)
    np.testing.assert_allclose(out64[None].to_numpy(), want, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(out32[None].to_numpy(), want, rtol=1e-6, atol=1e-7)


def test_solve_in_python_scope():
    A = ti.Matrix([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]])
    b = ti.Vector([1.0, 2.0, 3.0])
    x = ti.solve(A, b)
    np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(A.to_numpy(), b.to_numpy()),
                               rtol=1e-14)
    with pytest.raises(ValueError, match="singular"):
        ti.solve(ti.Matrix([[1.0, 2.0], [2.0, 4.0]]), ti.Vector([1.0, 1.0]))


def test_solve_singular_matrix_asserts_in_debug_mode():
    ti.init(arch=ti.cpu, debug=True)
    A = ti.Matrix.field(2, 2, ti.f32, shape=())
    x = ti.Vector.field(2, ti.f32, shape=())

    @ti.kernel
    def run():
        x[None] = ti.solve(A[None], ti.Vector([1.0, 1.0]))

    A[None] = [[1.0, 2.0], [2.0, 4.0]]
    with pytest.raises(ti.FluxionAssertionError, match="singular"):
        run()
    A[None] = [[1.0, 2.0], [2.0, 5.0]]
    run()
    np.testing.assert_allclose(x[None].to_numpy(), [3.0, -1.0], rtol=1e-6)


def test_solve_rejects_bad_shapes():
    with pytest.raises(ValueError, match="square"):
        ti.solve(ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), ti.Vector([1.0, 2.0]))
    with pytest.raises(ValueError, match="vector of 2"):
        ti.solve(ti.Matrix([[1.0, 2.0], [3.0, 4.0]]), ti.Vector([1.0, 2.0, 3.0]))
