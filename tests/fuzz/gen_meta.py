"""The compile-time part of the random programs (gen.py): what Taichi programs do with Python
at compile time, which expression-level fuzzing never reaches.

- `ti.static` loops in kernel and function bodies (unrolled; the loop variable is a Python
  int the body uses in expressions and indices);
- `ti.template()` parameters: a `ti.func` that takes a field and branches on its number of
  dimensions with `ti.static(len(f.shape) == ...)`, and kernels that take two fields and are
  launched with several pairs (one instance each);
- `ti.func`s whose vector parameter they assign (`v[1] = ...`, `v += c`): a copy, so the
  caller's vector keeps its values;
- a `@ti.data_oriented` class holding fields, with a `ti.func` method and a kernel method,
  instantiated twice;
- local vectors indexed by run-time values (`u[(e & 65535) % 3] += ...`), and
  `ti.loop_config` before a parallel loop (serialize, block_dim);
- array parameters annotated `ti.types.ndarray()` alone (an instance per dtype and number of
  dimensions), and array arguments made as `ti.ndarray` rather than NumPy arrays.

Whether a program has any of these, and every choice about them, comes from random streams
of their own (`Gen.with_meta`, `Gen.rm`), so the programs without them are the programs of
before (a test checks it byte for byte).

Race freedom (gen.py's rules): a template function reads the field it is given at any index,
so it is called only with fields this scope may read anywhere ("ro" in a parallel loop, any
in serial code); the template and class kernels write their first field at the loop's own
element and read the second, a different field, anywhere."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Meta:
    tfuncs: list = field(default_factory=list)   # template functions: name
    vfuncs: list = field(default_factory=list)   # vector-parameter functions: name
    launches: list = field(default_factory=list)  # lines of run() launching meta kernels
    ti_arrays: set = field(default_factory=set)  # array arguments made as ti.ndarray


def _plain_fields(g):
    """Fields a template may take: declared with ti.field (no vectors, sparse trees, arrays)."""
    return [f for f in g.fields if not f.arg and not f.vec and not f.sparse
            and f.name not in ("cnt",)]


def _conv(floats, e, c, h, dtype):
    """Text converting element `e` of the read field to the written field's `dtype`: through
    f64 and a clamp for floats; for integers through i64 (a float-to-integer cast of an
    out-of-range value differs between implementations, so none is generated)."""
    if floats:
        return f"ti.cast(ti.min(ti.max(ti.cast({e}, ti.f64) * 0.5 + {c}, -64.0), 64.0), {dtype})"
    return f"ti.cast(ti.cast({e}, ti.i64) * {c} + {h}, {dtype})"


def _read_into(g, ind, dst, src, conv):
    """`dst = conv(<src's element at h>)`, branching at compile time on src's number of
    dimensions (a template or a data-oriented member: each instance compiles one branch)."""
    reads = [("0", f"{src}[None]"), ("1", f"{src}[h % {src}.shape[0]]"),
             (None, f"{src}[h % {src}.shape[0], (h // 3) % {src}.shape[1]]")]
    for k, (n, e) in enumerate(reads):
        g.emit(ind, ("if" if k == 0 else "elif") + f" ti.static(len({src}.shape) == {n}):"
               if n else "else:")
        g.emit(ind + 1, f"{dst} = {conv(e)}")


def _store_from(g, ind, dst, src, floats, c):
    """`dst = <src's element at h, converted to dst's dtype>` (see _read_into)."""
    dtype = dst.split('[')[0] + '.dtype'
    _read_into(g, ind, dst, src, lambda e: _conv(floats, e, c, "h", dtype))


def funcs(g):
    """Declare the program's template and vector-parameter functions (before the kernels)."""
    if not g.with_meta:
        return
    rm = g.rm
    if rm.random() < 0.8:
        name = g.fresh("fn")
        g.emit(1, "@ti.func")
        g.emit(1, f"def {name}(f: ti.template(), a):")
        g.emit(2, "h = a & 65535")
        g.emit(2, "v = ti.cast(0.0, ti.f64)")
        _read_into(g, 2, "v", "f", lambda e: f"ti.cast({e}, ti.f64)")
        scale = rm.choice(["0.5", "0.25", "1.0"])
        g.emit(2, f"return ti.min(ti.max(v * {scale} + ti.static(len(f.shape)), -64.0), 64.0)")
        g.emit(0, "")
        g.meta.tfuncs.append(name)
    if rm.random() < 0.7:
        name = g.fresh("fn")
        g.emit(1, "@ti.func")
        g.emit(1, f"def {name}(v, c):")
        for _ in range(rm.randint(1, 3)):
            k = rm.randrange(4)
            if k == 0:
                g.emit(2, f"v[{rm.randrange(3)}] = v[{rm.randrange(3)}] * 0.5 + c")
            elif k == 1:
                g.emit(2, "v += c")
            elif k == 2:
                g.emit(2, "v = ti.min(ti.max(v * c, -64.0), 64.0)")
            else:
                g.emit(2, f"v[{rm.randrange(3)}] -= 1.0")
        ret = rm.choice(["v.sum()", "v.dot(v)", "v.max() - v.min()", "v[0] * v[2]"])
        g.emit(2, f"return ti.min(ti.max({ret}, -64.0), 64.0)")
        g.emit(0, "")
        g.meta.vfuncs.append(name)


