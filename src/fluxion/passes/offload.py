"""Offload: split the kernel body into tasks.

Requires: frontend IR. Guarantees: `kernel.tasks` is a list of ("serial", [stmts]) and
("range_for", RangeForStmt) in program order; each top-level parallel for is one parallel task
and each run of other top-level statements one serial task. Values defined in a serial task
and used by a later task stay in the kernel's entry function (tasks run in order there), and
codegen passes what a parallel body uses from outside through its closure.
"""
from __future__ import annotations

from fluxion.ir import stmts as S


def split_tasks(stmts):
    """Top-level statements -> [("serial", [stmts]) | ("range_for", loop)], in order."""
    tasks, serial = [], []
    for s in stmts:
        if isinstance(s, S.RangeForStmt) and s.parallel:
            if serial:
                tasks.append(("serial", serial))
                serial = []
            tasks.append(("range_for", s))
        else:
            serial.append(s)
    if serial:
        tasks.append(("serial", serial))
    return tasks


def run(kernel, cfg=None) -> bool:
    kernel.tasks = split_tasks(kernel.body.stmts)
    return True
