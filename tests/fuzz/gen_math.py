"""Library functions in the random programs (gen.py): `ti.exp`, `ti.log`, `ti.atan2`,
`ti.floor`/`ceil`/`round` (also to integers), `ti.pow` and `**`, inverse trigonometry,
`ti.math.*` (fract, clamp, sign, mix, smoothstep, step, log2), `ti.rsqrt`, and on integers
`**`, `ti.raw_div`/`ti.raw_mod`, `ti.math.clamp`/`sign`, three-argument `ti.max`/`ti.min`.

Arguments are kept in the functions' domains and results finite and small (gen.py's rule:
no NaN reaches a comparison, a min/max or a cast): logs of `|a| + 1`, exponents of values at
most 8, powers of bases in [1, 4], floats cast to integers only after a clamp to +-1000.
Whether a program has them and every choice about them come from streams of their own
(`Gen.with_math`, `Gen.rx`), so the programs without them are the programs of before."""
from __future__ import annotations


def fcall(g, env, d):
    """A float expression through a library function."""
    rx = g.rx
    a = g.fexpr(env, d)
    k = rx.randrange(16)
    if k == 0:
        return f"ti.exp(ti.min({a}, 8.0))"
    if k == 1:
        return f"ti.log(ti.abs({a}) + 1.0)"
    if k == 2:
        return f"ti.atan2({a}, {g.fexpr(env, d)})"
    if k == 3:
        return f"ti.{rx.choice(['floor', 'ceil', 'round'])}({a})"
    if k == 4:
        return f"ti.tanh({a})"
    if k == 5:
        return f"ti.tan(ti.min(ti.max({a}, -1.5), 1.5))"
    if k == 6:
        return f"ti.{rx.choice(['asin', 'acos'])}(ti.min(ti.max({a}, -1.0), 1.0))"
    if k == 7:
        return f"ti.pow(ti.min(ti.abs({a}), 3.0) + 1.0, {rx.choice(['0.5', '2.0', '3', '-1.0'])})"
    if k == 8:
        return f"(ti.min(ti.max({a}, -8.0), 8.0)) ** {rx.choice(['2', '3', '2.0'])}"
    if k == 9:
        return f"ti.math.fract({a})"
    if k == 10:
        return f"ti.math.clamp({a}, {rx.choice(['-1.0', '-2.5', '0.0'])}, {rx.choice(['1.0', '4.0'])})"
    if k == 11:
        return f"ti.math.sign({a})"
    if k == 12:
        return f"ti.math.mix({a}, {g.fexpr(env, d)}, {rx.choice(['0.25', '0.5', '0.75'])})"
    if k == 13:
        return f"ti.math.smoothstep(-2.0, 4.0, {a})" if rx.random() < 0.5 \
            else f"ti.math.step(1.0, {a})"
    if k == 14:
        return f"ti.math.log2(ti.abs({a}) + 1.0)"
    return f"ti.rsqrt(ti.abs({a}) + 1.0)"


def icall(g, env, d):
    """An integer expression through a library function."""
    rx = g.rx
    a = g.iexpr(env, d)
    k = rx.randrange(7)
    if k == 0:
        if g.o.taichi and g.constant(a):
            # taichi 1.7.4 folds an integer power of constants in floating point, and a result
            # out of i32's range saturates (`ti.cast(-65535, ti.i32) ** 3` is -2**31, not the
            # wrapped -196607 it computes at run time; fuzz seed 30243): kept in range there
            a = f"ti.math.clamp({a}, -1000, 1000)"
        return f"ti.cast({a}, ti.i32) ** {rx.choice([2, 3])}"
    if k == 1:
        return f"ti.raw_{rx.choice(['div', 'mod'])}({a}, {rx.choice([3, 7, 16])})"
    if k == 2:
        return f"ti.math.clamp(ti.cast({a}, ti.i32), -3, {rx.choice([3, 100])})"
    if k == 3:
        # the original's sign is a float even of an integer (-1.0): cast back
        return f"ti.cast(ti.math.sign(ti.cast({a}, ti.i32)), ti.i32)"
    if k == 4:
        return f"ti.{rx.choice(['max', 'min'])}({a}, {g.iexpr(env, d)}, {g.ilit()})"
    f = g.fexpr(env, d)
    return f"ti.{rx.choice(['floor', 'ceil', 'round'])}(ti.min(ti.max({f}, -1000.0), 1000.0), " \
           f"ti.i32)"   # (an i64 index stops taichi 1.7.4 at an internal assertion)
