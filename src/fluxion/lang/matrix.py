"""`ti.Matrix`, `ti.Vector`, `ti.types.matrix`: the value classes live in frontend/matrix.py
(the frontend builds and tests them); the language names them here."""
from __future__ import annotations

from fluxion.frontend.matrix import Matrix, MatrixType, Vector, _flat_values

__all__ = ["Matrix", "MatrixType", "Vector", "_flat_values"]
