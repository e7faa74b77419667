"""User-facing errors: each mistake raises a fluxion exception (also the matching builtin) whose
message names the kernel and shows the user's file, line and source line with carets.

Line numbers and caret columns are computed from this file's source with inspect, never
hardcoded, so editing this file does not break the tests.
"""
import inspect
import os
import traceback

import numpy as np
import pytest

import fluxion as ti

THIS_FILE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def _session():
    # tests/conftest.py did not exist when this file was written; a second ti.init is harmless
    ti.init(arch=ti.cpu)
    yield
    ti.reset()


def line_of(fn, text):
    """(absolute line number, source line) of the first line of `fn` containing `text`."""
    fn = getattr(fn, "func", fn)
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):          # a line that is exactly `text` wins
        if line.strip() == text:
            return first + k, line.rstrip("\n")
    for k, line in enumerate(lines):
        if text in line:
            return first + k, line.rstrip("\n")
    raise AssertionError(f"{text!r} not in the source of {fn.__name__}")


def def_line(fn):
    return line_of(fn, "def " + getattr(fn, "func", fn).__name__ + "(")


def location_block(fn, line_text, caret_text=None):
    """The expected `File ..., line N, in name:` + the source line as it is in the file (+
    carets under `caret_text`), the original system's layout."""
    name = getattr(fn, "func", fn).__name__
    lineno, src = line_of(fn, line_text)
    out = [f'File "{THIS_FILE}", line {lineno}, in {name}:', src.rstrip()]
    if caret_text is not None:
        col = src.index(caret_text)
        out.append(" " * col + "^" * len(caret_text))
    return "\n".join(out)


def first_frame(msg):
    return next(line for line in msg.splitlines() if line.startswith('File "'))


def assert_located(err, kernel, fn, line_text, caret_text=None):
    """The message names `kernel` (its first frame is the kernel's) and shows this file, the
    line of `line_text`, its text and, when given, carets exactly under `caret_text`."""
    msg = str(err)
    assert first_frame(msg).endswith(f", in {kernel}:"), msg
    lineno, src = line_of(fn, line_text)
    assert os.path.basename(THIS_FILE) in msg
    assert f"line {lineno}" in msg
    assert src.strip() in msg
    block = location_block(fn, line_text, caret_text)
    assert block in msg, f"expected\n{block}\nin\n{msg}"


# -- unsupported syntax ---------------------------------------------------------------------
def test_lambda_is_rejected_with_location():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def uses_lambda():
        f = lambda a: a + 1  # noqa: E731
        x[0] = f(1)

    with pytest.raises(ti.FluxionSyntaxError) as ei:
        uses_lambda()
    assert isinstance(ei.value, ti.FluxionCompilationError)
    assert isinstance(ei.value, ti.FluxionError)
    assert_located(ei.value, "uses_lambda", uses_lambda, "f = lambda",
                   caret_text="lambda a: a + 1")
    assert "lambda" in str(ei.value).splitlines()[-1]


def test_for_else_is_rejected():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def for_else():
        for i in range(3):
            x[i] = 1
        else:
            x[0] = 2

    with pytest.raises(ti.FluxionSyntaxError) as ei:
        for_else()
    assert_located(ei.value, "for_else", for_else, "for i in range(3):")
    assert "else" in str(ei.value).splitlines()[-1]


def test_while_else_is_rejected():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def while_else():
        while x[0] < 3:
            x[0] += 1
        else:
            x[1] = 2

    with pytest.raises(ti.FluxionSyntaxError) as ei:
        while_else()
    assert_located(ei.value, "while_else", while_else, "while x[0] < 3:")


def test_break_in_top_level_parallel_loop_is_rejected():
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def par_break():
        for i in x:
            if i > 2:
                break
            x[i] = 1

    with pytest.raises(ti.FluxionSyntaxError) as ei:
        par_break()
    assert_located(ei.value, "par_break", par_break, "break", caret_text="break")


def test_break_is_fine_in_serialized_and_inner_loops():
    x = ti.field(ti.i32, shape=8)

    @ti.kernel
    def ok():
        ti.loop_config(serialize=True)
        for i in range(8):
            if i > 2:
                break
            x[i] = 1
        for i in x:
            for j in range(100):
                if j >= i:
                    break
                x[i] += 10

    ok()
    ref = np.array([1, 1, 1, 0, 0, 0, 0, 0]) + 10 * np.arange(8)
    np.testing.assert_array_equal(x.to_numpy(), ref)


