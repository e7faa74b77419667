"""ti.linalg.SparseMatrixBuilder filled by kernels, and SparseMatrix arithmetic, against dense
numpy computations done here (duplicates summed with np.add.at)."""
import sys

import numpy as np
import pytest

import fluxion as ti

pytest.importorskip("scipy")

FORMATS = ["col_major", "row_major"]
NP = {"f32": np.float32, "f64": np.float64}


def _dense(A):
    return np.array([[A[i, j] for j in range(A.shape[1])] for i in range(A.shape[0])])


def _random_triplets(rng, n, m, count):
    return (rng.integers(0, n, count).astype(np.int32), rng.integers(0, m, count).astype(np.int32),
            rng.standard_normal(count))


def _builder_from(rows, cols, vals, n, m, dtype, fmt, sign=1):
    B = ti.linalg.SparseMatrixBuilder(n, m, max_num_triplets=len(rows), dtype=getattr(ti, dtype),
                                      storage_format=fmt)

    @ti.kernel
    def add(A: ti.types.sparse_matrix_builder(), r: ti.types.ndarray(), c: ti.types.ndarray(),
            v: ti.types.ndarray()):
        for k in r:
            A[r[k], c[k]] += v[k]

    @ti.kernel
    def sub(A: ti.types.sparse_matrix_builder(), r: ti.types.ndarray(), c: ti.types.ndarray(),
            v: ti.types.ndarray()):
        for k in r:
            A[r[k], c[k]] -= v[k]

    (add if sign > 0 else sub)(B, rows, cols, vals)
    return B


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("sign", [1, -1])
def test_builder_sums_duplicate_triplets_from_a_parallel_loop(fmt, dtype, sign):
    rng = np.random.default_rng(1)
    n, m, count = 37, 23, 20000            # about 24 additions per entry, from many threads
    rows, cols, vals = _random_triplets(rng, n, m, count)
    B = _builder_from(rows, cols, vals, n, m, dtype, fmt, sign)
    assert B.num_triplets == count
    A = B.build()
    assert A.shape == (n, m) and A.dtype == getattr(ti, dtype)
    want = np.zeros((n, m))
    np.add.at(want, (rows, cols), sign * vals.astype(NP[dtype]).astype(np.float64))
    tol = 1e-4 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(_dense(A), want, rtol=tol, atol=tol)
    assert B.num_triplets == 0              # build() empties the builder


def test_build_empties_the_builder_and_a_second_fill_starts_over():
    n = 4
    B = ti.linalg.SparseMatrixBuilder(n, n, max_num_triplets=n, dtype=ti.f64)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), s: ti.f64):
        for i in range(n):
            A[i, n - 1 - i] += s * (i + 1)

    fill(B, 1.0)
    first = _dense(B.build())
    fill(B, 2.0)                  # exactly max_num_triplets again: no overflow
    second = _dense(B.build())
    want = np.fliplr(np.diag([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(second, 2 * want)


def test_builder_values_take_the_builder_type_and_indices_any_integer_type():
    B = ti.linalg.SparseMatrixBuilder(3, 3, max_num_triplets=10, dtype=ti.f64)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), v: ti.f64):
        i = ti.cast(1, ti.i64)
        j = ti.cast(2, ti.u8)
        A[i, j] += v                         # an f64 value stays f64
        A[0, 0] += 3                         # an int literal
        A[ti.Vector([2, 0])] += 0.5          # an index vector

    fill(B, 0.1)
    A = B.build()
    assert A[1, 2] == 0.1 and A[0, 0] == 3.0 and A[2, 0] == 0.5


def test_builder_overflow_is_an_error_at_build():
    B = ti.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=5)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder()):
        for i, j in ti.ndrange(4, 2):
            A[i, j] += 1.0

    fill(B)
    with pytest.raises(ti.FluxionRuntimeError, match="added 8 triplets.*max_num_triplets=5"):
        B.build()


