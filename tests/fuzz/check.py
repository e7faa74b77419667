"""Checking one program against the oracles, in this process or in a child process (a program
that crashes fluxion must not take the runner with it).

`python -m tests.fuzz.check FILE ORACLE` prints one line per implementation as it finishes
("ran NAME ok|error ...") and then one line per comparison ("cmp ORACLE -|description"), so a
parent that sees the child die knows which implementation crashed."""
from __future__ import annotations

import os
import subprocess
import sys

from . import oracles as O

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def impls(oracle, kind):
    """[(name, impl)] to run and [(oracle name, a, b)] to compare, for an oracle choice."""
    runs, cmps = [("opt", O.FLUXION_OPT)], []
    if oracle in ("self", "both"):
        runs.append(("plain", O.FLUXION_PLAIN))
        cmps.append(("self", "plain", "opt"))
    if oracle in ("taichi", "both") and O.taichi_available():
        runs.append(("taichi", O.TAICHI))
        cmps.append(("taichi", "taichi", "opt"))
    if kind == "ad":
        cmps.append(("fd", "fd", "opt"))
    return runs, cmps


def check(src, oracle="both", kind="kernel", say=None):
    """{oracle: description} of the disagreements of program `src` (empty: all agree)."""
    from . import gen_ad
    runs, cmps = impls(oracle, kind)
    got = {}
    for name, impl in runs:
        if kind == "ad":
            got[name] = gen_ad.execute(src, impl)
        else:
            got[name] = O.execute(src, impl)
        if say:
            say(f"ran {name} " + (f"error {got[name].error}" if got[name].error else "ok"))
    if kind == "ad":
        got["fd"] = gen_ad.finite_differences(src)
    out = {}
    for oname, a, b in cmps:
        # half precision anywhere in a program bounds what its float results can agree to
        d = O.compare(got[a], got[b], tol_scale=(100.0 if oname == "fd" else 1.0),
                      scalar_tol=(1e-5 if kind == "ad" else 1e-3),
                      tol_floor=(1e-2 if "f16" in src else 0.0),
                      slack=getattr(got[a], "slack", None))
        if oname == "taichi" and got[a].error and not got[b].error:
            d = None     # a program taichi rejects is the generator's, not a finding
        if say:
            say(f"cmp {oname} " + (d or "-"))
        if d:
            out[oname] = d
    if "taichi" in out and "error" not in out["taichi"].split(":")[0]:
        why = _explain_taichi(src, kind, got, out)
        if why:
            out[EXPLAINED] = f"{why}: {out.pop('taichi')}"
            if say:
                say(f"cmp {EXPLAINED} {out[EXPLAINED]}")
    return out


# A disagreement with taichi that taichi's own runs show to be taichi's: reported under this
# key, saved, but neither counted as a disagreement of fluxion nor reduced.
EXPLAINED = "taichi_explained"


def _explain_taichi(src, kind, got, out):
    """Why taichi's different values are taichi's mistake, or None. Two tie-breakers, both
    independent of fluxion's own judgement:
    - taichi without its optimizing passes gives fluxion's values (a deterministic program
      whose values change with taichi's optimizer is miscompiled by it);
    - in a differentiated program, taichi's loss agrees with fluxion's, and fluxion's gradient
      agrees with central differences of that loss (taichi's gradient is then wrong)."""
    from . import gen_ad
    if kind == "ad" and "fd" not in out and "self" not in out:
        loss = O.compare(_only(got["taichi"], "loss"), _only(got["opt"], "loss"),
                         scalar_tol=1e-5)
        if loss is None:
            return "taichi's loss agrees and central differences agree with fluxion's gradient"
    plain = (gen_ad.execute if kind == "ad" else O.execute)(src, O.TAICHI_PLAIN)
    if not plain.error and "self" not in out:
        d = O.compare(plain, got["opt"], tol_scale=1.0,
                      scalar_tol=(1e-5 if kind == "ad" else 1e-3),
                      tol_floor=(1e-2 if "f16" in src else 0.0))
        if d is None:
            return "taichi without its optimizations agrees with fluxion"
    return None


