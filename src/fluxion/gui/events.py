"""Input for `ti.GUI`: the names of keys, buttons and event types, one event, and the
filters that `get_event` and `get_events` select events with.

Keys are strings: a printable key is its character (letters in lower case, ' ' for space),
other keys Tk's key symbols with one name per modifier ('Shift', not 'Shift_L'); mouse
buttons are 'LMB', 'MMB' and 'RMB'. Event types are strings too ('Press', 'Release',
'Motion'), so a filter entry names a type, a key, or a (type, key) pair.
"""
from __future__ import annotations

import collections


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


class Input:
    """The input side that `ti.GUI` and `ti.ui.Window` share: the queue of unread events
    (past 4,096 the oldest are dropped), the keys and buttons held down, the cursor
    (normalized, y up; (0, 0) until the mouse moves), and `self._window`, the Tk window that
    delivers input when pumped (None: headless, no input arrives). Each class keeps its own
    `_push_event` (what an event is there) and its own event selection (filters, tags)."""

    def _init_input(self):
        self.event = None
        self._events = collections.deque(maxlen=4096)
        self._pressed = set()
        self._cursor = (0.0, 0.0)

    def _hold(self, type, key):
        """Track held keys: a PRESS ('Press') holds `key`, a RELEASE ('Release') lets go."""
        if type == Keys.PRESS:
            self._pressed.add(key)
        elif type == Keys.RELEASE:
            self._pressed.discard(key)

    def _pump(self):
        """Let the window, if any, deliver its input."""
        if self._window is not None:
            self._window.pump()

    def _take_event(self, match):
        """Drop queued events until one matches (match(e) true, or match None): it becomes
        `self.event`, and True is returned; False when none is left."""
        self._pump()
        while self._events:
            e = self._events.popleft()
            if match is None or match(e):
                self.event = e
                return True
        return False

    def _take_events(self, match):
        """The queued events that match (all, if match is None), oldest first; the queue is
        emptied."""
        self._pump()
        events = [e for e in self._events if match is None or match(e)]
        self._events.clear()
        return events

    def is_pressed(self, *keys):
        """Whether any of `keys` (keys or mouse buttons) is held down."""
        self._pump()
        return any(normalize_key(k) in self._pressed for k in keys)

    def get_cursor_pos(self):
        """The cursor, normalized with y up ((0, 0) until the mouse moves)."""
        self._pump()
        return self._cursor
