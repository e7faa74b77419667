"""The hooks through which a lower layer reaches behaviour defined above it are all filled
once fluxion is imported: a default left in place raises only when a program first needs it
(a sparse field's fill, a struct field), far from the module that forgot to install it."""
import fluxion  # noqa: F401  (installs the hooks)
from fluxion.frontend import places
from fluxion.frontend.python_scope import _PythonScope, _python_scope


def test_lang_sparse_fills_every_entry_of_places_sparse():
    names = [k for k, v in vars(type(places.sparse)).items() if isinstance(v, staticmethod)]
    assert "deactivate_all" in names and "active_array" in names
    left = [k for k in names if k not in vars(places.sparse)]
    assert not left, f"not installed by lang/sparse.py: {left}"


def test_lang_fills_the_python_scope_of_matrix_and_struct_values():
    names = [k for k, v in vars(_PythonScope).items() if isinstance(v, staticmethod)]
    assert {"matrix_field", "ndarray", "struct_field", "is_argpack_type"} <= set(names)
    left = [k for k in names if k not in vars(_python_scope)]
    assert not left, f"not installed by the language layer: {left}"


def test_field_fill_under_sparse_levels_has_its_kernel():
    assert fluxion.Field._fill_by_kernel is not None
