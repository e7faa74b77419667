"""Source of a decorated function: its AST, file and line numbers, for compiling and errors."""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types


class SourceLoc:
    __slots__ = ("file", "line", "col", "end_line", "end_col", "func", "source_line",
                 "header_end")

    def __init__(self, file, line, col, end_line, end_col, func, source_line, header_end=None):
        self.file, self.line, self.col = file, line, col
        self.end_line, self.end_col = end_line, end_col
        self.func, self.source_line = func, source_line
        # a compound statement (`for`, `if`, ...): the last line of its header; errors show
        # the header, not the body
        self.header_end = header_end

    def __repr__(self):
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


def _definition_lines(func, file):
    """(lines, first line number) of `func`'s definition, decorators included, as
    inspect.getsourcelines gives them, found from its code object instead of by tokenizing
    the file (tokenize compiles its regular expressions on first use: about 5 ms of a
    process's first kernel, when the kernels themselves come from the offline cache). The
    definition runs from the code's first line (the first decorator's) to the last line any
    of its instructions, or its nested functions', come from, then on over the lines
    indented deeper than the `def` (a trailing `pass` or string has no instruction, and
    inspect keeps a block's trailing comments), up to the last such line that is not blank.
    None where that is not a definition read whole (the caller then asks inspect)."""
    code = getattr(func, "__code__", None)
    if code is None or hasattr(func, "__wrapped__"):
        return None     # (inspect reads the function that a functools.wraps wrapper wraps)
    lines = linecache.getlines(file, getattr(func, "__globals__", None))
    first = code.co_firstlineno
    if not lines or first > len(lines):
        return None
    last = first
    todo = [code]
    while todo:
        c = todo.pop()
        for pos in c.co_positions():
            if pos[1] is not None and pos[1] > last:
                last = pos[1]
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip())
    end = last
    for n in range(last, len(lines)):
        text = lines[n]
        stripped = text.strip()
        deeper = len(text) - len(text.lstrip()) > indent
        if not stripped or (stripped.startswith("#") and not deeper):
            continue        # (a comment does not end a block; inspect keeps one inside it)
        if not deeper:
            break
        end = n + 1
    return lines[first - 1:end], first


def _parse(lines):
    """The function definition that `lines` hold, or None where they do not parse as one
    statement (cut short: the caller then reads them by inspect)."""
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    return tree.body[0] if len(tree.body) == 1 else None


class SourceInfo:
    """The function's AST with line/column numbers mapped back to its file."""

    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self._locs = {}
        try:
            self.file = inspect.getsourcefile(func) or "<unknown>"
            got = _definition_lines(func, self.file)
            fdef = got and _parse(got[0])
            if fdef is None:
                got = inspect.getsourcelines(func)
                fdef = _parse(got[0])
        except (OSError, TypeError) as e:
            raise OSError(f"cannot read the source of {self.name!r}: kernels and functions must "
                          f"be defined in a file (or a notebook cell)") from e
        lines, first = got
        self.text = "".join(lines)  # what is compiled (the offline cache keys it)
        self.col_shift = len(lines[0]) - len(lines[0].lstrip())
        self.first_line = first
        if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TypeError(f"{self.name!r} is not a function definition")
        self.tree = fdef

    def loc(self, node):
        # a node's location, made once: an unrolled loop (`ti.static`) and the function's
        # every compile visit the same nodes again (the MLS-MPM substep asks ~1,200 times
        # for ~250 nodes). Keyed by the node itself, which the dict keeps alive, so an id is
        # never reused by another node.
        loc = self._locs.get(node)
        if loc is None:
            loc = self._locs[node] = self._loc(node)
        return loc

    def _loc(self, node):
        if not hasattr(node, "lineno"):
            return None
        line = node.lineno + self.first_line - 1
        end_line = getattr(node, "end_lineno", node.lineno) + self.first_line - 1
        src = linecache.getline(self.file, line) or None
        col = node.col_offset + self.col_shift
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None:
            end_col += self.col_shift
        header_end = None
        body = getattr(node, "body", None)
        if isinstance(node, ast.stmt) and isinstance(body, list) and body:
            header_end = max(body[0].lineno - 1, node.lineno) + self.first_line - 1
        return SourceLoc(self.file, line, col, end_line, end_col, self.name, src, header_end)
