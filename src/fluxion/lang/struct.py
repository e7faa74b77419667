"""Structs: `ti.types.struct(a=ti.f32, v=vec3)`, `@ti.dataclass`, `ti.Struct.field(...)`.

Struct values and types live in frontend/struct.py (the frontend builds and tests them).
Here: struct fields, one field per member, placed side by side in the same cells (AoS), and
the language's constructors of struct types and anonymous struct values.
"""
from __future__ import annotations

import functools

import numpy as np

from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.places import StructFieldBase
from fluxion.frontend.struct import _python_scope, Struct, StructType
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSyntaxError
from fluxion.ir.expr import Expr
from fluxion.lang import runtime, snode as SN
from fluxion.lang.decorated import Func
from fluxion.lang.field import check_offset, field as scalar_field, matrix_field
from fluxion.lang.whole_list import WholeList


class StructField(StructFieldBase, WholeList):
    """A field of structs: one field per member, placed together."""

    def __init__(self, stype, shape, needs_grad=False, name="", offset=None, needs_dual=False):
        check_offset(None if shape is None else ((shape,) if isinstance(shape, int)
                                                 else tuple(shape)), offset)
        self.stype = stype
        self.name = name
        self.fields = {}
        for k in stype.members:
            t = stype.member_type(k)
            nm = f"{name}.{k}" if name else k
            if isinstance(t, StructType):
                self.fields[k] = StructField(t, None, needs_grad, nm, needs_dual=needs_dual)
            elif isinstance(t, MatrixType):
                self.fields[k] = matrix_field(t.n, t.m, t.dtype, None, name=nm,
                                              needs_grad=needs_grad, needs_dual=needs_dual,
                                              ndim=t.ndim)
            else:
                self.fields[k] = scalar_field(t, None, name=nm, needs_grad=needs_grad,
                                              needs_dual=needs_dual)
        # a member named like a list method (a spring's `length`) is the member
        self.__dict__.update({k: f for k, f in self.fields.items() if hasattr(WholeList, k)})
        if shape is not None:
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            node = SN.root.dense(SN.axes(*range(len(shape))), shape) if shape else SN.Tree().root
            self._place_in(node, offset)
            for f in self._leaves():
                f._place_twins()        # `shape=` places the grads and duals too

    def _leaves(self):
        for f in self.fields.values():
            if isinstance(f, StructField):
                yield from f._leaves()
            else:
                yield f

    def _place_in(self, snode, offset=None):
        for f in self.fields.values():
            f._place_in(snode, offset)

    def __getattr__(self, k):
        fields = self.__dict__.get("fields", {})
        if k in fields:
            return fields[k]
        raise AttributeError(f"struct field has no member '{k}'")

    def _list_label(self):
        return "struct field"

    @property
    def shape(self):
        return next(iter(self._leaves())).shape

    @property
    def offset(self):
        return next(iter(self._leaves())).offset

    def parent(self, n=1):
        """The node `n` levels up (`x.parent()` is the node the members are placed in)."""
        return next(iter(self._leaves())).parent(n)

    @property
    def snode(self):
        return next(iter(self._leaves())).snode

    def __getitem__(self, key):
        return Struct(self.stype, {k: f[key] for k, f in self.fields.items()}, home=(self, key))

    def __setitem__(self, key, value):
        vals = value.to_dict() if isinstance(value, Struct) else dict(value)
        for k, f in self.fields.items():
            if k in vals:
                f[key] = vals[k]

    def to_numpy(self):
        return {k: f.to_numpy() for k, f in self.fields.items()}

    def from_numpy(self, d):
        for k, v in d.items():
            self.fields[k].from_numpy(v)

    def to_torch(self, device=None):
        """A dict of tensors, one per member (nested structs as nested dicts)."""
        return {k: f.to_torch(device=device) for k, f in self.fields.items()}

    def from_torch(self, d):
        for k, v in d.items():
            self.fields[k].from_torch(v)

    def copy_from(self, other):
        if not isinstance(other, StructField):
            raise TypeError(f"copy_from: expected a struct field, got {type(other).__name__}")
        for k, f in self.fields.items():
            f.copy_from(other.fields[k])

    def fill(self, v):
        for f in self._leaves():
            f.fill(v)

    def _materialize(self):
        for f in self._leaves():
            f._materialize()


def dataclass(cls):
    """`@ti.dataclass`: a struct type from a class's annotations; its methods (ti.func) work
    in kernels on struct values."""
    members = dict(getattr(cls, "__annotations__", {}))
    for k in members:
        if k in vars(cls):
            raise FluxionSyntaxError(f"Default value in @dataclass is not supported: member "
                                     f"'{k}' of {cls.__name__} (its value is 0 until assigned)")
    methods = {k: v for k, v in vars(cls).items() if isinstance(v, Func) or
               (callable(v) and not k.startswith("__"))}
    st = StructType(members, methods, name=cls.__name__)
    return st


def struct_field(members, shape=None, **kw):
    """`ti.Struct.field({'a': ti.f32, ...}, shape=...)`."""
    return StructType(members).field(shape, **kw)


def _infer_member_type(v):
    """The member type of a value in an anonymous `ti.Struct(...)`."""
    if isinstance(v, Struct):
        return v._type
    if isinstance(v, Matrix):
        types = {_infer_member_type(e) for e in v.entries}
        dt = functools.reduce(T.promote, sorted(types, key=str))
        return MatrixType(v.n, v.m, v.ndim, dt)
    if isinstance(v, Expr):
        return v.dtype
    if isinstance(v, float):
        return runtime.config().default_fp
    if isinstance(v, (int, bool)):
        return runtime.config().default_ip
    if isinstance(v, np.generic):
        return T.normalize(v.dtype)
    raise TypeError(f"ti.Struct: a member cannot be {type(v).__name__} {v!r}")


def anonymous_struct(*args, **kwargs):
    """`ti.Struct({'a': 1, 'v': vec})` or `ti.Struct(a=1, v=vec)`: a struct value whose
    member types are those of the values given (nested dicts become nested structs)."""
    members = {}
    for a in args:
        if not isinstance(a, dict):
            raise TypeError("ti.Struct takes a dict of members and/or keyword members")
        members.update(a)
    members.update(kwargs)
    values = {}
    for k, v in members.items():
        if isinstance(v, dict):
            v = anonymous_struct(v)
        elif isinstance(v, (list, tuple)):
            v = Matrix(list(v))
        values[k] = v
    stype = StructType({k: _infer_member_type(v) for k, v in values.items()})
    return Struct(stype, values)


class StructNamespace:
    """`ti.Struct`: `ti.Struct.field(...)` makes a struct field, `ti.Struct(...)` a value."""
    field = staticmethod(struct_field)

    def __new__(cls, *args, **kwargs):
        return anonymous_struct(*args, **kwargs)


def is_struct_field(x):
    return isinstance(x, StructField)


_python_scope.struct_field = StructField  # `StructType.field(...)` allocates through this
