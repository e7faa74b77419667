"""frontend/overflow.py: in debug mode an integer +, -, * or << of the user's source that wraps
around prints "<Operation> overflow detected in <location>" and the kernel goes on with the
wrapped value; one that does not wrap prints nothing. The oracle: Python's exact integers
against the type's range."""
import random

import pytest

import fluxion as ti

pytestmark = pytest.mark.cpu_only

TYPES = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]
WHAT = {"add": "Addition", "sub": "Subtraction", "mul": "Multiplication", "shl": "Shift left"}


def _range(name):
    bits = int(name[1:])
    if name[0] == "i":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _wrap(v, name):
    lo, hi = _range(name)
    return (v - lo) % (hi - lo + 1) + lo


def _operands(name, op, rng):
    lo, hi = _range(name)
    bits = int(name[1:])
    out = [(lo, 0), (hi, 0), (hi, 1 if op != "shl" else 1), (lo, 1 if op != "shl" else 0)]
    for _ in range(6):
        if op == "shl":
            out.append((rng.randint(max(lo, -4), min(hi, 4)), rng.randint(0, bits - 1)))
        elif op == "mul":
            h = 1 << (bits // 2)
            out.append((rng.randint(max(lo, -2 * h), 2 * h), rng.randint(max(lo, -h), h)))
        else:
            out.append((rng.randint(lo, hi), rng.randint(lo, hi)))
    return out


def _exact(op, a, b):
    if op == "shl":
        return a << b
    return {"add": a + b, "sub": a - b, "mul": a * b}[op]


@pytest.fixture(autouse=True)
def _debug_session():
    ti.init(arch=ti.cpu, debug=True, offline_cache=False)
    yield
    ti.reset()


@pytest.mark.parametrize("op", list(WHAT))
def test_wraparound_is_reported_where_the_exact_result_leaves_the_type(op, capfd):
    rng = random.Random(7)
    for name in TYPES:
        ty = getattr(ti, name)

        @ti.kernel
        def k(a: ty, b: ty) -> ty:
            if ti.static(op == "add"):
                return a + b
            elif ti.static(op == "sub"):
                return a - b
            elif ti.static(op == "mul"):
                return a * b
            else:
                return a << b

        lo, hi = _range(name)
        for a, b in _operands(name, op, rng):
            capfd.readouterr()
            got = k(a, b)
            out = capfd.readouterr().out
            exact = _exact(op, a, b)
            wraps = not (lo <= exact <= hi)
            assert got == _wrap(exact, name), (name, op, a, b)
            assert (f"{WHAT[op]} overflow detected" in out) == wraps, (name, op, a, b, out)
            if wraps:
                assert "k:" in out and "test_overflow_debug.py" in out


def test_augmented_assignment_in_a_loop_is_checked_each_time(capfd):
    @ti.kernel
    def powers(n: ti.i32) -> ti.i32:
        s = 1
        for _ in range(n):
            s *= 3
        return s

    capfd.readouterr()
    assert powers(19) == 3 ** 19
    assert "overflow" not in capfd.readouterr().out
    assert powers(22) == _wrap(3 ** 22, "i32")
    out = capfd.readouterr().out
    assert out.count("Multiplication overflow detected") == 3      # at 3**20, 3**21, 3**22
    assert "s *= 3" in out


def test_not_without_debug_nor_for_the_compilers_own_arithmetic(capfd):
    """Without debug nothing is checked; in debug mode, index arithmetic and ti.random's
    hashing (which wrap on purpose) print nothing."""
    x = ti.field(ti.f32, shape=(64, 64))

    @ti.kernel
    def fill():
        for i, j in x:
            x[i, j] = ti.random()

    capfd.readouterr()
    fill()
    assert "overflow" not in capfd.readouterr().out
    ti.init(arch=ti.cpu, offline_cache=False)

    @ti.kernel
    def add(a: ti.i32, b: ti.i32) -> ti.i32:
        return a + b

    assert add(2**31 - 1, 1) == -2**31
    assert "overflow" not in capfd.readouterr().out
