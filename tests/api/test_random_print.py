"""ti.random in kernels (statistical checks) and print inside kernels (captured at the file
descriptor: a GPU's printf writes there, not through Python's sys.stdout)."""
import math

import numpy as np

import fluxion as ti


def test_random_floats_are_uniform_in_unit_interval():
    n = 10 ** 6
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f64, shape=n)

    @ti.kernel
    def run():
        for i in range(n):
            x[i] = ti.random()
            y[i] = ti.random(ti.f64)

    run()
    for a in (x.to_numpy().astype(np.float64), y.to_numpy()):
        assert a.min() >= 0.0 and a.max() < 1.0
        # mean and variance of U(0, 1): 1/2 and 1/12, within ~6 standard errors
        assert abs(a.mean() - 0.5) < 6 * math.sqrt(1 / 12 / n)
        assert abs(a.var() - 1 / 12) < 6 * math.sqrt(1 / 180 / n)
        counts = np.histogram(a, bins=20, range=(0, 1))[0]
        chi2 = ((counts - n / 20) ** 2 / (n / 20)).sum()
        assert chi2 < 60            # 19 degrees of freedom: p < 1e-5 beyond 60
    assert len(np.unique(y.to_numpy())) > 0.99 * n     # f64 draws: essentially all distinct
    # successive draws are uncorrelated, with each other and with the index
    xa, ya = x.to_numpy().astype(np.float64), y.to_numpy()
    assert abs(np.corrcoef(xa, ya)[0, 1]) < 0.01
    assert abs(np.corrcoef(xa[:-1], xa[1:])[0, 1]) < 0.01
    assert abs(np.corrcoef(xa, np.arange(n))[0, 1]) < 0.01


def test_random_estimates_pi_and_differs_between_launches():
    n = 10 ** 6
    inside = ti.field(ti.i32, shape=())
    first = ti.field(ti.f32, shape=64)

    @ti.kernel
    def run():
        for i in range(n):
            px, py = ti.random(), ti.random()
            if px * px + py * py < 1.0:
                inside[None] += 1
        for i in range(64):
            first[i] = ti.random()

    run()
    a = first.to_numpy().copy()
    p = inside[None] / n
    assert abs(4 * p - math.pi) < 6 * 4 * math.sqrt(p * (1 - p) / n)
    run()
    b = first.to_numpy()
    assert not np.array_equal(a, b)     # the generator state advances between launches


def test_random_integers_cover_all_bit_patterns():
    n = 2 ** 18
    r = ti.field(ti.i32, shape=n)
    u = ti.field(ti.u32, shape=n)

    @ti.kernel
    def run():
        for i in range(n):
            r[i] = ti.random(ti.i32)
            u[i] = ti.random(ti.u32)

    run()
    for a in (r.to_numpy().view(np.uint32), u.to_numpy()):
        a = a.astype(np.int64)
        assert len(np.unique(a)) > 0.99 * n
        for shift in (0, 8, 16, 24):
            counts = np.bincount((a >> shift) & 0xF, minlength=16)
            chi2 = ((counts - n / 16) ** 2 / (n / 16)).sum()
            assert chi2 < 50, shift     # 15 degrees of freedom


def _numbers(line):
    return [float(t) for t in line.replace("[", " ").replace("]", " ").replace(",", " ").split()
            if t.lstrip("-").replace(".", "", 1).replace("e-", "", 1).replace("e+", "", 1).isdigit()]


def test_print_scalars_text_and_separators(capfd):
    @ti.kernel
    def run(a: ti.i32, x: ti.f32):
        print("a =", a, "x =", x)
        print(a * 2, a - 100, sep=", ", end=";\n")
        print(ti.cast(-1, ti.u32), ti.cast(-3, ti.i8), ti.cast(2 ** 40, ti.i64) * 3)

    run(21, 0.25)
    out = capfd.readouterr().out.splitlines()
    assert out[0].startswith("a = 21 x = ")
    assert float(out[0].split("x = ")[1]) == 0.25
    assert out[1] == "42, -79;"
    assert out[2].split() == [str(2 ** 32 - 1), "-3", str(3 * 2 ** 40)]


def test_print_vectors_matrices_and_fstrings(capfd):
    @ti.kernel
    def run(k: ti.i32):
        v = ti.Vector([k, k + 1, k + 2])
        print("v:", v)
        m = ti.Matrix([[1.5, 0.0], [0.0, -2.0]])
        print(m)
        print(f"k={k}, k2={k * k}, w={v.sum() * 0.5}")

    run(3)
    out = capfd.readouterr().out.splitlines()
    assert out[0] == "v: [3, 4, 5]"
    assert _numbers(out[1]) == [1.5, 0.0, 0.0, -2.0]
    assert out[1].startswith("[[") and out[1].endswith("]]")
    assert out[2].startswith("k=3, k2=9, w=")
    assert float(out[2].split("w=")[1]) == 6.0


def test_print_in_a_serial_loop_keeps_order_and_parallel_prints_all(capfd):
    @ti.kernel
    def run():
        ti.loop_config(serialize=True)
        for i in range(5):
            if i % 2 == 0:
                print("even", i)
            else:
                print("odd", i, i * 0.5)
        for i in range(16):
            print("p", i * i)

    run()
    lines = capfd.readouterr().out.splitlines()
    assert [ln.split()[:2] for ln in lines[:5]] == [
        ["even", "0"], ["odd", "1"], ["even", "2"], ["odd", "3"], ["even", "4"]]
    assert float(lines[3].split()[2]) == 1.5
    assert sorted(int(ln.split()[1]) for ln in lines[5:]) == [i * i for i in range(16)]


def test_print_of_compile_time_values_and_in_funcs(capfd):
    @ti.func
    def report(tag: ti.template(), v):
        print(tag, v)

    @ti.kernel
    def run():
        report("first", 1)
        report("second", ti.cast(2, ti.i16) * 3)
        print("static", 2 ** 10, ti.static(3 * 4))

    run()
    assert capfd.readouterr().out.splitlines() == ["first 1", "second 6", "static 1024 12"]


def test_print_format_specs_in_fstrings(capfd):
    @ti.kernel
    def run(x: ti.f32, n: ti.i32):
        print(f"{x:.3f}|{n:05d}|{n * 2:>4d}|{x * 4:.1f}")

    run(0.1, 7)
    assert capfd.readouterr().out == f"{0.1:.3f}|{7:05d}|{14:>4d}|{0.4:.1f}\n"
