"""Kernels with ndrange-fors of every kind (negative begins, empty dimensions, kernel-value
bounds of two integer types, grouped, 0-D and 1-D, under ti.static, serial ones inside other
loops, ti.loop_config, over an ndarray's indices, autodiff), and how to capture the IR that
lowering the frontend's loops gives, for comparing two builds of fluxion: before.ir is this
capture made by the build before ndrange-fors had a statement."""
from __future__ import annotations

import numpy as np

import fluxion as ti
from fluxion.ir.printer import print_kernel


def build(debug=False):
    """ti.init, the fields and the kernels; returns [(case name, launch)]."""
    ti.init(arch=ti.cpu, offline_cache=False, debug=debug)
    x = ti.field(ti.f32, shape=(6, 5), name="x")
    y = ti.field(ti.i32, shape=(4, 3, 2), name="y")
    v = ti.Vector.field(2, ti.i32, shape=(4, 4), name="v")
    s = ti.field(ti.f32, shape=(), name="s", needs_grad=True)
    a = ti.field(ti.f32, shape=(6, 5), name="a", needs_grad=True)
    c = ti.field(ti.i32, shape=(), name="c")

    @ti.kernel
    def negative_begins():
        for i, j in ti.ndrange((-3, 3), (-1, 4)):
            x[i + 3, j + 1] = i * 10 + j

    @ti.kernel
    def empty_dimensions():
        for i, j in ti.ndrange((5, 2), 3):
            c[None] += 1
        for i, j in ti.ndrange((0, 0), (4, 1)):
            c[None] += 1

    @ti.kernel
    def kernel_value_bounds(n: ti.i32, m: ti.i32, b: ti.i32):
        for i, j, k in ti.ndrange((b, n), m, (1, 3)):
            c[None] += i * 100 + j * 10 + k

    @ti.kernel
    def i64_bounds(n: ti.i64):
        for i, j in ti.ndrange(n, (-2, n)):
            c[None] += i - j

    @ti.kernel
    def grouped():
        for I in ti.grouped(ti.ndrange(4, 3, 2)):
            y[I] = I[0] * 100 + I[1] * 10 + I[2]

    @ti.kernel
    def grouped_values(n: ti.i32):
        for I in ti.grouped(ti.ndrange((1, n), 4)):
            v[I] = I

    @ti.kernel
    def in_static():
        for k in ti.static(range(2)):
            for i, j in ti.ndrange(3, (k, 5)):
                x[i + k, j] += 1.0

    @ti.kernel
    def serial_inside():
        for t in range(3):
            for i, j in ti.ndrange((t, 4), 2):
                c[None] += i * j + t
        for i, j in x:
            acc = 0.0
            for p, q in ti.ndrange((-1, 2), (-1, 2)):
                acc += p * q + 1.0
            x[i, j] = acc

    @ti.kernel
    def loop_config():
        ti.loop_config(block_dim=64)
        for i, j in ti.ndrange(6, 5):
            x[i, j] = i + j
        ti.loop_config(serialize=True)
        for i, j in ti.ndrange(6, 5):
            x[i, j] += x[(i + 5) % 6, j]
        ti.loop_config(parallelize=2)
        for i, j in ti.ndrange(6, 5):
            x[i, j] *= 2.0

    @ti.kernel
    def zero_and_one_d():
        for _I in ti.grouped(ti.ndrange()):
            c[None] += 1
        for i in ti.ndrange(7):
            c[None] += i
        for i in ti.ndrange((2, 7)):
            c[None] += i
        for I in ti.grouped(ti.ndrange((3, 6))):
            c[None] += I[0]

    @ti.kernel
    def with_break():
        for t in range(1):
            for i, j in ti.ndrange(5, 5):
                if i * j > 6:
                    break
                c[None] += 1

    @ti.kernel
    def over_ndarray(q: ti.types.ndarray()):
        for i, j in q:
            s[None] += q[i, j] * (i + 1) + j

    @ti.kernel
    def differentiated():
        for i, j in ti.ndrange(6, 5):
            s[None] += a[i, j] ** 2
        for I in ti.grouped(ti.ndrange((1, 6), 5)):
            s[None] += ti.sin(a[I])
        for i in range(6):
            acc = 0.0
            for j, k in ti.ndrange(5, (0, 2)):
                acc += a[i, j] * k + acc * 0.5
            s[None] += acc

    def tape():
        with ti.ad.Tape(loss=s):
            differentiated()

    q = np.arange(12, dtype=np.float32).reshape(3, 4)
    return [("negative_begins", negative_begins), ("empty_dimensions", empty_dimensions),
            ("kernel_value_bounds", lambda: kernel_value_bounds(5, 3, -1)),
            ("i64_bounds", lambda: i64_bounds(4)), ("grouped", grouped),
            ("grouped_values", lambda: grouped_values(4)), ("in_static", in_static),
            ("serial_inside", serial_inside), ("loop_config", loop_config),
            ("zero_and_one_d", zero_and_one_d), ("with_break", with_break),
            ("over_ndarray", lambda: over_ndarray(q)), ("differentiated", tape)]


def capture(monkeypatch_setattr, debug=False):
    """{kernel name: its IR text as passes/lower_struct_for.py lowers the frontend's, without
    locations} for every kernel `build` makes (an adjoint is its primal's name + `.grad`):
    `monkeypatch_setattr(obj, name, value)` wraps the driver's first simplify to lower the
    loops before it (the driver's order before 2026-11-28; simplify runs on the loops first
    now, which gives the same code)."""
    from fluxion.passes import simplify
    try:
        from fluxion.passes.lower_struct_for import run as lower
    except ImportError:     # (a build whose frontend lowered the loops itself: before_ir)
        def lower(ir, cfg):
            return False
    got = {}
    plain_simplify = simplify.run

    def lowered_before_simplify(ir, cfg, *args, **kwargs):
        lower(ir, cfg)
        got[ir.name] = print_kernel(ir, locs=False)
        return plain_simplify(ir, cfg, *args, **kwargs)

    monkeypatch_setattr(simplify, "run", lowered_before_simplify)
    for _, launch in build(debug):
        launch()
    return got


def final(monkeypatch_setattr, debug=False, lower_first=False):
    """{kernel name: its IR after the pass pipeline} for every kernel `build` makes,
    compiled as the driver does, or with `lower_first` with the loops lowered before
    simplify (the order it had before 2026-11-28)."""
    from fluxion.passes import lower_struct_for, pipeline, simplify
    got = {}
    plain_simplify, plain_pipeline = simplify.run, pipeline.run

    def lowered_before_simplify(ir, cfg, *args, **kwargs):
        lower_struct_for.run(ir, cfg)
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
    lines = [f"# The IR that fluxion {commit} (before ndrange-fors had a statement of their own)",
             "# handed to simplify for the kernels of ndrange_cases.py, without locations: the",
             "# lowering of an NdRangeForStmt must give the same (test_lower_ndrange_for.py).",
             "# Each kernel follows a line `# == <plain|debug> <kernel>`."]
    for debug in (False, True):
        got = capture(setattr, debug)
        for k in sorted(got):
            lines.append(f"# == {'debug' if debug else 'plain'} {k}")
            lines.extend(got[k].splitlines())
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # `python ndrange_cases.py COMMIT before.ir`, with PYTHONPATH at the build of COMMIT:
    # remake before.ir (when the frontend changes what it emits for these loops, on purpose)
    import sys
    with open(sys.argv[2], "w") as f:
        f.write(before_ir(sys.argv[1]))
