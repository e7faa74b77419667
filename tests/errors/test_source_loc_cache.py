"""SourceInfo.loc keeps one SourceLoc per AST node: the same object on every request, with
the fields a fresh computation gives; a kernel's error still names the line of the node."""
from __future__ import annotations

import ast

import pytest

import fluxion as ti
from fluxion.frontend.source import SourceInfo


def _sample(a):
    b = a + 1
    for i in range(3):
        b += i
    return b


def test_one_location_per_node_equal_to_a_fresh_one():
    src = SourceInfo(_sample)
    nodes = [n for n in ast.walk(src.tree) if hasattr(n, "lineno")]
    assert len(nodes) > 5
    first = [src.loc(n) for n in nodes]
    assert all(src.loc(n) is loc for n, loc in zip(nodes, first))
    fresh = SourceInfo(_sample)
    names = ("file", "line", "col", "end_line", "end_col", "func", "source_line", "header_end")
    fresh_nodes = [n for n in ast.walk(fresh.tree) if hasattr(n, "lineno")]
    for n, loc in zip(fresh_nodes, first):
        assert [getattr(fresh.loc(n), k) for k in names] == [getattr(loc, k) for k in names]
    ret = next(n for n in nodes if isinstance(n, ast.Return))
    assert src.loc(ret).source_line.strip() == "return b"
    assert src.loc(ast.Pass()) is None      # a node without a position has no location


def test_an_error_in_an_unrolled_loop_names_its_line_on_every_compile():
    ti.init(arch=ti.cpu, offline_cache=False)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in ti.static(range(2)):
            x[i] = x[i, 0]       # wrong number of indices

    for _ in range(2):
        with pytest.raises(Exception) as ei:
            k()
        assert "x[i] = x[i, 0]" in str(ei.value)
