"""Long differential runs: `python -m tests.fuzz --count 20000 --oracle both --seed 1`.

Programs run in a worker process (a crash or hang of one program is recorded, and the worker
restarts after it). Each disagreement is reduced to a small program, saved under --out with
its description, and counted. Prints the totals at the end (and every --every programs)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from . import check as C
from . import gen, gen_ad
from .reduce import reduce


def make(seed, kind, known, oracle="both"):
    if kind == "ad":
        return gen_ad.program(seed)
    # without the taichi oracle, also what only fluxion accepts
    return gen.program(seed, gen.Options(known=known, taichi=oracle != "self"))


def kind_of(seed, ad_every):
    return "ad" if ad_every and seed % ad_every == 0 else "kernel"


def worker(args):
    """Check programs seed, seed+1, ...; one JSON line per program."""
    known = frozenset(k for k in args.known.split(",") if k) if args.known is not None else gen.KNOWN_ALL
    for seed in range(args.seed, args.seed + args.count):
        kind = kind_of(seed, args.ad_every)
        if args.sparse_only and not (gen_ad.GenAD(seed) if kind == "ad" else gen.Gen(seed)).with_sparse:
            continue
        if args.structs_only and (kind == "ad" or not gen.Gen(seed).with_structs):
            continue
        if args.math_only and (kind == "ad" or not gen.Gen(seed).with_math):
            continue
        if args.linalg_only and not (gen_ad.GenAD(seed) if kind == "ad" else gen.Gen(seed)).with_linalg:
            continue
        if args.quant_only and (kind == "ad" or not gen.Gen(seed).with_quant):
            continue
        if args.real_only and (kind == "ad" or not gen.Gen(seed).with_real):
            continue
        if args.meta_only and not (gen_ad.GenAD(seed) if kind == "ad" else gen.Gen(seed)).with_meta:
            continue
        print(json.dumps({"start": seed}), flush=True)
        src = make(seed, kind, known, args.oracle)
        lines = []

        def say(text):
            lines.append(text)
            if text.startswith("ran "):    # the parent learns which run a crash ends
                print(json.dumps({"ran": text.split()[1]}), flush=True)
        d = C.check(src, args.oracle, kind, say=say)
        print(json.dumps({"seed": seed, "kind": kind, "diff": d, "log": lines}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--oracle", choices=["taichi", "self", "both"], default="both")
    ap.add_argument("--out", default="fuzz-findings")
    ap.add_argument("--ad-every", type=int, default=5, help="every Nth program is a "
                    "differentiable one (0: none)")
    ap.add_argument("--known", default=None, help="comma-separated known-bug constructs to "
                    f"generate too ({', '.join(sorted(gen.KNOWN_ALL))})")
    ap.add_argument("--no-reduce", action="store_true")
    ap.add_argument("--reduce-budget", type=int, default=120, help="checks per reduction")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per program")
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--sparse-only", action="store_true", help="only the seeds whose programs "
                    "hold sparse fields (about 3 in 10 of the kernel programs, and of the differentiable ones)")
    ap.add_argument("--structs-only", action="store_true", help="only the seeds whose programs "
                    "hold struct values (about 1 in 4 of the kernel programs)")
    ap.add_argument("--meta-only", action="store_true", help="only the seeds whose programs "
                    "hold ti.static loops, templates or data-oriented classes (about 3 in 10)")
    ap.add_argument("--math-only", action="store_true", help="only the seeds whose programs "
                    "call library functions (ti.exp, ti.math.*, ...; about 3 in 10)")
    ap.add_argument("--real-only", action="store_true", help="only the seeds whose programs "
                    "declare real functions (@ti.real_func; about 1 in 4)")
    ap.add_argument("--linalg-only", action="store_true", help="only the seeds whose programs "
                    "hold matrix fields and linear algebra (about 1 in 4; differentiable ones: 3 in 10)")
    ap.add_argument("--quant-only", action="store_true", help="only the seeds whose programs "
                    "hold quantized fields (about 1 in 5)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    os.makedirs(args.out, exist_ok=True)
    known = frozenset(k for k in args.known.split(",") if k) if args.known is not None else gen.KNOWN_ALL
    stats = {"programs": 0, "ad_programs": 0, "disagreements": 0, "taichi_rejected": 0,
             "taichi_explained": 0, "by_oracle": {}}
    t0 = time.time()
    seed, end = args.seed, args.seed + args.count

    def report():
        print(f"[fuzz] {stats['programs']} programs ({stats['ad_programs']} differentiable), "
              f"{stats['disagreements']} disagreements {stats['by_oracle']}, "
              f"taichi rejected {stats['taichi_rejected']}, taichi's own mistakes "
              f"{stats['taichi_explained']}, {time.time() - t0:.0f}s", flush=True)

    while seed < end:
        cmd = [sys.executable, "-m", "tests.fuzz", "--worker", "--seed", str(seed),
               "--count", str(end - seed), "--oracle", args.oracle, "--ad-every",
               str(args.ad_every), "--known", ",".join(sorted(known))] + \
            (["--sparse-only"] if args.sparse_only else []) + \
            (["--structs-only"] if args.structs_only else []) + \
            (["--meta-only"] if args.meta_only else []) + \
            (["--math-only"] if args.math_only else []) + \
            (["--real-only"] if args.real_only else []) + \
            (["--linalg-only"] if args.linalg_only else []) + \
            (["--quant-only"] if args.quant_only else [])
        # (killed on a timeout, or dying of a program: its programs stay in this process's
        # directory, which goes when this one exits)
        p = subprocess.Popen(cmd, cwd=C.ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, FLUXION_FUZZ_DIR=C.O.programs_dir()),
                             text=True, bufsize=1)
        current, last, ran = None, time.time(), []
        lines = C.Lines(p.stdout)
        while True:
            line = lines.get(5.0)
            if line is None:
                if time.time() - last > args.timeout:
                    p.kill()
                    p.wait()
                    finding(args, stats, current, kind_of(current, args.ad_every), known,
                            {"timeout": "timeout"})
                    seed = current + 1
                    break
                continue
            if not line:
                p.wait()
                if current is not None:   # died while checking `current`
                    kind = kind_of(current, args.ad_every)
                    order = [n for n, _ in C.impls(args.oracle, kind)[0]]
                    where = order[len(ran)] if len(ran) < len(order) else "comparison"
                    if where == "taichi":
                        # taichi's own crash (it aborts on some valid programs)
                        stats["programs"] += 1
                        stats["taichi_rejected"] += 1
                    else:
                        finding(args, stats, current, kind, known,
                                {"crash": f"crash (exit {p.returncode}) in {where}"})
                    seed = current + 1
                else:
                    seed = end
                break
            last = time.time()
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "start" in msg:
                current, ran = msg["start"], []
                continue
            if "ran" in msg:
                ran.append(msg["ran"])
                continue
            stats["programs"] += 1
            stats["ad_programs"] += msg["kind"] == "ad"
            if any("ran taichi error" in s for s in msg["log"]):
                stats["taichi_rejected"] += 1
            explained = msg["diff"].pop(C.EXPLAINED, None)
            if explained:
                taichis_own(args, stats, msg["seed"], msg["kind"], known, explained)
            if msg["diff"]:
                finding(args, stats, msg["seed"], msg["kind"], known, msg["diff"])
            current = None
            seed = msg["seed"] + 1
            if stats["programs"] % args.every == 0:
                report()
        p.stdout.close()
    report()
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(stats, f, indent=1)
    return 1 if stats["disagreements"] else 0


def taichis_own(args, stats, seed, kind, known, why):
    """A difference from taichi that taichi's own runs pin on taichi (see check.EXPLAINED):
    kept for the record under taichi/, not reduced, not a disagreement of fluxion."""
    stats["taichi_explained"] += 1
    os.makedirs(os.path.join(args.out, "taichi"), exist_ok=True)
    with open(os.path.join(args.out, "taichi", f"{kind}-{seed}.py"), "w") as f:
        f.write(f"# seed {seed} ({kind}): {why}\n" + make(seed, kind, known, args.oracle))
    print(f"[fuzz] seed {seed} ({kind}): taichi's own: {why}", flush=True)


def finding(args, stats, seed, kind, known, diff):
    stats["programs"] += "crash" in diff or "timeout" in diff
    stats["disagreements"] += 1
    for k in diff:
        stats["by_oracle"][k] = stats["by_oracle"].get(k, 0) + 1
    src = make(seed, kind, known, args.oracle)
    base = os.path.join(args.out, f"{kind}-{seed}")
    with open(base + ".py", "w") as f:
        f.write(src)
    print(f"[fuzz] seed {seed} ({kind}): {diff}", flush=True)
    small = src
    if not args.no_reduce and "timeout" not in diff:
        want = C.signature(diff)
        # only the implementations the disagreement involves
        oracle = {"taichi": "taichi", "self": "self"}.get(next(iter(diff)), args.oracle) \
            if len(diff) == 1 else args.oracle
        server = C.Server(oracle, kind, timeout=args.timeout)
        try:
            small = reduce(src, lambda t: C.signature(server(t)) >= want,
                           budget=args.reduce_budget)
        finally:
            server.close()
    with open(base + ".min.py", "w") as f:
        f.write(f"# seed {seed} ({kind}): {json.dumps(diff)}\n" + small)
    print(f"[fuzz]   saved {base}.min.py ({small.count(chr(10))} lines)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
