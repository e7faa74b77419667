"""Control flow in kernels: if/elif/else, conditional expressions, ti.select, while, range and
ndrange loops, struct-for and grouped loops, break/continue, ti.static, loop_config."""
import numpy as np
import pytest

import fluxion as ti


def test_if_elif_else_and_conditional_expression():
    n = 200
    x = ti.field(ti.f32, shape=n)
    out = ti.field(ti.i32, shape=(3, n))
    xs = np.linspace(-3, 3, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.kernel
    def run():
        for i in x:
            v = x[i]
            if v < -1.0:
                out[0, i] = -2
            elif v < 0.0:
                out[0, i] = -1
            elif v == 0.0:
                out[0, i] = 0
            else:
                if v > 2.0:
                    out[0, i] = 3
                else:
                    out[0, i] = 1
            out[1, i] = 10 if v > 0.5 else 20
            out[2, i] = ti.select(v > 0.5, i, -i)
            # compound conditions with and / or / not
            if (v > -1.0 and v < 1.0) or not (v < 2.5):
                out[2, i] += 1000

    run()
    ref0 = np.select([xs < -1, xs < 0, xs == 0, xs > 2], [-2, -1, 0, 3], 1)
    idx = np.arange(n)
    ref2 = np.where(xs > 0.5, idx, -idx) + 1000 * (((xs > -1) & (xs < 1)) | ~(xs < 2.5))
    np.testing.assert_array_equal(out.to_numpy(), np.stack([ref0, np.where(xs > 0.5, 10, 20), ref2]))


def test_select_broadcasts_over_vectors_and_promotes():
    out = ti.Vector.field(3, ti.f32, shape=2)
    iout = ti.field(ti.f64, shape=2)

    @ti.kernel
    def run(c: ti.i32):
        a = ti.Vector([1.0, 2.0, 3.0])
        b = ti.Vector([-1.0, -2.0, -3.0])
        out[c] = ti.select(c > 0, a, b)
        iout[c] = ti.select(c > 0, 1, 0.5)   # int and float branches: promoted to float

    run(0)
    run(1)
    np.testing.assert_array_equal(out.to_numpy(), [[-1, -2, -3], [1, 2, 3]])
    np.testing.assert_array_equal(iout.to_numpy(), [0.5, 1])


def test_while_loop_collatz_steps():
    n = 300
    steps = ti.field(ti.i32, shape=n)

    @ti.kernel
    def run():
        for i in range(1, n):
            v = ti.cast(i, ti.i64)
            c = 0
            while v != 1:
                if v % 2 == 0:
                    v = v // 2
                else:
                    v = 3 * v + 1
                c += 1
            steps[i] = c

    run()

    def collatz(v):
        c = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            c += 1
        return c

    ref = [0] + [collatz(i) for i in range(1, n)]
    np.testing.assert_array_equal(steps.to_numpy(), ref)


def test_range_loops_with_runtime_and_negative_bounds():
    out = ti.field(ti.i64, shape=4)

    @ti.kernel
    def run(a: ti.i32, b: ti.i32):
        for _ in range(1):               # the loops below are nested, hence serial
            s = ti.cast(0, ti.i64)
            for i in range(a, b):
                s += i * i
            out[0] = s
            c = 0
            for i in range(b, a):        # empty range: the body never runs
                c += 1
            out[1] = c
        for i in range(b, a):            # an empty top-level (parallel) loop
            out[2] += 1
        for i in range(a, b):            # negative begin, parallel
            out[3] += i

    run(-5, 7)
    assert out[0] == sum(i * i for i in range(-5, 7))
    assert out[1] == 0
    assert out[2] == 0
    assert out[3] == sum(range(-5, 7))


def test_ndrange_with_offsets_covers_each_point_once():
    hits = ti.field(ti.i32, shape=(6, 9))
    total = ti.field(ti.i64, shape=())

    @ti.kernel
    def run():
        for i, j in ti.ndrange(4, (2, 9)):
            hits[i + 1, j] += 1
            total[None] += i * 100 + j

    run()
    ref = np.zeros((6, 9), np.int32)
    ref[1:5, 2:9] = 1
    np.testing.assert_array_equal(hits.to_numpy(), ref)
    assert total[None] == sum(i * 100 + j for i in range(4) for j in range(2, 9))


def test_ndrange_three_dims_and_grouped_ndrange():
    a = ti.field(ti.i32, shape=(3, 4, 5))
    g = ti.field(ti.i32, shape=(5, 7))

    @ti.kernel
    def run():
        for i, j, k in ti.ndrange(3, 4, 5):
            a[i, j, k] = i * 100 + j * 10 + k
        for I in ti.grouped(ti.ndrange((1, 5), (2, 7))):
            g[I] = I[0] * 10 + I[1]

    run()
    i, j, k = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(a.to_numpy(), i * 100 + j * 10 + k)
    ref = np.zeros((5, 7), np.int32)
    for p in range(1, 5):
        for q in range(2, 7):
            ref[p, q] = p * 10 + q
    np.testing.assert_array_equal(g.to_numpy(), ref)


def test_struct_for_and_grouped_field_loops():
    x = ti.field(ti.f32, shape=(16, 12))
    y = ti.field(ti.f32, shape=(16, 12))
    v = ti.Vector.field(2, ti.i32, shape=(3, 5))

    @ti.kernel
    def run():
        for i, j in x:
            x[i, j] = i * 0.5 - j
        for I in ti.grouped(y):
            y[I] = x[I] * 2 + I[0] * I[1]
        for I in ti.grouped(v):
            v[I] = I

    run()
    i, j = np.meshgrid(np.arange(16), np.arange(12), indexing="ij")
    np.testing.assert_allclose(x.to_numpy(), i * 0.5 - j)
    np.testing.assert_allclose(y.to_numpy(), (i * 0.5 - j) * 2 + i * j)
    ii, jj = np.meshgrid(np.arange(3), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(v.to_numpy(), np.stack([ii, jj], axis=-1))


def test_break_and_continue_in_nested_serial_loops():
    n = 64
    first = ti.field(ti.i32, shape=n)
    odd_sum = ti.field(ti.i32, shape=n)

    @ti.kernel
    def run():
        for i in range(n):            # parallel outer loop; the inner loops are serial
            first[i] = -1
            for j in range(2, 100):
                if (i + 1) % j == 0:  # smallest divisor >= 2 of i + 1
                    first[i] = j
                    break
            s = 0
            for a in range(i):
                if a % 2 == 0:
                    continue
                k = 0
                while True:           # break out of the inner while only
                    k += 1
                    if k >= 3:
                        break
                s += a * k
            odd_sum[i] = s

    run()
    ref_first = []
    for i in range(n):
        f = -1
        for j in range(2, 100):
            if (i + 1) % j == 0:
                f = j
                break
        ref_first.append(f)
    np.testing.assert_array_equal(first.to_numpy(), ref_first)
    np.testing.assert_array_equal(odd_sum.to_numpy(), [3 * sum(range(1, i, 2)) for i in range(n)])


def test_serialized_top_level_loop_with_break():
    x = ti.field(ti.i32, shape=100)
    count = ti.field(ti.i32, shape=())
    x.from_numpy(np.arange(100, dtype=np.int32) ** 2 % 37)

    @ti.kernel
    def run(limit: ti.i32) -> ti.i32:
        # a serial scan: stop at the first element above `limit`
        ti.loop_config(serialize=True)
        for i in range(100):
            if x[i] > limit:
                break
            count[None] += 1
        # the prefix sum in order is only right when the loop is serial
        acc = 0
        ti.loop_config(serialize=True)
        for i in range(100):
            acc = acc * 3 % 1000003 + x[i]
        return acc

    acc = run(30)
    xs = np.arange(100) ** 2 % 37
    ref = int(np.argmax(xs > 30))
    assert count[None] == ref
    r = 0
    for v in xs:
        r = r * 3 % 1000003 + int(v)
    assert acc == r


def test_static_if_and_unrolled_loops():
    out = ti.field(ti.i32, shape=8)
    coeffs = [3, 1, 4, 1, 5]

    @ti.kernel
    def run(flag: ti.template(), x: ti.i32):
        if ti.static(flag):
            out[0] = x * 2
        else:
            out[0] = x * 3
        acc = 0
        for k in ti.static(range(len(coeffs))):
            acc = acc * x + coeffs[k]       # Horner with compile-time coefficients
        out[1] = acc
        for k in ti.static(range(3)):
            out[2 + k] = k * k
        for a, b in ti.static([(1, 2), (3, 4)]):
            out[5] += a * b
        for k in ti.static(range(10)):
            if ti.static(k == 4):
                break
            out[6] += k

    run(True, 2)
    assert out[0] == 4
    run(False, 2)
    assert out[0] == 6
    x = 2
    ref = 0
    for c in coeffs:
        ref = ref * x + c
    assert out[1] == ref
    assert [out[2], out[3], out[4]] == [0, 1, 4]
    assert out[5] == 2 * (1 * 2 + 3 * 4)
    assert out[6] == 2 * (0 + 1 + 2 + 3)


def test_each_unrolled_iteration_has_its_own_variable_scope():
    out = ti.field(ti.f64, shape=6)
    xs = np.array([0.25, 1.5, -2.0, 4.0], np.float32)
    x = ti.field(ti.f32, shape=4)
    x.from_numpy(xs)

    @ti.kernel
    def run():
        total = 0.0
        k = 100
        for k in ti.static(range(3)):
            # `v` is a new variable in each iteration: a 2-, 3- then 4-vector
            v = ti.Vector([x[i] for i in range(k + 2)])
            # `t` is an int in the first iteration and a float after it
            t = 1 if ti.static(k == 0) else v[1] * 0.5
            total += v.sum() + t      # bound before the loop: assigned through
        out[0] = total
        out[1] = k                    # the loop target shadowed `k` only inside the loop
        for j in ti.static(range(2)):
            w = x[j] if ti.static(j == 0) else x[j] * 0.5
            out[2 + j] = w

    run()
    ref_total = 0.0
    for k in range(3):
        v = xs[:k + 2].astype(np.float64)
        t = 1.0 if k == 0 else float(np.float32(v[1] * np.float32(0.5)))
        ref_total += v.sum() + t
    np.testing.assert_allclose(out.to_numpy()[:4], [ref_total, 100, xs[0], xs[1] * 0.5],
                               rtol=1e-6)


def test_a_variable_first_bound_in_an_unrolled_loop_is_not_visible_after_it():
    out = ti.field(ti.i32, shape=1)

    @ti.kernel
    def run():
        for k in ti.static(range(2)):
            last = k * 3
        out[0] = last

    with pytest.raises(ti.FluxionNameError, match='"last" is not defined'):
        run()


def test_loop_over_field_with_offset():
    x = ti.field(ti.i32, shape=(4,), offset=(-2,))

    @ti.kernel
    def run():
        for i in x:
            x[i] = i * 10

    run()
    assert [x[i] for i in range(-2, 2)] == [-20, -10, 0, 10]


def test_variables_defined_in_branches_are_block_local():
    out = ti.field(ti.f32, shape=4)

    @ti.kernel
    def run():
        for i in range(4):
            r = 0.0
            if i % 2 == 0:
                t = i * 1.5
                r = t
            else:
                t = -1.0
                r = t * i
            out[i] = r

    run()
    np.testing.assert_allclose(out.to_numpy(), [0.0, -1.0, 3.0, -3.0])


@pytest.mark.parametrize("dt", [ti.i8, ti.u16, ti.i64, ti.u64], ids=str)
def test_loop_counter_arithmetic_in_small_and_wide_types(dt):
    out = ti.field(dt, shape=50)

    @ti.kernel
    def run():
        for i in range(50):
            v = ti.cast(0, dt)
            for j in range(i):
                v += ti.cast(j, dt) * 7
            out[i] = v

    run()
    ref = np.array([7 * sum(range(i)) for i in range(50)], dtype=np.uint64).astype(dt.np_dtype)
    np.testing.assert_array_equal(out.to_numpy(), ref)


def test_continue_in_while_and_multiple_assignment_targets():
    out = ti.field(ti.i32, shape=3)

    @ti.kernel
    def run(n: ti.i32):
        for _ in range(1):
            j, t = 0, 0
            while j < n:
                j += 1
                if j % 2 == 0:
                    continue          # back to the condition
                t += j
            out[0] = t
            a = b = n * 2
            a += 1
            out[1] = a * 100 + b
            k = n
            while True:
                k -= 3
                if k < 0:
                    break
            out[2] = k

    run(10)
    assert out.to_numpy().tolist() == [sum(range(1, 11, 2)), 21 * 100 + 20, 10 % 3 - 3]


def test_static_loop_over_fields_and_vector_index_arithmetic():
    a = ti.field(ti.f32, shape=(4, 4))
    b = ti.field(ti.f32, shape=(4, 4))

    @ti.kernel
    def run():
        for k, f in ti.static(enumerate([a, b])):
            for I in ti.grouped(ti.ndrange(3, 3)):
                f[I + ti.Vector([1, 1])] = I[0] * 10 + I[1] + (1 if ti.static(k == 0) else 100)

    run()
    grid = np.arange(3)[:, None] * 10 + np.arange(3)[None, :]
    ref_a, ref_b = np.zeros((4, 4)), np.zeros((4, 4))
    ref_a[1:, 1:] = grid + 1
    ref_b[1:, 1:] = grid + 100
    np.testing.assert_array_equal(a.to_numpy(), ref_a)
    np.testing.assert_array_equal(b.to_numpy(), ref_b)


def test_a_name_bound_to_ti_static_stays_a_compile_time_value():
    """`w = ti.static(x)` keeps `w` the Python value: `ti.static(w != 0)` then chooses a
    branch at compile time (the branch not taken may not even compile), as in the original."""
    x = 3
    out = ti.field(ti.i32, shape=2)

    @ti.kernel
    def k():
        w = ti.static(x)
        if ti.static(w != 0):
            out[0] = w * 2
        else:
            out[1] = undefined_name  # noqa: F821 (never compiled)
        if ti.static(w == 0):
            out[1] = 1

    k()
    assert out.to_numpy().tolist() == [6, 0]
