"""`ti.simt.block`: block-level programming for the CUDA backend. Its operations build IR, so
they live in frontend/simt.py (where the transformer finds shared arrays); the language names
them here."""
from __future__ import annotations

from fluxion.frontend.simt import SharedArrayValue, block, shared_access

__all__ = ["SharedArrayValue", "block", "shared_access"]
