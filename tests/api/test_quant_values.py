"""What quantized fields store: random values through kernels and through Python scope,
against the definitions written out in quant_reference.py and against the original system
(taichi, where installed)."""
import numpy as np
import pytest

import fluxion as ti
from quant_reference import (expect_fixed, expect_float, expect_int, expect_shared,
                             have_taichi, taichi_store_load)

N = 257


def _packed(qtypes, n=N, word=32, shared=False, guard=True):
    """Fields of `qtypes` in one word per cell of a dense(n), between two guard fields
    (3-bit unsigned ints) that the stores must leave alone."""
    fields = [ti.field(q) for q in qtypes]
    bp = ti.BitpackedFields(max_num_bits=word)
    guards = []
    if guard:
        guards.append(ti.field(ti.types.quant.int(3, False)))
        bp.place(guards[0])
    bp.place(*fields, shared_exponent=shared)
    if guard:
        guards.append(ti.field(ti.types.quant.int(3, False)))
        bp.place(guards[1])
    ti.root.dense(ti.i, n).place(bp)
    for k, g in enumerate(guards):
        g.fill(5 + k)
    return fields, guards


def _check_guards(guards):
    for k, g in enumerate(guards):
        assert (g.to_numpy() == 5 + k).all()


@ti.kernel
def _store(f: ti.template(), a: ti.types.ndarray()):
    for i in f:
        f[i] = a[i]


@ti.kernel
def _load(f: ti.template(), a: ti.types.ndarray()):
    for i in f:
        a[i] = f[i]


def _roundtrip(f, values, np_dtype):
    """Values read back after a kernel store, after a Python-scope store (element by element
    for the first few, from_numpy for all), each read by a kernel and by Python."""
    out = np.zeros(len(values), np_dtype)
    _store(f, np.ascontiguousarray(values))
    _load(f, out)
    by_kernel = out.copy()
    assert np.array_equal(f.to_numpy(), by_kernel)
    f.from_numpy(values)
    _load(f, out)
    assert np.array_equal(out, by_kernel)
    for i in range(0, len(values), 37):
        f[i] = values[i].item()
        assert f[i] == by_kernel[i]
    return by_kernel


@pytest.mark.parametrize("bits,signed,compute,word", [
    (13, True, ti.i32, 32), (19, False, ti.u32, 32), (5, True, ti.i16, 16), (7, False, ti.u16, 16),
    (32, True, ti.i32, 64), (24, True, ti.i64, 64), (3, True, ti.i8, 8), (1, False, ti.u32, 8)])
def test_quant_int_wraps_to_its_bits(bits, signed, compute, word):
    rng = np.random.default_rng(bits)
    q = ti.types.quant.int(bits, signed, compute)
    (x,), guards = _packed([q], word=word, guard=bits <= word - 6)
    lo, hi = -(1 << (compute.bits - 1)) if compute.is_signed else 0, 1 << (compute.bits - 1)
    lo, hi = max(lo, -2**31), min(hi, 2**31 - 1)
    values = rng.integers(lo, hi, N).astype(compute.np_dtype)
    values[:4] = [0, 1, (1 << (bits - 1)) - 1, 1 << (bits - 1) if bits < compute.bits else 0]
    got = _roundtrip(x, values, compute.np_dtype)
    assert got.tolist() == expect_int(values.tolist(), bits, signed)
    _check_guards(guards)


@pytest.mark.parametrize("bits,signed,scale,compute", [
    (13, True, 0.1, ti.f32), (19, False, 0.1, ti.f32), (8, True, 2 / 128, ti.f32),
    (16, True, 1.2 / 2**15, ti.f32), (10, False, 3 / 1024, ti.f32), (20, True, 1e-3, ti.f64),
    (31, True, 2.0 ** -20, ti.f64), (7, True, 0.3, ti.f32)])
