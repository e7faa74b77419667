"""User-facing exceptions. Each names the kernel and shows the user's file, line and source line.

The classes also derive from the matching builtin (`FluxionNameError` is a `NameError`), so
`except TypeError` in user code keeps working.
"""


class FluxionError(Exception):
    pass


class FluxionCompilationError(FluxionError):
    pass


class FluxionSyntaxError(FluxionCompilationError):
    pass


class FluxionNameError(FluxionCompilationError, NameError):
    pass


class FluxionTypeError(FluxionCompilationError, TypeError):
    pass


class FluxionIndexError(FluxionError, IndexError):
    pass


class FluxionRuntimeError(FluxionError, RuntimeError):
    pass


class FluxionAssertionError(FluxionRuntimeError, AssertionError):
    pass


class FluxionRuntimeTypeError(FluxionRuntimeError, TypeError):
    """A value of the wrong type met at run time (the original's TaichiRuntimeTypeError)."""


class FluxionArgumentError(FluxionTypeError, FluxionRuntimeTypeError):
    """A kernel launched with an argument its parameter cannot take: a FluxionTypeError (as
    fluxion always raised it) and the original system's TaichiRuntimeTypeError."""


class FluxionArgumentValueError(FluxionArgumentError, ValueError):
    """An array argument of the wrong shape (dimensions, element shape): also a ValueError,
    as in the original system."""


class FluxionOutOfBoundsError(FluxionIndexError, FluxionAssertionError):
    """An index outside a field or array: an IndexError, and the AssertionError (a
    RuntimeError) the original system raises for it in debug mode."""


class FluxionZeroDivisionError(FluxionRuntimeError, ZeroDivisionError):
    """Integer `//` or `%` by zero in a kernel built with ti.init(debug=True)."""


class FluxionInternalError(FluxionError):
    """A compiler bug, not a user mistake."""


def format_location(loc, message):
    """`File "...", line N, in kernel:` + the source line + carets + message."""
    if loc is None:
        return message
    lines = [f'File "{loc.file}", line {loc.line}, in {loc.func}:']
    if loc.source_line is not None:
        text = loc.source_line.rstrip("\n")
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        lines.append("    " + stripped)
        if loc.col is not None:
            start = max(loc.col - indent, 0)
            end = loc.end_col - indent if loc.end_col and loc.end_line == loc.line else len(stripped)
            lines.append("    " + " " * start + "^" * max(end - start, 1))
    lines.append(message)
    return "\n".join(lines)
