"""Input for `ti.GUI`: the names of keys, buttons and event types, one event, and the
filters that `get_event` and `get_events` select events with.

Keys are strings: a printable key is its character (letters in lower case, ' ' for space),
other keys Tk's key symbols with one name per modifier ('Shift', not 'Shift_L'); mouse
buttons are 'LMB', 'MMB' and 'RMB'. Event types are strings too ('Press', 'Release',
'Motion'), so a filter entry names a type, a key, or a (type, key) pair.
"""
from __future__ import annotations


class Keys:
    """Keys and buttons, as they appear in `event.key` and in `is_pressed`, and event types,
    in `event.type` (`ti.GUI` has them all as class attributes)."""
    ESCAPE, SHIFT, ALT, CTRL = "Escape", "Shift", "Alt", "Control"
    BACKSPACE, RETURN, TAB, CAPSLOCK, SPACE = "BackSpace", "Return", "Tab", "Caps_Lock", " "
    UP, DOWN, LEFT, RIGHT = "Up", "Down", "Left", "Right"
    LMB, MMB, RMB = "LMB", "MMB", "RMB"
    EXIT, WHEEL, MOVE = "WMClose", "Wheel", "Motion"
    PRESS, RELEASE, MOTION = "Press", "Release", "Motion"


class Event:
    """One input event: `type` (PRESS, RELEASE, MOTION), `key`, `pos` (normalized, y up),
    `modifier` (held modifier keys) and `delta` (wheel steps)."""

    def __init__(self, type, key, pos=(0.0, 0.0), modifier=(), delta=(0, 0)):
        self.type, self.key, self.pos = type, key, pos
        self.modifier, self.delta = list(modifier), delta

    def __repr__(self):
        return f"GUI.Event({self.type!r}, {self.key!r}, pos={self.pos})"


class EventFilter:
    """The events that some filter entries select: an entry is an event type, a key, or a
    (type, key) pair (a list of two is taken as a pair). An event matches when its type, its
    key or its (type, key) is among the entries. (`MOTION` and `MOVE` are the same string,
    so that entry selects every motion event, wheel included, as MOTION does in the
    original.)"""

    def __init__(self, *e_filter):
        self.filter = set()
        for entry in e_filter:
            if isinstance(entry, list):
                entry = tuple(entry)
            if isinstance(entry, tuple) and len(entry) != 2:
                raise ValueError(f"GUI.EventFilter: a pair is (type, key), got {entry!r}")
            self.filter.add(entry)

    def match(self, e):
        """Whether event `e` is selected."""
        f = self.filter
        return (e.type, e.key) in f or e.type in f or e.key in f


_MODIFIER_KEYS = {"Shift_L": "Shift", "Shift_R": "Shift", "Control_L": "Control",
                  "Control_R": "Control", "Alt_L": "Alt", "Alt_R": "Alt", "Meta_L": "Alt",
                  "Meta_R": "Alt", "Option_L": "Alt", "Option_R": "Alt", "space": " "}


def normalize_key(key):
    """Tk's key names -> ours: one name per modifier, ' ' for space, letters in lower case."""
    key = _MODIFIER_KEYS.get(key, key)
    return key.lower() if len(key) == 1 else key
