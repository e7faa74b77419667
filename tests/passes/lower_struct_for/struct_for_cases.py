"""Struct-for kernels of every kind (dense, offsets, grouped, SNodes, pointer, bitmasked,
dynamic, nested sparse levels, loop_config, serial, autodiff, real functions), and how to
capture the IR that lowering the frontend's struct-fors gives, for comparing two builds of
fluxion."""
from __future__ import annotations

import fluxion as ti
from fluxion.ir.printer import print_kernel


def build(debug=False):
    """ti.init, the fields and the kernels; returns [(case name, launch)]."""
    ti.init(arch=ti.cpu, offline_cache=False, debug=debug)
    x1 = ti.field(ti.f32, shape=16, name="x1")
    x2 = ti.field(ti.f32, shape=(8, 6), name="x2")
    xo = ti.field(ti.i32, shape=(5, 7), offset=(-2, 3), name="xo")
    x3 = ti.Vector.field(2, ti.f32, shape=(4, 3, 2), name="x3")
    x0 = ti.field(ti.f32, shape=(), name="x0")
    y1 = ti.field(ti.f32, shape=16, name="y1", needs_grad=True)
    z1 = ti.field(ti.f32, shape=16, name="z1", needs_grad=True)
    s = ti.Struct.field({"a": ti.f32, "b": ti.i32}, shape=10, name="s")
    dn = ti.root.dense(ti.ij, (4, 4))
    bl = dn.dense(ti.ij, (2, 2))
    xb = ti.field(ti.f32, name="xb")
    bl.place(xb)
    ptr = ti.root.pointer(ti.i, 8)
    xp = ti.field(ti.f32, name="xp")
    ptr.dense(ti.i, 4).place(xp)
    bm = ti.root.bitmasked(ti.ij, (8, 8))
    xm = ti.field(ti.f32, name="xm")
    bm.place(xm)
    pb = ti.root.pointer(ti.ij, (4, 4)).bitmasked(ti.ij, (2, 2))
    xpb = ti.field(ti.f32, name="xpb")
    pb.place(xpb)
    dyn = ti.root.dense(ti.i, 4).dynamic(ti.j, 64, chunk_size=8)
    xd = ti.field(ti.i32, name="xd")
    dyn.place(xd)
    po = ti.root.pointer(ti.i, 4)
    xpo = ti.field(ti.f32, name="xpo")
    po.dense(ti.i, 4).place(xpo, offset=(-3,))
    out = ti.field(ti.f32, shape=(), name="out")

    @ti.kernel
    def dense_1d():
        for i in x1:
            x1[i] = i * 2.0

    @ti.kernel
    def dense_2d():
        for i, j in x2:
            x2[i, j] += i - j

    @ti.kernel
    def offsets():
        for i, j in xo:
            xo[i, j] = i * 10 + j

    @ti.kernel
    def grouped_3d():
        for I in ti.grouped(x3):
            x3[I] = ti.Vector([I[0] + I[1], I[2]])

    @ti.kernel
    def zero_d():
        for _ in ti.grouped(x0):
            x0[None] += 1.0

    @ti.kernel
    def over_snode():
        for i, j in bl:
            xb[i, j] = i + j
        for i, j in dn:
            xb[i * 2, j * 2] += 1.0

    @ti.kernel
    def struct_field():
        for i in s:
            s[i].a = s[i].b * 0.5

    @ti.kernel
    def pointer():
        for i in xp:
            xp[i] += 1.0

    @ti.kernel
    def bitmasked():
        for i, j in xm:
            xm[i, j] *= 2.0

    @ti.kernel
    def pointer_bitmasked():
        for I in ti.grouped(xpb):
            xpb[I] += 1.0

    @ti.kernel
    def dynamic():
        for i, j in xd:
            xd[i, j] += 1

    @ti.kernel
    def pointer_offset():
        for i in xpo:
            xpo[i] = i

    @ti.kernel
    def loop_config():
        ti.loop_config(block_dim=64)
        for i in xp:
            xp[i] += 1.0
        ti.loop_config(serialize=True)
        for i, j in xm:
            if i > 3:
                break
            out[None] += xm[i, 0]

    @ti.kernel
    def nested():
        for i in x1:
            for j, k in xm:
                x1[i] += xm[j, k]
            for p in xp:
                x1[i] += xp[p]
            for q, r in xd:
                x1[i] += q + r

    @ti.kernel
    def not_top_level():
        if True:
            for i in x1:
                x1[i] += 1.0

    @ti.kernel
    def reduce():
        for i in x1:
            out[None] += x1[i]

    @ti.kernel
    def energy():
        for i in y1:
            z1[i] = y1[i] * y1[i] + ti.sin(y1[i])
        for I in ti.grouped(y1):
            out[None] += z1[I]

    @ti.real_func
    def rf(n: ti.i32) -> ti.f32:
        acc = 0.0
        for i in x1:
            acc += x1[i] * n
        for j, k in x2:
            acc += x2[j, k]
        return acc

    @ti.kernel
    def real_function():
        out[None] = rf(3)

    def grad():
        energy()
        energy.grad()

    cases = [(k.name if hasattr(k, "name") else k.__name__, k) for k in (
        dense_1d, dense_2d, offsets, grouped_3d, zero_d, over_snode, struct_field, pointer,
        bitmasked, pointer_bitmasked, dynamic, pointer_offset, loop_config, nested,
        not_top_level, reduce, real_function)]
    cases.append(("energy+grad", grad))
    return cases


