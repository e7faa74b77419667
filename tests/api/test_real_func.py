"""@ti.real_func: functions compiled once per signature and called, not inlined (recursion,
returns inside loops, ti.ref parameters), checked against values computed here (NumPy, closed
forms, the same function run as Python) and, for a few programs, against Taichi itself."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.ir.builder import BuildContext, building
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.passes import lower_struct_for


# -- calls, values, side effects --------------------------------------------------------------
def test_calls_with_and_without_results_run_in_order():
    x = ti.field(ti.i32, shape=())
    log = ti.field(ti.i32, shape=4)

    @ti.real_func
    def bump(v: ti.i32):
        x[None] += v

    @ti.real_func
    def bump_and_get(v: ti.i32) -> ti.i32:
        x[None] += v
        return x[None]

    @ti.kernel
    def run() -> ti.i32:
        bump(40)
        log[0] = x[None]
        a = bump_and_get(2)
        log[1] = a
        log[2] = bump_and_get(a)        # the result of one call is the argument of the next
        return bump_and_get(0) * 10

    assert run() == 840
    np.testing.assert_array_equal(log.to_numpy(), [40, 42, 84, 0])


def test_arguments_and_results_convert_to_the_annotated_types():
    @ti.real_func
    def add(a: ti.f32, b: ti.f32) -> ti.f32:
        return a + b

    @ti.real_func
    def trunc(a: ti.i32) -> ti.f64:
        return a / 2

    @ti.kernel
    def run() -> ti.types.vector(3, ti.f64):
        return ti.Vector([add(1, 2), add(0.25, 7), trunc(7.9)], dt=ti.f64)

    np.testing.assert_allclose(run().to_numpy(), [3.0, 7.25, 3.5])


def test_same_function_run_as_python_and_in_a_kernel_agree():
    # outside kernels a real function is the Python function: the oracle for scalar code
    @ti.real_func
    def collatz_steps(n: ti.i32) -> ti.i32:
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
            if steps > 1000:
                break
        return steps

    out = ti.field(ti.i32, shape=200)

    @ti.kernel
    def run():
        for i in out:
            out[i] = collatz_steps(i + 1)    # called inside a parallel loop

    run()
    np.testing.assert_array_equal(out.to_numpy(), [collatz_steps(i + 1) for i in range(200)])


# -- recursion ---------------------------------------------------------------------------------
def test_deep_linear_recursion():
    @ti.real_func
    def sum_to(n: ti.i32) -> ti.i32:
        if n == 0:
            return 0
        return sum_to(n - 1) + n

    @ti.kernel
    def run(n: ti.i32) -> ti.i32:
        return sum_to(n)

    for n in (0, 1, 100, 2000):
        assert run(n) == n * (n + 1) // 2
    assert len(run.instances) == 1


def test_divide_and_conquer_over_a_template_field():
    @ti.real_func
    def range_sum(f: ti.template(), lo: ti.i32, hi: ti.i32) -> ti.i32:
        if lo == hi:
            return f[lo]
        mid = (lo + hi) // 2
        return range_sum(f, lo, mid) + range_sum(f, mid + 1, hi)

    @ti.real_func
    def range_max(f: ti.template(), lo: ti.i32, hi: ti.i32) -> ti.i32:
        if lo == hi:
            return f[lo]
        mid = (lo + hi) // 2
        return ti.max(range_max(f, lo, mid), range_max(f, mid + 1, hi))

    a = ti.field(ti.i32, shape=100)
    b = ti.field(ti.i32, shape=37)
    va = np.random.default_rng(1).integers(-1000, 1000, 100).astype(np.int32)
    vb = np.random.default_rng(2).integers(-1000, 1000, 37).astype(np.int32)
    a.from_numpy(va)
    b.from_numpy(vb)

    @ti.kernel
    def run() -> ti.types.vector(4, ti.i32):
        return ti.Vector([range_sum(a, 0, 99), range_sum(b, 0, 36), range_max(a, 0, 99),
                          range_sum(a, 10, 19)])

    np.testing.assert_array_equal(run().to_numpy(), [va.sum(), vb.sum(), va.max(),
                                                    va[10:20].sum()])


def test_mutual_recursion_and_recursion_inside_a_parallel_loop():
    @ti.real_func
    def is_even(n: ti.i32) -> ti.i32:
        r = 1
        if n > 0:
            r = is_odd(n - 1)
        return r

    @ti.real_func
    def is_odd(n: ti.i32) -> ti.i32:
        r = 0
        if n > 0:
            r = is_even(n - 1)
        return r

    @ti.real_func
    def fib(n: ti.i32) -> ti.i64:
        if n < 2:
            return n
        return fib(n - 1) + fib(n - 2)

    even = ti.field(ti.i32, shape=50)
    fibs = ti.field(ti.i64, shape=25)

    @ti.kernel
    def run():
        for i in even:
            even[i] = is_even(i)
        for i in fibs:
            fibs[i] = fib(i)

    run()
    np.testing.assert_array_equal(even.to_numpy(), [1 - i % 2 for i in range(50)])
    ref = [0, 1]
    while len(ref) < 25:
        ref.append(ref[-1] + ref[-2])
    np.testing.assert_array_equal(fibs.to_numpy(), ref)


def test_template_recursion_ends_at_compile_time():
    @ti.real_func
    def power(x: ti.f32, n: ti.template()) -> ti.f32:
        r = 1.0
        if ti.static(n > 0):
            r = x * power(x, n - 1)
        return r

    @ti.kernel
    def run(x: ti.f32) -> ti.f32:
        return power(x, 5) + power(x, 2)

    assert run(1.5) == pytest.approx(1.5 ** 5 + 1.5 ** 2, rel=1e-6)


# -- control flow ------------------------------------------------------------------------------
def test_returns_inside_loops_and_branches_and_break_continue():
    @ti.real_func
    def first_multiple(a: ti.i32, k: ti.i32) -> ti.i32:
        for i in range(a, a + 100):
            if i % k == 0:
                return i                    # a return in an if in a for
        return -1

    @ti.real_func
    def count_odd_until(a: ti.i32) -> ti.i32:
        c = 0
        for i in range(100):
            if i == a:
                break
            if i % 2 == 0:
                continue
            c += 1
        return c

    @ti.real_func
    def in_while(a: ti.i32) -> ti.i32:
        i = 0
        while True:
            i += 1
            if i * i > a:
                return i                    # the only way out of the loop

    @ti.real_func
    def in_for() -> ti.i32:
        for i in range(10):
            return 42

    @ti.real_func
    def classify(a: ti.i32) -> ti.i32:
        if a > 10:
            if a > 20:
                return 2
            return 1
        return 0

    out = ti.field(ti.i32, shape=(5, 60))

    @ti.kernel
    def run():
        for j in range(60):
            out[0, j] = first_multiple(j, 7)
            out[1, j] = count_odd_until(j)
            out[2, j] = in_while(j)
            out[3, j] = in_for()
            out[4, j] = classify(j)

    run()
    for j in range(60):
        assert list(out.to_numpy()[:, j]) == [first_multiple(j, 7), count_odd_until(j),
                                             in_while(j), in_for(), classify(j)]


def test_a_function_without_return_annotation_may_return_early():
    x = ti.field(ti.i32, shape=10)

    @ti.real_func
    def store_positive(i: ti.i32, v: ti.i32):
        if v <= 0:
            return
        x[i] = v

    @ti.kernel
    def run():
        for i in range(10):
            store_positive(i, i - 4)

    run()
    np.testing.assert_array_equal(x.to_numpy(), [0] * 5 + [1, 2, 3, 4, 5])


# -- vectors, matrices, structs, tuples ---------------------------------------------------------
def test_vector_matrix_and_struct_arguments_and_results():
    vec2 = ti.types.vector(2, ti.f32)
    mat2 = ti.types.matrix(2, 2, ti.f32)
    inner = ti.types.struct(a=ti.types.vector(3, ti.f32), b=ti.i16)
    outer = ti.types.struct(a=ti.f32, b=inner)

    @ti.real_func
    def apply(m: mat2, v: vec2) -> vec2:
        return m @ v

    @ti.real_func
    def transpose(m: mat2) -> mat2:
        return m.transpose()

    @ti.real_func
    def make(k: ti.i32) -> outer:
        return outer(a=k, b=inner(a=ti.Vector([k, 2 * k, 3 * k]), b=k + 1))

    @ti.real_func
    def total(s: outer) -> ti.f32:
        return s.a + s.b.a.sum() + s.b.b

    @ti.real_func
    def divmod_(a: ti.i32, b: ti.i32) -> (ti.i32, ti.i32):
        return a // b, a % b

    out = ti.field(ti.f32, shape=11)

    @ti.kernel
    def run():
        m = ti.Matrix([[1.0, 2.0], [3.0, 4.0]])
        v = apply(m, ti.Vector([5.0, 6.0]))
        out[0], out[1] = v[0], v[1]
        t = transpose(m)
        out[2], out[3] = t[0, 1], t[1, 0]
        s = make(7)
        out[4] = s.a
        out[5] = s.b.a[2]
        out[6] = s.b.b
        out[7] = total(s)
        q, r = divmod_(-17, 5)
        out[8], out[9] = q, r
        out[10] = total(make(1))

    run()
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(out.to_numpy(), list(m @ [5.0, 6.0]) + [3.0, 2.0] +
                               [7, 21, 8, 7 + 42 + 8] + [-17 // 5, -17 % 5] + [1 + 6 + 2])


def test_struct_result_keeps_a_double_member():
    s = ti.types.struct(a=ti.i16, b=ti.f64)

    @ti.real_func
    def bar() -> s:
        return s(a=123, b=ti.f64(1.2345e300))

    @ti.kernel
    def run() -> ti.f64:
        r = bar()
        return r.a * r.b

    assert run() == pytest.approx(123 * 1.2345e300)


def test_kernels_return_structs_and_tuples_of_vectors_and_structs():
    import typing
    vec3 = ti.types.vector(3, ti.f32)
    s0 = ti.types.struct(a=vec3, b=ti.i16)

    @ti.real_func
    def make() -> tuple[ti.f32, s0]:
        return 1, s0(a=ti.Vector([100, 0.25, 3]), b=65537)     # b wraps to 1 in i16

    @ti.kernel
    def as_tuple() -> (ti.f32, s0):
        return make()

    @ti.kernel
    def as_typing_tuple(k: ti.i32) -> typing.Tuple[vec3, ti.i32]:
        return ti.Vector([k, k + 1, k + 2]), k * 2

    @ti.kernel
    def as_struct() -> s0:
        a, s = make()
        s.b += 1
        return s

    a, s = as_tuple()
    assert a == 1.0 and s.b == 1
    np.testing.assert_allclose(s.a.to_numpy(), [100, 0.25, 3])
    v, k = as_typing_tuple(4)
    np.testing.assert_array_equal(v.to_numpy(), [4, 5, 6])
    assert k == 8
    s = as_struct()
    assert s.b == 2 and s.a[0] == 100.0


# -- ti.ref ------------------------------------------------------------------------------------
def test_ref_parameters_assign_the_callers_variable():
    @ti.real_func
    def set_to(a: ti.ref(ti.f32), v: ti.f32):
        a = v

    @ti.real_func
    def double(a: ti.ref(ti.f32)):
        a += a

    @ti.real_func
    def swap(a: ti.ref(ti.i32), b: ti.ref(ti.i32)):
        t = a
        a = b
        b = t

    @ti.real_func
    def pass_on(a: ti.ref(ti.f32)) -> ti.f32:
        double(a)                       # a reference passed on by reference
        return a

    @ti.kernel
    def run(n: ti.i32) -> ti.types.vector(5, ti.f32):
        x = 5.0
        set_to(x, 7)
        double(x)
        i, j = 1, 2
        swap(i, j)
        y = 1.5
        z = pass_on(y)
        swap(n, i)                      # an argument of the kernel is a variable too
        return ti.Vector([x, i * 10 + j, y, z, n])

    np.testing.assert_allclose(run(9).to_numpy(), [14.0, 91.0, 3.0, 3.0, 2.0])


def test_a_local_passed_by_reference_is_not_forwarded_or_dropped():
    # the local is stored once at the top level (forwarding's case) and never read after the
    # call by the kernel's own code but for the return: the call must be seen as a use
    @ti.real_func
    def add_ten(a: ti.ref(ti.i32)):
        a += 10

    out = ti.field(ti.i32, shape=8)

    @ti.kernel
    def run(n: ti.i32) -> ti.i32:
        m = n
        add_ten(m)
        for i in range(m):              # the loop bound reads the changed local
            out[i % 8] += 1
        return m

    assert run(-5) == 5
    assert out.to_numpy().sum() == 5


def test_a_local_of_every_iteration_is_updated_atomically_through_a_reference():
    # a kernel-level local passed from a parallel loop is one variable of all iterations:
    # `a += v` on it is atomic in the function, as it is in the loop itself
    n = 100000
    x = ti.field(ti.f32, shape=n)
    xs = np.random.default_rng(9).integers(0, 8, n).astype(np.float32)
    x.from_numpy(xs)

    @ti.real_func
    def acc(a: ti.ref(ti.f32), v: ti.f32):
        a += v

    @ti.real_func
    def acc_via(a: ti.ref(ti.f32), v: ti.f32):
        acc(a, v)

    @ti.kernel
    def total() -> ti.f32:
        s = 0.0
        for i in x:
            acc_via(s, x[i])
        t = 1.0
        acc(t, s)                       # a local of the serial part: a plain update
        return t

    assert total() == xs.sum() + 1
    ir = _frontend_ir(total)
    atomic = {}
    for f in ir.functions:
        atomic[f.name, f.body.stmts[0].shared] = any(
            isinstance(s, S.AtomicOpStmt) for s in S.walk(f.body))
    assert atomic == {("acc_via", True): False, ("acc", True): True, ("acc", False): False}


# -- arrays ------------------------------------------------------------------------------------
def test_ndarray_arguments_scalar_and_vector_elements():
    @ti.real_func
    def norm_at(a: ti.types.ndarray(ndim=1), i: ti.i32) -> ti.f32:
        return a[i].norm()

    @ti.real_func
    def scale(a: ti.types.ndarray(ndim=1), i: ti.i32, k: ti.f32):
        a[i] *= k

    @ti.func
    def size_of(a: ti.template()):
        n = 0
        if ti.static(a.element_shape() == [3]):
            n = 3
        return n

    @ti.kernel
    def run(v: ti.types.ndarray(ndim=1), w: ti.types.ndarray(ndim=1),
            out: ti.types.ndarray(ndim=1)):
        for i in out:
            out[i] = norm_at(v, i) + size_of(v) + size_of(w)
            scale(w, i, 2.0)

    v = ti.ndarray(ti.types.vector(3, ti.f32), shape=6)
    vs = np.random.default_rng(4).random((6, 3)).astype(np.float32)
    v.from_numpy(vs)
    w = np.arange(6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    run(v, w, out)
    np.testing.assert_allclose(out, np.linalg.norm(vs, axis=1) + 3, rtol=1e-6)
    np.testing.assert_array_equal(w, 2 * np.arange(6))


def test_a_read_only_array_written_by_a_function_is_an_error():
    @ti.real_func
    def write(a: ti.types.ndarray(), i: ti.i32):
        a[i] = 1

    @ti.kernel
    def run(a: ti.types.ndarray()):
        write(a, 0)

    a = np.zeros(3, np.int32)
    a.flags.writeable = False
    with pytest.raises(TypeError, match="written"):
        run(a)


# -- calls between functions, random numbers, checks -------------------------------------------
def test_real_funcs_call_ti_funcs_and_each_other():
    @ti.func
    def sq(x):
        return x * x

    @ti.real_func
    def hyp(a: ti.f32, b: ti.f32) -> ti.f32:
        return ti.sqrt(sq(a) + sq(b))

    @ti.func
    def via_func(a, b):
        return hyp(a, b) * 2                # a real function called from an inlined one

    @ti.real_func
    def chain(a: ti.f32) -> ti.f32:
        return via_func(a, hyp(a, a))

    @ti.kernel
    def run() -> ti.f32:
        return chain(3.0)

    inner = np.hypot(3.0, 3.0)
    assert run() == pytest.approx(2 * np.hypot(3.0, inner), rel=1e-6)


def test_random_numbers_in_functions_continue_the_callers_sequence():
    @ti.real_func
    def draw() -> ti.f32:
        return ti.random()

    out = ti.field(ti.f32, shape=(64, 4))

    @ti.kernel
    def run():
        for i in range(64):
            for k in range(4):
                out[i, k] = draw()

    run()
    v = out.to_numpy()
    assert len(np.unique(v)) == v.size          # no call restarts a sequence
    assert 0.0 <= v.min() and v.max() < 1.0 and abs(v.mean() - 0.5) < 0.1


def test_a_failed_check_inside_a_function_stops_the_kernel():
    ti.init(arch=ti.cpu, debug=True)
    x = ti.field(ti.f32, shape=4)
    done = ti.field(ti.i32, shape=())

    @ti.real_func
    def deep(i: ti.i32, n: ti.i32) -> ti.f32:
        r = 0.0
        if n == 0:
            r = x[i]                        # index checked in debug mode
        else:
            r = deep(i, n - 1)
        return r

    @ti.real_func
    def checked(v: ti.i32) -> ti.i32:
        assert v < 3, "v too big"
        return v

    @ti.kernel
    def bad_index(i: ti.i32) -> ti.f32:
        r = deep(i, 5)
        done[None] = 1
        return r

    @ti.kernel
    def bad_value():
        for i in range(10):
            checked(i)

    assert bad_index(2) == 0.0 and done[None] == 1
    done[None] = 0
    with pytest.raises(IndexError, match="x"):
        bad_index(7)
    assert done[None] == 0                  # nothing ran after the failed call
    with pytest.raises(AssertionError, match="v too big"):
        bad_value()


# -- errors ------------------------------------------------------------------------------------
def test_missing_annotations_are_errors():
    with pytest.raises(ti.TaichiSyntaxError, match="must be type annotated"):
        @ti.real_func
        def add(a, b: ti.i32) -> ti.i32:
            return a + b

    @ti.real_func
    def add2(a: ti.i32, b: ti.i32):
        return a + b

    @ti.kernel
    def run():
        add2(30, 2)

    with pytest.raises(ti.TaichiCompilationError, match="return value must be annotated"):
        run()


def test_wrong_arguments_are_errors_naming_the_function():
    @ti.real_func
    def takes_vec(v: ti.types.vector(3, ti.f32)) -> ti.f32:
        return v.sum()

    @ti.real_func
    def takes_template(t: ti.template()) -> ti.i32:
        return t

    @ti.real_func
    def takes_ref(a: ti.ref(ti.f32)):
        a = 1

    @ti.kernel
    def short_vector() -> ti.f32:
        return takes_vec(ti.Vector([1.0, 2.0]))

    @ti.kernel
    def kernel_value_as_template(n: ti.i32) -> ti.i32:
        return takes_template(n + 1)

    @ti.kernel
    def expression_by_ref():
        a = 1.0
        takes_ref(a + 1)

    @ti.kernel
    def wrong_type_by_ref():
        a = 1
        takes_ref(a)

    with pytest.raises(ti.TaichiSyntaxError, match="takes_vec.*Matrix with n 3, but got 2"):
        short_vector()
    with pytest.raises(ti.TaichiCompilationError, match="takes_template.*compile-time value"):
        kernel_value_as_template(1)
    with pytest.raises(ti.TaichiCompilationError, match="takes_ref.*local variable"):
        expression_by_ref()
    with pytest.raises(ti.TaichiCompilationError, match=r"takes_ref.*ti.ref\(f32\)"):
        wrong_type_by_ref()


def test_differentiating_through_a_real_function_is_a_clear_error():
    x = ti.field(ti.f32, shape=4, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True, needs_dual=True)

    @ti.real_func
    def sq(v: ti.f32) -> ti.f32:
        return v * v

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += sq(x[i])

    energy()                                # the primal runs
    with pytest.raises(RuntimeError, match="real_func 'sq' cannot be differentiated"):
        energy.grad()
    with pytest.raises(RuntimeError, match="real_func 'sq' cannot be differentiated"):
        with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] * 4):
            energy()


# -- the passes treat a call as opaque ---------------------------------------------------------
def _frontend_ir(kern, *template_args):
    src = kern.source()
    kern._specs()
    ir = S.Kernel(kern.name, [], kern._ret_types)
    with building(BuildContext(ir, runtime.config())):
        Transformer(src, kern.globals(), kern.name).build_function(
            dict(zip(kern.params(), template_args)))
    lower_struct_for.run(ir, runtime.config())     # (as the compile driver does first)
    return ir


def _atomics(ir):
    return sum(isinstance(s, S.AtomicOpStmt) for s in S.walk(ir.body))


def test_atomic_demotion_does_not_fire_across_a_call():
    from fluxion.passes import dce, demote
    n = 1000
    x = ti.field(ti.i32, shape=n)

    @ti.real_func
    def bump_next(f: ti.template(), i: ti.i32):
        f[(i + 1) % n] += 1                 # another iteration's element

    @ti.kernel
    def with_call():
        for i in x:
            x[i] += 1                       # the loop's own element, but not only its own
            bump_next(x, i)

    @ti.kernel
    def without_call():
        for i in x:
            x[i] += 1

    ir = _frontend_ir(without_call)
    dce.run(ir)
    assert demote.run(ir) and _atomics(ir) == 0      # the pattern demotion handles
    ir = _frontend_ir(with_call)
    dce.run(ir)
    assert not demote.run(ir) and _atomics(ir) == 1
    for _ in range(20):
        with_call()
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 40))


def test_reduction_and_scatter_privatization_do_not_fire_across_a_call():
    from fluxion.passes import dce, reduction, scatter
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    n, bins = 20000, 16
    total = ti.field(ti.i32, shape=())
    hist = ti.field(ti.i32, shape=bins)
    data = ti.field(ti.i32, shape=n)
    values = np.random.default_rng(5).integers(0, bins, n).astype(np.int32)
    data.from_numpy(values)

    @ti.real_func
    def observe(t: ti.template(), h: ti.template(), b: ti.i32):
        # reads and updates the targets of the loop's reductions
        if t[None] < 0 or h[b] < 0:
            t[None] += 1000000
        h[b] += 1

    @ti.kernel
    def count():
        for i in data:
            total[None] += 1
            hist[data[i]] += 1
            observe(total, hist, data[i])

    @ti.kernel
    def count_plain():
        for i in data:
            total[None] += 1
            hist[data[i]] += 1

    cfg = runtime.config()
    ir = _frontend_ir(count_plain)
    dce.run(ir)
    assert reduction.run(ir, cfg) and scatter.run(ir, cfg)   # the pattern both handle
    assert _atomics(ir) == 1        # the reduction's, applied once per thread
    ir = _frontend_ir(count)
    dce.run(ir)
    assert not reduction.run(ir, cfg)
    assert not scatter.run(ir, cfg)
    assert _atomics(ir) == 2        # the loop's own two (the function's is in its body)
    count()
    assert total[None] == n
    np.testing.assert_array_equal(hist.to_numpy(), 2 * np.bincount(values, minlength=bins))


@pytest.mark.cpu_only
def test_cpu_loop_transforms_do_not_fire_across_a_call():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    n, m = 64, 33
    w = ti.field(ti.f32, shape=m)
    x = ti.field(ti.f32, shape=n + m)
    out = ti.field(ti.f32, shape=n)
    calls = ti.field(ti.i32, shape=())
    ws = np.random.default_rng(6).random(m).astype(np.float32)
    xs = np.random.default_rng(7).random(n + m).astype(np.float32)
    w.from_numpy(ws)
    x.from_numpy(xs)

    @ti.real_func
    def tap(i: ti.i32, j: ti.i32) -> ti.f32:
        calls[None] += 1
        return w[j] * x[i + j]

    @ti.kernel
    def conv_call():
        for i in out:
            acc = 0.0
            for j in range(m):
                acc += tap(i, j)
            out[i] = acc

    @ti.kernel
    def conv_plain():
        for i in out:
            acc = 0.0
            for j in range(m):
                acc += w[j] * x[i + j]
            out[i] = acc

    ref = np.array([(ws * xs[i:i + m]).sum() for i in range(n)])
    conv_plain()
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5)
    plain_ir = next(iter(conv_plain.instances.values())).compiled.llvm_ir
    assert "jam_fused" in plain_ir and "llvm.loop.parallel_accesses" in plain_ir
    out.fill(0)
    conv_call()
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5)
    assert calls[None] == n * m
    call_ir = next(iter(conv_call.instances.values())).compiled.llvm_ir
    assert "jam_fused" not in call_ir and "llvm.loop.parallel_accesses" not in call_ir


# -- against Taichi ----------------------------------------------------------------------------
# Taichi runs in a process of its own: it leaves the calling thread's floating-point mode
# flushing denormals, which later tests in this process would see.
_TAICHI_RUN = r"""
import importlib.util, json, sys
import numpy as np
import taichi
spec = importlib.util.spec_from_file_location("real_func_program", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
taichi.init(arch=taichi.cpu, offline_cache=False, log_level=taichi.ERROR)
f, out, run = mod._mixed_program(taichi)
f.from_numpy(np.array(json.loads(sys.argv[2]), np.float32))
run()
print(json.dumps(out.to_numpy().tolist()))
"""


def _on_taichi(values):
    import importlib.util
    import json
    import subprocess
    import sys
    if importlib.util.find_spec("taichi") is None:
        pytest.skip("taichi is not installed")
    r = subprocess.run([sys.executable, "-c", _TAICHI_RUN, __file__, json.dumps(values.tolist())],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return np.array(json.loads(r.stdout.strip().splitlines()[-1]), np.float32)


def _mixed_program(ti):
    """A program of real functions over every kind of parameter, for either package."""
    vec3 = ti.types.vector(3, ti.f32)
    pair = ti.types.struct(lo=ti.i32, hi=ti.f32)

    @ti.real_func
    def clamp_sum(f: ti.template(), lo: ti.i32, hi: ti.i32, cap: ti.f32) -> ti.f32:
        s = 0.0
        for i in range(lo, hi):
            s += f[i]
            if s > cap:
                return cap
        return s

    @ti.real_func
    def blend(a: vec3, b: vec3, t: ti.f32) -> vec3:
        return a * (1 - t) + b * t

    @ti.real_func
    def split(v: ti.f32) -> pair:
        return pair(lo=ti.floor(v, ti.i32), hi=v - ti.floor(v))

    @ti.real_func
    def accumulate(acc: ti.ref(ti.f32), v: ti.f32) -> ti.i32:
        acc += v
        return ti.cast(acc, ti.i32)

    @ti.real_func
    def gcd(a: ti.i32, b: ti.i32) -> ti.i32:
        r = a
        if b != 0:
            r = gcd(b, a % b)
        return r

    f = ti.field(ti.f32, shape=32)
    out = ti.field(ti.f32, shape=(32, 8))

    @ti.kernel
    def run():
        for i in range(32):
            c = clamp_sum(f, 0, i, 40.0)
            v = blend(ti.Vector([1.0, 2.0, 3.0]), ti.Vector([f[i], -f[i], i]), 0.25)
            p = split(f[i] * 3.5)
            acc = 0.5
            k = accumulate(acc, f[i])
            out[i, 0] = c
            out[i, 1] = v[0] + v[1] * 2 + v[2] * 3
            out[i, 2] = p.lo
            out[i, 3] = p.hi
            out[i, 4] = acc
            out[i, 5] = k
            out[i, 6] = gcd(i * 12, 18)
            out[i, 7] = gcd(1071, 462 + i)

    return f, out, run


def test_a_program_of_real_functions_matches_taichi():
    values = np.random.default_rng(8).random(32).astype(np.float32) * 6
    f, out, run = _mixed_program(ti)
    f.from_numpy(values)
    run()
    np.testing.assert_allclose(out.to_numpy(), _on_taichi(values), rtol=1e-5, atol=1e-5)


def test_experimental_real_func_is_the_same_decorator_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="Use ti.real_func instead"):
        @ti.experimental.real_func
        def triangle(n: ti.i32) -> ti.i32:
            r = 0
            if n > 0:
                r = n + triangle(n - 1)
            return r

    @ti.kernel
    def run(n: ti.i32) -> ti.i32:
        return triangle(n)

    assert isinstance(triangle, ti.RealFunc) and run(30) == 465


def test_functions_update_quantized_fields_atomically():
    # 7-bit elements, four to a word: the function's updates from many iterations must not
    # lose each other's bits
    x = ti.field(ti.types.quant.int(7))
    ti.root.dense(ti.i, 16).quant_array(ti.i, 4, max_num_bits=32).place(x)

    @ti.real_func
    def bump(f: ti.template(), i: ti.i32):
        f[i] += 1

    @ti.kernel
    def run():
        for k in range(64 * 20):
            bump(x, k % 64)

    run()
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 20))
