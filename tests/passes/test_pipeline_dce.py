"""The pipeline's dce runs only where something may have left code unused
(passes/pipeline.py `dead_free`, compiler/driver.py): a kernel that simplify's dce left
as it is skips it, and every kernel, skipping or not, leaves the pipeline without a
statement that dce would remove."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import sparse_writes
from fluxion.passes import dce, pipeline


def _watch(monkeypatch):
    """Count dce's runs during compiles, and after each pipeline, whether dce would still
    find something to remove (the IR as codegen gets it)."""
    seen = {"dce": 0, "left": []}
    real_dce, real_pipeline = dce.run, pipeline.run

    def counting(kernel, cfg=None):
        seen["dce"] += 1
        return real_dce(kernel, cfg)

    def checked(kernel, cfg, *a, **kw):
        real_pipeline(kernel, cfg, *a, **kw)
        seen["left"].append(real_dce(kernel, cfg))

    monkeypatch.setattr(dce, "run", counting)
    monkeypatch.setattr(pipeline, "run", checked)
    return seen


def _range_kernel():
    x = ti.field(ti.f32, shape=16)
    y = ti.field(ti.f32, shape=16)

    @ti.kernel
    def k(a: ti.f32):
        for i in range(16):
            t = x[i] * a
            unused = x[i] + 1.0     # (dropped by simplify's dce)
            y[i] = t + 1.0
    return x, y, k, lambda xs, a: xs * a + 1.0


def _reduction_kernel():
    x = ti.field(ti.f32, shape=16)
    y = ti.field(ti.f32, shape=())

    @ti.kernel
    def k(a: ti.f32):
        for i in range(16):
            y[None] += x[i] * a     # privatized by passes/reduction: its pointer goes
    return x, y, k, lambda xs, a: np.float32((xs * a).sum())


def _struct_kernel():
    x = ti.field(ti.f32, shape=16)
    y = ti.field(ti.f32, shape=16)

    @ti.kernel
    def k(a: ti.f32):
        for i in x:
            y[i] = x[i] * a + 1.0
    return x, y, k, lambda xs, a: xs * a + 1.0


CASES = {"range": _range_kernel, "reduction": _reduction_kernel, "struct": _struct_kernel}


@pytest.mark.parametrize("checks", [False, None])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pipeline_leaves_nothing_for_dce(monkeypatch, case, checks):
    ti.init(arch=ti.cpu, check_out_of_bound=checks, offline_cache=False)
    x, y, k, expect = CASES[case]()
    seen = _watch(monkeypatch)
    xs = np.arange(16, dtype=np.float32)
    x.from_numpy(xs)
    k(2.0)
    assert seen["left"] == [False]
    np.testing.assert_allclose(y.to_numpy(), expect(xs, 2.0), rtol=1e-6)


def test_a_kernel_that_dce_left_as_it_is_gets_no_second_dce(monkeypatch):
    # without write checks nor sparse fields, simplify's dce is the only one (the pipeline's
    # two would find nothing: forward and reduction change nothing here)
    ti.init(arch=ti.cpu, check_out_of_bound=False, offline_cache=False)
    x, y, k, _ = _range_kernel()
    seen = _watch(monkeypatch)
    k(2.0)
    assert seen["dce"] == 1 and seen["left"] == [False]


def test_reductions_and_write_checks_get_the_pipelines_dce(monkeypatch):
    ti.init(arch=ti.cpu, check_out_of_bound=False, offline_cache=False)
    *_, k, _ = _reduction_kernel()
    seen = _watch(monkeypatch)
    k(2.0)
    assert seen["dce"] == 2         # simplify's, and the one after the reduction
    ti.init(arch=ti.cpu, offline_cache=False)      # (write checks by default)
    *_, k, _ = _range_kernel()
    seen = _watch(monkeypatch)
    k(2.0)
    assert seen["dce"] == 2         # simplify's, and the one after the checks


def test_instrument_writes_says_whether_it_changed_the_kernel(monkeypatch):
    ti.init(arch=ti.cpu, check_out_of_bound=False, offline_cache=False)
    said = []
    real = sparse_writes.instrument_writes

    def recording(kernel, reverse=False):
        said.append(real(kernel, reverse=reverse))
        return said[-1]
    monkeypatch.setattr(sparse_writes, "instrument_writes", recording)
    dense = ti.field(ti.i32, shape=8)
    sparse = ti.field(ti.i32)
    ti.root.pointer(ti.i, 4).dense(ti.i, 2).place(sparse)

    @ti.kernel
    def to_dense():
        for i in range(8):
            dense[i] = i

    @ti.kernel
    def to_sparse():
        for i in range(8):
            sparse[i] = i
    seen = _watch(monkeypatch)
    to_dense()
    to_sparse()
    assert said == [False, True]
    assert seen["left"] == [False, False]
    assert seen["dce"] == 1 + 2     # the sparse kernel's activations get the pipeline's dce
    assert sparse.to_numpy().tolist() == list(range(8))