# the kernels whose struct-fors are all over dense SNodes: their lowering is settled (a
# sparse one's may change: issue 16 would visit active blocks instead of testing cells)
DENSE = ("dense_1d", "dense_2d", "offsets", "grouped_3d", "zero_d", "over_snode",
         "struct_field", "not_top_level", "reduce", "energy", "real_function")


def _lowering():
    """passes/lower_struct_for.py's run, or nothing to do in a build of fluxion that had no
    struct-for statement (its frontend lowered them: `before_ir`)."""
    try:
        from fluxion.passes import lower_struct_for
    except ImportError:
        return lambda ir, cfg: False
    return lower_struct_for.run


def capture(monkeypatch_setattr, debug=False, locs=True):
    """Launch every case; returns {kernel name: {"lowered": text}}: the kernel's IR as
    passes/lower_struct_for.py lowers the frontend's (`monkeypatch_setattr(obj, name, value)`
    wraps the driver's first simplify to lower the loops before it, the order the compile
    driver had before 2026-11-28; it simplifies the structured loops first now, which gives
    the same code)."""
    from fluxion.passes import simplify
    lower = _lowering()
    got = {}
    plain_simplify = simplify.run

    def lowered_before_simplify(ir, cfg, *args, **kwargs):
        lower(ir, cfg)
        got[ir.name] = {"lowered": print_kernel(ir, locs=locs)}
        return plain_simplify(ir, cfg, *args, **kwargs)

    monkeypatch_setattr(simplify, "run", lowered_before_simplify)
    for _, launch in build(debug):
        launch()
    return got


def final(monkeypatch_setattr, debug=False, lower_first=False):
    """Launch every case; returns {kernel name: its IR after the pass pipeline}, compiled as
    the driver does, or with `lower_first` with the loops lowered before simplify (the
    order it had before 2026-11-28)."""
    from fluxion.passes import pipeline, simplify
    lower = _lowering()
    got = {}
    plain_simplify, plain_pipeline = simplify.run, pipeline.run

    def lowered_before_simplify(ir, cfg, *args, **kwargs):
        lower(ir, cfg)
        return plain_simplify(ir, cfg, *args, **kwargs)

    def after_pipeline(ir, cfg, *args, **kwargs):
        plain_pipeline(ir, cfg, *args, **kwargs)
        got[ir.name] = print_kernel(ir)

    if lower_first:
        monkeypatch_setattr(simplify, "run", lowered_before_simplify)
    monkeypatch_setattr(pipeline, "run", after_pipeline)
    for _, launch in build(debug):
        launch()
    return got


def before_ir(commit):
    """The text of before.ir: the dense kernels' IR before simplify, plain and debug, as the
    build of fluxion on PYTHONPATH (that of `commit`) makes it."""
    lines = [f"# The IR that the frontend of fluxion {commit} (before struct-fors had a statement "
             f"of their",
             "# own) handed to simplify for the dense kernels of struct_for_cases.py, without "
             "locations: the",
             "# lowering of a StructForStmt must give the same (test_lower_struct_for.py).",
             "# Each kernel follows a line `# == <plain|debug> <kernel>`."]
    for debug in (False, True):
        got = capture(setattr, debug, locs=False)
        for k in sorted(DENSE):
            lines.append(f"# == {'debug' if debug else 'plain'} {k}")
            lines.extend(got[k]["lowered"].splitlines())
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # `python struct_for_cases.py OUT.json` with PYTHONPATH at one build of fluxion, then at
    # another, and compare the two files: every kernel's lowered IR, plain and debug.
    # `python struct_for_cases.py --before COMMIT before.ir`: remake before.ir with the build
    # of COMMIT (when the frontend changes what it emits inside loops, on purpose)
    import json
    import sys
    if sys.argv[1] == "--before":
        with open(sys.argv[3], "w") as f:
            f.write(before_ir(sys.argv[2]))
        sys.exit()
    out = {}
    for debug in (False, True):
        out["debug" if debug else "plain"] = capture(setattr, debug)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
