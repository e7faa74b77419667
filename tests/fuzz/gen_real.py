"""Real functions (`@ti.real_func`) in the random programs (gen.py): functions compiled once
and called, not inlined, so their arguments, returns and locals cross a call boundary that
the inlined `ti.func`s never exercise.

- one to three real functions with an integer parameter `a` (i32 or i64) and maybe a float
  parameter `b` (f32 or f64), returning one of i32, i64, f32, f64; their bodies are gen.py's
  statements (locals, branches, serial loops, calls of `ti.func`s and of the real functions
  declared before them), with maybe an early `return` inside an `if` and a serial loop whose
  trip count is the argument;
- maybe a recursive one, `rec(n, x)`, descending to `n == 0` (its depth bounded by `n & 7`);
- maybe an integer atomic add into a field of their own (`rhits`) that no kernel writes, so
  a real function called from a parallel loop counts its calls (integer adds: the count does
  not depend on the order of the calls).
Calls pass every argument through `ti.cast` to the parameter's type. A real function reads
no field (the loops that call it may write any of them), as gen.py's `ti.func`s.

Under the taichi oracle a real function calls no `ti.func`: taichi 1.7.4 computes a wrong
value when a real function's body inlines a `ti.func` that holds an `if` (fuzz seed 12079:
`rf(a: ti.i32) -> ti.i64: return ti.cast(fn(a), ti.i64)`, with `fn` assigning a local under
`if True:`, summed over `ti.ndrange(400, 8)` gives 5,092,864 instead of 11,200, on one
thread too; fluxion gives 11,200).

Whether a program has them, and every choice about them, comes from random streams of their
own (`Gen.with_real`, `Gen.rr`), so the programs without them are the programs of before."""
from __future__ import annotations

from dataclasses import dataclass

INT_PARAMS = ["i32", "i64"]
FLOAT_PARAMS = ["f32", "f64"]
RETURNS = ["i32", "i64", "f32", "f64"]


@dataclass
class Real:
    name: str
    params: list          # [(name, dtype)]
    ret: str


def declare(g):
    """The field the real functions count their calls in (after the program's fields)."""
    if g.with_real:
        g.emit(1, "rhits = ti.field(ti.i32, shape=(8,))")


def funcs(g):
    """Declare the program's real functions (after the `ti.func`s, before the kernels)."""
    if not g.with_real:
        return
    from .gen import Loop, Var
    rr = g.rr
    for _ in range(rr.randint(1, 3)):
        name = g.fresh("rf")
        params = [("a", rr.choice(INT_PARAMS))]
        if rr.random() < 0.7:
            params.append(("b", rr.choice(FLOAT_PARAMS)))
        ret = rr.choice(RETURNS)
        sig = ", ".join(f"{p}: ti.{dt}" for p, dt in params)
        g.emit(1, "@ti.real_func")
        g.emit(1, f"def {name}({sig}) -> ti.{ret}:")
        # parameters are read-only in a real function (taichi refuses an assignment)
        env = {"vars": [Var(p, dt) for p, dt in params], "ints": [], "args": set(),
               "loop": Loop([], (), {f.name: "none" for f in g.fields}),
               "frozen": {p for p, _ in params}}
        hidden = _hide_funcs(g)
        r = g.fresh("r")
        g.emit(2, f"{r} = ti.cast({g.expr_of(env, ret, 1)}, ti.{ret})")
        env["vars"].append(Var(r, ret))
        if rr.random() < 0.5:
            g.emit(2, f"if {g.cond(env, 0)}:")
            g.emit(3, f"return ti.cast({_bounded(g.expr_of(env, ret, 1), ret)}, ti.{ret})")
        if rr.random() < 0.5:
            q = g.fresh("q")
            g.emit(2, f"for {q} in range(a & {rr.choice([3, 7, 15])}):")
            g.emit(3, f"{r} += ti.cast({_bounded(g.expr_of(dict(env, ints=[q]), ret, 1), ret)}, "
                      f"ti.{ret})")
            if rr.random() < 0.4:
                g.emit(3, f"if {g.cond(dict(env, ints=[q]), 0)}:")
                g.emit(4, "break")
        g.block(env, 2, 1, rr.randint(0, 2))
        if rr.random() < 0.5:
            g.emit(2, f"rhits[{g.nonneg(g.iexpr(env, 1))} % 8] += 1")
        g.emit(2, f"return ti.cast({_bounded(r, ret)}, ti.{ret})")
        g.emit(0, "")
        _show_funcs(g, hidden)
        g.reals.append(Real(name, params, ret))
    if rr.random() < 0.4:
        name = g.fresh("rf")
        dt = rr.choice(FLOAT_PARAMS)
        g.emit(1, "@ti.real_func")
        g.emit(1, f"def {name}(n: ti.i32, x: ti.{dt}) -> ti.{dt}:")
        g.emit(2, "r = x")
        g.emit(2, "if n > 0:")
        g.emit(3, f"r = ti.min(ti.max({name}(n - 1, x * {rr.choice(['0.5', '0.75', '-0.5'])} "
                  f"+ {rr.choice(['1.0', '0.25', '-2.0'])}) + ti.cast(n, ti.{dt}), -64.0), 64.0)")
        g.emit(2, "return r")
        g.emit(0, "")
        g.reals.append(Real(name, [("n", "rec"), ("x", dt)], dt))


def _hide_funcs(g):
    """Under taichi, make the `ti.func`s invisible to the expression generator (see above);
    returns what `_show_funcs` restores."""
    if not g.o.taichi:
        return None
    hidden = (g.funcs, g.meta.tfuncs, g.meta.vfuncs)
    g.funcs, g.meta.tfuncs, g.meta.vfuncs = [], [], []
    return hidden


def _show_funcs(g, hidden):
    if hidden is not None:
        g.funcs, g.meta.tfuncs, g.meta.vfuncs = hidden


def _bounded(e, dt):
    """`e` kept within [-64, 64] when it is a float (gen.py's rule: results stay small)."""
    return f"ti.min(ti.max({e}, -64.0), 64.0)" if dt in FLOAT_PARAMS else e


def call(g, env, depth, want_float):
    """A call of a real function declared so far, of the wanted number family, or None."""
    fs = [f for f in g.reals if (f.ret in FLOAT_PARAMS) == want_float]
    if not fs:
        return None
    f = g.rr.choice(fs)
    args = []
    for _, dt in f.params:
        if dt == "rec":
            args.append(f"{g.nonneg(g.iexpr(env, depth))} & 7")
        else:
            args.append(f"ti.cast({g.expr_of(env, dt, depth)}, ti.{dt})")
    return f"{f.name}({', '.join(args)})"


def results(g):
    if g.with_real:
        g.emit(2, "out['rhits'] = rhits.to_numpy()")