def _only(outcome, key):
    if outcome.error:
        return outcome
    return O.Outcome(values={key: outcome.values.get(key)})


def check_in_child(src, oracle="both", kind="kernel", timeout=300):
    """Like `check`, in a child process: {oracle: description}, with "crash in NAME" or
    "timeout" for a child that died or hung."""
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".py", prefix="fuzzcheck-")
    with os.fdopen(fd, "w") as f:
        f.write(src)
    try:
        p = subprocess.run([sys.executable, "-m", "tests.fuzz.check", path, oracle, kind],
                           cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        lines = p.stdout.splitlines()
    except subprocess.TimeoutExpired:
        return {"timeout": "timeout"}
    finally:
        os.unlink(path)
    return parse(lines, p.returncode, oracle, kind)


class Lines:
    """The lines of a child's stdout through a reader thread: `get(timeout)` is the next
    line, "" at its end, None when nothing came in time. (select() on a buffered pipe misses
    lines that arrived with the previous one.)"""

    def __init__(self, stream):
        import queue
        import threading
        self.q = queue.Queue()

        def pump():
            for line in stream:
                self.q.put(line)
            self.q.put("")
        threading.Thread(target=pump, daemon=True).start()

    def get(self, timeout):
        import queue
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None


class Server:
    """A child process that checks program after program (no import cost per program); a
    crash or hang answers like `check_in_child` and the next program gets a fresh child."""

    def __init__(self, oracle="both", kind="kernel", timeout=300):
        self.oracle, self.kind, self.timeout = oracle, kind, timeout
        self.p = None

    def _start(self):
        env = dict(os.environ, FLUXION_FUZZ_DIR=O.programs_dir())
        self.p = subprocess.Popen([sys.executable, "-m", "tests.fuzz.check", "--serve",
                                   self.oracle, self.kind], cwd=ROOT, env=env,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  bufsize=1)
        self.lines = Lines(self.p.stdout)

    def __call__(self, src):
        import json
        import time
        if self.p is None or self.p.poll() is not None:
            self._start()
        try:
            self.p.stdin.write(json.dumps(src) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        lines, t0 = [], time.time()
        while True:
            line = self.lines.get(1.0)
            if line is None:
                if time.time() - t0 > self.timeout:
                    self.close()
                    return {"timeout": "timeout"}
                continue
            if not line:
                rc = self.p.wait()
                self.p = None
                return parse(lines, rc or -1, self.oracle, self.kind)
            line = line.rstrip("\n")
            if line == "done":
                return parse(lines, 0, self.oracle, self.kind)
            lines.append(line)

    def close(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None


def parse(lines, rc, oracle, kind):
    runs, _ = impls(oracle, kind)
    ran = [ln.split()[1] for ln in lines if ln.startswith("ran ")]
    out = {}
    for ln in lines:
        if ln.startswith("cmp "):
            _, name, desc = ln.split(" ", 2)
            if desc != "-":
                out[name] = desc
    if rc != 0 and not any(ln.startswith("done") for ln in lines):
        missing = [n for n, _ in runs if n not in ran]
        out["crash"] = f"crash (exit {rc}) in {missing[0] if missing else 'comparison'}"
    return out


def signature(d):
    """What kind of disagreement: kept while a program is reduced."""
    sig = set()
    for k, v in d.items():
        if k == EXPLAINED:
            continue
        if k == "crash":
            sig.add("crash")
        elif v.startswith("error:"):
            sig.add((k, "error"))
        else:
            sig.add((k, "value"))
    return frozenset(sig)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    if sys.argv[1] == "--serve":
        import json
        for line in sys.stdin:
            check(json.loads(line), sys.argv[2], sys.argv[3], say=lambda s: print(s, flush=True))
            print("done", flush=True)
        sys.exit(0)
    text = open(sys.argv[1]).read()
    check(text, sys.argv[2], sys.argv[3], say=lambda s: print(s, flush=True))
    print("done", flush=True)
