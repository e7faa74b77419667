"""The language's objects as the frontend sees them. Fields, struct fields and SNodes own
memory, and kernels, ti.funcs and ti.real_funcs compile and launch: they live in lang/ (above
the frontend), yet kernels index, loop over or call them. The frontend recognizes them by
these bases, which lang's classes subclass, so that it need not import the language layer.
"""


class FieldBase:
    """A scalar or matrix field (lang/field.py): `x[i]` in a kernel is an element access
    (frontend/access.py field_access); a struct-for visits its index space."""


class StructFieldBase:
    """A field of structs (lang/struct.py): `s[i]` is a Struct of its members' accesses."""


class SNodeBase:
    """A node of a layout tree (lang/snode.py): a struct-for visits its index space."""



class FuncBase:
    """A @ti.func (lang/decorated.py Func): a call in a kernel inlines its body
    (frontend/calls.py inline)."""


class RealFuncBase:
    """A @ti.real_func (lang/real_func.py): a call in a kernel calls a compiled function
    (frontend/real_func.py)."""


class KernelBase:
    """A @ti.kernel (lang/kernel.py): kernels cannot call one."""

def _needs_lang(*args, **kwargs):
    raise TypeError("sparse SNodes need fluxion's language layer (import fluxion)")


class _Sparse:
    """What lang/sparse.py installs at import: the sparse SNodes above a container, the test
    of their cells' activity in a kernel and the lists of dynamic nodes, which read hidden
    fields that the language layer allocates."""
    levels = node_of = active_condition = block_shape = list_cell = staticmethod(_needs_lang)
    # what lang's fields and SNodes ask of it in Python scope (lang/sparse.py builds on them)
    active_array = activate_element = deactivate_all = staticmethod(_needs_lang)


sparse = _Sparse()
