"""`ti.GUI`, the 2-D canvas and window (see fluxion/gui/gui.py)."""
from fluxion.gui.gui import GUI  # noqa: F401

__all__ = ["GUI"]
