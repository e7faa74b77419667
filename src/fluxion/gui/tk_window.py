"""`ti.GUI`'s window: a Tk Toplevel that shows the frame, turns Tk's input into the GUI's
events, and holds the widgets' side panel. The GUI opens one only where a display exists
(see fluxion/gui/gui.py); everything else works without it.
"""
from __future__ import annotations

import sys
import warnings

from fluxion.gui.events import Keys, normalize_key

_tk_root = None
_warned_no_window = False


def open_window(gui, fullscreen):
    """A TkWindow for `gui`, or None (with one warning per process) if Tk cannot start."""
    global _warned_no_window
    try:
        return TkWindow(gui, fullscreen)
    except Exception as e:  # no tkinter, no ImageTk, or the display refused us
        if not _warned_no_window:
            _warned_no_window = True
            warnings.warn(f"ti.GUI: no window ({type(e).__name__}: {e}); drawing and "
                          f"show(file) still work", stacklevel=3)
        return None


class TkWindow:
    """A Toplevel showing the frame, forwarding input to the GUI's event queue. All windows
    share one hidden Tk root, since Tk wants one interpreter per thread."""

    def __init__(self, gui, fullscreen):
        global _tk_root
        import tkinter
        from PIL import ImageTk
        self._tkinter, self._ImageTk = tkinter, ImageTk
        if _tk_root is None:
            root = tkinter.Tk()
            root.withdraw()
            _tk_root = root
        self.gui = gui
        top = self.top = tkinter.Toplevel(_tk_root)
        top.title(gui.name)
        top.resizable(False, False)
        if fullscreen:
            top.attributes("-fullscreen", True)
        top.protocol("WM_DELETE_WINDOW", self._on_close)
        top.bind("<Destroy>", self._on_destroy)
        self.view = tkinter.Label(top, bd=0, highlightthickness=0, bg="black")
        self.view.pack(side="left")
        self.panel = None
        self.photo = None
        self.closed = False
        top.bind("<KeyPress>", lambda e: self._key(Keys.PRESS, e))
        top.bind("<KeyRelease>", lambda e: self._key(Keys.RELEASE, e))
        self.view.bind("<ButtonPress>", lambda e: self._button(Keys.PRESS, e))
        self.view.bind("<ButtonRelease>", lambda e: self._button(Keys.RELEASE, e))
        self.view.bind("<Motion>", self._motion)
        self.view.bind("<MouseWheel>", self._wheel)          # Windows and macOS
        self.present(gui._pil_image())
        top.focus_force()

    # input ----------------------------------------------------------------------------------
    def _pos(self, e):
        w, h = self.gui.res
        return (e.x + 0.5) / w, 1.0 - (e.y + 0.5) / h

    @staticmethod
    def _modifiers(e):
        state = int(e.state) if isinstance(e.state, int) else 0
        return [name for bit, name in ((0x1, Keys.SHIFT), (0x4, Keys.CTRL), (0x8, Keys.ALT))
                if state & bit]

    def _key(self, type, e):
        # A printable character names itself (',' rather than Tk's 'comma'); other keys,
        # Return and Escape included, go by Tk's key symbol.
        key = e.char if len(e.char) == 1 and e.char.isprintable() else e.keysym
        self.gui._push_event(type, normalize_key(key), modifier=self._modifiers(e))

    def _button(self, type, e):
        if e.num in (4, 5):                                  # X11 sends the wheel as buttons
            if type == Keys.PRESS:
                self.gui._push_event(Keys.MOTION, Keys.WHEEL, self._pos(e), self._modifiers(e),
                                     (0, 120 if e.num == 4 else -120))
            return
        names = {1: Keys.LMB, 2: Keys.MMB, 3: Keys.RMB}
        if sys.platform == "darwin":                         # Tk on macOS: 2 is the right one
            names = {1: Keys.LMB, 2: Keys.RMB, 3: Keys.MMB}
        if e.num in names:
            self.gui._push_event(type, names[e.num], self._pos(e), self._modifiers(e))

    def _motion(self, e):
        self.gui._push_event(Keys.MOTION, Keys.MOVE, self._pos(e), self._modifiers(e))

    def _wheel(self, e):
        self.gui._push_event(Keys.MOTION, Keys.WHEEL, self._pos(e), self._modifiers(e),
                             (0, int(e.delta)))

    def _on_close(self):
        self.gui._push_event(Keys.PRESS, Keys.EXIT)
        self.gui.running = False
        self.destroy()

    def _on_destroy(self, e):
        # The window went away without the close button (the window manager, or Tk being
        # torn down): a `while gui.running` loop must still end.
        if e.widget is self.top and not self.closed:
            self.closed = True
            self.gui._push_event(Keys.PRESS, Keys.EXIT)
            self.gui.running = False

    # output ---------------------------------------------------------------------------------
    def present(self, image):
        if self.closed:
            return
        if self.photo is None or (self.photo.width(), self.photo.height()) != image.size:
            self.photo = self._ImageTk.PhotoImage(image)
            self.view.configure(image=self.photo)
        else:
            self.photo.paste(image)                          # reuse the Tk image: faster
        self.pump()

    def pump(self):
        """Let Tk redraw and run our input callbacks."""
        if self.closed:
            return
        try:
            _tk_root.update()
        except self._tkinter.TclError:                      # the window went away under us
            self.closed = True

    # widgets --------------------------------------------------------------------------------
    def _side_panel(self):
        if self.panel is None:
            self.panel = self._tkinter.Frame(self.top)
            self.panel.pack(side="right", fill="y")
        return self.panel

    def add_slider(self, widget, text, minimum, maximum, step):
        tk = self._tkinter

        def moved(s):
            widget._value = float(s)

        scale = tk.Scale(self._side_panel(), label=text, from_=minimum, to=maximum,
                         resolution=step, orient="horizontal", command=moved)
        scale.set(minimum)
        scale.pack(fill="x")
        widget._on_set = scale.set

    def add_label(self, widget, text):
        var = self._tkinter.StringVar(value=f"{text}: {widget.value}")
        self._tkinter.Label(self._side_panel(), textvariable=var, anchor="w").pack(fill="x")
        widget._on_set = lambda v: var.set(f"{text}: {v}")

    def add_button(self, text, command):
        self._tkinter.Button(self._side_panel(), text=text, command=command).pack(fill="x")

    def destroy(self):
        if not self.closed:
            self.closed = True
            try:
                self.top.destroy()
                _tk_root.update()
            except self._tkinter.TclError:
                pass
