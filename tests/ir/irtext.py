"""Helpers of the IR-text tests: the round trip of one kernel's IR (print -> parse -> print,
plus a structural comparison of the parsed IR with the original, which the text alone could
not show: a field the printer leaves out would print alike on both sides), and a hook that
applies it to every stage the pass pipeline reaches."""
from __future__ import annotations

import contextlib
import math

from fluxion.ir import stmts as S
from fluxion.ir.parser import parse_kernel
from fluxion.ir.printer import print_kernel


class Mismatch(AssertionError):
    pass


def _same_value(x, y, m, where):
    if isinstance(x, (S.Stmt, S.Function)):
        if m.get(id(x)) is not y:
            raise Mismatch(f"{where}: refers to another statement / function")
        return
    if isinstance(x, (list, tuple)):
        if not isinstance(y, (list, tuple)) or len(x) != len(y):
            raise Mismatch(f"{where}: {x!r} != {y!r}")
        for k, (a, b) in enumerate(zip(x, y)):
            _same_value(a, b, m, f"{where}[{k}]")
        return
    if isinstance(x, (bool, int, float, str)) or x is None:
        if type(x) is not type(y) or not (x == y or (isinstance(x, float) and math.isnan(x)
                                                     and math.isnan(y))):
            raise Mismatch(f"{where}: {x!r} ({type(x).__name__}) != {y!r} ({type(y).__name__})")
        return
    if x is not y:      # data types, places, array arguments: the same objects
        raise Mismatch(f"{where}: {x!r} is not {y!r}")


def _pair(a, b, m, pairs, where):
    if len(a.stmts) != len(b.stmts):
        raise Mismatch(f"{where}: {len(a.stmts)} statements != {len(b.stmts)}")
    if len(a.stop_gradients) != len(b.stop_gradients) or any(
            x is not y for x, y in zip(a.stop_gradients, b.stop_gradients)):
        raise Mismatch(f"{where}: stop_gradients differ")
    for k, (x, y) in enumerate(zip(a.stmts, b.stmts)):
        w = f"{where}.{k}:{type(x).__name__}"
        if type(x) is not type(y):
            raise Mismatch(f"{w}: parsed as {type(y).__name__}")
        if y.parent is not b:
            raise Mismatch(f"{w}: wrong parent block")
        m[id(x)] = y
        pairs.append((x, y, w))
        for name in x.BLOCKS:
            bx, by = getattr(x, name), getattr(y, name)
            if bx is None or by is None:
                if (bx is None) != (by is None) and len(bx or by) != 0:
                    raise Mismatch(f"{w}.{name}: present on one side only")
                continue
            if by.parent_stmt is not y:
                raise Mismatch(f"{w}.{name}: wrong parent statement")
            _pair(bx, by, m, pairs, f"{w}.{name}")


def assert_same_ir(a, b):
    """Kernel `b` is `a` statement for statement (classes, types, operands, attributes, blocks,
    locations as printed) with its functions, tasks and what passes recorded on the kernel."""
    m, pairs = {}, []
    if a.name != b.name or list(a.arg_types) != list(b.arg_types) or \
            list(a.ret_types or ()) != list(b.ret_types or ()):
        raise Mismatch(f"kernel header: {a.name} {a.arg_types} {a.ret_types} != "
                       f"{b.name} {b.arg_types} {b.ret_types}")
    if len(a.functions) != len(b.functions):
        raise Mismatch("number of functions")
    for fa, fb in zip(a.functions, b.functions):
        m[id(fa)] = fb
        if (fa.name, fa.param_types, fa.ref_params, fa.ret_types, repr(fa.loc)) != \
                (fb.name, fb.param_types, fb.ref_params, fb.ret_types, repr(fb.loc)):
            raise Mismatch(f"function header {fa.name}")
    _pair(a.body, b.body, m, pairs, "body")
    for k, (fa, fb) in enumerate(zip(a.functions, b.functions)):
        _pair(fa.body, fb.body, m, pairs, f"function{k}")
    for x, y, w in pairs:
        _same_value(x.ret_type, y.ret_type, m, f"{w}.ret_type")
        if repr(x.loc) != repr(y.loc):
            raise Mismatch(f"{w}.loc: {x.loc!r} != {y.loc!r}")
        for name in x.OPERANDS + x.ATTRS:
            _same_value(getattr(x, name), getattr(y, name), m, f"{w}.{name}")
    if (a.tasks is None) != (b.tasks is None):
        raise Mismatch("tasks: offloaded on one side only")
    for k, (ta, tb) in enumerate(zip(a.tasks or (), b.tasks or ())):
        if ta[0] != tb[0]:
            raise Mismatch(f"task {k}: {ta[0]} != {tb[0]}")
        _same_value(ta[1], tb[1], m, f"task {k}")
    if len(a.tasks or ()) != len(b.tasks or ()):
        raise Mismatch("number of tasks")
    for attr in ("private_copies", "private_threads", "private_arrays", "private_trips",
                 "private_fields"):
        _same_value(getattr(a, attr), getattr(b, attr), m, attr)
    if getattr(a, "tape_log_capacity", None) != getattr(b, "tape_log_capacity", None):
        raise Mismatch("tape_log_capacity")


