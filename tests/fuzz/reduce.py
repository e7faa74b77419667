"""Shrinking a failing program text: delete statements (a line with its indented block) and
unwrap compound statements while the failure persists. Greedy, one edit at a time, until no
edit keeps the failure (a 1-minimal program with respect to these edits)."""
from __future__ import annotations

import ast


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _unit_end(lines, k):
    """Index past the statement starting at line k (its indented block included)."""
    ind = _indent(lines[k])
    j = k + 1
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > ind):
        j += 1
    return j


def _fix_empty_blocks(lines):
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        if line.rstrip().endswith(":"):
            nxt = next((x for x in lines[k + 1:] if x.strip()), None)
            if nxt is None or _indent(nxt) <= _indent(line):
                out.append(" " * (_indent(line) + 4) + "pass")
    return out


def _candidates(lines):
    """Edited versions of `lines`, biggest deletions first."""
    fixed = ("def build", "def run", "return run", "return out", "rng =", "out = {}",
             "import ", "@ti.")
    order = sorted(range(len(lines)), key=lambda k: -(_unit_end(lines, k) - k))
    for k in order:
        s = lines[k].strip()
        if not s or any(s.startswith(f) for f in fixed) or _indent(lines[k]) < 4:
            continue
        if s.startswith("def "):
            # a whole kernel or function (with its decorator line)
            start = k - 1 if k and lines[k - 1].strip().startswith("@") else k
            yield lines[:start] + lines[_unit_end(lines, k):]
            continue
        end = _unit_end(lines, k)
        yield lines[:k] + lines[end:]
        if s.endswith(":") and end > k + 1 and not s.startswith(("else", "elif")):
            # unwrap: the body in place of the compound statement
            body = [ln[4:] if ln.startswith(" " * (_indent(lines[k]) + 4)) else ln
                    for ln in lines[k + 1:end]]
            # an if/elif/else chain: keep only this branch
            rest = end
            while rest < len(lines) and lines[rest].strip().startswith(("elif", "else")) and \
                    _indent(lines[rest]) == _indent(lines[k]):
                rest = _unit_end(lines, rest)
            yield lines[:k] + body + lines[rest:]


def reduce(src, still_fails, budget=400, log=None):
    """The smallest program found from `src` for which `still_fails(text)` holds."""
    lines = src.rstrip("\n").split("\n")
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for cand in _candidates(lines):
            cand = _fix_empty_blocks(cand)
            text = "\n".join(cand) + "\n"
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            tries += 1
            if tries > budget:
                break
            if still_fails(text):
                if log:
                    log(f"reduced to {len(cand)} lines")
                lines = cand
                changed = True
                break
    return "\n".join(lines) + "\n"
