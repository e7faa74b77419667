"""The language's containers as the frontend sees them. Fields, struct fields and SNodes own
memory and live in lang/ (above the frontend), yet kernels index them and loop over them: the
frontend recognizes them by these bases, which lang's classes subclass, so that it need not
import the language layer.
"""


class FieldBase:
    """A scalar or matrix field (lang/field.py): `x[i]` in a kernel is an element access
    (frontend/access.py field_access); a struct-for visits its index space."""


class StructFieldBase:
    """A field of structs (lang/struct.py): `s[i]` is a Struct of its members' accesses."""


class SNodeBase:
    """A node of a layout tree (lang/snode.py): a struct-for visits its index space."""
