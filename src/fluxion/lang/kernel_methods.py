"""Methods of Python-scope objects that have a kernel-scope meaning: `x.fill(v)` inside a
kernel fills the field with a loop (in Python scope it writes the field's memory directly).
The frontend inlines the ti.func given here in place of the method call."""
from fluxion.frontend.loops import grouped
from fluxion.lang.kernel import func, template


@func
def fill_field(f: template(), value: template()):
    for I in grouped(f):
        f[I] = value


def kernel_version(method):
    """(ti.func, receiver) standing for bound method `method` in a kernel, or None."""
    from fluxion.lang.field import Field
    owner = getattr(method, "__self__", None)
    if isinstance(owner, Field) and getattr(method, "__func__", None) is Field.fill:
        return fill_field, owner
    return None
