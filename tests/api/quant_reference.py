"""What quantized types store, written out independently of fluxion's encoders (Python
integers and floats, from the definitions in lang/quant.py's docstring), and the original
system run as an oracle in a subprocess (skipped where taichi is not installed)."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np


def expect_int(values, bits, signed):
    out = []
    for v in values:
        v = int(v) & ((1 << bits) - 1)
        if signed and v >> (bits - 1):
            v -= 1 << bits
        out.append(v)
    return out


def expect_fixed(values, bits, signed, scale, ct=np.float32):
    """The compute-type value read back after storing each of `values`: v * (1 / scale) and
    the added half (away from zero) are each one operation in the compute type (so the sum
    can round up to the next integer, as in the original), then truncation; the low `bits`
    bits of that integer are stored."""
    out = []
    inv = ct(1.0 / scale)
    for v in values:
        s = ct(ct(v) * inv)
        r = float(ct(s + ct(math.copysign(0.5, float(s)))))
        d = math.trunc(r) & ((1 << bits) - 1)
        if signed and d >> (bits - 1):
            d -= 1 << bits
        out.append(ct(ct(d) * ct(scale)))
    return np.array(out, dtype=ct)


def expect_float(values, exp, frac, signed):
    """Round |v| to `frac - signed` fraction bits (halves away from zero), flush exponents
    below the smallest normal to zero, saturate above the largest."""
    m = frac - (1 if signed else 0)
    bias = (1 << (exp - 1)) - 1
    e_min, e_max = 1 - bias, min((1 << exp) - 1, 127 + bias) - bias
    top = (2 - 2.0 ** -m) * 2.0 ** e_max
    out = []
    for v in values:
        v = float(np.float32(v))
        a = abs(v)
        if a == 0 or not math.isfinite(a):
            r = top if not a == 0 else 0.0
        else:
            mant, e = math.frexp(a)           # a = mant * 2**e, 0.5 <= mant < 1
            e -= 1
            f = math.floor((a / 2.0 ** e - 1) * 2 ** m + 0.5)
            if f == 1 << m:
                e, f = e + 1, 0
            if e < e_min:
                r = 0.0
            elif e > e_max:
                r = top
            else:
                r = (1 + f / 2 ** m) * 2.0 ** e
        out.append(-r if (signed and v < 0 and r != 0) else r)
    return np.array(out, dtype=np.float32)


def expect_shared(values, members, exp):
    """Values read back after storing `values` (one list per member, f32) into a
    shared-exponent group at once. members: [(frac, signed)]."""
    bias = (1 << (exp - 1)) - 1
    e_min, e_max = 1 - bias, min((1 << exp) - 1, 127 + bias) - bias
    vals = [[float(np.float32(x)) for x in v] for v in values]
    out = [[] for _ in members]
    for k in range(len(vals[0])):
        col = [v[k] for v in vals]
        exps = [math.frexp(abs(x))[1] - 1 for x in col if x != 0]
        if not exps or max(exps) < e_min:
            for o in out:
                o.append(0.0)
            continue
        e = min(max(exps), e_max)
        for o, x, (frac, signed) in zip(out, col, members):
            m = frac - (1 if signed else 0)
            unit = 2.0 ** (e - m + 1)
            d = min(math.floor(abs(x) / unit + 0.5), (1 << m) - 1)
            r = d * unit
            o.append(-r if (signed and x < 0 and d) else r)
    return [np.array(o, dtype=np.float32) for o in out]


def have_taichi():
    return importlib.util.find_spec("taichi") is not None


_ORACLE = r'''
import json, sys
import numpy as np
import taichi as ti
cases = json.load(open(sys.argv[1]))
results = []
for case in cases:
    ti.init(arch=ti.cpu, offline_cache=False, log_level=ti.ERROR)
    fields = []
    for t in case["types"]:
        kind, args = t
        compute = getattr(ti, args.pop("compute")) if "compute" in args else None
        q = getattr(ti.types.quant, kind)(compute=compute, **args)
        fields.append(ti.field(q))
    n = len(case["values"][0])
    bp = ti.BitpackedFields(max_num_bits=case.get("word", 32))
    bp.place(*fields, shared_exponent=case.get("shared", False))
    ti.root.dense(ti.i, n).place(bp)
    out = ti.field(ti.f64, shape=n)

    @ti.kernel
    def store(f: ti.template(), a: ti.types.ndarray()):
        for i in range(n):
            f[i] = a[i]

    @ti.kernel
    def load(f: ti.template()):
        for i in range(n):
            out[i] = f[i]

    for k in case.get("order", range(len(fields))):
        store(fields[k], np.array(case["values"][k], dtype=case["dtype"]))
    got = []
    for f in fields:
        load(f)
        got.append(out.to_numpy().tolist())
    results.append(got)
    ti.reset()
json.dump(results, open(sys.argv[2], "w"))
'''


def taichi_store_load(cases):
    """Run each case on the original system: fields of `types` ([kind, kwargs]) packed in one
    word per cell, `values[k]` (of numpy `dtype`) stored into field k by a kernel, member by
    member in `order`, then read back by a kernel. Returns, per case, per field, the values."""
    with tempfile.TemporaryDirectory() as d:
        src, inp, outp = (os.path.join(d, n) for n in ("oracle.py", "in.json", "out.json"))
        with open(src, "w") as f:
            f.write(_ORACLE)
        with open(inp, "w") as f:
            json.dump(cases, f)
        env = dict(os.environ, TI_LOG_LEVEL="error")
        r = subprocess.run([sys.executable, src, inp, outp], capture_output=True, text=True,
                           env=env, timeout=600)
        if r.returncode:
            raise RuntimeError(f"the taichi oracle failed:\n{r.stderr[-3000:]}")
        with open(outp) as f:
            return json.load(f)
