"""Taichi's own example programs, run unchanged on Taichi and on fluxion side by side.

    python -m tests.examples.taichi_examples                 # every example, a table
    python -m tests.examples.taichi_examples mpm88 fractal   # those whose path contains a name
    python -m tests.examples.taichi_examples --json out.json --frames 3 --timeout 120

The examples come with the taichi package (`pip install taichi`; `taichi/examples`). Each runs
in its own process, headless, on the CPU: `ti.GUI` is forced to `show_gui=False`, the frame
of its `--frames`-th `show()` is saved and the program stops there (a program without a GUI
runs to its end or to the timeout). `import taichi` means fluxion in fluxion's runs (the
module and its submodules are aliased), so the program's text is the original. The table
gives each implementation's outcome and, where both drew the frame, how far apart the two
pictures are (a program that draws random particles differs in any case: the random sequence
is not the same; a deterministic one should match to one 8-bit step)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# needs GGUI (ti.ui: windows, 3-D scenes): fluxion draws it headless; Taichi's needs Vulkan,
# which a machine without a GPU (this one) does not have, so these run on fluxion only
NEEDS_UI = "ti.ui."
NOT_RUN = {"outcome": "not run", "seconds": 0, "why": ""}

# run in the child before the example: aliasing, the headless GUI, the frame budget
_BOOT = r'''
import os, runpy, sys, types
impl, path, frames, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.argv = [path]
if impl == "fluxion":
    import importlib, pkgutil
    import fluxion
    sys.modules["taichi"] = fluxion
    for m in pkgutil.walk_packages(fluxion.__path__, "fluxion."):
        if ".examples" in m.name:
            continue
        try:
            mod = importlib.import_module(m.name)
        except Exception:
            continue
        sys.modules["taichi" + m.name[len("fluxion"):]] = mod
    # examples import each other (taichi.examples.patterns): the originals, run on fluxion
    ex = types.ModuleType("taichi.examples")
    ex.__path__ = [os.environ["TAICHI_EXAMPLES"]]
    sys.modules["taichi.examples"] = ex
ti = sys.modules.get("taichi") or __import__("taichi")
import numpy as np

_init = ti.init
def init(*a, **kw):
    kw["arch"] = ti.cpu
    if impl == "taichi":
        kw.setdefault("offline_cache", False)
    return _init(*a[1:], **kw)
ti.init = init

class Stop(BaseException):
    pass

GUI = ti.GUI
_gui_init, _show = GUI.__init__, GUI.show
count = [0]
def gui_init(self, *a, **kw):
    kw["show_gui"] = False
    _gui_init(self, *a, **kw)
def show(self, *a, **kw):
    count[0] += 1
    if count[0] >= frames:
        img = np.asarray(self.get_image(), dtype=np.float32)
        np.save(out, img)
        raise Stop()
    return _show(self, *a, **kw)
GUI.__init__, GUI.show = gui_init, show

# ti.ui (GGUI): the same, for its windows (fluxion's are headless without a display anyway)
Window = getattr(getattr(ti, "ui", None), "Window", None)
if Window is not None:
    _win_init, _win_show = Window.__init__, Window.show
    def win_init(self, *a, **kw):
        kw["show_window"] = False
        _win_init(self, *a, **kw)
    def win_show(self, *a, **kw):
        count[0] += 1
        if count[0] >= frames:
            img = np.asarray(self.get_image_buffer_as_numpy(), dtype=np.float32)
            np.save(out, img)
            raise Stop()
        return _win_show(self, *a, **kw)
    Window.__init__, Window.show = win_init, win_show
os.chdir(os.path.dirname(path))
try:
    runpy.run_path(path, run_name="__main__")
except Stop:
    pass
except SystemExit as e:
    if e.code not in (None, 0):
        raise
print("EXAMPLE-OK", count[0])
'''


def examples_dir():
    import importlib.util
    spec = importlib.util.find_spec("taichi")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("taichi is not installed (pip install taichi): its examples are run")
    return os.path.join(list(spec.submodule_search_locations)[0], "examples")


def find(names):
    base = examples_dir()
    out = []
    for d, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(".py") and not f.startswith("_"):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, base)
                if not names or any(n in rel for n in names):
                    out.append((rel, p))
    return sorted(out)


def run_one(impl, path, frames, timeout, tmp):
    out = os.path.join(tmp, f"{impl}.npy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH", "")]), TI_LOG_LEVEL="error",
        TAICHI_EXAMPLES=examples_dir(),
        MPLBACKEND="Agg")
    env.pop("DISPLAY", None)
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", _BOOT, impl, path, str(frames), out],
                           capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
    except subprocess.TimeoutExpired as e:
        ok = "EXAMPLE-OK" in (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else False
        return {"outcome": "timeout" if not ok else "ok", "seconds": timeout,
                "frame": out if os.path.exists(out) else None, "why": ""}
    why = ""
    if p.returncode != 0 or "EXAMPLE-OK" not in p.stdout:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        why = lines[-1][:160] if lines else f"exit {p.returncode}"
    return {"outcome": "ok" if not why else ("crash" if p.returncode < 0 else "error"),
            "seconds": round(time.time() - t0, 1), "why": why,
            "frame": out if os.path.exists(out) else None}


def compare(a, b):
    """(max abs difference, fraction of pixels more than one 8-bit step apart) of two frames,
    or a word why not comparable."""
    x, y = np.load(a), np.load(b)
    if x.shape != y.shape:
        return f"shape {x.shape} vs {y.shape}"
    d = np.abs(x.astype(np.float64) - y.astype(np.float64))
    if d.ndim == 3:
        d = d[:, :, :3].max(axis=2)         # what is seen: red, green, blue
    return float(d.max()), float((d > 1.5 / 255).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.examples.taichi_examples")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--impl", choices=["both", "taichi", "fluxion"], default="both")
    ap.add_argument("--frames", type=int, default=3, help="stop at this show() and save it")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--png", help="write fluxion's saved frame of each example here, as png")
    ap.add_argument("--ui-on-taichi", action="store_true",
                    help="run the ti.ui examples on Taichi too (it needs Vulkan)")
    args = ap.parse_args(argv)
    impls = ["taichi", "fluxion"] if args.impl == "both" else [args.impl]
    rows = []
    for rel, path in find(args.names):
        row = {"example": rel}
        ui = NEEDS_UI in open(path).read()
        with tempfile.TemporaryDirectory() as tmp:
            for impl in impls:
                if ui and impl == "taichi" and not args.ui_on_taichi:
                    row[impl] = dict(NOT_RUN)
                    continue
                os.makedirs(os.path.join(tmp, impl), exist_ok=True)
                row[impl] = run_one(impl, path, args.frames, args.timeout,
                                    os.path.join(tmp, impl))
            frames = [row[i]["frame"] for i in impls if row[i].get("frame")]
            if args.png and row.get("fluxion", {}).get("frame"):
                from fluxion.tools.image import imwrite
                name = os.path.splitext(os.path.basename(rel))[0] + ".png"
                imwrite(np.clip(np.load(row["fluxion"]["frame"])[:, :, :3], 0, 1),
                        os.path.join(args.png, name))
            if len(frames) == 2:
                c = compare(*frames)
                row["frame_diff"] = c if isinstance(c, str) else {"max": round(c[0], 4),
                                                                   "pixels": round(c[1], 4)}
            for impl in impls:
                row[impl].pop("frame", None)
        rows.append(row)
        cells = [f"{i}: {row[i]['outcome']} {row[i]['seconds']}s" for i in impls]
        extra = f" frame {row['frame_diff']}" if "frame_diff" in row else ""
        why = "; ".join(f"{i}: {row[i]['why']}" for i in impls if row[i]["why"])
        print(f"{rel:55s} {' | '.join(cells)}{extra}{('  ' + why) if why else ''}", flush=True)
    for impl in impls:
        ran = [r for r in rows if r[impl]["outcome"] != NOT_RUN["outcome"]]
        print(f"{impl}: {sum(r[impl]['outcome'] == 'ok' for r in ran)} of {len(ran)} run "
              f"({len(rows) - len(ran)} not run: they need ti.ui, on Vulkan)")
    if args.impl == "both":
        both = [r for r in rows if r["taichi"]["outcome"] == "ok"]
        print(f"fluxion runs {sum(r['fluxion']['outcome'] == 'ok' for r in both)} of the "
              f"{len(both)} that taichi runs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
