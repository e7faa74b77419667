"""Random whole kernel programs, as Python source text, deterministic in a seed.

A program is a module with `build(ti)`: it declares fields, `ti.func`s and kernels with the
module `ti` it is given (fluxion or taichi) and returns `run()`, which fills the fields and
array arguments from a seeded NumPy generator, launches the kernels in order and returns a
dict of every result (kernel returns, fields, arrays). The same text runs on any
implementation of the language, so two runs can be compared value for value.

Programs are race-free by construction, so every correct implementation gives one answer:
inside a parallel loop each field or array has one role for that loop:
- "ro": only read, at any index;
- "own": read and written at the loop's own element only (its shape is the loop's domain);
- "atomic": only updated by atomics whose old value is unused, with order-independent
  operands (integers; for floats, min/max, or adds of small multiples of 1/4, exact sums);
- "mark": only stored, with one constant per loop, at any index.
Serial code (a kernel's top-level statements, the bodies of serial inner loops of one
iteration) may touch anything it owns. Float values stay finite (products and quotients are
clamped), so no NaN reaches a comparison, a min/max or a cast.

Struct values (`St = ti.types.struct(u=vec3 f32, w=f32)`): locals built, copied and assigned
member by member, passed to `ti.func`s that assign their struct parameter (a copy, by value:
the caller's variable keeps its values). Whether a program has them, and every choice about
them, is drawn from streams of their own, so programs without structs are the programs of
before structs were generated.

Constructs that hit a known bug can be left out: `Options.known` names the optional constructs
that are generated (by default all of KNOWN_ALL, whose comments say what each was about)."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from . import gen_linalg, gen_math, gen_meta, gen_quant, gen_real, gen_sparse

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "f32", "f64"]
NP = {"i8": "np.int8", "i16": "np.int16", "i32": "np.int32", "i64": "np.int64",
      "u8": "np.uint8", "u16": "np.uint16", "u32": "np.uint32", "u64": "np.uint64",
      "f16": "np.float16", "f32": "np.float32", "f64": "np.float64"}
BITS = {t: int(t[1:]) for t in INTS + FLOATS}

# constructs that had open bugs in fluxion when the generator was written (both fixed since,
# issue 13): generated when Options.known includes them, which it does by default; a new
# known bug gets an entry here and is left out of the default until it is fixed
KNOWN_ALL = frozenset({
    "local_accumulator",   # `s += x[i]` on a kernel-level local in a parallel loop
    "literal_typing",      # `x_i8 + 200`: taichi types the literal i32, fluxion i8
})


@dataclass
class Options:
    taichi: bool = True          # only what taichi 1.7 accepts (the taichi oracle runs it)
    known: frozenset = KNOWN_ALL
    max_kernels: int = 3
    max_depth: int = 3           # nesting of control flow in a loop body
    max_stmts: int = 5           # statements per block
    big: bool = True             # sometimes loops long enough to run on several threads
    sparse: bool = True          # sometimes a field under a pointer or bitmasked SNode
    meta: bool = True            # sometimes ti.static loops, templates, data-oriented classes
    math: bool = True            # sometimes library functions (ti.exp, ti.math.*, ...)
    real: bool = True            # sometimes real functions (@ti.real_func)
    linalg: bool = True          # sometimes matrix fields, decompositions, ti.math on vectors
    quant: bool = True           # sometimes quantized fields (bit-packed, quant arrays)


@dataclass
class Var:
    name: str
    dt: str                      # a scalar dtype, or "vec3:<dt>"


@dataclass
class Field:
    name: str
    dt: str
    shape: tuple
    vec: int = 0                 # 0: scalar field, else a Vector field of this many
    arg: bool = False            # an ndarray argument rather than a field
    sparse: dict = None          # under a pointer/bitmasked SNode (gen_sparse.declare)


@dataclass
class Loop:
    idx: list                    # index expressions of the loop's own element ("i", "j"...)
    shape: tuple
    roles: dict = field(default_factory=dict)   # field name -> role
    mark: str = "1"              # the constant of "mark" stores in this loop
    accs: list = field(default_factory=list)    # kernel-level local accumulators
    atomic_ops: dict = field(default_factory=dict)  # field name -> its family of atomics
    over: str = None             # the field a struct-for iterates


class Gen:
    def __init__(self, seed, opts=None):
        self.r = random.Random(seed)
        self.seed = seed
        self.o = opts or Options()
        self.lines = []
        self.fields = []
        self.funcs = []          # (name, nparams, returns float, takes a struct)
        self.names = 0
        # whether the program has a sparse field is drawn from a stream of its own, and the
        # sparse constructs draw only where one exists: the programs without sparse fields
        # are the same as before sparse fields were generated
        self.with_sparse = self.o.sparse and random.Random(f"sparse{seed}").random() < 0.3
        self.lists = []          # dynamic list fields (gen_sparse.List)
        # structs: drawn like sparse fields, and their choices from a stream of their own
        self.with_structs = random.Random(f"struct{seed}").random() < 0.25
        self.rs = random.Random(f"structs{seed}")
        # compile-time constructs (gen_meta.py): the same scheme again
        self.with_meta = self.o.meta and random.Random(f"meta{seed}").random() < 0.3
        self.rm = random.Random(f"metas{seed}")
        self.meta = gen_meta.Meta()
        # library functions (gen_math.py): the same scheme again
        self.with_math = self.o.math and random.Random(f"math{seed}").random() < 0.3
        self.rx = random.Random(f"maths{seed}")
        # real functions (gen_real.py): the same scheme again
        self.with_real = self.o.real and random.Random(f"real{seed}").random() < 0.25
        self.rr = random.Random(f"reals{seed}")
        self.reals = []
        # linear algebra (gen_linalg.py): the same scheme again
        self.with_linalg = self.o.linalg and random.Random(f"linalg{seed}").random() < 0.25
        self.rl = random.Random(f"linalgs{seed}")
        # quantized types (gen_quant.py): the same scheme again
        self.with_quant = self.o.quant and random.Random(f"quant{seed}").random() < 0.2
        self.rq = random.Random(f"quants{seed}")

    # -- helpers -------------------------------------------------------------------------------
    def fresh(self, p):
        self.names += 1
        return f"{p}{self.names}"

    @staticmethod
    def constant(e):
        """Whether expression text `e` reads no variable, field or call (see _constant)."""
        return _constant(e)

    def chance(self, p):
        return self.r.random() < p

    def pick(self, xs):
        return self.r.choice(xs)

    def emit(self, ind, text):
        self.lines.append("    " * ind + text)

    # -- expressions -----------------------------------------------------------------------------
    def lit(self, k):
        """Int constant `k` as an operand: untyped when literal typing is generated (the
        default; a literal next to a narrow integer once took that integer's type in fluxion,
        `x_u8 % 256` was `x_u8 % 0`), else typed i32."""
        return str(k) if "literal_typing" in self.o.known else f"ti.i32({k})"

    def ilit(self):
        k = self.pick([0, 1, 2, 3, 5, 7, 100, -1, -3, -100, 127, 255, 1000, 65535,
                       2147483647, -2147483647])
        if "literal_typing" in self.o.known:
            return str(k)
        return f"ti.i32({k})"      # see lit()

    def flit(self):
        return repr(self.r.randint(-16, 16) * 0.25)

    def int_leaves(self, env):
        out = [v.name for v in env["vars"] if v.dt in INTS]
        out += env["ints"]
        return out

    def float_leaves(self, env):
        out = [v.name for v in env["vars"] if v.dt in FLOATS]
        for v in env["vars"]:
            if v.dt == "st":
                out += [f"{v.name}.w", f"{v.name}.u[{self.rs.randrange(3)}]"]
        return out

    def read(self, env, kind, depth=0):
        """A read of a field or array this scope may read, or None."""
        loop = env.get("loop")
        cands = []
        for f in self.fields:
            if f.arg and f.name not in env["args"]:
                continue
            is_float = f.dt in FLOATS
            if is_float != (kind == "f"):
                continue
            role = loop.roles.get(f.name) if loop else "serial"
            if role == "ro" or role == "serial":
                cands.append((f, "any"))
            elif role == "own":
                cands.append((f, "own"))
        if not cands:
            return None
        f, how = self.pick(cands)
        if how == "own":
            idx = ", ".join(loop.idx)
        else:
            idx = ", ".join(self.index(env, n, depth - 1) for n in f.shape) if f.shape else "None"
        base = f"{f.name}[{idx}]"
        if f.vec:
            base += f"[{self.r.randrange(f.vec)}]"
        return base

    def nonneg(self, e):
        """`e` for the left of `%` or `//`. Under taichi, masked non-negative: taichi folds
        `%` and `//` of values it knows constant (also through locals and inlined calls) with
        C's rules (-3 % 33 == -3) though it computes them with Python's at run time; on
        non-negative operands the two agree."""
        return f"(({e}) & {self.lit(65535)})" if self.o.taichi else f"({e})"

    def mod(self, e, k):
        """`e % k`, or a literal in [0, k) for a constant `e` under taichi (see index)."""
        if self.o.taichi and _constant(e):
            return str(self.r.randrange(k))
        return f"{self.nonneg(e)} % {self.lit(k)}"

    def index(self, env, n, depth=1):
        if depth < 0:
            leaves = self.int_leaves(env)
            e = self.pick(leaves) if leaves and self.chance(0.7) else self.ilit()
        else:
            e = self.iexpr(env, depth)
        if self.o.taichi and _constant(e):
            # taichi 1.7 folds `%` of constants with C's sign rule (-3 % 33 == -3), an
            # index out of range there
            return str(self.r.randrange(n))
        if self.chance(0.5):
            return f"{self.nonneg(e)} % {self.lit(n)}"
        return f"ti.max(0, ti.min(ti.cast({e}, ti.i32), {n - 1}))" if self.chance(0.3) \
            else f"ti.abs(ti.cast({self.nonneg(e)}, ti.i32) % {n})"

    def iexpr(self, env, depth):
        if self.with_math and depth > 0 and self.rx.random() < 0.1:
            return gen_math.icall(self, env, depth - 1)
        if self.with_real and depth > 0 and self.rr.random() < 0.08:
            got = gen_real.call(self, env, depth - 1, False)
            if got:
                return got
        r = self.r.random()
        if depth <= 0 or r < 0.25:
            leaves = self.int_leaves(env)
            if leaves and self.chance(0.6):
                return self.pick(leaves)
            if self.chance(0.5):
                got = self.read(env, "i", depth)
                if got:
                    return got
            if self.with_sparse and self.chance(0.2):
                got = gen_sparse.is_active(self, env)
                if got:
                    return got
            return self.ilit() if self.chance(0.7) else f"ti.cast({self.ilit()}, ti.{self.pick(INTS)})"
        d = depth - 1
        k = self.r.randrange(14)
        a = self.iexpr(env, d)
        if k <= 2:
            return f"({a} {self.pick(['+', '-', '*'])} {self.iexpr(env, d)})"
        if k == 3 and not (self.o.taichi and _constant(a)):
            return f"({self.nonneg(a)} {self.pick(['//', '%'])} {self.lit(self.r.randint(1, 9))})"
        if k == 4:
            return f"({a} {self.pick(['&', '|', '^'])} {self.iexpr(env, d)})"
        if k == 5:
            return f"({a} {self.pick(['<<', '>>'])} {self.r.randint(0, 7)})"
        if k == 6:
            return f"ti.{self.pick(['min', 'max'])}({a}, {self.iexpr(env, d)})"
        if k == 7:
            return f"({self.pick(['-', '~'])}{a})"
        if k == 8:
            return f"ti.cast({a}, ti.{self.pick(INTS)})"
        if k == 9:
            return f"ti.select({self.cond(env, d)}, {a}, {self.iexpr(env, d)})"
        if k == 10:
            return f"ti.cast({self.cond(env, d)}, ti.i32)"
        if k == 11 and self.funcs:
            return self.call(env, d, False) or a
        if k == 12:
            v = self.vec_leaf(env, "i")
            if v:
                return v
        if k == 13 and not (self.o.taichi and _constant(a)):
            return f"ti.cast({self.nonneg(a)} % {self.lit(64)}, ti.i32) * {self.pick([1, 2, 3])}"
        return a

    def fexpr(self, env, depth):
        if self.with_math and depth > 0 and self.rx.random() < 0.15:
            return gen_math.fcall(self, env, depth - 1)
        if self.with_meta and depth > 0 and self.rm.random() < 0.08:
            got = gen_meta.call(self, env, depth - 1)
            if got:
                return got
        if self.with_real and depth > 0 and self.rr.random() < 0.08:
            got = gen_real.call(self, env, depth - 1, True)
            if got:
                return got
        r = self.r.random()
        if depth <= 0 or r < 0.25:
            leaves = self.float_leaves(env)
            if leaves and self.chance(0.6):
                return self.pick(leaves)
            if self.chance(0.6):
                got = self.read(env, "f", depth)
                if got:
                    return got
            if self.chance(0.3):
                return f"ti.cast({self.mod(self.iexpr(env, 0), 64)}, ti.{self.pick(FLOATS)})"
            return self.flit()
        d = depth - 1
        k = self.r.randrange(12)
        a = self.fexpr(env, d)
        if k <= 1:
            return f"({a} {self.pick(['+', '-'])} {self.fexpr(env, d)})"
        if k == 2:
            return f"ti.min(ti.max({a} * {self.fexpr(env, d)}, -64.0), 64.0)"
        if k == 3:
            return f"ti.min(ti.max({a} / (ti.abs({self.fexpr(env, d)}) + 1.0), -64.0), 64.0)"
        if k == 4:
            return f"ti.{self.pick(['sin', 'cos'])}({a})"
        if k == 5:
            return f"ti.sqrt(ti.abs({a}))"
        if k == 6:
            return f"ti.{self.pick(['min', 'max'])}({a}, {self.fexpr(env, d)})"
        if k == 7:
            return f"ti.select({self.cond(env, d)}, {a}, {self.fexpr(env, d)})"
        if k == 8:
            return f"ti.cast({a}, ti.{self.pick(FLOATS)})"
        if k == 9:
            return f"ti.cast({self.mod(self.iexpr(env, d), 256)}, ti.{self.pick(FLOATS)}) * 0.25"
        if k == 10 and self.funcs:
            return self.call(env, d, True) or a
        if k == 11:
            v = self.vec_leaf(env, "f")
            if v:
                return v
        return f"(-{a})"

    def vec_leaf(self, env, kind):
        vs = [v for v in env["vars"] if v.dt.startswith("vec")]
        vs = [v for v in vs if (v.dt.split(":")[1] in FLOATS) == (kind == "f")]
        if not vs:
            return None
        v = self.pick(vs)
        k = self.r.randrange(4)
        if k == 0 and kind == "f":
            return f"{v.name}.dot({v.name})" if self.chance(0.5) else f"{v.name}.norm()"
        if k == 1:
            return f"{v.name}.sum()"
        if k == 2:
            return f"{v.name}.max()"
        return f"{v.name}[{self.r.randrange(3)}]"

    def cond(self, env, depth):
        k = self.r.randrange(6)
        if k <= 1:
            return f"{self.iexpr(env, depth)} {self.pick(['<', '<=', '>', '>=', '==', '!='])} " \
                   f"{self.iexpr(env, depth)}"
        if k == 2:
            return f"{self.fexpr(env, depth)} {self.pick(['<', '>', '<=', '>='])} {self.flit()}"
        if k == 3:
            return f"{self.mod(self.iexpr(env, depth), self.r.randint(2, 5))} == 0"
        if k == 4 and depth > 0:
            return f"({self.cond(env, depth - 1)}) {self.pick(['and', 'or'])} " \
                   f"({self.cond(env, depth - 1)})"
        return f"not ({self.iexpr(env, depth)} > {self.ilit()})"

    def call(self, env, depth, want_float):
        fs = [f for f in self.funcs if f[2] == want_float]
        if not fs:
            return None
        name, nparams, _, takes_struct = self.pick(fs)
        args = [self.iexpr(env, depth) if k == 0 else self.fexpr(env, depth)
                for k in range(nparams)]
        if self.o.taichi and _constant(args[0]):
            # taichi folds an inlined call on constants with C's `%` (see index)
            leaves = self.int_leaves(env)
            if not leaves:
                return None
            args[0] = self.pick(leaves)
        if takes_struct:
            # the caller's own struct variable (which the call must leave as it was) or a
            # temporary (which the function must be able to assign)
            mine = [v.name for v in env["vars"] if v.dt == "st"]
            args.append(self.rs.choice(mine) if mine and self.rs.random() < 0.7
                        else self.struct_value(env))
        return f"{name}({', '.join(args)})"

    def expr_of(self, env, dt, depth):
        return self.fexpr(env, depth) if dt in FLOATS else self.iexpr(env, depth)

    def struct_value(self, env):
        """A new St value: the constructor, by position or by keyword."""
        u = ", ".join(self.fexpr(env, 1) for _ in range(3))
        w = self.fexpr(env, 1)
        if self.rs.random() < 0.5:
            return f"St(ti.Vector([{u}], dt=ti.f32), {w})"
        return f"St(w={w}, u=ti.Vector([{u}], dt=ti.f32))"

    def struct_assign(self, env, ind, v):
        """An assignment to struct variable `v`: a member, an entry of its vector, the whole
        vector, or the whole struct (a new value or a copy of another struct variable)."""
        k = self.rs.randrange(6)
        if k == 0:
            self.emit(ind, f"{v}.w = {self.fexpr(env, 2)}")
        elif k == 1:
            self.emit(ind, f"{v}.u[{self.rs.randrange(3)}] = {self.fexpr(env, 2)}")
        elif k == 2:
            self.emit(ind, f"{v}.u += {self.fexpr(env, 1)}")
        elif k == 3:
            self.emit(ind, f"{v}.w {self.rs.choice(['+=', '-='])} {self.fexpr(env, 1)}")
        elif k == 4:
            others = [o.name for o in env["vars"] if o.dt == "st" and o.name != v]
            self.emit(ind, f"{v} = {self.rs.choice(others) if others else self.struct_value(env)}")
        else:
            self.emit(ind, f"{v} = {self.struct_value(env)}")

    def struct_stmt(self, env, ind):
        """A struct local made, or one of this scope's struct locals assigned."""
        mine = [v.name for v in env["vars"]
                if v.dt == "st" and v.name not in env.get("frozen", ())]
        if mine and self.rs.random() < 0.6:
            self.struct_assign(env, ind, self.rs.choice(mine))
            return
        name = self.fresh("st")
        others = [v.name for v in env["vars"] if v.dt == "st"]
        value = self.rs.choice(others) if others and self.rs.random() < 0.3 \
            else self.struct_value(env)
        self.emit(ind, f"{name} = {value}")
        env["vars"].append(Var(name, "st"))

    # -- statements ---------------------------------------------------------------------------
    def block(self, env, ind, depth, n=None):
        n = n if n is not None else self.r.randint(1, self.o.max_stmts)
        env = dict(env, vars=list(env["vars"]))
        before = len(self.lines)
        for _ in range(n):
            self.stmt(env, ind, depth)
        if len(self.lines) == before:
            self.emit(ind, "pass")

    def stmt(self, env, ind, depth):
        if self.with_structs and self.rs.random() < 0.2:
            self.struct_stmt(env, ind)
            return
        if self.with_meta and self.rm.random() < 0.12:
            if depth > 0 and self.rm.random() < 0.6:
                gen_meta.static_loop(self, env, ind, depth)
                return
            if gen_meta.dynamic_index(self, env, ind):
                return
        loop = env.get("loop")
        k = self.r.randrange(17)
        if k <= 2:
            dt = self.pick(INTS + FLOATS)
            name = self.fresh("v")
            self.emit(ind, f"{name} = ti.cast({self.expr_of(env, dt, 2)}, ti.{dt})")
            env["vars"].append(Var(name, dt))
        elif k == 3 and env["vars"]:
            v = self.pick(env["vars"])
            if v.dt == "st":
                if v.name not in env.get("frozen", ()):
                    self.struct_assign(env, ind, v.name)
            elif v.dt.startswith("vec"):
                sub = v.dt.split(":")[1]
                self.emit(ind, f"{v.name}[{self.r.randrange(3)}] = {self.expr_of(env, sub, 2)}")
            elif v.name not in env.get("frozen", ()):
                op = self.pick(["=", "+=", "-=", "*="] if v.dt in FLOATS and v.dt != "f16"
                               else ["=", "+=", "-=", "*=", "^=", "|="] if v.dt in INTS else ["="])
                val = self.expr_of(env, v.dt, 2)
                if op == "*=" and v.dt in FLOATS:
                    self.emit(ind, f"{v.name} = ti.min(ti.max({v.name} * ({val}), -64.0), 64.0)")
                else:
                    self.emit(ind, f"{v.name} {op} {val}")
        elif k <= 6:
            self.store(env, ind)
        elif k == 7 and loop is not None:
            self.atomic(env, ind)
        elif k == 8 and depth > 0:
            self.emit(ind, f"if {self.cond(env, 1)}:")
            self.block(env, ind + 1, depth - 1)
            if self.chance(0.4):
                self.emit(ind, f"elif {self.cond(env, 1)}:")
                self.block(env, ind + 1, depth - 1)
            if self.chance(0.5):
                self.emit(ind, "else:")
                self.block(env, ind + 1, depth - 1)
        elif k == 9 and depth > 0:
            var = self.fresh("k")
            lo = self.r.randint(-2, 2)
            hi = lo + self.r.randint(0, 5)
            bound = f"{hi}" if self.chance(0.7) else f"ti.min({self.mod(self.iexpr(env, 1), 6)}, {hi})"
            self.emit(ind, f"for {var} in range({lo}, {bound}):")
            inner = dict(env, ints=env["ints"] + [var], in_serial=True)
            self.block(inner, ind + 1, depth - 1)
            self.jump(inner, ind + 1)
        elif k == 10 and depth > 0:
            var = self.fresh("w")
            self.emit(ind, f"{var} = 0")
            self.emit(ind, f"while {var} < {self.r.randint(0, 4)}:")
            self.emit(ind + 1, f"{var} += 1")
            inner = dict(env, ints=env["ints"] + [var], in_serial=True, frozen=env.get("frozen", set()) | {var})
            self.block(inner, ind + 1, depth - 1)
            self.jump(inner, ind + 1)
        elif k == 11:
            dt = self.pick(["f32", "f64", "i32", "i64", "f16"])
            name = self.fresh("u")
            kind = dt in FLOATS
            parts = [self.expr_of(env, dt, 1) for _ in range(3)]
            self.emit(ind, f"{name} = ti.Vector([{', '.join(parts)}], dt=ti.{dt})")
            env["vars"].append(Var(name, f"vec:{dt}"))
            if self.chance(0.5) and kind:
                m = self.fresh("m")
                rows = ", ".join("[" + ", ".join(self.flit() for _ in range(3)) + "]"
                                 for _ in range(3))
                self.emit(ind, f"{m} = ti.Matrix([{rows}], dt=ti.{dt})")
                op = self.pick([f"{m} @ {name}", f"{m}.transpose() @ {name}",
                                f"ti.min(ti.max({name}.cross({name} * 0.5 + 1.0), -64.0), 64.0)",
                                f"{name} * 2.0 - {m}[0, 1]"])
                n2 = self.fresh("u")
                self.emit(ind, f"{n2} = ti.min(ti.max({op}, -64.0), 64.0)")
                env["vars"].append(Var(n2, f"vec:{dt}"))
        elif k == 12 and loop is not None and loop.accs:
            self.stmt_accumulate(env, self.pick(loop.accs), ind)
        elif k == 13 and depth > 0 and loop is not None:
            self.counter_slot(env, ind)
        elif k == 14 and depth > 0:
            self.python_literal_locals(env, ind, depth)
        else:
            self.store(env, ind)

    def python_literal_locals(self, env, ind, depth):
        """Locals that start as a Python literal (`f = True`, `c = 0`) and change under a run-time
        condition: they are kernel variables, not compile-time values (a bool local once kept
        the value of its last assignment whatever the branch did)."""
        flag, count = self.fresh("b"), self.fresh("c")
        self.emit(ind, f"{flag} = {self.pick(['True', 'False'])}")
        self.emit(ind, f"{count} = 0")
        self.emit(ind, f"if {self.cond(env, 1)}:")
        self.emit(ind + 1, f"{flag} = {self.pick(['True', 'False', f'not {flag}'])}")
        self.emit(ind + 1, f"{count} += {self.r.randint(1, 3)}")
        self.emit(ind, f"if {flag}:")
        env["vars"].append(Var(count, "i32"))
        self.block(env, ind + 1, depth - 1)

    def stmt_accumulate(self, env, acc, ind):
        """`s += ...` on a kernel-level local inside the parallel loop: a reduction, with
        order-independent terms (integers, or multiples of 1/4 that sum exactly)."""
        if acc.dt in INTS:
            self.emit(ind, f"{acc.name} += {self.iexpr(env, 1)}")
        else:
            self.emit(ind, f"{acc.name} += ti.cast({self.mod(self.iexpr(env, 1), 16)}, "
                           f"ti.{acc.dt}) * 0.25")

    def jump(self, env, ind):
        if self.chance(0.5):
            self.emit(ind, f"if {self.cond(env, 0)}:")
            self.emit(ind + 1, self.pick(["break", "continue"]))
            if self.chance(0.5):
                self.block(env, ind, 0, 1)

    def store(self, env, ind):
        loop = env.get("loop")
        cands = []
        for f in self.fields:
            if f.arg and f.name not in env["args"]:
                continue
            role = loop.roles.get(f.name) if loop else "serial"
            if role in ("own", "serial"):
                cands.append((f, role))
            elif role == "mark":
                cands.append((f, role))
        if not cands:
            return
        f, role = self.pick(cands)
        if role == "own":
            idx = ", ".join(loop.idx)
        else:
            idx = ", ".join(self.index(env, n) for n in f.shape) if f.shape else "None"
        target = f"{f.name}[{idx}]"
        if role == "mark":
            self.emit(ind, f"{target} = {loop.mark}")
            return
        if f.vec and self.chance(0.4):
            sub = self.r.randrange(f.vec)
            target += f"[{sub}]"
        elif f.vec:
            parts = ", ".join(self.expr_of(env, f.dt, 1) for _ in range(f.vec))
            self.emit(ind, f"{target} = ti.Vector([{parts}])")
            return
        op = "="
        if self.chance(0.3):
            op = self.pick(["+=", "-="] + (["^=", "&=", "|="] if f.dt in INTS else []))
        self.emit(ind, f"{target} {op} {self.expr_of(env, f.dt, 2)}")

    def atomic(self, env, ind):
        loop = env["loop"]
        cands = [f for f in self.fields if loop.roles.get(f.name) == "atomic"
                 and (not f.arg or f.name in env["args"])]
        if not cands:
            return self.store(env, ind)
        f = self.pick(cands)
        idx = ", ".join(self.index(env, n) for n in f.shape) if f.shape else "None"
        target = f"{f.name}[{idx}]"
        if f.vec:
            target += f"[{self.r.randrange(f.vec)}]"
        # one family of operations per field and loop: they commute with each other (add
        # and sub; min; max; and; or; xor), mixed they would not
        family = loop.atomic_ops.setdefault(f.name, self.pick(
            ["add", "min", "max", "and", "or", "xor"] if f.dt in INTS else ["add", "min", "max"]))
        op = self.pick(["add", "sub", "+=", "-="] if f.dt in INTS else ["add", "+=", "-="]) \
            if family == "add" else family
        if f.dt in INTS:
            val = self.iexpr(env, 2)
        else:
            val = (f"ti.cast({self.mod(self.iexpr(env, 1), 16)}, ti.{f.dt}) * 0.25"
                   if op in ("add", "+=", "-=") else self.fexpr(env, 2))
        if op in ("+=", "-="):
            self.emit(ind, f"{target} {op} {val}")
        else:
            self.emit(ind, f"ti.atomic_{op}({target}, {val})")

    def counter_slot(self, env, ind):
        """`slots[ti.atomic_add(counter[None], 1) % n] += c`: an index with a side effect,
        still order-independent (the old counter values are 0, 1, ... in any order)."""
        loop = env["loop"]
        cnt = [f for f in self.fields if loop.roles.get(f.name) == "counter"]
        slots = [f for f in self.fields if loop.roles.get(f.name) == "slots"]
        if not cnt or not slots:
            return self.store(env, ind)
        c, s = cnt[0], slots[0]
        # one step and one delta per program: mixed, the slots an iteration hits would
        # depend on the order of the iterations
        if not hasattr(self, "slot_step"):
            self.slot_step, self.slot_form = self.pick([1, 1, 2, 3]), self.r.randrange(3)
        at = f"ti.atomic_add({c.name}[None], {self.slot_step}) % {s.shape[0]}"
        if self.slot_form == 0:
            self.emit(ind, f"{s.name}[{at}] += 1")
        elif self.slot_form == 1:
            self.emit(ind, f"ti.atomic_add({s.name}[{at}], 2)")
        else:
            self.emit(ind, f"{s.name}[{at}] -= 1")

    # -- functions, loops, kernels --------------------------------------------------------------
    def func(self):
        name = self.fresh("fn")
        nparams = self.r.randint(1, 2)
        want_float = self.chance(0.5)
        params = ["a", "b"][:nparams]
        takes_struct = self.with_structs and self.rs.random() < 0.6
        if takes_struct:
            params.append(self.rs.choice(["s: St", "s"]))
        self.emit(1, "@ti.func")
        self.emit(1, f"def {name}({', '.join(params)}):")
        env = {"vars": [Var("a", "i32")] + ([Var("b", "f32")] if nparams > 1 else []),
               "ints": [], "args": set(), "loop": Loop([], (), {f.name: "none" for f in self.fields}),
               "frozen": {"a", "b"}}
        if takes_struct:
            env["vars"].append(Var("s", "st"))
            for _ in range(self.rs.randint(1, 3)):
                self.struct_assign(env, 2, "s")
        ret = self.fresh("r")
        rt = "f32" if want_float else "i32"
        self.emit(2, f"{ret} = ti.cast({self.expr_of(env, rt, 1)}, ti.{rt})")
        env["vars"].append(Var(ret, rt))
        if not self.o.taichi and self.chance(0.6):
            # taichi 1.7 has no return inside a non-static if of a ti.func; fluxion has
            self.emit(2, f"if {self.cond(env, 0)}:")
            self.emit(3, f"return {ret} + ti.cast({self.ilit()} % 7, ti.{rt})")
        self.block(env, 2, 1, self.r.randint(1, 3))
        if takes_struct:
            # the function's reads of its parameter after assigning it
            self.emit(2, f"{ret} += ti.cast(ti.min(ti.max(s.w + s.u[{self.rs.randrange(3)}], "
                         f"-64.0), 64.0), ti.{rt})")
        self.emit(2, f"return {ret}")
        self.emit(0, "")
        self.funcs.append((name, nparams, want_float, takes_struct))

    def loop_header(self, kargs):
        """(header text, Loop) of a parallel loop over some field's or array's domain."""
        one = [f for f in self.fields if len(f.shape) == 1 and (not f.arg or f.name in kargs)]
        two = [f for f in self.fields if len(f.shape) == 2 and (not f.arg or f.name in kargs)]
        k = self.r.randrange(7)
        if two and k >= 5:
            f = self.pick(two)
            n0, n1 = f.shape
            if f.arg:
                return f"for i, j in ti.ndrange({f.name}.shape[0], {f.name}.shape[1]):", \
                    Loop(["i", "j"], f.shape)
            form = self.r.randrange(3)
            if form == 0:
                return f"for i, j in {f.name}:", Loop(["i", "j"], f.shape, over=f.name)
            if form == 1:
                return f"for i, j in ti.ndrange({n0}, {n1}):", Loop(["i", "j"], f.shape)
            return f"for I in ti.grouped({f.name}):", Loop(["I"], f.shape, over=f.name)
        if not one:
            n = self.pick([8, 100])
            return f"for i in range({n}):", Loop(["i"], (n,))
        f = self.pick(one)
        n = f.shape[0]
        if f.arg:
            return f"for i in range({f.name}.shape[0]):", Loop(["i"], f.shape)
        if k == 0:
            return f"for i in {f.name}:", Loop(["i"], f.shape, over=f.name)
        if k == 1 and n > 2:
            lo = self.r.randint(0, 2)
            return f"for i in range({lo}, {n}):", Loop(["i"], f.shape)
        return f"for i in range({n}):", Loop(["i"], f.shape)

    def kernel(self, kid):
        name = f"k{kid}"
        params = []
        scal = []
        for _ in range(self.r.randint(0, 2)):
            dt = self.pick(INTS + ["f32", "f64"])
            p = self.fresh("p")
            params.append((p, dt))
            scal.append(Var(p, dt))
        kargs = set()
        for f in self.fields:
            if f.arg and self.chance(0.7):
                kargs.add(f.name)
        ann = [f"{p}: ti.{dt}" for p, dt in params]
        for f in self.fields:
            if f.name in kargs:
                if gen_meta.untyped_array(self):
                    # a template on the array's dtype and dimensions (one instance per kind)
                    ann.append(f"{f.name}: ti.types.ndarray()")
                else:
                    ann.append(f"{f.name}: ti.types.ndarray(dtype=ti.{f.dt}, "
                               f"ndim={len(f.shape)})")
        ret = self.pick([None, None, "i32", "i64", "f32", "f64", "u8", "i16"])
        self.emit(1, "@ti.kernel")
        self.emit(1, f"def {name}({', '.join(ann)})" + (f" -> ti.{ret}:" if ret else ":"))
        env = {"vars": list(scal), "ints": [], "args": kargs, "frozen": {p for p, _ in params}}
        # serial prologue
        for _ in range(self.r.randint(0, 2)):
            self.store(env, 2)
        if self.with_sparse and self.chance(0.3):
            gen_sparse.deactivate(self, env, 2)
        if self.lists and self.chance(0.2):
            gen_sparse.clear_list(self, env, 2)
        for _ in range(self.r.randint(1, 2)):
            header, loop = self.loop_header(kargs)
            self.assign_roles(loop, kargs)
            accs = []
            if "local_accumulator" in self.o.known and self.chance(0.3):
                dt = self.pick(["i32", "i64", "f32", "f64"])
                acc = self.fresh("s")
                self.emit(2, f"{acc} = ti.cast(0, ti.{dt})")
                accs.append(Var(acc, dt))
                loop.accs = accs
            if self.with_meta and self.rm.random() < 0.2:
                gen_meta.loop_config(self, 2)
            self.emit(2, header)
            # the kernel's locals are read-only in the parallel loop's body (an accumulator
            # changes only through stmt_accumulate): an assignment there (`s = f(s)`,
            # `s *= 3`) is a race that a CPU's few threads hid and a GPU's thousands showed
            lenv = dict(env, loop=loop, vars=list(env["vars"]),
                        frozen=env["frozen"] | {v.name for v in env["vars"]},
                        ints=[x for x in loop.idx if x != "I"] + (["I[0]", "I[1]"] if loop.idx == ["I"] else []))
            self.block(lenv, 3, self.o.max_depth)
            if self.lists and self.chance(0.6):
                gen_sparse.append(self, lenv, loop, 3)
            for acc in accs:
                if self.chance(0.8):
                    self.stmt_accumulate(lenv, acc, 3)
                # not the counter under taichi: a store to a field in the kernel whose loop
                # hands out slots with atomics on it made taichi 1.7.4 return the same old
                # value to every atomic (fuzz seeds 200044..200227: all adds in one slot)
                tgt = [f for f in self.fields if not f.arg and not f.shape and not f.vec
                       and f.dt in INTS + ["f32", "f64"]
                       and not (self.o.taichi and f.name == "cnt")]
                if tgt:
                    t = self.pick(tgt)
                    self.emit(2, f"{t.name}[None] = {acc.name}")
                env["vars"].append(acc)
        if ret:
            e = self.expr_of(env, ret, 2)
            self.emit(2, f"return {e}")
        self.emit(0, "")
        return name, params, kargs

    def assign_roles(self, loop, kargs):
        loop.mark = str(self.r.randint(-5, 5))
        counters = [f for f in self.fields if f.name.startswith("cnt")]
        slots = [f for f in self.fields if f.name.startswith("slot")]
        for f in self.fields:
            if f.arg and f.name not in kargs:
                continue
            if f in counters:
                loop.roles[f.name] = "counter"
                continue
            if f in slots:
                loop.roles[f.name] = "slots"
                continue
            opts = ["ro", "ro"]
            if tuple(f.shape) == tuple(loop.shape):
                opts += ["own", "own", "own"]
            if f.dt in INTS or (f.dt in ("f32", "f64")):
                opts.append("atomic")
            if not f.vec:
                opts.append("mark")
            loop.roles[f.name] = self.pick(opts)
        gen_sparse.restrict_roles(loop, self.fields)

    # -- the program ----------------------------------------------------------------------------
    def program(self):
        r = self.r
        self.emit(0, "import numpy as np")
        self.emit(0, "")
        self.emit(0, "")
        self.emit(0, "def build(ti):")
        sizes = [5, 8, 16, 33, 64, 100] + ([1000, 4099] if self.o.big else [])
        n1 = self.pick(sizes)
        shapes1 = [(n1,), (self.pick(sizes),)]
        shapes2 = [(self.pick([3, 4, 7, 16]), self.pick([5, 8, 9, 40]))]
        if self.o.big and self.chance(0.2):
            shapes2.append((64, 70))
        for _ in range(r.randint(2, 5)):
            shape = self.pick(shapes1 + shapes2 + [()])
            dt = self.pick(INTS + FLOATS)
            vec = 3 if (self.chance(0.15) and dt in ("f32", "f64", "i32") and shape) else 0
            name = self.fresh("x")
            self.fields.append(Field(name, dt, shape, vec))
            if vec:
                self.emit(1, f"{name} = ti.Vector.field({vec}, ti.{dt}, shape={shape})")
            else:
                self.emit(1, f"{name} = ti.field(ti.{dt}, shape={shape})")
        if self.with_sparse:
            kinds = self.pick(["tree", "tree", "list", "both"])
            if kinds != "list":
                # under taichi, extents that are powers of two: taichi 1.7.4's struct-for over
                # a pointer grid of 3x1 blocks of 1x8 visits 6 cells of the one active block
                shapes = [(8,), (16,), (64,), (1024,), (4, 8), (16, 8), (64, 64)] \
                    if self.o.taichi else shapes1 + shapes2
                dt, shape = self.pick(INTS + FLOATS), self.pick(shapes)
                name, facts = gen_sparse.declare(self, dt, shape)
                self.fields.append(Field(name, dt, shape, sparse=facts))
            if kinds != "tree":
                gen_sparse.declare_list(self)
        if self.chance(0.5):
            self.fields.append(Field("cnt", self.pick(["i32", "i64"]), ()))
            m = self.pick([4, 16, 64, 5000])
            self.fields.append(Field("slot", self.pick(["i32", "u32", "i64"]), (m,)))
            self.emit(1, f"cnt = ti.field(ti.{self.fields[-2].dt}, shape=())")
            self.emit(1, f"slot = ti.field(ti.{self.fields[-1].dt}, shape=({m},))")
        for _ in range(r.randint(0, 2)):
            shape = self.pick(shapes1 + shapes2)
            dt = self.pick(["i32", "i64", "f32", "f64", "u8", "i16"])
            self.fields.append(Field(self.fresh("arr"), dt, shape, arg=True))
        if self.with_structs:
            self.emit(1, "St = ti.types.struct(u=ti.types.vector(3, ti.f32), w=ti.f32)")
        gen_real.declare(self)
        gen_linalg.declare(self)
        gen_quant.declare(self)
        self.emit(0, "")
        for _ in range(r.randint(0, 2)):
            self.func()
        gen_meta.funcs(self)
        gen_real.funcs(self)
        kernels = [self.kernel(k) for k in range(r.randint(1, self.o.max_kernels))]
        gen_meta.kernels(self)
        gen_linalg.kernels(self)
        gen_quant.kernels(self)
        gen_sparse.probes(self)
        gen_sparse.list_probes(self)
        # run(): data, launches, results
        self.emit(1, "def run():")
        self.emit(2, f"rng = np.random.default_rng({self.seed % (2**32)})")
        for f in self.fields:
            shape = f.shape + ((f.vec,) if f.vec else ())
            if f.dt in FLOATS:
                data = f"(rng.integers(-16, 17, size={shape}) * 0.25).astype({NP[f.dt]})"
            elif f.dt.startswith("u"):
                data = f"rng.integers(0, 41, size={shape}).astype({NP[f.dt]})"
            else:
                data = f"rng.integers(-20, 21, size={shape}).astype({NP[f.dt]})"
            if f.arg:
                self.emit(2, f"{f.name} = {gen_meta.array_value(self, f, data)}")
            elif f.name in ("cnt",):
                continue
            elif not f.shape:
                self.emit(2, f"{f.name}[None] = {data}.item()")
            elif f.sparse:
                gen_sparse.fill(self, f, data)
            else:
                self.emit(2, f"{f.name}.from_numpy({data})")
        gen_linalg.fill(self)
        self.emit(2, "out = {}")
        for at, (name, params, kargs) in enumerate(kernels):
            gen_meta.launch(self, 2, at, len(kernels))
            for rep in range(self.pick([1, 1, 2])):
                vals = []
                for p, dt in params:
                    if dt in FLOATS:
                        vals.append(repr(r.randint(-12, 12) * 0.5))
                    elif dt.startswith("u"):
                        vals.append(str(r.randint(0, 200)))
                    else:
                        vals.append(str(r.randint(-100, 100)))
                vals += [f.name for f in self.fields if f.name in kargs]
                self.emit(2, f"out['{name}.{rep}'] = {name}({', '.join(vals)})")
                if self.with_sparse:
                    gen_sparse.between_launches(self)
        gen_meta.launch(self, 2, len(kernels), len(kernels))
        gen_linalg.launch(self, 2)
        gen_quant.launch(self, 2)
        for f in self.fields:
            self.emit(2, f"out['{f.name}'] = {f.name}" + ("" if f.arg and f.name not in
                                                           self.meta.ti_arrays else ".to_numpy()"))
        gen_sparse.results(self)
        gen_sparse.list_results(self)
        gen_real.results(self)
        gen_linalg.results(self)
        self.emit(2, "return out")
        self.emit(0, "")
        self.emit(1, "return run")
        return "\n".join(self.lines) + "\n"


_VAR = re.compile(r"(?<!ti\.)\b(?:[vpkwurs]\d+|x\d+\[|arr\d+|fn\d+|i|j|I|a|b|cnt|slot)\b")


def _constant(e):
    """Whether expression text `e` reads no variable, field or call (all constants)."""
    return _VAR.search(e) is None


def program(seed, opts=None):
    return Gen(seed, opts).program()
