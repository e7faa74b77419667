"""What `@ti.kernel` and `@ti.func` share: the decorated function's source, signature,
annotations and argument binding (with the original system's errors), and `@ti.func` itself
(inlined by the frontend; a plain Python call outside kernels). Kernels are in
lang/kernel.py; `ti.template()` and `ti.loop_config`, which the frontend reads, are
frontend/builtins.py's.
"""
from __future__ import annotations

import functools
import inspect

from fluxion.frontend.builtins import is_template
from fluxion.frontend.places import FuncBase
from fluxion.frontend.source import SourceInfo
from fluxion.frontend.struct import _BoundMethod, StructType
from fluxion.ir import builder
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSignatureError, format_location
from fluxion.lang.argpack import ArgPackType
from fluxion.lang.matrix import MatrixType
from fluxion.lang.ndarray import NdarrayType


def _globals_of(func):
    g = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                g[name] = cell.cell_contents
            except ValueError:
                pass
    return g


class _Decorated:
    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func
        self.name = func.__name__
        self._src = None
        self._sig = inspect.signature(func)
        self._hints = None

    def source(self):
        if self._src is None:
            self._src = SourceInfo(self.func)
        return self._src

    def signature(self):
        return self._sig

    def params(self):
        return self._sig.parameters

    def globals(self):
        return _globals_of(self.func)

    def hints(self):
        """Annotations by name ("return" included), string ones evaluated where possible
        (`from __future__ import annotations`)."""
        if self._hints is None:
            hints = dict(getattr(self.func, "__annotations__", None) or {})
            g = None
            for k, v in hints.items():
                if isinstance(v, str):
                    g = g if g is not None else self.globals()
                    try:
                        hints[k] = eval(v, g)  # noqa: S307 - the user's own annotation
                    except Exception:
                        pass
            self._hints = hints
        return self._hints

    def check_annotations(self, kind):
        """At decoration, as the original system does: each parameter annotation must name a
        type here. A string one (`from __future__ import annotations`) is evaluated now; one
        that names nothing, or an object no parameter can have, is an error."""
        g = None
        for i, (name, p) in enumerate(self.params().items()):
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                continue
            if isinstance(ann, str):
                g = g if g is not None else self.globals()
                try:
                    ann = eval(ann, g)  # noqa: S307 - the user's own annotation
                except Exception:
                    raise FluxionSignatureError(self._where(
                        f"Invalid type annotation (argument {i}) of {kind} '{self.name}': "
                        f"{p.annotation!r} names no type here (annotate '{name}' with the "
                        f"type itself, e.g. ti.f32)")) from None
            if kind == "kernel" and not _valid_kernel_annotation(ann):
                raise FluxionSignatureError(self._where(
                    f"Invalid type annotation (argument {i}) of kernel '{self.name}': {ann!r} "
                    f"(argument '{name}' takes a data type such as ti.f32, "
                    f"ti.types.vector(...), ti.types.ndarray(...), a struct type or "
                    f"ti.template())"))

    def bind(self, args, kwargs, describe):
        """The arguments by parameter name, in order (defaults filled), or the original
        system's errors: too many, missing, unknown or repeated."""
        params = self.params()
        if any(p.kind != p.POSITIONAL_OR_KEYWORD for p in params.values()):
            try:
                ba = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise FluxionSignatureError(f"{describe()}: {e}") from None
            ba.apply_defaults()
            return ba.arguments
        names = list(params)
        if len(args) > len(names):
            expected = ", ".join(self._param_text(n) for n in names)
            got = ", ".join(repr(a) for a in args)[:200]
            raise FluxionSignatureError(f"Too many arguments. Expected ({expected}), got "
                                        f"({got}): {describe()} takes {len(names)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in params:
                raise FluxionSignatureError(f"Unexpected argument '{k}': {describe()} has no "
                                            f"parameter '{k}'")
            if k in bound:
                raise FluxionSignatureError(f"Multiple values for argument '{k}' in the call "
                                            f"of {describe()}")
            bound[k] = v
        out = {}
        for n in names:
            if n in bound:
                out[n] = bound[n]
            elif params[n].default is not inspect.Parameter.empty:
                out[n] = params[n].default
            else:
                raise FluxionSignatureError(f"Parameter `{self._param_text(n)}` missing in the "
                                            f"call of {describe()}")
        return out

    def _param_text(self, name):
        ann = self.hints().get(name, inspect.Parameter.empty)
        if ann is inspect.Parameter.empty:
            return name
        if is_template(ann):
            return f"{name} : template"
        return f"{name} : {ann!r}" if not isinstance(ann, type) else f"{name} : {ann.__name__}"

    def _where(self, message):
        try:
            src = self.source()
        except OSError:
            return message
        return "\n" + format_location(src.loc(src.tree), message)


def _valid_kernel_annotation(ann):
    if is_template(ann) or ann is NdarrayType or ann in (int, float, bool):
        return True
    if isinstance(ann, (NdarrayType, MatrixType, StructType, T.DataType, ArgPackType)):
        return True
    try:
        T.from_numpy_dtype(ann)
        return True
    except Exception:
        return False


def _defined_in_class(func):
    """Whether `func` was defined in a class body (its qualified name says so): then it is a
    method, and `self` binds to the instance it is reached through."""
    parts = func.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


class Func(_Decorated, FuncBase):
    """`@ti.func`: inlined into the kernels that call it; callable from Python scope too."""

    def __call__(self, *args, **kwargs):
        if builder.in_kernel():
            raise RuntimeError("ti.func called through Python inside a kernel build")
        return self.func(*args, **kwargs)

    def __get__(self, obj, owner=None):
        # a ti.func method reached through an instance: `self.f(i)` in a kernel inlines f
        # with `self` bound to the instance (a compile-time value, like a template)
        if obj is None or not _defined_in_class(self.func):
            return self
        return _BoundMethod(self, obj)


def func(fn):
    f = Func(fn)
    f.check_annotations("ti.func")
    return f


def pyfunc(fn):
    return Func(fn)
