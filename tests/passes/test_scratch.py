"""Passes request scratch memory, the runtime allocates it: the scatter pass records its
per-thread copies on the kernel IR (ir/scratch.py) and makes no field; runtime/scratch.py
gives them memory when the program is loaded, shared by the kernels that privatize one field,
and kept at zero between launches."""
import numpy as np
import pytest

import fluxion as ti
from fluxion.frontend.transformer import Transformer
from fluxion.ir import stmts as S
from fluxion.ir.builder import BuildContext, building
from fluxion.ir.scratch import ScratchBuffer
from fluxion.lang import field as field_mod
from fluxion.lang import runtime
from fluxion.passes import dce, lower_struct_for, reduction, scatter
from fluxion.runtime import scratch


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, cpu_max_num_threads=4, offline_cache=False)
    if runtime.on_cuda():
        ti.reset()
        pytest.skip("per-thread copies are the CPU backend's")
    yield
    ti.reset()


def frontend_ir(kern):
    ir = S.Kernel(kern.name, [], ())
    with building(BuildContext(ir, runtime.config())):
        Transformer(kern.source(), kern.globals(), kern.name).build_function({})
    lower_struct_for.run(ir, runtime.config())     # (as the compile driver does first)
    return ir


def test_scatter_requests_copies_and_the_runtime_allocates_them():
    hist = ti.field(ti.f32, shape=16)
    vals = ti.field(ti.i32, shape=4096)

    @ti.kernel
    def count():
        for i in vals:
            hist[vals[i] % 16] += 1.0

    vals.from_numpy(np.arange(4096, dtype=np.int32))
    ir = frontend_ir(count)
    cfg = runtime.config()
    dce.run(ir)
    reduction.run(ir, cfg)
    before = len(field_mod.all_fields())
    assert scatter.run(ir, cfg)
    assert len(field_mod.all_fields()) == before         # the pass made no field
    (req,) = ir.scratch
    assert req.shape == (4, 16) and req.dtype == ti.f32 and req.copy_of is hist.places[0]
    ptrs = [s for s in S.walk(ir.body) if isinstance(s, S.GlobalPtrStmt)
            and isinstance(s.place, ScratchBuffer)]
    assert ptrs
    scratch.allocate(ir)
    assert len(field_mod.all_fields()) == before + 1     # the runtime did, once
    assert all(not isinstance(s.place, ScratchBuffer) for s in S.walk(ir.body)
               if isinstance(s, S.GlobalPtrStmt))
    (hidden,) = ir.private_fields
    assert hidden.shape == (4, 16)
    # a second program privatizing the same field shares its copies
    ir2 = frontend_ir(count)
    dce.run(ir2)
    reduction.run(ir2, cfg)
    scatter.run(ir2, cfg)
    scratch.allocate(ir2)
    assert ir2.private_fields == [hidden]
    # and the kernel computes what numpy does, launch after launch
    count()
    count()
    expect = 2 * np.bincount(np.arange(4096) % 16, minlength=16)
    np.testing.assert_array_equal(hist.to_numpy(), expect)
    (inst,) = count.instances.values()
    assert inst.compiled.private_fields
    np.testing.assert_array_equal(inst.compiled.private_fields[0].to_numpy(), 0)
