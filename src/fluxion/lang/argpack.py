"""Argument packs: `ti.types.argpack(a=ti.i32, v=vec3, arr=ti.types.ndarray(...), ...)`, a
kernel parameter type that bundles several arguments (scalars, vectors, structs, ndarrays,
other packs) under one name: `pack.a`, `pack.arr[i, j]` in the kernel.

A kernel sees a pack's members as arguments of their own: the kernel flattens each pack
parameter into its leaves (see Kernel._specs), passes them like any argument, and binds the
parameter's name in the body to an `ArgPackValue` whose attributes are the leaves' values.
"""
from __future__ import annotations

from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.struct import (_convert as struct_convert, _python_scope as _struct_scope,
                                     StructType)
from fluxion.ir import types as T
from fluxion.lang.ndarray import NdarrayType


class ArgPackType:
    """The type of an argument pack: call it with the members' values to make a pack."""

    def __init__(self, **members):
        self.members = {}
        for k, t in members.items():
            if isinstance(t, (MatrixType, StructType, NdarrayType, ArgPackType)) or \
                    t is NdarrayType:
                self.members[k] = t
            else:
                try:
                    self.members[k] = T.normalize(t)
                except TypeError:
                    raise ValueError(f"ti.types.argpack: member '{k}' has an invalid data type "
                                     f"{t!r}") from None

    def __call__(self, *args, **kwargs):
        vals = dict(zip(self.members, args))
        vals.update(kwargs)
        unknown = set(vals) - set(self.members)
        if unknown:
            raise TypeError(f"{self!r} has no members {sorted(unknown)}")
        missing = [k for k in self.members if k not in vals]
        if missing:
            raise TypeError(f"{self!r}: no value for members {missing}")
        return ArgPack(self, {k: _convert(vals[k], self.members[k]) for k in self.members})

    def leaves(self, prefix=""):
        """(dotted name, member type) of every non-pack member, nested packs flattened."""
        out = []
        for k, t in self.members.items():
            if isinstance(t, ArgPackType):
                out.extend(t.leaves(f"{prefix}{k}."))
            else:
                out.append((f"{prefix}{k}", t))
        return out

    def __repr__(self):
        inner = ", ".join(f"{k}={_type_name(t)}" for k, t in self.members.items())
        return f"<ti.ArgPackType {inner}>"


def _type_name(t):
    return repr(t) if not isinstance(t, T.DataType) else t.name


def _convert(v, t):
    if isinstance(t, ArgPackType):
        if isinstance(v, ArgPack):
            return v
        if isinstance(v, dict):
            return t(**v)
        raise TypeError(f"{t!r}: expected a pack or a dict, got {type(v).__name__}")
    if isinstance(t, NdarrayType) or t is NdarrayType:
        return v                                    # checked at the launch, as an argument
    if isinstance(t, (MatrixType, StructType)):
        return struct_convert(v, t)
    return v


class ArgPack:
    """A value of an ArgPackType: members as attributes (`pack.a`), `to_dict()`."""

    def __init__(self, ptype, values):
        object.__setattr__(self, "_type", ptype)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, k):
        values = object.__getattribute__(self, "_values")
        if k in values:
            return values[k]
        raise AttributeError(f"argument pack has no member '{k}'")

    def __setattr__(self, k, v):
        if k not in self._values:
            raise AttributeError(f"argument pack has no member '{k}'")
        self._values[k] = _convert(v, self._type.members[k])

    def keys(self):
        return self._values.keys()

    def items(self):
        return self._values.items()

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, ArgPack) else v)
                for k, v in self._values.items()}

    def leaf_values(self):
        """The values of `self._type.leaves()`, in order."""
        out = []
        for k, t in self._type.members.items():
            v = self._values[k]
            if isinstance(t, ArgPackType):
                out.extend(v.leaf_values())
            else:
                out.append(v)
        return out

    def __repr__(self):
        return repr(self.to_dict())


class ArgPackValue:
    """A pack parameter inside a kernel: its attributes are the members' values."""

    def __init__(self, members):
        self._members = members

    def __getattr__(self, k):
        members = self.__dict__.get("_members", {})
        if k not in members:
            raise AttributeError(f"argument pack has no member '{k}'")
        v = members[k]
        load = getattr(v, "load", None)
        return load() if load is not None and not isinstance(v, Matrix) else v


def build_value(ptype, bound, prefix):
    """The ArgPackValue of pack parameter `prefix` from the kernel's bound leaves."""
    members = {}
    for k, t in ptype.members.items():
        name = f"{prefix}.{k}"
        members[k] = build_value(t, bound, name) if isinstance(t, ArgPackType) else \
            bound.pop(name)
    return ArgPackValue(members)


def argpack(**members):
    """`ti.types.argpack(a=ti.i32, b=ti.types.ndarray(...), ...)`."""
    return ArgPackType(**members)


# an argument pack cannot be a struct member: frontend/struct.py asks this
_struct_scope.is_argpack_type = lambda t: isinstance(t, ArgPackType)