# -- arguments ------------------------------------------------------------------------------
@ti.kernel
def two_args(a: ti.i32, b: ti.f32) -> ti.f32:
    return a + b


@pytest.mark.parametrize("args", [(1,), (1, 2.0, 3), ()], ids=["too_few", "too_many", "none"])
def test_wrong_argument_count(args):
    with pytest.raises(ti.FluxionTypeError) as ei:
        two_args(*args)
    assert isinstance(ei.value, TypeError)
    assert isinstance(ei.value, ti.TaichiSyntaxError)    # what the original system raises
    assert isinstance(ei.value, ti.FluxionError)
    assert_located(ei.value, "two_args", two_args, "def two_args(")
    assert "2" in str(ei.value)                        # how many it takes
    assert two_args(1, 2.5) == 3.5                     # the kernel still works afterwards


def test_unknown_keyword_argument():
    with pytest.raises(TypeError) as ei:
        two_args(1, c=2.0)
    assert isinstance(ei.value, ti.FluxionTypeError)
    assert "'two_args'" in str(ei.value)


def test_wrong_argument_type_raises_type_error():
    two_args(1, 1.0)                                   # compiled; the error is at launch
    with pytest.raises(ti.TaichiRuntimeTypeError) as ei:   # a launch error, as in the original
        two_args("seven", 1.0)
    assert isinstance(ei.value, TypeError) and isinstance(ei.value, RuntimeError)
    assert not isinstance(ei.value, ti.TaichiCompilationError)
    msg = str(ei.value)
    assert "'two_args'" in msg
    assert "i32" in msg and "str" in msg
    assert two_args(7, 0.5) == 7.5


def test_wrong_argument_type_on_first_call():
    x = ti.field(ti.i32, shape=2)

    @ti.kernel
    def first(a: ti.i32) -> ti.i32:
        return a

    with pytest.raises(TypeError) as ei:
        first(x)                                       # a field for a scalar argument
    assert isinstance(ei.value, ti.FluxionRuntimeTypeError)
    assert "'first'" in str(ei.value)
    assert first(4) == 4


def test_numeric_string_argument_is_rejected():
    @ti.kernel
    def first(a: ti.i32, b: ti.f32) -> ti.f32:
        return a + b

    with pytest.raises(TypeError):
        first("3", 0.5)
    with pytest.raises(TypeError):
        first(3, "0.5")


def test_wrong_argument_type_message_has_location():
    with pytest.raises(ti.FluxionRuntimeTypeError) as ei:
        two_args("seven", 1.0)
    assert_located(ei.value, "two_args", two_args, "def two_args(")


def test_missing_annotation():
    @ti.kernel
    def no_annotation(a):
        pass

    with pytest.raises(ti.FluxionTypeError) as ei:
        no_annotation(1)
    assert_located(ei.value, "no_annotation", no_annotation, "def no_annotation(")
    assert "'a'" in str(ei.value)


# -- names and indexing ---------------------------------------------------------------------
def test_undefined_name_golden_format():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def undefined():
        for i in x:
            x[i] = undefined_thing + 1  # noqa: F821

    with pytest.raises(ti.FluxionNameError) as ei:
        undefined()
    err = ei.value
    assert isinstance(err, NameError)
    assert isinstance(err, ti.FluxionCompilationError)
    lines = str(err).splitlines()
    # golden, the original system's layout: a blank line, the location (the frame names the
    # kernel), the source line as in the file, carets under the name, the message
    lineno, src = line_of(undefined, "undefined_thing + 1")
    col = src.index("undefined_thing")
    assert lines[0] == ""
    assert lines[1] == f'File "{THIS_FILE}", line {lineno}, in undefined:'
    assert lines[2] == src.rstrip()
    assert lines[3] == " " * col + "^" * len("undefined_thing")
    assert len(lines) == 5
    assert lines[4] == 'Name "undefined_thing" is not defined'


def test_compile_error_traceback_hides_compiler_frames():
    @ti.kernel
    def undefined2():
        y = another_undefined_thing  # noqa: F841,F821

    with pytest.raises(NameError) as ei:
        undefined2()
    frames = [f.filename for f in traceback.extract_tb(ei.value.__traceback__)]
    assert not any(os.sep + "frontend" + os.sep in f for f in frames), frames
    assert ei.value.__suppress_context__


