"""codegen/text.py writes the text of the CPU's LLVM modules faster than llvmlite's str(): the
text must be the same, byte for byte, for every instruction it writes itself (compared here
on kernels that together emit all of them), and be str()'s own with another llvmlite."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.codegen import lower, text

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def modules(monkeypatch):
    ti.init(arch=ti.cpu, offline_cache=False)
    made = []
    plain = lower.ModuleLowering.lower

    def lowered(self):
        m = plain(self)
        made.append(m)
        return m
    monkeypatch.setattr(lower.ModuleLowering, "lower", lowered)
    return made


def _fresh(module):
    """Forget the instructions' texts, so that the next writer makes them all again."""
    for f in module.functions:
        for b in f.blocks:
            for i in b.instructions:
                i._clear_string_cache()


def _kernels():
    n = 16
    x = ti.field(ti.f32, n)
    c = ti.field(ti.i32, ())
    grid = ti.Vector.field(2, ti.f32, (4, 4))

    @ti.real_func
    def clamp01(v: ti.f32) -> ti.f32:
        r = v
        if v < 0.0:
            r = 0.0
        elif v > 1.0:
            r = 1.0
        return r

    @ti.kernel
    def work(a: ti.types.ndarray(dtype=ti.f32, ndim=1), p: ti.i32) -> ti.i32:
        for i in x:
            x[i] = clamp01(a[i]) + ti.select(a[i] > 0.5, 1.0, 0.0)
            ti.atomic_add(c[None], 1)
        for i, j in grid:
            grid[i, j] += ti.Vector([x[i], x[j] * 0.5])
        k = 0
        for i in range(n):
            if a[i] != a[i]:
                k += 1
        return k + 3 ** p

    a = np.linspace(-1.0, 2.0, n).astype(np.float32)
    assert work(a, 2) == 9
    np.testing.assert_allclose(x.to_numpy(), np.clip(a, 0, 1) + (a > 0.5), rtol=1e-6)
    assert c[None] == n
    from fluxion.examples.mpm88 import build
    sim = build(ti, n_particles=64, n_grid=16)
    sim["init"]()
    sim["substep"]()


def test_the_text_is_llvmlites(modules):
    _kernels()
    assert len(modules) >= 3
    written = set()
    for m in modules:
        _fresh(m)
        want = str(m)
        _fresh(m)
        assert text.module_text(m) == want
        # (and what str() writes after it, from the texts it left, is the same again)
        assert str(m) == want
        written |= {type(i) for f in m.functions for b in f.blocks for i in b.instructions}
    # every instruction that text.py writes itself was compared (phi and a returned value:
    # the integer power's helper; select, fcmp, calls and atomics: `work`)
    assert set(text._WRITERS) <= written
    assert written - set(text._WRITERS), "some instruction left to llvmlite was compared too"


def test_another_llvmlite_writes_its_own_text(modules, monkeypatch):
    monkeypatch.setattr(text, "_SAME", False)
    monkeypatch.setattr(text, "_WRITERS", {})       # (nothing of text.py's may run)
    _kernels()
    for m in modules:
        assert text.module_text(m) == str(m)
        f = next(f for f in m.functions if f.blocks)
        assert text.function_text(f) == str(f)
