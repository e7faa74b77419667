from fluxion.ui.gui import GUI  # noqa: F401