def test_error_inside_ti_func_shows_call_site_and_func_line():
    x = ti.field(ti.i32, shape=4)

    @ti.func
    def helper(i):
        return x[i] + missing_in_func  # noqa: F821

    @ti.kernel
    def calls_helper():
        for i in x:
            x[i] = helper(i)

    with pytest.raises(NameError) as ei:
        calls_helper()
    msg = str(ei.value)
    assert first_frame(msg).endswith(", in calls_helper:")
    call_block = location_block(calls_helper, "x[i] = helper(i)", "helper(i)")
    func_block = location_block(helper, "missing_in_func", "missing_in_func")
    assert call_block in msg and func_block in msg
    assert msg.index(call_block) < msg.index(func_block)   # outermost first, like a traceback


def test_indexing_2d_field_with_one_index():
    m = ti.field(ti.f32, shape=(4, 4))

    @ti.kernel
    def one_index():
        for i in range(4):
            m[i] = 1.0

    with pytest.raises(ti.FluxionIndexError) as ei:
        one_index()
    assert isinstance(ei.value, IndexError)
    assert_located(ei.value, "one_index", one_index, "m[i] = 1.0", caret_text="m[i]")
    last = str(ei.value).splitlines()[-1]
    assert "2" in last and "1" in last                     # dimensions vs indices


def test_indexing_0d_field_without_none():
    s = ti.field(ti.f32, shape=())

    @ti.kernel
    def zero_d():
        s[0] = 1.0

    with pytest.raises(IndexError) as ei:
        zero_d()
    assert_located(ei.value, "zero_d", zero_d, "s[0] = 1.0")
    assert "None" in str(ei.value)


def test_indexing_with_a_float():
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def float_index(a: ti.f32):
        x[a] = 1.0

    with pytest.raises(TypeError) as ei:               # a TypeError, as in the original system
        float_index(1.0)
    assert isinstance(ei.value, ti.TaichiTypeError)
    assert "indices must be integers" in str(ei.value)
    assert_located(ei.value, "float_index", float_index, "x[a] = 1.0")


def test_calling_a_kernel_from_a_kernel():
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def callee():
        for i in x:
            x[i] = 1

    @ti.kernel
    def caller():
        callee()

    with pytest.raises(ti.FluxionError) as ei:
        caller()
    assert isinstance(ei.value, ti.FluxionCompilationError)
    assert_located(ei.value, "caller", caller, "callee()", caret_text="callee()")
    assert "'callee'" in str(ei.value)
    assert "ti.func" in str(ei.value)                       # says what to do instead


def test_taichi_exception_aliases():
    assert ti.TaichiCompilationError is ti.FluxionCompilationError
    assert ti.TaichiSyntaxError is ti.FluxionSyntaxError
    assert ti.TaichiNameError is ti.FluxionNameError
    assert ti.TaichiTypeError is ti.FluxionTypeError
    assert ti.TaichiIndexError is ti.FluxionIndexError
    for cls in (ti.FluxionCompilationError, ti.FluxionIndexError, ti.FluxionRuntimeError,
                ti.FluxionAssertionError):
        assert issubclass(cls, ti.FluxionError)
    assert issubclass(ti.FluxionNameError, NameError)
    assert issubclass(ti.FluxionTypeError, TypeError)
    assert issubclass(ti.FluxionIndexError, IndexError)
    assert issubclass(ti.FluxionAssertionError, AssertionError)


# -- out-of-bounds checks (ti.init(debug=True)) ----------------------------------------------
def test_debug_out_of_bounds_golden_and_memory_untouched():
    ti.init(arch=ti.cpu, debug=True)
    p = ti.field(ti.i32, shape=(4, 4), name="grid")
    guard = ti.field(ti.i32, shape=4, name="guard")
    p.fill(7)
    guard.fill(3)

    @ti.kernel
    def write(a: ti.i32, b: ti.i32):
        p[a, b] = 99

    write(1, 1)
    ref = np.full((4, 4), 7)
    ref[1, 1] = 99
    np.testing.assert_array_equal(p.to_numpy(), ref)
    # (0, 4) is out of bounds but its flat offset is a real cell, (1, 0): it must stay 7
    for a, b in [(0, 4), (-1, 0), (4, 0), (3, -1), (100000, 0)]:
        with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
            write(a, b)
        err = ei.value
        assert isinstance(err, IndexError) and isinstance(err, ti.FluxionError)
        # a failed check at run time, as the original system reports it
        assert isinstance(err, AssertionError) and isinstance(err, ti.TaichiRuntimeError)
        lines = str(err).splitlines()
        lineno, src = line_of(write, "p[a, b] = 99")
        assert lines[0] == "in kernel 'write':"
        assert lines[1] == f'File "{THIS_FILE}", line {lineno}, in write:'
        assert lines[2] == src.rstrip()
        assert lines[3] == " " * src.index("p[a, b]") + "^" * len("p[a, b]")
        assert lines[4].startswith("Out of bound access")
        assert f"({a}, {b})" in lines[4]                  # the index
        assert "'grid'" in lines[4]                        # the field
        assert "(4, 4)" in lines[4]                        # its shape
        np.testing.assert_array_equal(p.to_numpy(), ref)
        np.testing.assert_array_equal(guard.to_numpy(), np.full(4, 3))
    write(2, 3)                                            # the kernel works after an error
    ref[2, 3] = 99
    np.testing.assert_array_equal(p.to_numpy(), ref)


