"""Random differentiable programs: float64 kernels from an input field `x` through
intermediate fields to a scalar `loss`, differentiated in reverse mode (ti.ad.Tape, or the
kernels' .grad() in reverse order) and forward mode (ti.ad.FwdMode), checked against central
finite differences of the primal in float64, and against taichi where installed.

Every function is smooth where it is evaluated: branches depend on loop indices, never on
differentiated values; no abs/min/max of them. Each kernel follows the global data access
rules (a field is written by one kernel, after every read of it by earlier kernels; the loss
is only accumulated into).

About 3 in 10 programs also differentiate through compile-time constructs: a `ti.static`
loop that unrolls reads of the previous stage, a `ti.func` taking that stage's field as a
`ti.template()`, and a `ti.func` that assigns its vector parameter. Whether a program has
them and every choice about them come from random streams of their own, so the other
programs are the programs of before."""
from __future__ import annotations

import random

import numpy as np

from . import gen_ad_linalg
from . import gen_ad_sparse
from . import oracles as O

UNARY = ["ti.sin({})", "ti.cos({})", "ti.tanh({})", "ti.sqrt({0} * {0} + 1.0)",
         "ti.exp(ti.sin({}))", "ti.log({0} * {0} + 1.0)", "({}) ** 2", "({}) ** 3",
         "1.0 / ({0} * {0} + 1.0)"]


