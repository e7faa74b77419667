"""`ti.GUI`, the 2-D canvas and window (see fluxion/ui/gui.py)."""
from fluxion.ui.gui import GUI  # noqa: F401

__all__ = ["GUI"]
