"""`ti.tools.imshow`: an image in a window of its own.

It needs ti.GUI, which reads images through tools/image.py: kept apart from the image
functions, it sits above the GUI and they below it, so no import goes back up.
"""
from __future__ import annotations

from fluxion.gui.gui import GUI
from fluxion.tools.image import as_numpy, has_display


def imshow(img, title="imshow"):
    """Show an image in a window until it is closed or Escape is pressed. Without a display
    (or without tkinter) this does nothing, so scripts run unchanged on headless machines."""
    if not has_display():
        return
    a = as_numpy(img)
    gui = GUI(title, res=(a.shape[0], a.shape[1]))
    if not gui.has_window:
        gui.close()
        return
    try:
        while gui.running:
            if gui.get_event(GUI.ESCAPE):
                break
            gui.set_image(a)
            gui.show()
    finally:
        gui.close()