def test_quant_fixed_rounds_halves_away_from_zero_and_wraps(bits, signed, scale, compute):
    rng = np.random.default_rng(bits)
    q = ti.types.quant.fixed(bits=bits, signed=signed, scale=scale, compute=compute)
    (x,), guards = _packed([q], guard=bits <= 26)
    span = (1 << (bits - 1) if signed else 1 << bits) * scale
    ct = compute.np_dtype.type
    values = np.concatenate([
        rng.uniform(-1.3 * span if signed else 0, 1.3 * span, N - 60),   # some wrap around
        (rng.integers(-200, 200, 60) + 0.5) * scale,                      # halves
    ]).astype(ct)
    if not signed:
        values = np.abs(values)
    got = _roundtrip(x, values, compute.np_dtype)
    assert np.array_equal(got, expect_fixed(values, bits, signed, scale, ct))
    _check_guards(guards)


@pytest.mark.parametrize("exp,frac,signed", [
    (5, 4, True), (5, 4, False), (6, 13, True), (6, 13, False), (8, 23, True), (8, 24, True),
    (7, 10, True), (5, 2, True), (5, 2, False), (3, 12, True), (8, 23, False), (4, 1, False)])
def test_quant_float_rounds_flushes_and_saturates(exp, frac, signed):
    rng = np.random.default_rng(exp * 100 + frac)
    q = ti.types.quant.float(exp=exp, frac=frac, signed=signed)
    (x,), guards = _packed([q], guard=exp + frac <= 26)
    bias = (1 << (exp - 1)) - 1
    lo, hi = -bias - 3, min(bias + 4, 127)            # beyond both ends
    mag = 2.0 ** rng.uniform(lo, hi, N - 100)
    # values with few significant bits: ties and carries into the exponent
    few = (rng.integers(0, 1 << 12, 92) / 2.0 ** 11 + 1) * 2.0 ** rng.integers(lo, hi, 92)
    values = np.concatenate([mag, few, [0, -0.0, 1, -1, np.inf, -np.inf, 3e38, 1e-40]])
    values = (values * rng.choice([-1, 1], len(values))).astype(np.float32)
    got = _roundtrip(x, values, np.float32)
    assert np.array_equal(got, expect_float(values, exp, frac, signed))
    _check_guards(guards)


@pytest.mark.parametrize("exp,members", [
    (5, [(10, False), (14, False)]), (8, [(10, True), (14, True)]),
    (6, [(10, False), (14, True)]), (7, [(8, True), (8, False), (8, True)])])
def test_shared_exponent_members_round_to_the_largest_exponent(exp, members):
    rng = np.random.default_rng(exp)
    qs = [ti.types.quant.float(exp=exp, frac=f, signed=s) for f, s in members]
    fields, guards = _packed(qs, shared=True, guard=exp + sum(f for f, _ in members) <= 26)
    bias = (1 << (exp - 1)) - 1
    vals = []
    for _ in members:
        v = 2.0 ** rng.uniform(-bias - 2, min(bias + 3, 127), N) * rng.choice([-1, 1], N)
        v[rng.random(N) < 0.1] = 0
        vals.append(v.astype(np.float32))
    out = np.zeros(N, np.float32)
    # stored member by member: each store re-encodes the others from their current values
    current = [np.zeros(N, np.float32) for _ in members]
    for k, f in enumerate(fields):
        _store(f, vals[k])
        current = expect_shared([vals[k] if j == k else current[j] for j in range(len(members))],
                                members, exp)
        for j, g in enumerate(fields):
            _load(g, out)
            assert np.array_equal(out, current[j]), (k, j)
    # Python scope: the same sequence, element by element
    for f in fields:
        f.fill(0)
    for k, f in enumerate(fields):
        f.from_numpy(vals[k])
    for j, g in enumerate(fields):
        assert np.array_equal(g.to_numpy(), current[j])
    _check_guards(guards)


