"""The IR's walk and operand lists, which every pass uses, against plain reference versions
(a recursive walk; the generic `Stmt.operands` driven by OPERANDS) on kernels with nested
blocks of every kind, at every stage of the pipeline."""
from __future__ import annotations

import fluxion as ti
from fluxion.ir import stmts as S
from fluxion.passes import pipeline


def _reference_walk(block):
    out = []
    for s in block.stmts:
        out.append(s)
        for b in (getattr(s, name) for name in s.BLOCKS):
            if b is not None:
                out.extend(_reference_walk(b))
    return out


def _check(kernel):
    for body in S.bodies(kernel):
        got = list(S.walk(body))
        assert [id(s) for s in got] == [id(s) for s in _reference_walk(body)]
        for s in got:
            ops = s.operands()
            ref = S.Stmt.operands(s)
            assert len(ops) == len(ref) and all(a is b for a, b in zip(ops, ref))
            if s.OPERANDS:     # a new list each call: callers may extend it
                assert type(ops) is list and s.operands() is not ops
    return ""


def test_walk_and_operands_match_the_reference_at_every_stage(monkeypatch):
    ti.init(arch=ti.cpu, print_ir=True, offline_cache=False)
    seen = []
    monkeypatch.setattr(pipeline, "print_kernel", lambda k: seen.append(k.name) or _check(k))
    x = ti.field(ti.f32, shape=(8, 4))
    v = ti.Vector.field(2, ti.f32, shape=8)
    total = ti.field(ti.f32, shape=())

    @ti.real_func
    def twice(a: ti.f32) -> ti.f32:
        r = a
        if a > 0:
            r = 2 * a
        return r

    @ti.kernel
    def k(n: ti.i32):
        for i, j in x:
            if i % 2 == 0:
                x[i, j] = i + j
            else:
                k2 = 0
                while k2 < n:
                    for q in range(3):
                        if q == 1:
                            continue
                        x[i, j] += q
                    k2 += 1
        for i in v:
            v[i] = [ti.cast(i, ti.f32), twice(ti.cast(i, ti.f32))]
            total[None] += v[i].dot(v[i])
        for _ in range(1):
            if n > 2:
                total[None] += 1

    k(3)
    assert "k" in seen and len(seen) > 5
    xs = x.to_numpy()
    for i in range(8):
        for j in range(4):
            assert xs[i, j] == (i + j if i % 2 == 0 else 3 * 2)
