"""The frames of Taichi's own GGUI examples (python/taichi/examples/ggui_examples/*.py), run
unchanged on fluxion, headless: what one frame's drawing costs at the example's resolution,
with the data its simulation really produces.

The example's source is read at run time from the installed taichi package (else from a git
mirror of Taichi: TAICHI_MIRROR, a bare repository), never kept here. Its main loop becomes a
generator (a `yield` after each `window.show()`), so that its frames can be stepped one at a
time; `import taichi` means fluxion, its ti.init is forced onto the CPU and its windows are
headless (show_window=False). After `frames` frames of the example itself (simulation,
drawing, widgets, show), the next frame's ti.ui calls (Canvas, Scene and widget methods, with
their arguments: the live fields) are recorded; the timed call replays them and shows the
frame. So what is timed is the drawing of a real frame of the example, not its simulation
(which, written for a GPU, may well take longer than the frame on this 2-core CPU).

Taichi's GGUI needs Vulkan; its peer is not run here (fluxion's ti.ui is what is measured)."""
import ast
import builtins
import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import subprocess

import numpy as np

MIRROR = os.environ.get("TAICHI_MIRROR", "/work/.mirror/taichi-dev+taichi/repo")
EXAMPLES = "python/taichi/examples/ggui_examples"


def source(name):
    """The text of ggui_examples/<name>.py: the installed taichi's, else the mirror's HEAD."""
    spec = importlib.util.find_spec("taichi")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "examples",
                            "ggui_examples", name + ".py")
        if os.path.exists(path):
            with open(path) as f:
                return f.read(), path
    try:
        text = subprocess.run(["git", "-C", MIRROR, "show", f"HEAD:{EXAMPLES}/{name}.py"],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise RuntimeError(f"Taichi's example {name}.py was not found: install taichi, or "
                           f"set TAICHI_MIRROR to a git mirror of Taichi") from None
    return text, f"{MIRROR}:{EXAMPLES}/{name}.py"


class _Stepper(ast.NodeTransformer):
    """`yield` after each `<x>.show()` statement in a `while <x>.running:` loop."""

    def __init__(self):
        self.loops = 0

    def visit_While(self, node):
        self.generic_visit(node)
        t = node.test
        if isinstance(t, ast.Attribute) and t.attr == "running":
            body = []
            for stmt in node.body:
                body.append(stmt)
                c = getattr(stmt, "value", None)
                if isinstance(stmt, ast.Expr) and isinstance(c, ast.Call) and \
                        isinstance(c.func, ast.Attribute) and c.func.attr == "show":
                    body.append(ast.Expr(ast.Yield(None)))
            node.body = body
            self.loops += 1
        return node


def _importer(ti):
    """__import__ for the example: `taichi` and its submodules are fluxion's."""
    real = builtins.__import__

    def imp(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "taichi" or name.startswith("taichi.")):
            name = ti.__name__ + name[len("taichi"):]
        return real(name, globals, locals, fromlist, level)
    return imp


# the ti.ui methods a frame's drawing is made of (recorded, then replayed); sub_window is
# left out: it is a context manager, recorded as the begin() and end() it calls
_DRAWING = {"Canvas": None, "Scene": None, "Gui": ("sub_window",)}


def _recorder(ti, calls):
    """Wrap the drawing methods of ti.ui's classes so that each outermost call is appended to
    `calls` as (method, self, args, kwargs); returns a function that undoes it."""
    mods = {"Canvas": "canvas", "Scene": "scene", "Gui": "imgui"}
    undo, depth = [], [0]
    for cls_name, skip in _DRAWING.items():
        cls = getattr(importlib.import_module(f"{ti.__name__}.ui.{mods[cls_name]}"), cls_name)
        for name, fn in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(fn) or name in (skip or ()):
                continue

            def wrapper(self, *args, _fn=fn, **kwargs):
                if depth[0] == 0:
                    calls.append((_fn, self, args, kwargs))
                depth[0] += 1
                try:
                    return _fn(self, *args, **kwargs)
                finally:
                    depth[0] -= 1
            setattr(cls, name, wrapper)
            undo.append((cls, name, fn))

    def restore():
        for cls, name, fn in undo:
            setattr(cls, name, fn)
    return restore


def make_example(ti, name, frames):
    """(run, result) for the workload of example `name` after `frames` frames of it."""
    if ti.__name__ != "fluxion":
        why = ("its GGUI needs Vulkan, which this machine lacks"
               if not ti._lib.core.with_vulkan() else "only fluxion's ti.ui is measured here")
        raise RuntimeError(f"Taichi's example run on fluxion only: {why}")
    text, path = source(name)
    tree = ast.parse(text, path)
    stepper = _Stepper()
    tree = ast.fix_missing_locations(stepper.visit(tree))
    if stepper.loops != 1:
        raise RuntimeError(f"{name}: expected one `while window.running` loop, found "
                           f"{stepper.loops}")
    windows = []
    real_init, real_window = ti.init, ti.ui.Window

    class Window(real_window):
        def __init__(self, *args, **kwargs):
            kwargs["show_window"] = False
            super().__init__(*args, **kwargs)
            windows.append(self)

    def init(*args, **kwargs):
        kwargs["arch"] = ti.cpu
        return real_init(**kwargs)

    g = {"__name__": "ggui_example", "__file__": path,
         "__builtins__": dict(vars(builtins), __import__=_importer(ti))}
    calls = []
    ti.init, ti.ui.Window = init, Window
    try:
        # (what the example prints, hints and progress, stays out of the benchmark's table)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(tree, path, "exec"), g)
            frame = g["main"]()
            for _ in range(frames):
                next(frame)
            restore = _recorder(ti, calls)
            try:
                next(frame)
            finally:
                restore()
    finally:
        ti.init, ti.ui.Window = real_init, real_window
    win = windows[-1]

    def draw():
        for fn, self, args, kwargs in calls:
            fn(self, *args, **kwargs)

    def run():
        draw()
        win.show()

    def result():
        draw()
        img = win.get_image_buffer_as_numpy()
        win.show()
        return np.array([img[:, :, :3].astype(np.float64).mean()])

    return run, result