def test_builder_index_out_of_range():
    B = ti.linalg.SparseMatrixBuilder(4, 3, max_num_triplets=5)

    @ti.kernel
    def fill(A: ti.types.sparse_matrix_builder(), i: ti.i32):
        A[i, 2] += 1.0

    fill(B, 4)
    with pytest.raises(ti.FluxionRuntimeError, match=r"index \(4, 2\), out of range"):
        B.build()
    ti.init(arch=ti.cpu, debug=True)
    B = ti.linalg.SparseMatrixBuilder(4, 3, max_num_triplets=5)
    with pytest.raises(IndexError, match=r"\(-1, 2\) out of range .* \(4, 3\)"):
        fill(B, -1)


def test_builder_misuse_in_kernels_is_reported():
    B = ti.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=5)

    @ti.kernel
    def assign(A: ti.types.sparse_matrix_builder()):
        A[0, 0] = 1.0

    @ti.kernel
    def scale(A: ti.types.sparse_matrix_builder()):
        A[0, 0] *= 2.0

    @ti.kernel
    def three(A: ti.types.sparse_matrix_builder()):
        A[0, 0, 0] += 2.0

    with pytest.raises(ti.FluxionSyntaxError, match="only added to"):
        assign(B)
    with pytest.raises(ti.FluxionSyntaxError, match=r"only \+= and -="):
        scale(B)
    with pytest.raises(ti.FluxionSyntaxError, match=r"\[row, column\]"):
        three(B)
    with pytest.raises(ti.FluxionTypeError, match="sparse_matrix_builder"):
        assign(ti.field(ti.f32, (4, 4)))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_arithmetic_matches_dense(fmt, dtype):
    rng = np.random.default_rng(7)
    n, m = 9, 6
    A = _builder_from(*_random_triplets(rng, n, m, 30), n, m, dtype, fmt).build()
    B = _builder_from(*_random_triplets(rng, n, m, 30), n, m, dtype, fmt).build()
    C = _builder_from(*_random_triplets(rng, m, 4, 15), m, 4, dtype, fmt).build()
    a, b, c = _dense(A), _dense(B), _dense(C)
    tol = 1e-5 if dtype == "f32" else 1e-13
    cases = {
        "add": (A + B, a + b), "sub": (A - B, a - b), "hadamard": (A * B, a * b),
        "scale": (A * 2.5, a * 2.5), "rscale": (3 * A, 3 * a), "neg": (-A, -a),
        "npscale": (np.float64(2.0) * A, 2 * a),
        "matmul": (A @ C, a @ c), "transpose": (A.transpose(), a.T),
    }
    for name, (got, want) in cases.items():
        assert isinstance(got, ti.linalg.SparseMatrix), name
        assert got.shape == want.shape and got.dtype == A.dtype, name
        np.testing.assert_allclose(_dense(got), want, rtol=tol, atol=tol, err_msg=name)
    D = ti.linalg.SparseMatrix(sm=A, dtype=A.dtype)      # a copy
    D += B
    D -= A
    D[0, 0] = 123.0
    want = b.copy()
    want[0, 0] = 123.0
    np.testing.assert_allclose(_dense(D), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(_dense(A), a)
    with pytest.raises(ti.FluxionRuntimeError, match="Dimension mismatch"):
        A + C
    with pytest.raises(ti.FluxionRuntimeError, match="Dimension mismatch"):
        A @ A


def test_spmv_with_fields_ndarrays_and_numpy():
    rng = np.random.default_rng(3)
    n, m = 12, 8
    A = _builder_from(*_random_triplets(rng, n, m, 40), n, m, "f64", "col_major").build()
    a = _dense(A)
    xv = rng.standard_normal(m)
    f = ti.field(ti.f64, m)
    f.from_numpy(xv)
    nd = ti.ndarray(ti.f32, m)
    nd.from_numpy(xv.astype(np.float32))
    y_field = A @ f
    y_np = A @ xv
    y_nd = A @ nd
    assert isinstance(y_field, np.ndarray) and y_field.dtype == np.float64
    assert isinstance(y_nd, ti.Ndarray) and y_nd.dtype == ti.f32 and y_nd.shape == (n,)
    np.testing.assert_allclose(y_field, a @ xv, rtol=1e-13)
    np.testing.assert_allclose(y_np, a @ xv, rtol=1e-13)
    np.testing.assert_allclose(y_nd.to_numpy(), a @ xv, rtol=1e-5, atol=1e-5)
    with pytest.raises(ti.FluxionRuntimeError, match="Dimension mismatch"):
        A @ np.ones(n)
    with pytest.raises(TypeError, match="must be a SparseMatrix"):
        A @ [1.0] * m


def test_f32_matrix_multiplies_in_f32():
    # 1 + 1e-8 is 1 in f32: the product of an f32 matrix keeps f32 rounding
    A = ti.linalg.SparseMatrix(2, 2, dtype=ti.f32)
    A[0, 0] = 1.0
    A[0, 1] = 1.0
    y = A @ np.array([1.0, 1e-8], dtype=np.float32)
    assert y.dtype == np.float32 and y[0] == np.float32(1.0)


def test_element_access_and_setting():
    A = ti.linalg.SparseMatrix(n=3, m=4, dtype=ti.f64, storage_format="row_major")
    assert A.shape == (3, 4) and A[2, 3] == 0.0
    A[2, 3] = 7.5
    A[0, 0] = -1.0
    A[2, 3] += 1.0
    assert A[2, 3] == 8.5 and A[0, 0] == -1.0
    with pytest.raises(IndexError, match="out of range"):
        A[3, 0]
    with pytest.raises(IndexError, match="out of range"):
        A[0, -1] = 1.0
    with pytest.raises(IndexError, match=r"\(row, column\)"):
        A[1]


def test_printing_like_the_original_system():
    A = ti.linalg.SparseMatrix(2, 3, dtype=ti.f64)
    A[0, 0] = 0.5
    A[0, 1] = -12345.678
    A[1, 2] = 1e-8
    # entries with 4 significant digits, right-aligned to the widest one
    assert str(A) == "[       0.5, -1.235e+04,          0]\n[         0,          0,      1e-08]"
    assert repr(A) == str(A)
    assert str(ti.linalg.SparseMatrix(2, dtype=ti.f32)) == "[0, 0]\n[0, 0]"


def test_build_from_ndarray_and_mmwrite(tmp_path):
    import scipy.io
    n = 5
    triplets = ti.Vector.ndarray(n=3, dtype=ti.f32, shape=2 * n)

    @ti.kernel
    def fill(t: ti.types.ndarray()):
        for i in range(n):
            t[i] = ti.Vector([i, (i + 1) % n, i + 1], dt=ti.f32)
            t[n + i] = ti.Vector([i, (i + 1) % n, 0.5], dt=ti.f32)    # duplicates add

    fill(triplets)
    A = ti.linalg.SparseMatrix(n=n, m=n, dtype=ti.f32)
    A.build_from_ndarray(triplets)
    want = np.zeros((n, n))
    for i in range(n):
        want[i, (i + 1) % n] = i + 1.5
    np.testing.assert_array_equal(_dense(A), want)
    path = tmp_path / "a.mtx"
    A.mmwrite(str(path))
    np.testing.assert_array_equal(scipy.io.mmread(str(path)).toarray(), want)
    bad = ti.ndarray(ti.f32, 4)
    with pytest.raises(ti.FluxionRuntimeError, match="triplets"):
        A.build_from_ndarray(bad)


def test_sparse_matrix_from_scipy_and_dtype_checks():
    import scipy.sparse as sp
    S = sp.random(6, 5, density=0.4, random_state=0, format="coo")
    A = ti.linalg.SparseMatrix(sm=S, dtype=ti.f64)
    assert A.shape == (6, 5)
    np.testing.assert_array_equal(_dense(A), S.toarray())
    with pytest.raises(ti.FluxionTypeError, match="f32 or ti.f64"):
        ti.linalg.SparseMatrixBuilder(3, 3, dtype=ti.i32)
    with pytest.raises(ValueError, match="storage_format"):
        ti.linalg.SparseMatrix(3, 3, storage_format="diagonal")


def test_missing_scipy_is_a_clear_error(monkeypatch):
    for name in [k for k in sys.modules if k == "scipy" or k.startswith("scipy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)
    with pytest.raises(ImportError, match=r"fluxion\[sparse\]"):
        ti.linalg.SparseMatrix(3, 3)