def call(g, env, depth):
    """A float expression calling a template or vector-parameter function, or None."""
    rm = g.rm
    if g.meta.tfuncs and rm.random() < 0.6:
        loop = env.get("loop")
        ok = [f for f in _plain_fields(g)
              if (loop.roles.get(f.name) == "ro" if loop else True)]
        if ok:
            f = rm.choice(ok)
            return f"{rm.choice(g.meta.tfuncs)}({f.name}, {g.iexpr(env, depth)})"
    if g.meta.vfuncs:
        vs = [v.name for v in env["vars"] if v.dt in ("vec:f32", "vec:f64")]
        if vs and rm.random() < 0.7:
            arg = rm.choice(vs)
        else:
            arg = "ti.Vector([" + ", ".join(g.fexpr(env, 0) for _ in range(3)) + "], dt=ti.f32)"
        # c as f32: taichi 1.7.4 aborts in its code generator on an f16 added to a vector
        return f"{rm.choice(g.meta.vfuncs)}({arg}, ti.cast({g.fexpr(env, depth)}, ti.f32))"
    return None


def static_loop(g, env, ind, depth):
    """`for q in ti.static(...)`: the body unrolled, `q` a Python int in its expressions."""
    rm = g.rm
    q = g.fresh("q")
    over = rm.choice([f"range({rm.randint(0, 3)})", f"range({rm.randint(-2, 0)}, {rm.randint(1, 3)})",
                      "[" + ", ".join(str(rm.randint(-3, 9)) for _ in range(rm.randint(1, 3))) + "]"])
    g.emit(ind, f"for {q} in ti.static({over}):")
    g.block(dict(env, ints=env["ints"] + [q]), ind + 1, depth - 1)


def dynamic_index(g, env, ind):
    """An entry of a local vector at a run-time index assigned or updated; False if this
    scope has no local vector."""
    vs = [v for v in env["vars"] if v.dt.startswith("vec") and v.name not in env.get("frozen", ())]
    if not vs:
        return False
    v = g.rm.choice(vs)
    sub = v.dt.split(":")[1]
    at = f"(({g.iexpr(env, 1)}) & 65535) % 3"
    op = g.rm.choice(["=", "+="] if sub != "f16" else ["="])
    g.emit(ind, f"{v.name}[{at}] {op} {g.expr_of(env, sub, 1)}")
    return True


def untyped_array(g):
    """Whether a kernel's array parameter is annotated `ti.types.ndarray()` alone (its dtype
    and dimensions taken from the argument at the call: a template instance per kind)."""
    return g.with_meta and g.rm.random() < 0.3


def array_value(g, f, data):
    """The text making array argument `f` in run(): the NumPy array `data`, or sometimes a
    `ti.ndarray` filled from it (read back with to_numpy at the end)."""
    if g.with_meta and g.rm.random() < 0.4:
        g.meta.ti_arrays.add(f.name)
        return f"ti.ndarray(ti.{f.dt}, {f.shape}); {f.name}.from_numpy({data})"
    return data


