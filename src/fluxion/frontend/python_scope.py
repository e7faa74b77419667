"""What the language layer installs for the frontend's values at import: allocating fields
and ndarrays of matrices (lang/field.py, lang/ndarray.py: `ti.Vector.field`, `ti.Matrix.ndarray`),
fields of structs (lang/struct.py: `StructType.field`), and recognizing an argument pack type
(lang/argpack.py). They live above the frontend, which reaches them only through here.
"""


class _PythonScope:
    @staticmethod
    def matrix_field(n, m, dtype, shape=None, ndim=2, **kw):
        raise TypeError("fields need fluxion's language layer (import fluxion)")

    @staticmethod
    def ndarray(dtype, shape, element=None, needs_grad=False):
        raise TypeError("ndarrays need fluxion's language layer (import fluxion)")

    @staticmethod
    def struct_field(stype, shape, needs_grad=False, name="", offset=None, needs_dual=False):
        raise TypeError("struct fields need fluxion's language layer (import fluxion)")

    @staticmethod
    def is_argpack_type(t):
        # (no argument pack type exists before lang/argpack.py is imported)
        return False


_python_scope = _PythonScope()
