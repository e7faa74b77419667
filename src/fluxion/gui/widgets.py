"""What `ti.GUI.slider` and `ti.GUI.label` return (`ti.GUI.WidgetValue`)."""
from __future__ import annotations


class WidgetValue:
    """A widget's value, read and written through `.value`. Where the GUI has a window, the
    widget shows it in the side panel: setting `.value` moves the slider or rewrites the
    label, and moving the slider sets `.value`. Headless, it is a plain value. A value is a
    float, as in the original, whose widgets hold doubles (a slider from 1 to 10 reads 1.0).
    """

    def __init__(self, value, on_set=None):
        self._value = float(value)
        self._on_set = on_set       # the window's display of the value, if any

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        self._value = float(v)
        if self._on_set is not None:
            self._on_set(self._value)

    def __repr__(self):
        return f"GUI.WidgetValue({self._value!r})"
