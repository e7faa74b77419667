"""Compare the code of two builds of fluxion, kernel by kernel: for a change of the compiler
that must not change the code (or only where explained).

    PYTHONPATH=<build A>/src python tests/passes/compare_builds.py dump A.pkl [PARTS]
    PYTHONPATH=<build B>/src python tests/passes/compare_builds.py dump B.pkl [PARTS]
    python tests/passes/compare_builds.py compare A.pkl B.pkl

`dump` (from the root of a checkout: the cases and programs are this checkout's) compiles
with the offline cache and the compile worker off and keeps, for every kernel instance in
the order compiled: its IR after the pass pipeline, its LLVM text and its object file. PARTS
(comma-separated, all by default): `bench` (the benchmark workloads at their quick sizes,
two calls each), `cases` (tests/passes/lower_struct_for and lower_ndrange_for's kernels,
plain and debug), `fuzz` (120 random kernel programs), `fuzzad` (40 random differentiable
ones), `sparse` (40 random programs with sparse fields), each random program on the
optimized and the plain configuration of tests/fuzz. `compare` counts the objects, LLVM
texts and IR texts that differ (the IR with constants written into their uses, so that
where a constant stands does not count, and the random programs' file names masked), and
names the kernels whose code differs."""
from __future__ import annotations

import difflib
import importlib
import os
import pickle
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTS = ("bench", "cases", "fuzz", "fuzzad", "sparse")


def dump(out_path, parts):
    os.environ["FLUXION_OFFLINE_CACHE"] = "0"
    os.environ["FLUXION_COMPILE_WORKER"] = "0"
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"),
                    os.path.join(ROOT, "tests", "passes", "lower_struct_for"),
                    os.path.join(ROOT, "tests", "passes", "lower_ndrange_for")]
    import fluxion as ti
    from fluxion.ir.printer import print_kernel
    from fluxion.passes import pipeline
    from fluxion.runtime import cpu_jit

    records, errors, tag, final = [], [], ["?"], {}
    plain_build, plain_pipeline = cpu_jit.CpuJit.build, pipeline.run

    def build(self, kernel):
        art = plain_build(self, kernel)
        records.append((tag[0], kernel.name, final.pop(id(kernel), None), art.llvm_ir, art.obj))
        return art

    def after_pipeline(ir, cfg, *args, **kwargs):
        changed = plain_pipeline(ir, cfg, *args, **kwargs)
        final[id(ir)] = print_kernel(ir)
        return changed

    cpu_jit.CpuJit.build, pipeline.run = build, after_pipeline
    if "bench" in parts:
        from benchmarks.workloads import NAMES
        for name in NAMES:
            tag[0] = "bench:" + name
            try:
                mod = importlib.import_module("benchmarks.workloads." + name)
                ti.init(arch=ti.cpu)
                run, result = mod.make(ti, mod.QUICK_N)
                run()
                run()
                ti.sync()
                result()
            except Exception as e:      # noqa: BLE001 (recorded: both builds should agree)
                errors.append((tag[0], repr(e)[:200]))
    if "cases" in parts:
        import ndrange_cases
        import struct_for_cases
        for m in (struct_for_cases, ndrange_cases):
            for debug in (False, True):
                tag[0] = f"cases:{m.__name__}:{debug}"
                for _, launch in m.build(debug):
                    launch()
    from fuzz import gen, gen_ad
    from fuzz import oracles as O
    seeds = {"fuzz": range(96000, 96120), "fuzzad": range(96200, 96240),
             "sparse": [s for s in range(96500, 96800) if gen.Gen(s).with_sparse][:40]}
    for part, chosen in seeds.items():
        if part not in parts:
            continue
        for seed in chosen:
            tag[0] = f"{part}:{seed}"
            src = gen_ad.program(seed) if part == "fuzzad" else \
                gen.program(seed, gen.Options(taichi=False))
            for impl in (O.FLUXION_OPT, O.FLUXION_PLAIN):
                o = O.execute(src, impl)
                if o.error:
                    errors.append((tag[0], o.error))
    with open(out_path, "wb") as f:
        pickle.dump({"records": records, "errors": errors}, f)
    print(f"{len(records)} compiles, {len(errors)} programs that raised")


def _ir(text):
    """IR text with each constant written into its uses, statements renumbered, spaces
    collapsed, the random programs' file names masked."""
    if text is None:
        return None
    text = re.sub(r"fuzzprog_\d+_\d+", "fuzzprog", text)
    consts, names, out = {}, {}, []
    for line in text.splitlines():
        m = re.match(r"\s*\$(\d+) = const (.*?)\s*(#.*)?$", line)
        if m:
            consts["$" + m.group(1)] = f"<{m.group(2)}>"
            continue
        m = re.match(r"\s*\$(\d+)", line)
        if m:
            names["$" + m.group(1)] = f"%{len(names)}"
        line = re.sub(r"\$\d+", lambda v: consts.get(v.group(0)) or names.get(v.group(0),
                                                                              v.group(0)), line)
        out.append(re.sub(r"\s+", " ", line))
    return out


def compare(a_path, b_path):
    with open(a_path, "rb") as f:
        a = pickle.load(f)
    with open(b_path, "rb") as f:
        b = pickle.load(f)
    ra, rb = a["records"], b["records"]
    if [r[:2] for r in ra] != [r[:2] for r in rb]:
        print("the builds compiled different kernels (or in another order)")
        return 1
    n = len(ra)
    objs = [x[:2] for x, y in zip(ra, rb) if x[4] != y[4]]
    texts = [x[:2] for x, y in zip(ra, rb) if x[3] != y[3]]
    irs = [(x, y) for x, y in zip(ra, rb) if _ir(x[2]) != _ir(y[2])]
    print(f"{n} compiles; objects differ: {len(objs)}, LLVM texts: {len(texts)}, "
          f"IR after the pipeline: {len(irs)}; raised: {len(a['errors'])} and "
          f"{len(b['errors'])}{'' if a['errors'] == b['errors'] else ' (not the same)'}")
    for tag, name in texts:
        print(f"  code differs: {tag} {name}")
    for x, y in irs[:5]:
        print(f"  IR differs: {x[0]} {x[1]}")
        print("\n".join(list(difflib.unified_diff(_ir(x[2]), _ir(y[2]), n=1,
                                                  lineterm=""))[2:14]))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else PARTS)
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
