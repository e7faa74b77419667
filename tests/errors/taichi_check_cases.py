"""Programs the original system rejects, each beside a near-identical one it accepts.

Every case is a function of the language module (`fluxion`, or `taichi` where installed) so
that test_taichi_checks.py runs the same code with both: fluxion must reject what is marked
`raises` with the expected exception classes and words, and accept the rest; the original
system is run on the very same cases to show that the checks reject nothing it accepts.

`EXPECT[name]` is ("raises", (class names...), regex) or ("ok", expected value or None). A
class name is looked up on the module (`TaichiSyntaxError`) or among the builtins
(`IndexError`). The module imports nothing of either implementation.
"""
import numpy as np

EXPECT = {}
INIT = {}       # ti.init options of a case, when it needs some


def raises(*classes, match=""):
    def deco(fn):
        EXPECT[fn.__name__] = ("raises", classes, match)
        return fn
    return deco


def ok(value=None):
    def deco(fn):
        EXPECT[fn.__name__] = ("ok", value)
        return fn
    return deco


def init(**kw):
    def deco(fn):
        INIT[fn.__name__] = kw
        return fn
    return deco


# -- kernel arguments are immutable ----------------------------------------------------------
@raises("TaichiSyntaxError", match='Kernel argument "a" is immutable in the kernel')
def assign_to_kernel_argument(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        a = a * 2
        return a
    return k(3)


@ok(6)
def assign_to_a_copy_of_a_kernel_argument(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        b = a
        b = b * 2
        return b
    return k(3)


@raises("TaichiSyntaxError", match='Kernel argument "a" is immutable')
def augment_a_kernel_argument_in_a_branch(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        if a > 0:
            a += 1
        return a
    return k(3)


@ok(4)
def augment_a_ti_func_parameter(ti):
    @ti.func
    def f(a):
        a += 1          # a ti.func's parameters are its own copies
        return a

    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return f(a)
    return k(3)


@raises("TaichiSyntaxError", match='Kernel argument "t" is immutable')
def assign_to_a_template_argument(ti):
    @ti.kernel
    def k(t: ti.template()) -> ti.i32:
        t = 5
        return t
    return k(1)


# -- loop variables ---------------------------------------------------------------------------
@raises("TaichiSyntaxError", match="Variable 'i' is already declared in the outer scope")
def range_for_reuses_a_variable(ti):
    @ti.kernel
    def k() -> ti.i32:
        i = 7
        for i in range(3):
            pass
        return i
    return k()


@ok(7)
def ndrange_for_shadows_a_variable(ti):
    # an ndrange loop may reuse the name; the variable is seen again after the loop
    @ti.kernel
    def k() -> ti.i32:
        i = 7
        s = 0
        for i in ti.ndrange(3):
            s += i
        return i + s - 3
    return k()


@raises("TaichiSyntaxError", match="Variable 'I' is already declared")
def struct_for_reuses_a_variable(ti):
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        I = 0
        for I in ti.grouped(x):
            x[I] = 1
    k()


@ok(6)
def sequential_loops_reuse_a_loop_name(ti):
    @ti.kernel
    def k() -> ti.i32:
        s = 0
        for i in range(3):
            for j in range(2):
                s += j
            for j in range(2):
                s += j
        return s
    return k()


# -- is / in ----------------------------------------------------------------------------------
@raises("TaichiSyntaxError", match='Operator "is" in Taichi scope is not supported')
def is_in_a_kernel(ti):
    @ti.kernel
    def k(a: ti.template()) -> ti.i32:
        r = 0
        if ti.static(a is None):
            r = 1
        return r
    return k(None)


@ok(1)
def equality_of_a_template_argument(ti):
    @ti.kernel
    def k(a: ti.template()) -> ti.i32:
        r = 0
        if ti.static(a == 3):
            r = 1
        return r
    return k(3)


@raises("TaichiSyntaxError", match='"In" is only supported inside `ti.static`')
def in_outside_static(ti):
    L = [1, 2]

    @ti.kernel
    def k() -> ti.i32:
        r = 0
        if 1 in L:
            r = 1
        return r
    return k()


@ok(1)
def in_inside_static(ti):
    L = [1, 2]

    @ti.kernel
    def k() -> ti.i32:
        r = 0
        if ti.static(1 in L):
            r = 1
        return r
    return k()


# -- ti.static --------------------------------------------------------------------------------
@raises("TaichiSyntaxError", match="'ti.static' cannot be nested")
def nested_static_loop(ti):
    @ti.kernel
    def k() -> ti.i32:
        s = 0
        for i in ti.static(ti.static(range(3))):
            s += i
        return s
    return k()


@ok(3)
def static_loop(ti):
    @ti.kernel
    def k() -> ti.i32:
        s = 0
        for i in ti.static(range(3)):
            s += i
        return s
    return k()


@raises("TaichiCompilationError", match="must be compile-time constants")
def static_of_a_kernel_value(ti):
    @ti.kernel
    def k(v: ti.f32) -> ti.i32:
        r = 0
        if ti.static(v > 0.5):
            r = 1
        return r
    return k(1.0)


@ok(2 ** 40)
def static_assign_keeps_a_wide_integer(ti):
    # `b = ti.static(v)` names the compile-time value; it is not squeezed through an i32
    @ti.kernel
    def k() -> ti.i64:
        b = ti.static(2 ** 40)
        return ti.i64(b)
    return k()


# -- scopes -----------------------------------------------------------------------------------
@raises("TaichiNameError", match='Name "a" is not defined')
def variable_of_a_constant_branch_used_after_it(ti):
    @ti.kernel
    def k() -> ti.i32:
        if True:
            a = 1
        return a
    return k()


@ok(1)
def variable_declared_before_a_constant_branch(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = 0
        if True:
            a = 1
        return a
    return k()


@raises("TaichiNameError", match='Name "a" is not defined')
def variable_of_a_static_branch_used_after_it(ti):
    @ti.kernel
    def k() -> ti.i32:
        if ti.static(True):
            a = 1
        return a
    return k()


# -- literals and primitive types ---------------------------------------------------------------
@raises("TaichiTypeError", match="exceeded the range of default_ip")
def int_literal_beyond_the_default_int(ti):
    @ti.kernel
    def k() -> ti.i64:
        b = 0x80000000
        return b
    return k()


@ok(0x7FFFFFFF)
def int_literal_within_the_default_int(ti):
    @ti.kernel
    def k() -> ti.i64:
        b = 0x7FFFFFFF
        return b
    return k()


@ok(0x80000000)
def wide_literal_through_its_type(ti):
    @ti.kernel
    def k() -> ti.u32:
        b = ti.u32(0x80000000)
        return b
    return k()


@raises("TaichiTypeError", match="exceeded the range of specified dtype: u16")
def negative_literal_for_an_unsigned_type(ti):
    @ti.kernel
    def k() -> ti.i32:
        return ti.u16(-1)
    return k()


@ok(65535)
def largest_literal_of_an_unsigned_type(ti):
    @ti.kernel
    def k() -> ti.i32:
        return ti.u16(65535)
    return k()


@raises("TaichiTypeError", match="Integer literals must be annotated with a integer type")
def int_literal_as_a_float_type(ti):
    @ti.kernel
    def k() -> ti.f32:
        return ti.f32(1)
    return k()


@ok(1.0)
def float_literal_as_a_float_type(ti):
    @ti.kernel
    def k() -> ti.f32:
        return ti.f32(1.0)
    return k()


@ok(1.0)
def int_variable_as_a_float_type(ti):
    @ti.kernel
    def k() -> ti.f32:
        a = 1
        return ti.f32(a)
    return k()


@raises("TaichiTypeError", match="Floating-point literals must be annotated with a floating-point")
def float_literal_as_an_int_type(ti):
    @ti.kernel
    def k() -> ti.i32:
        return ti.i32(1.5)
    return k()


@raises("TaichiSyntaxError", match="A primitive type can only decorate a single expression")
def primitive_type_of_two_values(ti):
    @ti.kernel
    def k() -> ti.i64:
        return ti.i64(1, 2)
    return k()


@raises("TaichiSyntaxError", match="cannot decorate an expression with a compound type")
def primitive_type_of_a_vector(ti):
    @ti.kernel
    def k() -> ti.f32:
        v = ti.Vector([1.0, 2.0])
        w = ti.f16(v)
        return w[0]
    return k()


@ok(1.0)
def cast_of_a_vector(ti):
    @ti.kernel
    def k() -> ti.f32:
        v = ti.Vector([1.0, 2.0])
        w = ti.cast(v, ti.f16)
        return w[0]
    return k()


# -- operand types ------------------------------------------------------------------------------
@raises("TaichiTypeError", match="'floor' takes real inputs only")
def floor_of_an_int(ti):
    @ti.kernel
    def k(x: ti.i32) -> ti.f32:
        return ti.floor(x)
    return k(3)


@ok(3.0)
def floor_of_a_float(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.f32:
        return ti.floor(x)
    return k(3.5)


@raises("TaichiTypeError", match="'sin' takes real inputs only")
def sin_of_an_int(ti):
    @ti.kernel
    def k(x: ti.i32) -> ti.f32:
        return ti.sin(x)
    return k(0)


@ok(2.0)
def sqrt_of_an_int(ti):
    # sqrt, exp and log convert an integer operand
    @ti.kernel
    def k(x: ti.i32) -> ti.f32:
        return ti.sqrt(x)
    return k(4)


@raises("TaichiTypeError", match=r"unsupported operand type\(s\) for '&'")
def bit_and_of_a_float(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = 1
        b = 3.1
        return a & b
    return k()


@raises("TaichiTypeError", match=r"unsupported operand type\(s\) for '<<'")
def shift_by_a_float(ti):
    # (the float was truncated, silently)
    @ti.kernel
    def k() -> ti.i32:
        a = 1
        b = 3.1
        return a << b
    return k()


@ok(8)
def shift_by_an_int(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = 1
        b = 3
        return a << b
    return k()


@raises("TaichiTypeError", match="'bit_not' takes integral inputs only")
def invert_a_float(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.i32:
        return ~x
    return k(1.0)


@raises("TaichiTypeError", match="'logic_not' takes integral inputs only")
def not_of_a_float(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.i32:
        return not x
    return k(1.0)


@ok(1)
def not_of_a_comparison_of_a_float(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.i32:
        return not (x != 0)
    return k(0.0)


@raises("TaichiTypeError", match=r"unsupported operand type\(s\) for '&&'")
def and_of_a_float(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.i32:
        r = 0
        if x and x > 1:
            r = 1
        return r
    return k(2.0)


@ok(1)
def and_of_comparisons(ti):
    @ti.kernel
    def k(x: ti.f32) -> ti.i32:
        r = 0
        if x != 0 and x > 1:
            r = 1
        return r
    return k(2.0)


@raises("TaichiTypeError", match="indices must be integers")
def field_indexed_with_a_float(ti):
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k(a: ti.f32):
        x[a] = 1.0
    k(1.0)


@raises("RuntimeError", match=r"Negative exponent in pow\(int, int\)")
def int_power_with_a_constant_negative_exponent(ti):
    z = ti.field(ti.i32, shape=())

    @ti.kernel
    def k(x: ti.i32, y: ti.template()):
        z[None] = x ** y
    k(10, -2)


@ok(100)
def int_power_with_a_positive_exponent(ti):
    z = ti.field(ti.i32, shape=())

    @ti.kernel
    def k(x: ti.i32, y: ti.template()):
        z[None] = x ** y
    k(10, 2)
    return z[None]


@init(debug=True)
@raises("TaichiRuntimeError", match="")
def int_power_with_a_negative_exponent_in_debug_mode(ti):
    z = ti.field(ti.i32, shape=())

    @ti.kernel
    def k(x: ti.i32, y: ti.i32):
        z[None] = x ** y
    k(10, -2)


@init(debug=True)
@ok(100)
def int_power_checked_in_debug_mode(ti):
    z = ti.field(ti.i32, shape=())

    @ti.kernel
    def k(x: ti.i32, y: ti.i32):
        z[None] = x ** y
    k(10, 2)
    return z[None]


# -- vectors and matrices ---------------------------------------------------------------------
@raises("TaichiCompilationError", "IndexError", match="Expected 2 indices, got 1")
def one_index_into_a_matrix(ti):
    @ti.kernel
    def k() -> ti.i32:
        m = ti.Matrix([[1, 2], [3, 4]])
        r = m[1]
        return r[0]
    return k()


@ok(3)
def two_indices_into_a_matrix(ti):
    @ti.kernel
    def k() -> ti.i32:
        m = ti.Matrix([[1, 2], [3, 4]])
        return m[1, 0]
    return k()


@raises("TaichiCompilationError", "IndexError", match="Expected 1 indices, got 2")
def two_indices_into_a_vector(ti):
    @ti.kernel
    def k() -> ti.i32:
        v = ti.Vector([1, 2, 3])
        return v[0, 0]
    return k()


@raises("TaichiSyntaxError", match='Please use "ti.select" instead')
def conditional_expression_on_a_vector_condition(ti):
    @ti.kernel
    def k() -> ti.i32:
        v = ti.Vector([1, -1])
        w = 1 if v > 0 else 0
        return w[0]
    return k()


@ok(1)
def select_on_a_vector_condition(ti):
    @ti.kernel
    def k() -> ti.i32:
        v = ti.Vector([1, -1])
        w = ti.select(v > 0, 1, 0)
        return w[0] - w[1]
    return k()


@raises("TaichiCompilationError", match="Cannot broadcast tensor to tensor")
def conditional_expression_of_two_vector_shapes(ti):
    # (one entry of the longer vector was dropped, silently)
    @ti.kernel
    def k(b: ti.i32) -> ti.f32:
        a = ti.math.vec2(1.0, 1.0)
        c = ti.math.vec3(1.0, 1.0, 2.0)
        d = a if b else c
        return d[0]
    return k(3)


@ok(2.0)
def conditional_expression_of_one_vector_shape(ti):
    @ti.kernel
    def k(b: ti.i32) -> ti.f32:
        a = ti.math.vec2(1.0, 1.0)
        c = ti.math.vec2(2.0, 2.0)
        d = a if b else c
        return d[0] + d[1]
    return k(3)


@raises("TaichiTypeError", match=r"cannot assign '\[Tensor \(3\) i32\]' to '\[Tensor \(4\) i32\]'")
def store_a_3_vector_into_a_4_vector(ti):
    f = ti.Vector.field(4, dtype=ti.i32, shape=())

    @ti.kernel
    def k():
        f[None] = ti.Vector([1, 2, 3])
    k()


@ok(10)
def store_a_4_vector(ti):
    f = ti.Vector.field(4, dtype=ti.i32, shape=())

    @ti.kernel
    def k():
        f[None] = ti.Vector([1, 2, 3, 4])
    k()
    return int(f.to_numpy().sum())


@raises("TaichiCompilationError", match="`transpose\\(\\)` cannot apply to a vector")
def transpose_of_a_vector(ti):
    @ti.kernel
    def k() -> ti.i32:
        x = ti.Vector([1, 2])
        y = ti.Vector([3, 4])
        z = x @ y.transpose()
        return z[0, 0]
    return k()


@ok(3)
def outer_product_of_two_vectors(ti):
    @ti.kernel
    def k() -> ti.i32:
        x = ti.Vector([1, 2])
        y = ti.Vector([3, 4])
        z = x.outer_product(y)
        return z[0, 0]
    return k()


@raises("TaichiSyntaxError", match="cannot use a non-writable target as the first operand of")
def atomic_on_a_list(ti):
    @ti.kernel
    def k() -> ti.i32:
        y = ti.Vector([1, 2, 3])
        z = ti.atomic_min([3, 2, 1], y)
        return z[0]
    return k()


@ok(1)
def atomic_on_a_local_vector(ti):
    @ti.kernel
    def k() -> ti.i32:
        x = ti.Vector([3, 2, 1])
        y = ti.Vector([1, 2, 3])
        ti.atomic_min(x, y)
        return x[0]
    return k()


# -- functions and returns ----------------------------------------------------------------------
@raises("TaichiSyntaxError", match="Kernel has a return type but does not have a return statement")
def kernel_without_its_return(ti):
    @ti.kernel
    def k() -> ti.i32:
        pass
    return k()


@raises("TaichiCompilationError",
        match="Function has a return type but does not have a return statement")
def func_without_its_return(ti):
    @ti.func
    def f() -> ti.i32:
        pass

    @ti.kernel
    def k() -> ti.i32:
        return f()
    return k()


@raises("TaichiSyntaxError", match="Function definition is not allowed in 'ti.kernel'")
def function_defined_in_a_kernel(ti):
    @ti.kernel
    def k():
        def helper():
            pass
    k()


@raises("TaichiSyntaxError", match='Unsupported node "Raise"')
def raise_in_a_kernel(ti):
    @ti.kernel
    def k():
        raise ValueError()
    k()


@raises("TaichiSyntaxError", match="is expected to be a Matrix with n 3, but got 2")
def two_vector_for_a_3_vector_parameter(ti):
    @ti.func
    def f(a: ti.types.vector(3, ti.f32)):
        return a[0]

    @ti.kernel
    def k() -> ti.f32:
        x = ti.Vector([3.0, 4.0])
        return f(x)
    return k()


@ok(3.0)
def three_vector_for_a_3_vector_parameter(ti):
    @ti.func
    def f(a: ti.types.vector(3, ti.f32)):
        return a[0]

    @ti.kernel
    def k() -> ti.f32:
        x = ti.Vector([3.0, 4.0, 5.0])
        return f(x)
    return k()


@raises("TaichiSyntaxError", match="Multiple values for argument 'a'")
def ti_func_argument_given_twice(ti):
    @ti.func
    def f(a, b):
        return a + b

    @ti.kernel
    def k() -> ti.i32:
        return f(1, a=3, b=3)
    return k()


@raises("TaichiSyntaxError", match="Parameter `b` missing")
def ti_func_argument_missing(ti):
    @ti.func
    def f(a, b, c=3):
        return a + b + c

    @ti.kernel
    def k() -> ti.i32:
        return f(1, c=3)
    return k()


@ok(7)
def ti_func_keyword_arguments(ti):
    @ti.func
    def f(a, b, c=3):
        return a + b + c

    @ti.kernel
    def k() -> ti.i32:
        return f(b=1, a=3)
    return k()


@raises("TaichiSyntaxError", match="Too many arguments")
def kernel_given_too_many_arguments(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a
    return k(1, 2)


@raises("TaichiSyntaxError", match="Unexpected argument 'c'")
def kernel_given_an_unknown_keyword(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a
    return k(1, c=2)


@ok(1)
def kernel_given_its_keyword(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a
    return k(a=1)


@raises("TaichiSyntaxError", match="annotation")
def kernel_annotation_that_names_nothing(ti):
    @ti.kernel
    def k(x: "no_such_type"):  # noqa: F821
        pass


@raises("TaichiRuntimeTypeError", "TypeError",
        match=r"Argument \(0,\) \(type=<class 'float'>\) cannot be converted into required type i32")
def float_for_an_int_argument(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a
    return k(1.5)


@ok(2)
def int_for_an_int_argument(ti):
    @ti.kernel
    def k(a: ti.i32) -> ti.i32:
        return a
    return k(2)


@raises("TaichiRuntimeTypeError", match="Invalid type for argument a")
def float_for_an_ndarray_argument(ti):
    @ti.kernel
    def k(a: ti.types.ndarray()):
        pass
    k(1.2)


@raises("ValueError", match=r"required ndim=1, but 2d ndarray with shape \(2, 3\) is provided")
def two_dimensional_array_for_one_dimension(ti):
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=1)):
        pass
    k(ti.ndarray(ti.f32, shape=(2, 3)))


@raises("ValueError", match=r"required array has ndim=2, array with 3 dimensions is provided")
def numpy_array_of_other_dimensions(ti):
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.f32, ndim=2)):
        pass
    k(np.zeros((2, 3, 4), dtype=np.float32))


@raises("ValueError", match=r"required array has dtype=i32, array with dtype=i64 is provided")
def numpy_array_of_another_dtype(ti):
    @ti.kernel
    def k(a: ti.types.ndarray(ti.i32, ndim=1)):
        pass
    k(np.zeros(3, dtype=np.int64))


@raises("ValueError", match=r"required element_shape=\(3, 3\), array with element shape of "
                            r"\(2, 3\) is provided")
def numpy_array_of_other_element_shape(ti):
    @ti.kernel
    def k(a: ti.types.ndarray(dtype=ti.math.mat3, ndim=2)):
        pass
    k(np.zeros((2, 2, 2, 3), dtype=np.float32))


@ok(6)
def array_of_the_annotated_dimensions(ti):
    @ti.kernel
    def k(a: ti.types.ndarray(ndim=2)) -> ti.i32:
        n = 0
        for i, j in a:
            n += 1
        return n
    return k(ti.ndarray(ti.f32, shape=(2, 3)))


@raises("TaichiRuntimeTypeError", match="Ndarray shouldn't be passed in via")
def ndarray_as_a_template_argument(ti):
    @ti.kernel
    def k(a: ti.template()):
        pass
    k(ti.ndarray(ti.f32, shape=(2,)))


@raises("TaichiTypeError", match="Only 0-dimensional numpy array")
def numpy_vector_as_a_scalar(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = np.array([1])
        return a
    return k()


@ok(3)
def numpy_0d_array_as_a_scalar(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = np.array(3, dtype=np.int32)
        return a
    return k()


# -- fields -----------------------------------------------------------------------------------
@raises("RuntimeError", match=r"These field\(s\) are not placed")
def launch_with_an_unplaced_field(ti):
    a = ti.field(ti.i32)

    @ti.kernel
    def k():
        pass
    k()


@ok(1.0)
def launch_after_placing(ti):
    a = ti.field(ti.f32)
    ti.root.dense(ti.i, 2).place(a)

    @ti.kernel
    def k():
        a[1] = 1.0
    k()
    return a[1]


@raises("RuntimeError", match=r"requrie `needs_grad=True`, however their grad field\(s\) are not")
def needs_grad_field_placed_without_its_gradient(ti):
    a = ti.field(ti.f32, needs_grad=True)
    ti.root.dense(ti.i, 2).place(a)

    @ti.kernel
    def k():
        a[0] = 1.0
    k()


@ok(2.0)
def needs_grad_field_placed_with_its_gradient(ti):
    a = ti.field(ti.f32, needs_grad=True)
    ti.root.dense(ti.i, 2).place(a, a.grad)

    @ti.kernel
    def k():
        a.grad[1] = 2.0
    k()
    return a.grad[1]


@ok(3.0)
def gradient_placed_by_lazy_grad(ti):
    a = ti.field(ti.f32, needs_grad=True)
    ti.root.dense(ti.i, 2).place(a)
    ti.root.lazy_grad()

    @ti.kernel
    def k():
        a.grad[0] = 3.0
    k()
    return a.grad[0]


@raises("TaichiCompilationError", match="Gradient x.grad has not been placed")
def unplaced_gradient_read_in_a_kernel(ti):
    x = ti.field(ti.f32, shape=(), name="x")
    y = ti.field(ti.f32, shape=())

    @ti.kernel
    def k():
        y[None] = x.grad[None]
    k()


@raises("TaichiCompilationError", match="The axes in order must be different")
def field_order_with_a_repeated_axis(ti):
    ti.field(ti.f32, shape=(3, 4, 3), order="iji")


@ok(12)
def field_order_of_distinct_axes(ti):
    f = ti.field(ti.f32, shape=(3, 4), order="ji")
    return int(np.prod(f.shape))


@raises("TaichiSyntaxError", match="Default value in @dataclass is not supported")
def dataclass_with_a_default(ti):
    @ti.dataclass
    class Foo:
        a: int
        b: float = 3.14


@ok()
def dataclass_without_a_default(ti):
    @ti.dataclass
    class Foo:
        a: int
        b: float


@raises("TaichiCompilationError", match="Recreating variables is not allowed")
def static_assign_to_a_variable_of_the_block(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = 1
        a = ti.static(2)
        return a
    return k()


@ok(2)
def static_assign_shadowing_an_outer_variable(ti):
    @ti.kernel
    def k() -> ti.i32:
        a = 1
        r = 0
        if True:
            a = ti.static(2)
            r = a
        return r + a - 1
    return k()


@ok(3)
def static_assign_of_a_pair(ti):
    f = ti.field(ti.i32, shape=2)

    @ti.kernel
    def k() -> ti.i32:
        x, y = ti.static(1, 2)
        return x + y
    return k()


@raises("TaichiCompilationError", match="Polar decomposition only supports 2D and 3D matrices")
def polar_decomposition_of_a_field(ti):
    m = ti.Matrix.field(1, 1, ti.f32, shape=())

    @ti.kernel
    def k():
        ti.polar_decompose(m, ti.f32)
    k()



# -- a constant negative index into an ndarray: it cannot count from the end (the size is a
# run-time value), and read outside the array without a word ---------------------------------
@raises("TaichiSyntaxError", match="Negative indices are not supported")
def negative_index_into_an_ndarray(ti):
    import numpy as np

    @ti.kernel
    def k(a: ti.types.ndarray()) -> ti.i32:
        return a[-1]
    return k(np.arange(4, dtype=np.int32))


@raises("TaichiSyntaxError", match="Negative indices are not supported")
def negative_index_stored_into_an_ndarray(ti):
    import numpy as np

    @ti.kernel
    def k(a: ti.types.ndarray()):
        a[1, -2] = 5
    return k(np.zeros((3, 3), dtype=np.int32))


@ok(3)
def last_index_into_an_ndarray(ti):
    import numpy as np

    @ti.kernel
    def k(a: ti.types.ndarray()) -> ti.i32:
        return a[3]
    return k(np.arange(4, dtype=np.int32))


@ok(5)
def kernel_value_index_into_an_ndarray(ti):
    import numpy as np

    @ti.kernel
    def k(a: ti.types.ndarray(), i: ti.i32) -> ti.i32:
        a[1, i - 1] = 5
        return a[1, 1]
    return k(np.zeros((3, 3), dtype=np.int32), 2)


# -- a struct argument of another layout: read in part, it would pass wrong members -----------
@raises("TaichiRuntimeTypeError", match="cannot be converted into required type")
def struct_argument_with_a_longer_vector_member(ti):
    circle = ti.types.struct(center=ti.math.vec2, radius=ti.f32)
    sphere = ti.types.struct(center=ti.math.vec3, radius=ti.f32)

    @ti.kernel
    def k(c: circle) -> ti.f32:
        return c.center[0] + c.center[1] + c.radius
    return k(sphere(center=ti.math.vec3(1, 2, 3), radius=4))


@raises("TaichiRuntimeTypeError", match="cannot be converted into required type")
def struct_argument_with_a_shorter_vector_member(ti):
    circle = ti.types.struct(center=ti.math.vec2, radius=ti.f32)
    sphere = ti.types.struct(center=ti.math.vec3, radius=ti.f32)

    @ti.kernel
    def k(s: sphere) -> ti.f32:
        return s.center[0] + s.radius
    return k(circle(center=ti.math.vec2(1, 2), radius=4))


@raises("TaichiRuntimeTypeError", match="cannot be converted into required type")
def struct_argument_with_an_extra_member(ti):
    circle = ti.types.struct(center=ti.math.vec2, radius=ti.f32)
    tagged = ti.types.struct(center=ti.math.vec2, radius=ti.f32, tag=ti.i32)

    @ti.kernel
    def k(c: circle) -> ti.f32:
        return c.center[0] + c.center[1] + c.radius
    return k(tagged(center=ti.math.vec2(1, 2), radius=4, tag=7))


@raises("TaichiRuntimeTypeError", match="cannot be converted into required type")
def struct_argument_given_a_number(ti):
    circle = ti.types.struct(center=ti.math.vec2, radius=ti.f32)

    @ti.kernel
    def k(c: circle) -> ti.f32:
        return c.radius
    return k(3)


@ok(7.0)
def struct_argument_of_another_type_with_the_same_members(ti):
    circle = ti.types.struct(center=ti.math.vec2, radius=ti.f32)
    disc = ti.types.struct(center=ti.math.vec2, radius=ti.f32)

    @ti.kernel
    def k(c: circle) -> ti.f32:
        return c.center[0] + c.center[1] + c.radius
    return k(disc(center=ti.math.vec2(1, 2), radius=4))


# -- a matrix argument of another shape with as many entries: read as the parameter's shape, it
# would pass wrong entries (Taichi fails on it in its own way; fluxion names the argument) ----
@raises("Exception")
def matrix_argument_of_the_transposed_shape(ti):
    @ti.kernel
    def k(m: ti.types.matrix(2, 3, ti.f32)) -> ti.f32:
        return m[0, 2] * 10 + m[1, 0]
    return k(ti.Matrix([[1, 2], [3, 4], [5, 6]]))


@raises("Exception")
def matrix_argument_for_a_vector_parameter(ti):
    @ti.kernel
    def k(v: ti.types.vector(6, ti.f32)) -> ti.f32:
        return v[2]
    return k(ti.Matrix([[1, 2, 3], [4, 5, 6]]))


@ok(34.0)
def matrix_argument_of_the_parameter_shape(ti):
    @ti.kernel
    def k(m: ti.types.matrix(2, 3, ti.f32)) -> ti.f32:
        return m[0, 2] * 10 + m[1, 0]
    return k(ti.Matrix([[1, 2, 3], [4, 5, 6]]))


@ok(3.0)
def list_argument_for_a_vector_parameter(ti):
    @ti.kernel
    def k(v: ti.types.vector(6, ti.f32)) -> ti.f32:
        return v[2]
    return k([1, 2, 3, 4, 5, 6])
