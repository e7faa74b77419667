"""Logging levels, as the original system names them: `ti.set_logging_level(ti.WARN)`,
`ti.init(log_level=ti.DEBUG)`, `ti.is_logging_effective("info")`.

fluxion reports through Python's `warnings` and exceptions; the level decides which of the
messages of `fluxion._logging.debug/info/warn/...` (and so of fluxion's own informational
output) are printed, like the original's logger."""
from __future__ import annotations

import sys

TRACE = "trace"
DEBUG = "debug"
INFO = "info"
WARN = "warn"
ERROR = "error"
CRITICAL = "critical"

supported_log_levels = [DEBUG, TRACE, INFO, WARN, ERROR, CRITICAL]
_RANK = {TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, "warning": 3, ERROR: 4, CRITICAL: 5, "off": 6}

_level = [INFO]


def _rank(level):
    try:
        return _RANK[str(level).lower()]
    except KeyError:
        raise ValueError(f"unknown logging level {level!r}: one of "
                         f"{', '.join(supported_log_levels)}") from None


def set_logging_level(level):
    """Messages of this level and above are printed ('trace' < 'debug' < 'info' < 'warn' <
    'error' < 'critical')."""
    _rank(level)
    _level[0] = str(level).lower()


def is_logging_effective(level):
    """Whether messages of `level` are printed at the current logging level."""
    return _rank(level) >= _rank(_level[0])


def _logger(level):
    def log(msg, *args, **kwargs):
        if is_logging_effective(level):
            text = msg.format(*args, **kwargs) if args or kwargs else msg
            print(f"[fluxion:{level}] {text}", file=sys.stderr)
    log.__name__ = level
    return log


trace = _logger(TRACE)
debug = _logger(DEBUG)
info = _logger(INFO)
warn = _logger(WARN)
error = _logger(ERROR)
critical = _logger(CRITICAL)