def test_debug_out_of_bounds_read_and_unnamed_field():
    ti.init(arch=ti.cpu, debug=True)
    z = ti.field(ti.f32, shape=8)
    out = ti.field(ti.f32, shape=())

    @ti.kernel
    def read(k: ti.i32):
        out[None] = z[k] + 1.0

    read(7)
    assert out[None] == 1.0
    with pytest.raises(IndexError) as ei:
        read(8)
    msg = str(ei.value)
    assert_located(ei.value, "read", read, "out[None] = z[k]", caret_text="z[k]")
    assert "'z'" in msg and "(8,)" in msg
    assert out[None] == 1.0


def test_debug_out_of_bounds_in_parallel_loop():
    ti.init(arch=ti.cpu, debug=True)
    c = ti.field(ti.f32, shape=8)

    @ti.kernel
    def overrun():
        for i in range(10):
            c[i] = 2.0

    with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
        overrun()
    assert_located(ei.value, "overrun", overrun, "c[i] = 2.0", caret_text="c[i]")
    last = str(ei.value).splitlines()[-1]
    assert "(8,)" in last or "(9,)" in last                  # one of the bad indices


def test_debug_out_of_bounds_respects_offsets():
    ti.init(arch=ti.cpu, debug=True)
    o = ti.field(ti.i32, shape=5, offset=(-2,))

    @ti.kernel
    def put(k: ti.i32):
        o[k] = k

    for k in range(-2, 3):
        put(k)
    np.testing.assert_array_equal(o.to_numpy(), np.arange(-2, 3))
    for bad in (-3, 3):
        with pytest.raises(IndexError) as ei:
            put(bad)
        assert f"({bad},)" in str(ei.value) and "(-2,)" in str(ei.value)
    np.testing.assert_array_equal(o.to_numpy(), np.arange(-2, 3))


def test_debug_out_of_bounds_names_the_field_as_written_in_the_kernel():
    ti.init(arch=ti.cpu, debug=True)
    c = ti.field(ti.f32, shape=8)

    @ti.kernel
    def twice(q: ti.template()):
        for i in q:
            q[i] = q[i] * 2

    @ti.kernel
    def wr(k: ti.i32):
        c[k] = 1

    twice(c)
    with pytest.raises(IndexError) as ei:
        wr(9)
    assert "field 'c'" in str(ei.value)


def test_debug_assert_raises_assertion_error():
    ti.init(arch=ti.cpu, debug=True)

    @ti.kernel
    def check(a: ti.i32):
        assert a < 3, "a too big"

    check(2)
    with pytest.raises(AssertionError) as ei:
        check(5)
    assert isinstance(ei.value, ti.FluxionAssertionError)
    assert_located(ei.value, "check", check, "assert a < 3")
    assert "a too big" in str(ei.value)


