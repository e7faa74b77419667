"""`ti.ui`: the original system's GGUI (Window, Canvas, Scene, Camera, widgets), drawn by
fluxion kernels, on the screen where there is one and headless everywhere else.

window.py   the window: frames, events, images, the Tk window where a display exists
canvas.py   2-D drawing calls, and the order a frame is drawn in
scene.py    a frame's 3-D contents; camera.py the camera and its matrices
raster.py, raster3d.py   the kernels: splat and resolve, in 2-D and with a depth test
imgui.py    the widgets; constants.py the keys; staging.py inputs as numpy arrays
"""
from fluxion.ui.constants import (SHIFT, ALT, CTRL, ESCAPE, RETURN, TAB, BACKSPACE,  # noqa: F401
                                  SPACE, UP, DOWN, LEFT, RIGHT, CAPSLOCK, LMB, MMB, RMB,
                                  PRESS, RELEASE, ProjectionMode)
from fluxion.ui.camera import Camera  # noqa: F401
from fluxion.ui.canvas import Canvas  # noqa: F401
from fluxion.ui.imgui import Gui  # noqa: F401
from fluxion.ui.scene import Scene  # noqa: F401
from fluxion.ui.window import Window, Event  # noqa: F401
# the original's ti.ui also holds ti.GUI and its colour helpers under these names
from fluxion.gui.gui import GUI  # noqa: F401
from fluxion.lang.extra_ops import rgb_to_hex, hex_to_rgb  # noqa: F401


def make_camera():
    return Camera()


def check_ggui_availability():
    """Nothing to check: fluxion's kernels draw the frames, with or without a display or a
    GPU (the original raises where Vulkan is missing)."""


__all__ = ["SHIFT", "ALT", "CTRL", "ESCAPE", "RETURN", "TAB", "BACKSPACE", "SPACE", "UP", "DOWN",
           "LEFT", "RIGHT", "CAPSLOCK", "LMB", "MMB", "RMB", "PRESS", "RELEASE",
           "ProjectionMode", "Camera", "Canvas", "Gui", "Scene", "Window", "Event",
           "make_camera", "GUI", "rgb_to_hex", "hex_to_rgb", "check_ggui_availability"]
