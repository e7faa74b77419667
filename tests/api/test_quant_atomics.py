"""Atomics and stores on quantized elements from many threads at once: elements that share a
word (quant-array neighbours, bitpacked members) must not lose each other's updates."""
import numpy as np
import pytest

import fluxion as ti
from quant_reference import expect_int


@pytest.fixture(autouse=True)
def _many_threads():
    # more threads than this machine's cores: they interleave within each word's updates
    ti.init(arch=ti.cpu, cpu_max_num_threads=8)


@pytest.mark.parametrize("serial", [False, True])
def test_adds_into_neighbours_of_one_word_from_many_threads(serial):
    x = ti.field(ti.types.quant.int(7))             # 4 per u32 word
    ti.root.dense(ti.i, 16).quant_array(ti.i, 4, max_num_bits=32).place(x)
    n = 200_000

    @ti.kernel
    def hammer():
        ti.loop_config(serialize=serial)
        for i in range(n):
            x[i % 64] += 1 + i % 3

    hammer()
    counts = np.zeros(64, np.int64)
    np.add.at(counts, np.arange(n) % 64, 1 + np.arange(n) % 3)
    assert x.to_numpy().tolist() == expect_int(counts.tolist(), 7, True)


def test_every_atomic_on_bitpacked_members_sharing_a_word():
    a = ti.field(ti.types.quant.int(13))
    b = ti.field(ti.types.quant.int(9, False))
    c = ti.field(ti.types.quant.int(5))
    lo = ti.field(ti.types.quant.int(5))
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(a, b, c, lo)
    ti.root.place(bp)
    a[None], b[None], c[None], lo[None] = 0, 0b111111111, 0, 15
    n = 50_000
    old = ti.field(ti.i32, shape=n)

    @ti.kernel
    def hammer():
        for i in range(n):
            k = i % 4
            if k == 0:
                old[i] = ti.atomic_add(a[None], 1)
            elif k == 1:
                b[None] ^= 1 << (i % 9)
            elif k == 2:
                ti.atomic_max(c[None], (i * 7919) % 16)
            else:
                ti.atomic_min(lo[None], 15 - (i * 31) % 29)

    hammer()
    assert a[None] == expect_int([n // 4], 13, True)[0]
    flips = np.zeros(9, np.int64)
    np.add.at(flips, np.arange(1, n, 4) % 9, 1)
    assert b[None] == 0b111111111 ^ int(sum(1 << k for k in range(9) if flips[k] % 2))
    assert c[None] == max((i * 7919) % 16 for i in range(2, n, 4))
    assert lo[None] == min(15 - (i * 31) % 29 for i in range(3, n, 4))
    # the adds of the 12500 iterations were one at a time: each saw another count (modulo
    # the 13 bits they wrap at)
    olds = old.to_numpy()[::4]
    assert sorted(expect_int(olds.tolist(), 13, False)) == sorted(np.arange(n // 4) % 8192)


def test_stores_into_one_bit_neighbours_from_many_threads():
    x = ti.field(ti.types.quant.int(1, False))
    ti.root.dense(ti.i, 1 << 12).quant_array(ti.i, 32, max_num_bits=32).place(x)
    n = 1 << 17

    @ti.kernel
    def scatter(p: ti.i32):
        for i in range(n):
            k = (i * p) % n                 # neighbours go to different threads
            x[k] = k % 3 == 0

    scatter(40503)
    assert (x.to_numpy() == (np.arange(n) % 3 == 0)).all()


def test_fixed_point_and_shared_exponent_accumulation_is_exact():
    fx = ti.field(ti.types.quant.fixed(bits=19, signed=True, scale=0.25))
    a = ti.field(ti.types.quant.float(exp=6, frac=10, signed=False))
    b = ti.field(ti.types.quant.float(exp=6, frac=14, signed=True))
    bp = ti.BitpackedFields(max_num_bits=32)
    bp.place(a, b, shared_exponent=True)
    ti.root.place(bp)
    bp2 = ti.BitpackedFields(max_num_bits=32)
    bp2.place(fx)
    ti.root.place(bp2)

    @ti.kernel
    def run():
        for i in range(3000):
            fx[None] += 0.25 * (i % 5) - 0.5        # multiples of the scale: exact
            if i % 3 == 0:
                a[None] += 1.0      # integers up to 1000 fit a's 10 bits at any exponent seen
            elif i % 3 == 1:
                b[None] -= 1.0      # b's 13 bits hold the integers down to -1000 beside a

    run()
    assert fx[None] == sum(0.25 * (i % 5) - 0.5 for i in range(3000))
    assert (a[None], b[None]) == (1000.0, -1000.0)


def test_the_old_value_of_a_fixed_point_atomic():
    x = ti.field(ti.types.quant.fixed(bits=10, max_value=2.0))
    bp = ti.BitpackedFields(max_num_bits=16)
    bp.place(x)
    ti.root.dense(ti.i, 2).place(bp)
    got = ti.field(ti.f32, shape=2)

    @ti.kernel
    def run():
        x[0] = 0.5
        got[0] = ti.atomic_add(x[0], 0.25)
        got[1] = ti.atomic_sub(x[0], 2.0)      # 0.75 - 2.0 = -1.25

    run()
    assert got.to_numpy().tolist() == [0.5, 0.75] and x[0] == -1.25