@pytest.mark.cpu_only
def test_bounds_checks_on_request(capsys):
    """Every field access is checked with check_out_of_bound=True or debug=True (an index past
    the end is an error naming the kernel, not a store into other memory); by default only
    writes are (runtime/program.py: DEFAULT_ACCESS_CHECKS says why; passes/write_checks.py),
    and check_out_of_bound=False checks nothing."""
    ti.init(arch=ti.cpu, print_ir=True, check_out_of_bound=False)
    z = ti.field(ti.i32, shape=8)

    @ti.kernel
    def write(k: ti.i32):
        z[k] = 1

    capsys.readouterr()
    write(3)                               # in bounds: we never run out-of-bounds code (UB)
    ir = capsys.readouterr().out
    assert "global_store" in ir
    assert "assert" not in ir
    assert z[3] == 1
    ti.init(arch=ti.cpu, print_ir=True)
    z = ti.field(ti.i32, shape=8)

    @ti.kernel
    def read(k: ti.i32) -> ti.i32:
        return z[k]

    capsys.readouterr()
    assert read(3) == 0
    assert "assert" not in capsys.readouterr().out
    for opts in ({"debug": True}, {"check_out_of_bound": True}):
        ti.init(arch=ti.cpu, print_ir=True, **opts)
        z = ti.field(ti.i32, shape=8)

        @ti.kernel
        def write2(k: ti.i32):
            z[k] = 1

        capsys.readouterr()
        write2(3)
        assert "assert" in capsys.readouterr().out, opts
        with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
            write2(8)
        assert "write2" in str(ei.value) and "(8,)" in str(ei.value)
        np.testing.assert_array_equal(z.to_numpy(), [0, 0, 0, 1, 0, 0, 0, 0])


def test_python_scope_out_of_bounds_always_checked():
    x = ti.field(ti.i32, shape=(2, 3), name="small")
    with pytest.raises(ti.FluxionOutOfBoundsError) as ei:
        x[2, 0] = 1
    assert "'small'" in str(ei.value) and "(2, 0)" in str(ei.value) and "(2, 3)" in str(ei.value)
    np.testing.assert_array_equal(x.to_numpy(), np.zeros((2, 3)))


# -- the layout of the location (the original system's) --------------------------------------
def test_a_compound_statement_shows_its_header_only():
    @ti.kernel
    def stepped():
        for i in range(1, 9, 2):
            a = 1  # noqa: F841
            b = 2  # noqa: F841

    with pytest.raises(ti.TaichiSyntaxError) as ei:
        stepped()
    lineno, src = line_of(stepped, "for i in range(1, 9, 2):")
    indent = len(src) - len(src.lstrip())
    # the exact message the original system gives, which its tests compare whole
    assert str(ei.value) == (f'\nFile "{THIS_FILE}", line {lineno}, in stepped:\n{src}\n'
                             f'{" " * indent}{"^" * len(src.strip())}\n'
                             f"Range should have 1 or 2 arguments, found 3")


def test_a_long_line_is_shown_in_pieces_with_the_carets_under_each():
    @ti.kernel
    def long_name():
        a_name_so_long_that_the_line_holding_it_runs_past_eighty_columns_of_text_by_far_xx(1)  # noqa: F821,E501

    with pytest.raises(ti.TaichiNameError) as ei:
        long_name()
    lines = str(ei.value).splitlines()
    _, src = line_of(long_name, "a_name_so_long")
    assert len(src.rstrip()) > 80
    code, carets = lines[2::2][:2], lines[3::2][:2]
    assert "".join(code) == src.rstrip()[:len("".join(code))]
    assert all(len(c) <= 80 for c in code)
    # each caret row lies under its piece of the name
    for c, h in zip(code, carets):
        assert set(h.strip()) == {"^"} and len(h) <= len(c)
    assert lines[-1] == ('Name "a_name_so_long_that_the_line_holding_it_runs_past_eighty_columns_'
                         'of_text_by_far_xx" is not defined')


def test_tabs_are_shown_as_four_columns(tmp_path):
    import importlib.util
    path = tmp_path / "tab_kernel_module.py"
    path.write_text("import fluxion as ti\n\n\n@ti.kernel\ndef tabbed():\n    a(11,\t22,\t3)\n")
    spec = importlib.util.spec_from_file_location("tab_kernel_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(ti.TaichiNameError) as ei:
        mod.tabbed()
    lines = str(ei.value).splitlines()
    assert lines[2] == "    a(11,\t22,\t3)".expandtabs(4)
    assert lines[3] == "    ^"


def test_a_kernel_without_source_says_so_without_the_caches_exception():
    # (a kernel defined by exec has no file; the offline cache's key gives up on it first,
    # and the error shown must be the kernel's, not one raised while handling the cache's)
    import fluxion as ti
    ti.init(arch=ti.cpu)
    ns = {"ti": ti}
    exec("@ti.kernel\ndef k() -> ti.i32:\n    return 1\n", ns)
    with pytest.raises(OSError, match="must be defined in a file") as info:
        ns["k"]()
    seen = info.value
    while seen is not None:
        assert "Uncacheable" not in type(seen).__name__
        seen = seen.__context__
