"""The original system's checks: each program of taichi_check_cases.py that it rejects, fluxion
rejects with the same exception classes and words (in messages that also name the kernel, the
file and the line), and each near-identical program it accepts, fluxion accepts and computes
the same.

With taichi installed, test_the_original_system_agrees runs the same cases with it: what is
marked rejected it rejects (with those words), and what is marked accepted it accepts with the
same value, so no check here rejects a program the original system runs.
"""
import builtins
import json
import os
import subprocess
import sys

import pytest

import fluxion as ti

import taichi_check_cases as cases

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = sorted(cases.EXPECT)


def classes_of(module, names):
    return tuple(getattr(module, n, None) or getattr(builtins, n) for n in names)


@pytest.mark.parametrize("name", NAMES)
def test_fluxion(name):
    opts = cases.INIT.get(name)
    if opts:
        ti.init(arch=ti.cpu, **opts)
    fn = getattr(cases, name)
    expect = cases.EXPECT[name]
    if expect[0] == "ok":
        value = fn(ti)
        if expect[1] is not None:
            assert value == pytest.approx(expect[1])
        return
    _, names, match = expect
    classes = classes_of(ti, names)
    with pytest.raises(classes[0], match=match) as ei:
        fn(ti)
    for cls in classes[1:]:
        assert isinstance(ei.value, cls), type(ei.value).__mro__


def test_compile_errors_show_the_failing_line():
    # the message of a compile-time error starts with its location, as the original system's
    with pytest.raises(ti.TaichiSyntaxError) as ei:
        cases.assign_to_kernel_argument(ti)
    msg = str(ei.value)
    lines = msg.splitlines()
    assert lines[0] == ""
    assert lines[1].startswith(f'File "{cases.__file__}"') and lines[1].endswith(", in k:")
    assert lines[2].strip() == "a = a * 2"
    assert set(lines[3].strip()) == {"^"}


_RUNNER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import taichi as ti
import taichi_check_cases as cases
out = {}
for name in sorted(cases.EXPECT):
    ti.init(arch=ti.cpu, offline_cache=False, **cases.INIT.get(name, {}))
    try:
        v = getattr(cases, name)(ti)
        out[name] = ["ok", v if isinstance(v, (int, float, type(None))) else repr(v)]
    except Exception as e:
        out[name] = ["raises", [c.__name__ for c in type(e).__mro__], str(e)]
print("@@" + json.dumps(out))
"""


@pytest.mark.cpu_only
def test_the_original_system_agrees():
    pytest.importorskip("taichi")
    env = dict(os.environ, TI_LOG_LEVEL="error")
    p = subprocess.run([sys.executable, "-c", _RUNNER, HERE], capture_output=True, text=True,
                       env=env, timeout=600)
    line = next((x for x in p.stdout.splitlines() if x.startswith("@@")), None)
    assert line is not None, p.stderr[-3000:]
    got = json.loads(line[2:])
    import re
    wrong = []
    for name in NAMES:
        expect, (kind, *rest) = cases.EXPECT[name], got[name]
        if expect[0] == "ok":
            if kind != "ok" or (expect[1] is not None and rest[0] != pytest.approx(expect[1])):
                wrong.append((name, got[name]))
        else:
            mro = rest[0] if kind == "raises" else []
            if kind != "raises" or not all(n in mro for n in expect[1]) or \
                    not re.search(expect[2], rest[1]):
                wrong.append((name, got[name]))
    assert not wrong, wrong
