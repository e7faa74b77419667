"""Struct values and types (`ti.types.struct(a=ti.f32, v=vec3)`, `@ti.dataclass`): a
`Struct` holds one value per member (a number or kernel value, a vector, or a nested struct);
inside kernels each member is scalarized like everything else. The frontend builds and tests
them, so they live here; struct fields are the language layer's (lang/struct.py), which plugs
them in through `_python_scope` (frontend/python_scope.py).
"""
from __future__ import annotations

from fluxion.frontend import builtins as B
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.matrix_entries import scalar_of
from fluxion.frontend.python_scope import _python_scope
from fluxion.frontend.stores import store_value
from fluxion.ir import builder
from fluxion.ir import types as T




class StructType:
    def __init__(self, members, methods=None, name="Struct"):
        self.members = {}
        for k, t in members.items():
            if _python_scope.is_argpack_type(t):
                raise ValueError(f"Invalid data type {t!r}: an argument pack cannot be a "
                                 f"member of a struct (member '{k}')")
            self.members[k] = t
        self.methods = dict(methods or {})
        self.name = name

    def member_type(self, k):
        t = self.members[k]
        if isinstance(t, (MatrixType, StructType)):
            return t
        return T.normalize(t)

    def __call__(self, *args, **kwargs):
        vals = dict(zip(self.members, args))
        vals.update(kwargs)
        unknown = set(vals) - set(self.members)
        if unknown:
            raise TypeError(f"{self.name} has no members {sorted(unknown)}")
        out = {}
        for k in self.members:
            t = self.member_type(k)
            v = vals.get(k, 0)
            out[k] = _convert(v, t)
        return Struct(self, out)

    def field(self, shape=None, needs_grad=False, name="", offset=None, needs_dual=False, **kw):
        return _python_scope.struct_field(self, shape, needs_grad=needs_grad, name=name,
                                          offset=offset, needs_dual=needs_dual)

    def __repr__(self):
        return f"{self.name}({', '.join(f'{k}: {t}' for k, t in self.members.items())})"


def _convert(v, t):
    if isinstance(t, StructType):
        if isinstance(v, Struct):
            return v
        if isinstance(v, dict):
            return t(**v)
        # one value for the first member, as for a struct type called positionally:
        # `mystruct(1)` sets the nested struct's first member to 1 (not all zeros)
        return t(v)
    if isinstance(t, MatrixType):
        return t(v)
    return B.cast(v, t)


class Struct:
    """A struct value; members are attributes."""

    def __init__(self, stype, members, home=None):
        object.__setattr__(self, "_type", stype)
        object.__setattr__(self, "_members", members)
        # (struct field, index) when this value was read from a field in Python scope:
        # assigning a member (`x[i].a = v`) stores into the field, as Taichi does
        object.__setattr__(self, "_home", home)

    def __getattribute__(self, k):
        # a member named like a method of this class (`entries`, `keys`, `to_dict`...) is
        # the member, as in the original
        if not k.startswith("_"):
            members = object.__getattribute__(self, "_members")
            if k in members:
                return members[k]
        return object.__getattribute__(self, k)

    def __getattr__(self, k):
        members = object.__getattribute__(self, "_members")
        if k in members:
            return members[k]
        stype = object.__getattribute__(self, "_type")
        if k in stype.methods:
            return _BoundMethod(stype.methods[k], self)
        raise AttributeError(f"{stype.name} has no member '{k}'")

    def __setattr__(self, k, v):
        if k not in self._members:
            raise AttributeError(f"{self._type.name} has no member '{k}'")
        if builder.in_kernel():
            store_value(self._members[k], v)
        elif self._home is not None:
            field, key = self._home
            field.fields[k][key] = v.to_dict() if isinstance(v, Struct) else v
            self._members[k] = field.fields[k][key]
        else:
            self._members[k] = _convert(v, self._type.member_type(k))

    def _kernel_store(self, value):
        """In a kernel: each member of `value` (a struct, or indexed by member names) through
        this struct's members."""
        for k, t in self._members.items():
            store_value(t, getattr(value, k) if isinstance(value, Struct) else value[k])

    def to_dict(self, include_methods=False, include_ndim=False):
        """The members by name, a vector or matrix as a (nested) list, as the original gives
        them; `include_methods` adds the struct type's methods under "__struct_methods",
        `include_ndim` each matrix member's ndim under "__matrix_ndim"."""
        out = {}
        for k, v in self._members.items():
            out[k] = v.to_dict(include_methods, include_ndim) if isinstance(v, Struct) else (
                v.to_list() if isinstance(v, Matrix) else v)
        if include_methods:
            out["__struct_methods"] = dict(self._type.methods)
        if include_ndim:
            out["__matrix_ndim"] = {k: v.ndim for k, v in self._members.items()
                                    if isinstance(v, Matrix)}
        return out

    def __repr__(self):
        return f"{self._type.name}({', '.join(f'{k}={v!r}' for k, v in self._members.items())})"

    def entries(self):
        return self._members


class _BoundMethod:
    def __init__(self, func, obj):
        self.func, self.obj = func, obj

    def __call__(self, *args, **kwargs):
        return self.func(self.obj, *args, **kwargs)


def struct_leaves(stype, prefix=()):
    """(path, scalar dtype) of each scalar member of struct type `stype`, in member order; a
    matrix member's path ends in the index of its entry."""
    out = []
    for k in stype.members:
        t = stype.member_type(k)
        if isinstance(t, StructType):
            out.extend(struct_leaves(t, prefix + (k,)))
        elif isinstance(t, MatrixType):
            out.extend(((prefix + (k, c)), t.dtype) for c in range(t.n * t.m))
        else:
            out.append((prefix + (k,), t))
    return out


def build_struct(stype, values):
    """A Struct of `stype` whose scalar members are taken from `values` in order."""
    members = {}
    for k in stype.members:
        t = stype.member_type(k)
        if isinstance(t, StructType):
            members[k] = build_struct(t, values)
        elif isinstance(t, MatrixType):
            dt = t.dtype
            members[k] = Matrix._make([scalar_of(next(values), dt) for _ in range(t.n * t.m)],
                                      t.n, t.m, t.ndim)
        else:
            members[k] = next(values)
    return Struct(stype, members)
