"""A kernel's source is read from its code object's line positions (frontend/source.py:
_definition_lines), not by tokenizing its file: it must be what inspect.getsourcelines
reads, for every shape of definition whose last lines hold no instruction, and where it
cannot tell, inspect must answer."""
import inspect
import textwrap
import types

import pytest

import fluxion as ti
from fluxion.frontend import source

CASES = {
    "plain": '''
        def f(a):
            b = a + 1
            return b
    ''',
    "decorated, signature over lines": '''
        @staticmethod
        @property
        def f(a,
              b: int = 3,
              *c):
            return a
    ''',
    "trailing pass": '''
        def f(a):
            if a:
                a = 1
            else:
                pass
    ''',
    "trailing string and ellipsis": '''
        def f(a):
            a = 1
            """a string"""
            ...
    ''',
    "trailing comments, a blank line, then the next statement": '''
        def f(a):
            a = 1
            # inside

            # still inside
        x = 1
    ''',
    # (these two start at column 0: a line of theirs does, so dedent could not align them)
    "a comment at column 0 inside": '''
def f(a):
    a = 1
# odd, but inside
    a = 2
''',
    "nested functions and a lambda last": '''
        def f(a):
            def g(b):
                def h():
                    pass
                return h
            k = lambda: (1,
                         2)
    ''',
    "a multi-line string reaching column 0 last": '''
def f(a):
    a = 1
    s = """
text at column 0
"""
''',
    "a global declaration last": '''
        def f(a):
            a = 1
            global zz
    ''',
}


def _functions(text, tmp_path, name):
    path = tmp_path / f"{name.replace(' ', '_').replace(',', '')}.py"
    path.write_text(textwrap.dedent(text))
    code = compile(path.read_text(), str(path), "exec")
    out = []
    todo = [code]
    while todo:
        c = todo.pop()
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        if c.co_flags & inspect.CO_OPTIMIZED and not c.co_name.startswith("<"):
            cells = tuple(types.CellType() for _ in c.co_freevars)
            out.append((types.FunctionType(c, {}, None, None, cells), str(path)))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_definitions_read_as_inspect_reads_them(name, tmp_path):
    for fn, path in _functions(CASES[name], tmp_path, name):
        want = inspect.getsourcelines(fn.__code__)
        got = source._definition_lines(fn, path)
        assert got is not None and source._parse(got[0]) is not None, fn.__name__
        assert (got[0], got[1]) == (want[0], want[1]), fn.__name__


def test_a_definition_cut_short_is_left_to_inspect(tmp_path):
    # lines that do not parse as one definition (a block with nothing in it) are refused
    assert source._parse(["def f(a):\n", "    if a:\n"]) is None
    assert source._parse(["def f():\n", "    pass\n", "def g():\n", "    pass\n"]) is None


def test_a_kernel_whose_last_statement_is_pass_compiles_whole():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            if i % 2:
                x[i] = i
            else:
                pass

    k()
    assert x.to_numpy().tolist() == [0, 1, 0, 3]
    assert k.source().text.rstrip().endswith("pass")