class GenAD:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.seed = seed
        self.lines = []
        self.names = 0
        self.with_meta = random.Random(f"admeta{seed}").random() < 0.3
        self.rm = random.Random(f"admetas{seed}")
        self.tfunc = self.vfunc = None
        self.with_linalg = random.Random(f"adla{seed}").random() < 0.3
        self.rla = random.Random(f"adlas{seed}")
        self.with_sparse = random.Random(f"adsp{seed}").random() < 0.3
        self.rsp = random.Random(f"adsps{seed}")
        self.sparse_stage = {}

    def emit(self, ind, text):
        self.lines.append("    " * ind + text)

    def fresh(self, p):
        self.names += 1
        return f"{p}{self.names}"

    def expr(self, leaves, depth):
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            return r.choice(leaves) if r.random() < 0.8 else repr(r.randint(-8, 8) * 0.25)
        k = r.randrange(6)
        a = self.expr(leaves, depth - 1)
        if k <= 1:
            return f"({a} {r.choice(['+', '-', '*'])} {self.expr(leaves, depth - 1)})"
        if k == 2:
            # parenthesized: `-1.0 ** 2` is -1
            return f"({a} / (({self.expr(leaves, depth - 1)}) ** 2 + 1.0))"
        if k == 3 and self.funcs:
            return f"{r.choice(self.funcs)}({a}, {self.expr(leaves, depth - 1)})"
        if k == 4:
            return f"ti.atan2({a}, 2.0)" if r.random() < 0.3 else f"({a} * 0.5)"
        return r.choice(UNARY).format(a)

    def meta_funcs(self):
        rm = self.rm
        self.tfunc, self.vfunc = self.fresh("gt"), self.fresh("gv")
        self.emit(1, "@ti.func")
        self.emit(1, f"def {self.tfunc}(f: ti.template(), i):")
        self.emit(2, f"return f[(i + {rm.randint(0, 3)}) % f.shape[0]]")
        self.emit(0, "")
        self.emit(1, "@ti.func")
        self.emit(1, f"def {self.vfunc}(v, c):")
        self.emit(2, f"v[{rm.randrange(2)}] = v[{rm.randrange(2)}] * ti.tanh(c)")
        # bounded in c: an unbounded c (a cube of a local) made sin(v.sum()) oscillate
        # faster than central differences resolve (fuzz seed 9091)
        self.emit(2, "v += ti.tanh(c) * 0.5")
        self.emit(2, f"return {rm.choice(['v.dot(v) * 0.25', 'v[0] * v[1]', 'ti.tanh(v.sum())'])}")
        self.emit(0, "")

    def meta_terms(self, t, lv, src, prev, s):
        """Terms added to local `t` through the compile-time constructs (own stream)."""
        rm = self.rm
        if rm.random() < 0.6:
            q = self.fresh("q")
            self.emit(3, f"for {q} in ti.static(range({rm.randint(1, 3)})):")
            # tanh, not sin: the term feeds t back (sin(t ** 3) three times over: seed 10055)
            self.emit(4, f"{t} = {t} + 0.25 * ti.tanh({self.expr(lv + [src(f'(i + {q}) % n')], 1)})")
        if rm.random() < 0.6:
            vec = prev != "x" and getattr(self, f"vec{s - 1}")
            pick = f"[{rm.randrange(2)}]" if vec else ""
            self.emit(3, f"{t} = {t} + 0.5 * {self.tfunc}({prev}, i){pick}")
        if rm.random() < 0.5:
            u = self.fresh("u")
            self.emit(3, f"{u} = ti.Vector([{self.expr(lv, 1)}, {t}], dt=ti.f64)")
            self.emit(3, f"{t} = {t} + 0.25 * {self.vfunc}({u}, {self.expr(lv, 1)}) + {u}[1]")

    def program(self):
        r = self.r
        n = r.choice([4, 7, 16, 33])
        self.n = n
        self.funcs = []
        self.emit(0, "import numpy as np")
        self.emit(0, "")
        self.emit(0, "")
        self.emit(0, "def build(ti):")
        self.emit(1, f"n = {n}")
        self.emit(1, "x = ti.field(ti.f64, shape=(n,), needs_grad=True, needs_dual=True)")
        self.emit(1, "loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)")
        self.emit(1, "w = ti.field(ti.f64, shape=(n,))")
        stages = r.randint(1, 3)
        for s in range(stages):
            vec = r.random() < 0.25
            sparse = self.with_sparse and gen_ad_sparse.declare(self, s, vec)
            if sparse:
                for line in sparse:
                    self.emit(1, line)
            elif vec:
                self.emit(1, f"y{s} = ti.Vector.field(2, ti.f64, shape=(n,), needs_grad=True, "
                             "needs_dual=True)")
            else:
                self.emit(1, f"y{s} = ti.field(ti.f64, shape=(n,), needs_grad=True, needs_dual=True)")
            setattr(self, f"vec{s}", vec)
        if self.with_linalg:
            gen_ad_linalg.declare(self, stages)
        self.emit(0, "")
        for _ in range(r.randint(0, 2)):
            name = self.fresh("g")
            self.emit(1, "@ti.func")
            self.emit(1, f"def {name}(a, b):")
            self.emit(2, f"return {self.expr(['a', 'b'], 2)}")
            self.emit(0, "")
            self.funcs.append(name)
        if self.with_meta:
            self.meta_funcs()
        kernels = []
        prev = "x"
        for s in range(stages + 1):
            name = f"k{s}"
            kernels.append(name)
            self.emit(1, "@ti.kernel")
            self.emit(1, f"def {name}():")
            loop = r.choice(["for i in range(n):", "for i in x:", "for i in range(n):"])
            if self.with_sparse:
                loop = gen_ad_sparse.loop(self, s, loop)
            self.emit(2, loop)

            def src(idx):
                base = f"{prev}[{idx}]"
                return base + f"[{r.randrange(2)}]" if prev != "x" and getattr(self, f"vec{s - 1}") \
                    else base
            leaves = [src("i"), src(f"(i + {r.randint(1, 5)}) % n"), "w[i]"]
            t = self.fresh("t")
            # typed f64: a local takes the type of its first value (f32 for a constant)
            self.emit(3, f"{t} = ti.cast({self.expr(leaves, 2)}, ti.f64)")
            lv = leaves + [t]
            form = r.randrange(4)
            if form == 0:
                # a local overwritten in a serial loop: its history on the AD stack
                k = self.fresh("j")
                self.emit(3, f"for {k} in range({r.randint(1, 4)}):")
                # (bounded: a value fed back through `** 3` four times reaches 1e19, where
                # sin() turns an ulp of difference between x*x*x and pow(x, 3) into any value)
                self.emit(4, f"{t} = ti.tanh({self.expr(lv + [src(f'({k} + i) % n')], 2)})")
            elif form == 1:
                self.emit(3, f"if i % {r.randint(2, 3)} == 0:")
                self.emit(4, f"{t} = {self.expr(lv, 2)}")
                if r.random() < 0.6:
                    self.emit(3, "else:")
                    self.emit(4, f"{t} = {self.expr(lv, 1)}")
            elif form == 2:
                u = self.fresh("u")
                self.emit(3, f"{u} = ti.Vector([{self.expr(lv, 1)}, {self.expr(lv, 1)}], dt=ti.f64)")
                self.emit(3, f"{t} = {t} + {u}.dot({u}) * 0.5 + {u}[1]")
            if self.with_meta:
                self.meta_terms(t, lv, src, prev, s)
            if self.with_linalg:
                gen_ad_linalg.terms(self, t, lv, s, stages)
            if s < stages:
                out = f"y{s}"
                guard = self.with_sparse and gen_ad_sparse.write_guard(self, s)
                ind = 3
                if guard:
                    self.emit(3, guard)
                    ind = 4
                if getattr(self, f"vec{s}"):
                    self.emit(ind, f"{out}[i] = ti.Vector([{t}, {self.expr(lv, 1)}])")
                else:
                    self.emit(ind, f"{out}[i] = {t}")
                prev = out
            else:
                self.emit(3, f"loss[None] += {t}" if r.random() < 0.7 else
                          f"ti.atomic_add(loss[None], {t} * 0.5)")
            self.emit(0, "")
        calls = "; ".join(f"{k}()" for k in kernels)
        grads = "; ".join(f"{k}.grad()" for k in reversed(kernels))
        seed = [r.choice([1.0, -1.0, 0.5, 0.0]) for _ in range(n)]
        self.emit(1, "def init():")
        self.emit(2, f"rng = np.random.default_rng({self.seed % 2**32})")
        self.emit(2, "x.from_numpy(rng.uniform(-1.0, 1.0, n))")
        self.emit(2, "w.from_numpy(rng.uniform(-1.0, 1.0, n))")
        self.emit(0, "")
        self.emit(1, "def primal(xv):")
        self.emit(2, "x.from_numpy(xv)")
        self.emit(2, "loss[None] = 0.0")
        self.emit(2, calls)
        self.emit(2, "return loss[None]")
        self.emit(0, "")
        self.emit(1, "def run():")
        self.emit(2, "init()")
        if r.random() < 0.7:
            self.emit(2, "with ti.ad.Tape(loss=loss):")
            self.emit(3, calls)
        else:
            self.emit(2, "loss[None] = 0.0")
            self.emit(2, calls)
            self.emit(2, "loss.grad[None] = 1.0")
            self.emit(2, grads)
        self.emit(2, "out = {'loss': loss[None], 'xgrad': x.grad.to_numpy()}")
        # taichi 1.7's forward mode fails an internal assertion on kernels whose locals are
        # reassigned (UnaryOpStmt of an AllocaStmt): its dual is left out (None)
        self.emit(2, "out['dual'] = None")
        self.emit(2, "if ti.__name__ != 'taichi':")
        self.emit(3, "init()")
        self.emit(3, f"with ti.ad.FwdMode(loss=loss, param=x, seed={seed!r}):")
        self.emit(4, "loss[None] = 0.0")
        self.emit(4, calls)
        self.emit(3, "out['dual'] = loss.dual[None]")
        self.emit(2, "return out")
        self.emit(0, "")
        self.emit(1, f"run.seed = np.array({seed!r})")
        self.emit(1, "run.primal = primal")
        self.emit(1, "run.init = init")
        self.emit(1, "run.x = x")
        self.emit(1, "return run")
        return "\n".join(self.lines) + "\n"


