"""Source of a decorated function: its AST, file and line numbers, for compiling and errors."""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap


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


class SourceInfo:
    """The function's AST with line/column numbers mapped back to its file."""

    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self._locs = {}
        try:
            self.file = inspect.getsourcefile(func) or "<unknown>"
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError) as e:
            raise OSError(f"cannot read the source of {self.name!r}: kernels and functions must "
                          f"be defined in a file (or a notebook cell)") from e
        src = "".join(lines)
        self.text = src             # what is compiled (the offline cache keys it)
        dedented = textwrap.dedent(src)
        self.col_shift = len(lines[0]) - len(lines[0].lstrip())
        self.first_line = first
        tree = ast.parse(dedented)
        fdef = tree.body[0]
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