def test_quant_types_compute_in_their_compute_type():
    qi5 = ti.types.quant.int(5, True, ti.i16)
    qu7 = ti.types.quant.int(7, False, ti.u16)
    a, b = ti.field(qi5), ti.field(qu7)
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(a, b)
    ti.root.place(bp)
    out = ti.field(ti.i64, shape=4)

    @ti.kernel
    def run():
        out[0] = ti.cast(a[None], ti.i32)
        out[1] = ti.cast(b[None], ti.u32)
        out[2] = ti.cast(ti.cast(a[None], ti.u32), ti.i64)
        out[3] = a[None] + b[None]          # i16 + u16: promoted like the compute types

    a[None] = -16
    b[None] = -64                            # wraps to 64
    run()
    assert out.to_numpy().tolist() == [-16, 64, 2**32 - 16, 48]
    assert (a.dtype, b.dtype) == (ti.i16, ti.u16)


# -- the original system as the oracle ------------------------------------------------------------

@pytest.mark.skipif(not have_taichi(), reason="taichi is not installed")
@pytest.mark.cpu_only
def test_stored_values_match_the_original_system():
    rng = np.random.default_rng(7)
    cases, ours = [], []

    def add(types, values, dtype, shared=False, order=None, word=32):
        case = dict(types=types, values=[v.tolist() for v in values], dtype=dtype,
                    shared=shared, word=word)
        if order is not None:
            case["order"] = order
        cases.append(case)

    # in range: the original's results there are its definition (outside, see lang/quant.py)
    for bits, signed in [(13, True), (5, False), (32, True), (19, False)]:
        v = rng.integers(-2**31, 2**31 - 1, 300).astype(np.int32)
        add([["int", dict(bits=bits, signed=signed)]], [v], "int32")
    for bits, signed, kw in [(13, True, dict(scale=0.1)), (16, True, dict(max_value=1.2)),
                             (10, False, dict(max_value=3.0)), (15, True, dict(scale=0.1)),
                             (20, True, dict(scale=1e-3, compute="f64"))]:
        top = 0.99 * (2 ** (bits - 1) if signed else 2 ** bits) * \
            kw.get("scale", kw.get("max_value", 1) / 2 ** (bits - (1 if signed else 0)))
        v = rng.uniform(-top if signed else 0, top, 300)
        add([["fixed", dict(bits=bits, signed=signed, **kw)]], [v],
            "float64" if kw.get("compute") == "f64" else "float32")
    for exp, frac, signed in [(5, 4, True), (6, 13, False), (8, 23, True), (7, 10, True),
                              (5, 2, False)]:
        bias = (1 << (exp - 1)) - 1
        v = 2.0 ** rng.uniform(-bias + 1, bias, 300) * rng.choice([-1, 1], 300)
        add([["float", dict(exp=exp, frac=frac, signed=signed)]], [v], "float32")
    # shared exponents, stored member by member in both orders; unsigned members (a signed
    # member that rounds to zero reads back as a tiny negative number there)
    for order in ([0, 1], [1, 0]):
        v = [2.0 ** rng.uniform(-12, 12, 300) for _ in range(2)]
        add([["float", dict(exp=6, frac=10, signed=False)],
             ["float", dict(exp=6, frac=14, signed=False)]], v, "float32", True, order)
    results = taichi_store_load(cases)

    for case, theirs in zip(cases, results):
        ti.reset()
        ti.init(arch=ti.cpu)
        qs = []
        for kind, kw in case["types"]:
            kw = dict(kw)
            if "compute" in kw:
                kw["compute"] = getattr(ti, kw["compute"])
            qs.append(getattr(ti.types.quant, kind)(**kw))
        fields, _ = _packed(qs, n=300, word=case["word"], shared=case["shared"], guard=False)
        for k in case.get("order", range(len(fields))):
            _store(fields[k], np.array(case["values"][k], dtype=case["dtype"]))
        for f, want in zip(fields, theirs):
            got = f.to_numpy().astype(np.float64)
            assert np.array_equal(got, np.array(want)), (case["types"], np.nonzero(got != want))
