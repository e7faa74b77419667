"""User-facing exceptions. Each names the kernel and shows the user's file, line and source line.

The hierarchy is the original system's, so that `except`/`pytest.raises` written for it work
here: compile-time errors are `FluxionCompilationError`s and also the matching builtin
(`FluxionNameError` is a `NameError`, `FluxionSyntaxError` a `SyntaxError`); run-time errors
are `FluxionRuntimeError`s (`RuntimeError`), failed checks in a kernel `FluxionAssertionError`s.
"""

import linecache


class FluxionError(Exception):
    pass


class FluxionCompilationError(FluxionError):
    pass


class FluxionSyntaxError(FluxionCompilationError, SyntaxError):
    pass


class FluxionNameError(FluxionCompilationError, NameError):
    pass


class FluxionTypeError(FluxionCompilationError, TypeError):
    pass


class FluxionSignatureError(FluxionSyntaxError, FluxionTypeError):
    """Arguments that do not fit a kernel's or ti.func's parameters (too many, missing, an
    unknown keyword), or a parameter with an invalid annotation: a `SyntaxError` as in the
    original system, and a `TypeError` as Python says of a bad call."""


class FluxionIndexError(FluxionCompilationError, IndexError):
    """A wrong number or kind of indices, found before anything runs."""


class FluxionIndexCountError(FluxionIndexError, AssertionError):
    """A field indexed from Python with the wrong number of indices: an `AssertionError` too,
    which is what the original raises there."""


class FluxionRuntimeError(FluxionError, RuntimeError):
    pass


class FluxionRuntimeTypeError(FluxionRuntimeError, TypeError):
    """A launch argument that cannot be converted to its parameter's type."""


class FluxionArgumentError(FluxionRuntimeTypeError, ValueError):
    """An array passed to a kernel whose dimensions, element shape or element type do not fit
    its parameter (the original system raises ValueError or TypeError, depending)."""


class FluxionAssertionError(FluxionRuntimeError, AssertionError):
    pass


class FluxionOutOfBoundsError(FluxionAssertionError, IndexError):
    """An index outside a field or array: in a kernel built with ti.init(debug=True) (the
    original system reports it as a failed assertion), or in Python scope."""


class FluxionZeroDivisionError(FluxionRuntimeError, ZeroDivisionError):
    """Integer `//` or `%` by zero in a kernel built with ti.init(debug=True)."""


class FluxionInternalError(FluxionError):
    """A compiler bug, not a user mistake."""


_WIDTH = 80     # source lines longer than this are shown in pieces, carets under each


def _char_col(line, col):
    """The character index of UTF-8 byte offset `col` of `line` (what the ast reports)."""
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _shown(line, start, end):
    """`line` with tabs expanded and a caret line under characters [start, end)."""
    shown = line.expandtabs(4)
    a = len(line[:start].expandtabs(4))
    b = len(line[:end].expandtabs(4))
    carets = " " * a + "^" * max(b - a, 1 if end > start else 0)
    out = []
    k = 0
    while True:
        # pieces of at most _WIDTH columns, cut after a space where one is (a single word
        # longer than that is cut anywhere); the carets are cut at the same places
        cut = len(shown)
        if cut - k > _WIDTH:
            cut = k + _WIDTH
            space = shown.rfind(" ", k, cut + 1)
            if space > k and shown[k:space].strip():
                cut = space + 1
        code, hint = shown[k:cut].rstrip(), carets[k:cut].rstrip()
        out.append(code)
        if hint:
            out.append(hint)
        k = cut
        while k < len(shown) and shown[k] == " ":
            k += 1
        if k >= len(shown):
            return out


def _span_lines(loc):
    """The source lines of `loc`'s node, each followed by carets under the node's part of it:
    the whole node on one line; for a node over several lines, each of its lines (only the
    header of a compound statement such as `for`)."""
    first, last = loc.line, loc.end_line or loc.line
    if loc.header_end is not None:
        last = loc.header_end
    out = []
    for n in range(first, last + 1):
        text = loc.source_line if n == first and loc.source_line is not None else \
            linecache.getline(loc.file, n)
        text = text.rstrip("\n")
        if not text and n != first:
            continue
        lead = len(text) - len(text.lstrip())
        trail = len(text.rstrip())
        start = _char_col(text, loc.col) if n == first and loc.col is not None else lead
        if n == loc.end_line and loc.end_col is not None and loc.header_end is None:
            end = _char_col(text, loc.end_col)
        else:
            end = trail
        out.extend(_shown(text, start, end))
    return out


def format_frame(loc):
    """`File "...", line N, in name:` + the node's source line(s) + carets, as the original
    system prints a kernel's frames (no trailing newline)."""
    lines = [f'File "{loc.file}", line {loc.line}, in {loc.func}:']
    if loc.source_line is not None:
        lines.extend(_span_lines(loc))
    return "\n".join(lines)


def format_location(loc, message, call_stack=()):
    """The location block of an error and its message: one frame per ti.func call site (the
    kernel's first, as in a traceback), then the failing node's frame, then `message`."""
    if loc is None:
        return message
    frames = [format_frame(c) for c in call_stack if c is not None] + [format_frame(loc)]
    return "\n".join(frames) + "\n" + message


def located_error(cls, loc, message, call_stack=()):
    """A compile-time error: the message starts with a newline and the frames, as the original
    system's do (`str(e)` is what tests match)."""
    err = cls("\n" + format_location(loc, message, call_stack))
    err._located = True
    return err
