"""`ti.graph`: a fixed sequence of kernel launches over symbolic arguments, built once and run
many times with concrete arrays and scalars.

    x = ti.graph.Arg(ti.graph.ArgKind.NDARRAY, "x", dtype=ti.math.vec2, ndim=1)
    b = ti.graph.GraphBuilder()
    b.dispatch(step, x, 0.5)               # an Arg, or a value fixed at build time
    g = b.compile()
    g.run({"x": arr})                       # launches step(arr, 0.5)

In the original system a graph is the unit of ahead-of-time deployment; here it runs its
launches in order through the ordinary kernel calls, which cost about a microsecond each, so
a graph is as fast as the same calls written out. What the graph adds is checked at `run`:
every symbolic argument is given, with the kind, dtype, dimensions and element shape it was
declared with (an error names the argument). Textures are not supported (fluxion has none).
"""
from __future__ import annotations

import enum

from fluxion.ir import types as T
from fluxion.ir.errors import FluxionRuntimeError
from fluxion.lang.matrix import Matrix
from fluxion.lang.ndarray import Ndarray


class ArgKind(enum.Enum):
    SCALAR = 0
    NDARRAY = 1
    MATRIX = 2
    TEXTURE = 3
    RWTEXTURE = 4


class Arg:
    """A symbolic argument of a graph: its kind, name and (for arrays) element type and
    dimensions. Positional arguments follow the original: tag, name, dtype, ndim, field_dim,
    element_shape."""

    _POSITIONAL = ("tag", "name", "dtype", "ndim", "field_dim", "element_shape",
                   "channel_format", "shape", "num_channels")

    def __init__(self, *args, **kwargs):
        if len(args) > len(self._POSITIONAL):
            raise FluxionRuntimeError(f"ti.graph.Arg: unexpected {len(args)}th positional "
                                      f"argument")
        for key, value in zip(self._POSITIONAL, args):
            kwargs[key] = value
        self.tag = kwargs.pop("tag")
        if not isinstance(self.tag, ArgKind):
            raise FluxionRuntimeError(f"ti.graph.Arg: the tag must be a ti.graph.ArgKind, got "
                                      f"{self.tag!r}")
        self.name = kwargs.pop("name")
        if self.tag in (ArgKind.TEXTURE, ArgKind.RWTEXTURE):
            raise FluxionRuntimeError(f"ti.graph.Arg '{self.name}': textures are not supported "
                                      f"by fluxion")
        dtype = kwargs.pop("dtype", None)
        if "field_dim" in kwargs and kwargs["field_dim"] is not None:
            if kwargs.get("ndim") is not None:
                raise FluxionRuntimeError(f"ti.graph.Arg '{self.name}': give ndim or field_dim "
                                          f"(its old name), not both")
            kwargs["ndim"] = kwargs.pop("field_dim")
        kwargs.pop("field_dim", None)
        self.ndim = kwargs.pop("ndim", None)
        element_shape = tuple(kwargs.pop("element_shape", None) or ())
        unknown = [k for k, v in kwargs.items() if v is not None]
        if unknown:
            raise FluxionRuntimeError(f"ti.graph.Arg '{self.name}': unexpected arguments "
                                      f"{unknown} for {self.tag}")
        self.element_shape = element_shape
        self.dtype = None
        if dtype is not None:
            if hasattr(dtype, "n") and hasattr(dtype, "ndim"):       # a vector/matrix type
                self.element_shape = (dtype.n,) if dtype.ndim == 1 else (dtype.n, dtype.m)
                dtype = dtype.dtype
            self.dtype = T.normalize(dtype) if dtype is not None else None
        if self.tag is ArgKind.NDARRAY and self.ndim is None:
            raise FluxionRuntimeError(f"ti.graph.Arg '{self.name}': an NDARRAY argument needs "
                                      f"ndim")

    def __repr__(self):
        return f"ti.graph.Arg({self.tag.name}, {self.name!r})"

    def check(self, value):
        """The value to pass for this argument, or an error naming it."""
        where = f"ti.graph: argument '{self.name}'"
        if self.tag is ArgKind.NDARRAY:
            if not isinstance(value, Ndarray):
                raise FluxionRuntimeError(f"{where} must be a ti.ndarray, got "
                                          f"{type(value).__name__}")
            es = () if value.element is None else (
                (value.element.n,) if value.element.ndim == 1 else
                (value.element.n, value.element.m))
            if self.dtype is not None and value.dtype != self.dtype:
                raise FluxionRuntimeError(f"{where} was declared with dtype {self.dtype}, got an "
                                          f"ndarray of {value.dtype}")
            if len(value.shape) != self.ndim:
                raise FluxionRuntimeError(f"{where} was declared with ndim={self.ndim}, got an "
                                          f"ndarray of shape {value.shape}")
            if self.element_shape and es != self.element_shape:
                raise FluxionRuntimeError(f"{where} was declared with elements of shape "
                                          f"{self.element_shape}, got {es or 'scalars'}")
            return value
        if self.tag is ArgKind.MATRIX:
            if not isinstance(value, Matrix):
                raise FluxionRuntimeError(f"{where} must be a ti.Matrix, got "
                                          f"{type(value).__name__}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FluxionRuntimeError(f"{where} must be a Python int or float, got "
                                      f"{type(value).__name__}")
        return value


class Sequential:
    """A list of launches that a builder appends, possibly several times."""

    def __init__(self):
        self.launches = []

    def dispatch(self, kernel, *args):
        if not callable(kernel):
            raise FluxionRuntimeError(f"ti.graph: dispatch takes a kernel, got {kernel!r}")
        self.launches.append((kernel, args))


class GraphBuilder:
    def __init__(self):
        self._seq = Sequential()

    def dispatch(self, kernel, *args):
        self._seq.dispatch(kernel, *args)

    def create_sequential(self):
        return Sequential()

    def append(self, node):
        if not isinstance(node, Sequential):
            raise FluxionRuntimeError("ti.graph: append takes what create_sequential() made")
        self._seq.launches.extend(node.launches)

    def compile(self):
        return Graph(list(self._seq.launches))


class Graph:
    """A compiled graph: `run(args)` launches its kernels in order, the symbolic arguments
    replaced by `args[name]`."""

    def __init__(self, launches):
        self.launches = launches
        self.args = {}
        for _, args in launches:
            for a in args:
                if isinstance(a, Arg):
                    seen = self.args.setdefault(a.name, a)
                    if seen is not a and (seen.tag, seen.dtype, seen.ndim) != \
                            (a.tag, a.dtype, a.ndim):
                        raise FluxionRuntimeError(f"ti.graph: two different arguments are "
                                                  f"named '{a.name}'")

    def run(self, args):
        missing = [n for n in self.args if n not in args]
        if missing:
            raise FluxionRuntimeError(f"ti.graph: run() is missing the argument(s) {missing}")
        values = {n: a.check(args[n]) for n, a in self.args.items()}
        for kernel, kargs in self.launches:
            kernel(*[values[a.name] if isinstance(a, Arg) else a for a in kargs])


__all__ = ["Arg", "ArgKind", "Graph", "GraphBuilder", "Sequential"]