def program(seed):
    return GenAD(seed).program()


def execute(src, impl):
    return O.execute(src, impl)


def finite_differences(src, h=1e-6):
    """The values `run()` returns, with derivatives by central differences of the primal
    (fluxion, serial and unoptimized, float64). The outcome's `slack` bounds what these
    derivatives themselves can be trusted to: per derivative, twice the change from step h to
    2h (truncation, and rounding as it shows) plus the rounding of the loss's float64
    value over the step (4 ulps of |loss| / h: a loss of 1e7 leaves differences of h = 1e-6
    about 1e-2 of noise, whatever the derivative)."""
    slack = {}

    def central(run, x0, j, step):
        xp, xm = x0.copy(), x0.copy()
        xp[j] += step
        xm[j] -= step
        fp, fm = run.primal(xp), run.primal(xm)
        return (fp - fm) / (2 * step), max(abs(fp), abs(fm))

    def post(run, ti):
        run.init()
        x0 = run.x.to_numpy().copy()
        loss = run.primal(x0.copy())
        grad = np.zeros_like(x0)
        err = np.zeros_like(x0)
        for j in range(len(x0)):
            g1, big = central(run, x0, j, h)
            g2, _ = central(run, x0, j, 2 * h)
            grad[j] = g1
            err[j] = 2 * abs(g1 - g2) + 4 * np.finfo(np.float64).eps * max(big, abs(loss)) / h
        slack["xgrad"] = err
        slack["dual"] = float(err @ np.abs(run.seed))
        dual = float(grad @ run.seed)
        return {"loss": loss, "xgrad": grad, "dual": dual}
    out = O.execute(src, O.FLUXION_PLAIN, post=post)
    out.slack = slack
    return out
