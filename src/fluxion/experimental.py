"""`ti.experimental`: what the original system kept there; `real_func` has left it."""
import warnings

from fluxion.lang.real_func import real_func as _real_func


def real_func(func):
    """Deprecated: `ti.real_func` (the original's warning, then the same decorator)."""
    warnings.warn("ti.experimental.real_func is deprecated because it is no longer experimental. "
                  "Use ti.real_func instead.", DeprecationWarning, stacklevel=2)
    return _real_func(func)


__all__ = ["real_func"]
