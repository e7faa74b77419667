"""The names of `ti.ui`'s keys, mouse buttons and event types (the original's strings: a
letter key is its lower-case letter), and the camera's projection modes."""
SHIFT, ALT, CTRL = "Shift", "Alt", "Control"
ESCAPE, RETURN, TAB, BACKSPACE, SPACE = "Escape", "Return", "Tab", "BackSpace", " "
UP, DOWN, LEFT, RIGHT = "Up", "Down", "Left", "Right"
CAPSLOCK = "CapsLock"
LMB, MMB, RMB = "LMB", "MMB", "RMB"

PRESS, RELEASE = "Press", "Release"

PERSPECTIVE, ORTHOGONAL = 0, 1


class ProjectionMode:
    """`camera.projection_mode(ti.ui.ProjectionMode.Perspective)`."""
    Perspective = PERSPECTIVE
    Orthogonal = ORTHOGONAL