def loop_config(g, ind):
    """`ti.loop_config(...)` for the parallel loop that follows: a race-free loop gives the
    same answer serial or parallel, in blocks of any size."""
    g.emit(ind, "ti.loop_config(" + g.rm.choice(["serialize=True", "block_dim=16",
                                                 "block_dim=128", "parallelize=2"]) + ")")


def _pairs(g):
    """(written, read) pairs of distinct plain fields with dimensions, in one number family
    (a float written from floats, an integer from integers: no float-to-integer casts, whose
    out-of-range results differ between implementations)."""
    fs = [f for f in _plain_fields(g) if f.shape and not f.name.startswith("slot")]
    out = []
    for a in fs:
        for b in _plain_fields(g):
            if a is not b and (a.dt[0] == "f") == (b.dt[0] == "f"):
                out.append((a, b))
    return out


def kernels(g):
    """Declare the template kernel and the data-oriented class; their launches go to run()."""
    if not g.with_meta:
        return
    rm = g.rm
    pairs = _pairs(g)
    if not pairs:
        return
    fam = {}
    for a, b in pairs:
        fam.setdefault(a.dt[0] == "f", []).append((a, b))
    if rm.random() < 0.7:
        name = g.fresh("tk")
        g.emit(1, "@ti.kernel")
        g.emit(1, f"def {name}(f: ti.template(), g: ti.template(), c: ti.i32):")
        g.emit(2, "for I in ti.grouped(f):")
        g.emit(3, "h = (I.sum() * c + 7) & 65535")
        fl = rm.choice(sorted(fam))
        # the branch on f's dtype is a compile-time fact too (each launch passes one family)
        g.emit(3, "if ti.static(f.dtype in (ti.f16, ti.f32, ti.f64)):")
        _store_from(g, 4, "f[I]", "g", True, "c")
        g.emit(3, "else:")
        _store_from(g, 4, "f[I]", "g", False, "c")
        g.emit(0, "")
        for _ in range(rm.randint(1, 3)):
            a, b = rm.choice(fam[fl])
            g.meta.launches.append(f"{name}({a.name}, {b.name}, {rm.randint(-5, 5)})")
    if rm.random() < 0.6:
        cls = g.fresh("Dn")
        fl = rm.choice(sorted(fam))
        g.emit(1, "@ti.data_oriented")
        g.emit(1, f"class {cls}:")
        g.emit(2, "def __init__(self, p, q, k):")
        g.emit(3, "self.p, self.q, self.k = p, q, k")
        g.emit(0, "")
        g.emit(2, "@ti.func")
        g.emit(2, "def put(self, I, h, c):")
        _store_from(g, 3, "self.p[I]", "self.q", fl, "c")
        g.emit(0, "")
        g.emit(2, "@ti.kernel")
        g.emit(2, "def step(self, c: ti.i32) -> ti.i32:")
        g.emit(3, "n = 0")
        g.emit(3, "for I in ti.grouped(self.p):")
        g.emit(4, "self.put(I, (I.sum() * c + self.k) & 65535, c)")
        for _ in range(rm.randint(0, 2)):
            q = g.fresh("q")
            g.emit(4, f"for {q} in ti.static(range({rm.randint(1, 3)})):")
            g.emit(5, f"n += {q} + 1")
        g.emit(4, "n += 1")
        g.emit(3, "return n")
        g.emit(0, "")
        for _ in range(rm.randint(1, 2)):
            a, b = rm.choice(fam[fl])
            g.meta.launches.append(f"{cls}({a.name}, {b.name}, {rm.randint(0, 9)}).step("
                                   f"{rm.randint(-4, 4)})")


def launch(g, ind, at, total):
    """Emit the meta launches that go before regular launch number `at` (of `total`)."""
    if not g.meta.launches:
        return
    rm = g.rm
    keep = []
    for line in g.meta.launches:
        if at == total or rm.random() < 0.3:
            key = g.fresh("m")
            g.emit(ind, f"out['{key}'] = {line}")
        else:
            keep.append(line)
    g.meta.launches = keep