def roundtrip(kernel, text=None, env=None):
    """Print `kernel` (or take its `text`, printed with `env`), parse the text back, check
    the parsed IR is the same and prints the same; returns the text."""
    if text is None:
        env = {}
        text = print_kernel(kernel, env)
    parsed = parse_kernel(text, env)
    again = print_kernel(parsed, dict(env))
    if again != text:
        import difflib
        diff = "\n".join(difflib.unified_diff(text.splitlines(), again.splitlines(),
                                              "printed", "reprinted", lineterm=""))
        raise Mismatch(f"print -> parse -> print changed the text:\n{diff}")
    try:
        assert_same_ir(kernel, parsed)
    except Mismatch as e:
        raise Mismatch(f"{e}\n--- text ---\n{text}") from None
    return text


@contextlib.contextmanager
def checking_every_stage(monkeypatch):
    """Within: every kernel the pipeline compiles is round-tripped from the frontend on and
    after each pass (the pipeline prints each stage when `ti.init(print_ir=True)`), and so is
    what the frontend made, struct-fors included, before the driver lowers them. Yields the
    list of (kernel name, text) checked."""
    from fluxion.passes import lower_struct_for, pipeline
    seen = []

    done = set()

    def check(kernel):
        env = {}
        text = print_kernel(kernel, env)
        if (id(kernel), text) not in done:    # a pass that changed nothing: checked already
            roundtrip(kernel, text, env)
            done.add((id(kernel), text))
        seen.append((kernel.name, text))
        return text

    lower = lower_struct_for.run

    def lower_checked(kernel, cfg):
        check(kernel)
        return lower(kernel, cfg)

    monkeypatch.setattr(pipeline, "print_kernel", check)
    monkeypatch.setattr(lower_struct_for, "run", lower_checked)
    yield seen


def check_pass(run, before, after, env, cfg=None, changed=True):
    """Run one pass (`run(kernel, cfg)`) on the kernel that the IR text `before` describes and
    compare the result with the IR text `after`: both printed by the printer, so the
    comparison ignores naming ($N), indentation width and comments but nothing else (every
    statement, type, operand and attribute counts). The pass must report `changed`, and its
    result must pass the verifier. Returns the kernel after the pass.

    A whole-text comparison rather than FileCheck patterns: every statement of the result is
    written out, so nothing a pass adds or leaves behind goes unnoticed, and the expected text
    is itself IR that must parse (a typo in it is an error, not a pattern that never matches).
    The printer's renumbering does what FileCheck's variables would."""
    from fluxion.passes import verify
    kernel = parse_kernel(before, env)
    result = run(kernel, cfg)
    verify.run(kernel, after="the pass under test")
    got = print_kernel(kernel, dict(env))
    full_env = dict(env)
    for f in kernel.private_fields:          # hidden fields a pass made
        full_env.setdefault(repr(f.places[0]), f)
    for k, r in enumerate(getattr(kernel, "scratch", ())):   # scratch buffers a pass requested,
        full_env.setdefault("scratch" if k == 0 else f"scratch#{k + 1}", r)   # named as printed
    want = print_kernel(parse_kernel(after, full_env), dict(full_env))
    if got != want:
        import difflib
        diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "expected",
                                              "got", lineterm=""))
        raise AssertionError(f"the pass made other IR than expected:\n{diff}")
    assert result is changed, f"the pass reported changed={result!r}, expected {changed!r}"
    roundtrip(kernel)
    return kernel
