"""The offline cache of compiled kernels (runtime/offline_cache.py, lang/cache_key.py,
lang/kernel_cache.py).

A session's new entries reach the disk when it ends (ti.init/ti.reset), so most tests run
two sessions in one process: the second one loads what the first one compiled, unless
something the code depends on changed, in which case it must compile (a stale hit would give
the first session's result). Expected values are computed here, in Python/numpy. A few
tests run separate processes: the real use, and processes filling one cache at once.
"""
import importlib.util
import json
import linecache
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion as ti
from fluxion.lang import cache_key
from fluxion.runtime import offline_cache
from fluxion.runtime.jit import get_jit

pytestmark = pytest.mark.cpu_only


def session(cache, **cfg):
    ti.init(arch=ti.cpu, offline_cache_file_path=str(cache), **cfg)


def note(kernel):
    (inst,) = kernel.instances.values()
    return inst.cache_note


def notes(kernel):
    return sorted(i.cache_note for i in kernel.instances.values())


def tic_files(cache):
    return sorted(n for n in os.listdir(cache) if n.endswith(".tic")) if os.path.isdir(cache) \
        else []


def load_module(path, text, name):
    """Import `text` written at `path` as module `name` (a fresh module object each time,
    as a new process would have)."""
    path.write_text(textwrap.dedent(text))
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# -- a hit, and what a hit must not be -------------------------------------------------------
def test_second_session_loads_what_the_first_compiled(tmp_path):
    cache = tmp_path / "c"
    x = None

    @ti.kernel
    def fill(k: ti.i32):
        for i in x:
            x[i] = ti.sin(i * 0.5) * k

    for expect_note in ("compiled", "loaded"):
        session(cache)
        x = ti.field(ti.f32, shape=64)
        assert tic_files(cache) == ([] if expect_note == "compiled" else tic_files(cache))
        fill(3)
        assert note(fill) == expect_note
        np.testing.assert_allclose(x.to_numpy(), np.sin(np.arange(64) * 0.5) * 3, rtol=1e-6)
        ti.reset()
        assert len(tic_files(cache)) == 1
    assert os.path.isfile(cache / tic_files(cache)[0])


def test_entries_are_written_when_the_session_ends(tmp_path):
    cache = tmp_path / "c"
    session(cache)

    @ti.kernel
    def one() -> ti.i32:
        return 1

    assert one() == 1
    assert tic_files(cache) == []          # as the original system: written at the end
    ti.reset()
    assert len(tic_files(cache)) == 1


def test_offline_cache_false_writes_and_reads_nothing(tmp_path):
    cache = tmp_path / "c"

    @ti.kernel
    def one() -> ti.i32:
        return 1

    for _ in range(2):
        session(cache, offline_cache=False)
        assert one() == 1
        assert note(one) == "compiled (offline cache off)"
        ti.reset()
    assert not cache.exists()


def test_global_constant_change_recompiles(tmp_path):
    cache = tmp_path / "c"
    mod = load_module(tmp_path / "m_global.py", """
        import fluxion as ti
        C = 3

        @ti.kernel
        def k() -> ti.i32:
            return C * 10
        """, "m_global")
    session(cache)
    assert mod.k() == 30
    mod.C = 4
    session(cache)
    assert mod.k() == 40
    assert note(mod.k) == "compiled"
    mod.C = 3
    session(cache)
    assert mod.k() == 30 and note(mod.k) == "loaded"


def test_closure_value_change_recompiles(tmp_path):
    cache = tmp_path / "c"

    def make(c):
        @ti.kernel
        def k() -> ti.f32:
            return c * 0.5
        return k

    session(cache)
    assert make(3.0)() == 1.5
    session(cache)
    k = make(5.0)
    assert k() == 2.5 and note(k) == "compiled"
    session(cache)
    k = make(3.0)
    assert k() == 1.5 and note(k) == "loaded"


def test_func_body_change_in_an_imported_module_recompiles(tmp_path):
    """A ti.func of another module (library code) changed: same file, same line."""
    cache = tmp_path / "c"
    lib = tmp_path / "m_lib.py"
    main = """
        import fluxion as ti
        import m_lib

        @ti.kernel
        def k(a: ti.i32) -> ti.i32:
            return m_lib.f(a) + 1
        """
    sys.path.insert(0, str(tmp_path))
    try:
        for body, expect, expect_note in (("a * 2", 21, "compiled"), ("a * 3", 31, "compiled"),
                                          ("a * 2", 21, "loaded")):
            load_module(lib, f"""
                import fluxion as ti

                @ti.func
                def f(a):
                    return {body}
                """, "m_lib")
            mod = load_module(tmp_path / "m_main.py", main, "m_main")
            session(cache)
            assert mod.k(10) == expect
            assert note(mod.k) == expect_note
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("m_lib", None)


def test_template_argument_value_is_part_of_the_key(tmp_path):
    cache = tmp_path / "c"

    @ti.kernel
    def k(n: ti.template()) -> ti.i32:
        s = 0
        for i in ti.static(range(n)):
            s += i
        return s

    session(cache)
    assert k(4) == 6
    session(cache)
    assert k(5) == 10 and note(k) == "compiled"
    session(cache)
    assert k(4) == 6 and note(k) == "loaded"


@pytest.mark.parametrize("option, a, b", [
    ("default_fp", ti.f32, ti.f64),
    ("default_ip", ti.i32, ti.i64),
    ("fast_math", True, False),
    ("advanced_optimization", True, False),
    ("debug", False, True),
])
def test_configuration_is_part_of_the_key(tmp_path, option, a, b):
    cache = tmp_path / "c"

    @ti.kernel
    def k() -> ti.f64:
        x = 1 / 3
        return x

    session(cache, **{option: a})
    first = k()
    session(cache, **{option: b})
    second = k()
    assert note(k) == "compiled"
    if option == "default_fp":
        assert first == np.float32(1 / 3) and second == 1 / 3
    session(cache, **{option: a})
    assert k() == first and note(k) == "loaded"


def test_default_fp_changes_the_result_through_the_cache(tmp_path):
    cache = tmp_path / "c"
    x = None

    @ti.kernel
    def third():
        for i in x:
            x[i] = 1 / (i + 3)

    for fp in (ti.f32, ti.f64, ti.f32):
        session(cache, default_fp=fp)
        x = ti.field(ti.f64, shape=4)
        third()
        want = 1 / (np.arange(4) + 3)
        if fp is ti.f32:
            want = want.astype(np.float32).astype(np.float64)
        np.testing.assert_array_equal(x.to_numpy(), want)


def test_debug_bound_checks_come_from_the_configuration(tmp_path):
    cache = tmp_path / "c"

    @ti.kernel
    def poke(i: ti.i32):
        x[i] = 1

    for debug in (False, True, False):
        session(cache, debug=debug)
        x = ti.field(ti.i32, shape=4)
        if debug:
            with pytest.raises(ti.FluxionOutOfBoundsError):
                poke(7)
        else:
            poke(2)
            assert x[2] == 1


def test_field_shape_and_dtype_are_part_of_the_key(tmp_path):
    cache = tmp_path / "c"
    seen = False
    for n, dt in ((8, ti.f32), (16, ti.f32), (8, ti.i32), (8, ti.f32)):
        session(cache)
        x = ti.field(dt, shape=n)

        @ti.kernel
        def count():
            for i in x:
                x[i] = i + 0.5

        count()
        want = np.arange(n) + 0.5
        np.testing.assert_array_equal(x.to_numpy(), want.astype(dt.np_dtype))
        # (the key itself tells the layouts apart: an entry dropped at load would mean
        # that only the layout check behind it did)
        assert note(count) == ("loaded" if (n, dt) == (8, ti.f32) and seen else "compiled")
        seen = True


def test_fields_of_one_tree_and_their_offsets(tmp_path):
    """Two fields placed together: the code addresses them at offsets in one tree; another
    placement order is another layout."""
    cache = tmp_path / "c"
    seen = False
    for order in ("ab", "ba", "ab"):
        session(cache)
        a = ti.field(ti.f32)
        b = ti.field(ti.f32)
        ti.root.dense(ti.i, 8).place(*([a, b] if order == "ab" else [b, a]))

        @ti.kernel
        def set_both():
            for i in a:
                a[i] = i
                b[i] = 100 + i

        set_both()
        np.testing.assert_array_equal(a.to_numpy(), np.arange(8))
        np.testing.assert_array_equal(b.to_numpy(), 100 + np.arange(8))
        assert note(set_both) == ("compiled" if order == "ba" or not seen else "loaded")
        seen = True


def test_aliased_and_distinct_template_fields_are_different_instances(tmp_path):
    """k(x, x) and k(x, y): code built for two fields may assume they do not overlap."""
    cache = tmp_path / "c"

    @ti.kernel
    def shift(dst: ti.template(), src: ti.template()):
        for i in range(1, 8):
            dst[i] = src[i - 1] + 1

    for _ in range(2):
        session(cache)
        x = ti.field(ti.i32, shape=8)
        y = ti.field(ti.i32, shape=8)
        shift(y, x)
        shift(x, x)                 # a loop-carried race in general; serial order is fine here
        np.testing.assert_array_equal(y.to_numpy(), [0, 1, 1, 1, 1, 1, 1, 1])
        assert len(shift.instances) == 2


def test_aliasing_decides_what_the_code_may_assume(tmp_path):
    """Code for two distinct fields may keep a stored value in a register across a store to
    the other one; for one field passed twice it must not."""
    cache = tmp_path / "c"

    @ti.kernel
    def overlap(a: ti.template(), b: ti.template()) -> ti.i32:
        a[3] = 1
        b[3] = 2
        return a[3]

    for _ in range(2):
        session(cache)
        x = ti.field(ti.i32, shape=8)
        y = ti.field(ti.i32, shape=8)
        assert overlap(x, y) == 1
        assert overlap(x, x) == 2
        assert overlap(y, y) == 2
        assert len(overlap.instances) == 3


def test_which_tree_a_field_is_in_is_part_of_the_key(tmp_path):
    """(x, x.grad) share one tree; (y, w.grad) are in two trees of that same structure. Code
    for the first addresses both through one symbol: bound for the second, it would write
    y.grad instead of w.grad."""
    cache = tmp_path / "c"

    @ti.kernel
    def two(p: ti.template(), q: ti.template()):
        for i in p:
            p[i] = 1
            q[i] = 2

    session(cache)
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    two(x, x.grad)
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(8, 2))
    session(cache)
    y = ti.field(ti.f32, shape=8, needs_grad=True)
    w = ti.field(ti.f32, shape=8, needs_grad=True)
    two(y, w.grad)
    assert note(two) == "compiled"
    np.testing.assert_array_equal(y.to_numpy(), np.full(8, 1))
    np.testing.assert_array_equal(w.grad.to_numpy(), np.full(8, 2))
    np.testing.assert_array_equal(y.grad.to_numpy(), np.zeros(8))


def test_fields_sharing_a_tree_or_not(tmp_path):
    """a and b share a tree; c and d sit at the same places of two trees of that structure."""
    cache = tmp_path / "c"

    @ti.kernel
    def two(p: ti.template(), q: ti.template()):
        for i in p:
            p[i] = 1
            q[i] = 2

    session(cache)
    a, b = ti.field(ti.i32), ti.field(ti.i32)
    ti.root.dense(ti.i, 8).place(a, b)
    two(a, b)
    session(cache)
    c, e, f, d = (ti.field(ti.i32) for _ in range(4))
    ti.root.dense(ti.i, 8).place(c, e)
    ti.root.dense(ti.i, 8).place(f, d)
    two(c, d)
    assert note(two) == "compiled"
    for fld, want in ((c, 1), (d, 2), (e, 0), (f, 0)):
        np.testing.assert_array_equal(fld.to_numpy(), np.full(8, want))


def test_field_offset_and_name(tmp_path):
    cache = tmp_path / "c"
    for off, name in ((0, "first"), (-4, "first"), (0, "second"), (0, "first")):
        session(cache, debug=True)
        x = ti.field(ti.i32, shape=8, offset=(off,), name=name)

        @ti.kernel
        def fill_and_poke(j: ti.i32):
            for i in x:
                x[i] = i
            x[j] = 0

        fill_and_poke(off + 1)
        np.testing.assert_array_equal(x.to_numpy(), np.r_[off, 0, off + 2: off + 8])
        with pytest.raises(ti.FluxionOutOfBoundsError, match=f"field '{name}'"):
            fill_and_poke(off + 9)


def test_func_annotation_through_a_global(tmp_path):
    cache = tmp_path / "c"
    mod = load_module(tmp_path / "m_ann.py", """
        import fluxion as ti
        T = ti.i32

        @ti.func
        def half(a: T) -> T:
            return a / 2

        @ti.kernel
        def k() -> ti.f32:
            return half(7)
        """, "m_ann")
    for t, want in ((ti.i32, 3.0), (ti.f32, 3.5), (ti.i32, 3.0)):
        mod.T = t
        # (the annotations were evaluated when the module was imported: rebind them)
        mod.half.func.__annotations__.update(a=t, **{"return": t})
        mod.half._hints = None
        session(cache)
        assert mod.k() == want


def test_plain_helper_closure_change_recompiles(tmp_path):
    cache = tmp_path / "c"

    def make_helper(c):
        def helper(v):
            return v + c
        return helper

    box = {}

    @ti.kernel
    def k() -> ti.i32:
        return box_helper()(1)

    def box_helper():
        return box["h"]

    for c, want, expect in ((10, 11, "compiled"), (20, 21, "compiled"), (10, 11, "loaded")):
        box["h"] = make_helper(c)
        session(cache)
        assert k() == want
        assert note(k) == expect


def test_one_entry_loaded_for_two_fields_of_the_same_layout(tmp_path):
    """The same instance key (same layout) with other fields: each load binds its own."""
    cache = tmp_path / "c"

    @ti.kernel
    def inc(f: ti.template(), by: ti.i32):
        for i in f:
            f[i] += by

    for expect in ("compiled", "loaded"):
        session(cache)
        a = ti.field(ti.i32, shape=16)
        b = ti.field(ti.i32, shape=16)
        inc(a, 1)
        inc(b, 5)
        inc(a, 2)
        np.testing.assert_array_equal(a.to_numpy(), np.full(16, 3))
        np.testing.assert_array_equal(b.to_numpy(), np.full(16, 5))
        assert len(inc.instances) == 2
        if expect == "loaded":
            assert notes(inc) == ["loaded", "loaded"]
        assert len(set(i.cache_key for i in inc.instances.values())) == 1


def test_numpy_global_and_plain_python_helper(tmp_path):
    cache = tmp_path / "c"
    mod = load_module(tmp_path / "m_np.py", """
        import numpy as np
        import fluxion as ti
        TABLE = np.array([1.0, 2.0, 4.0])
        SCALE = 10

        def scaled(v):               # plain Python, run at compile time
            return v * SCALE

        @ti.kernel
        def k() -> ti.f32:
            s = 0.0
            for i in ti.static(range(3)):
                s += scaled(TABLE[i])
            return s
        """, "m_np")
    session(cache)
    assert mod.k() == 70
    mod.TABLE[2] = 8.0
    session(cache)
    assert mod.k() == 110 and note(mod.k) == "compiled"
    mod.SCALE = 1
    session(cache)
    assert mod.k() == 11 and note(mod.k) == "compiled"


def test_struct_method_and_argument_annotation(tmp_path):
    cache = tmp_path / "c"
    # the method's body changes, then only the value of the annotation's global
    # (with the annotation ignored, the third would read the int 2 as a float's bits)
    for body, ann, want in (("self.a + self.b", "ti.f32", 3.5), ("self.a * self.b", "ti.f32", 3.0),
                            ("self.a * self.b", "ti.i32", 3.0), ("self.a + self.b", "ti.f32", 3.5)):
        mod = load_module(tmp_path / "m_struct.py", f"""
            import fluxion as ti
            A = {ann}

            @ti.dataclass
            class P:
                a: ti.f32
                b: ti.f32

                @ti.func
                def combine(self):
                    return {body}

            @ti.kernel
            def k(a: A) -> ti.f32:
                p = P(a=a, b=1.5)
                return p.combine()
            """, "m_struct")
        session(cache)
        assert mod.k(2) == want


def test_gradients_through_the_cache(tmp_path):
    cache = tmp_path / "c"
    for expect in ("compiled", "loaded"):
        session(cache)
        x = ti.field(ti.f32, shape=8, needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def energy():
            for i in x:
                loss[None] += x[i] ** 3

        x.from_numpy(np.arange(8, dtype=np.float32))
        with ti.ad.Tape(loss=loss):
            energy()
        np.testing.assert_allclose(x.grad.to_numpy(), 3 * np.arange(8) ** 2)
        assert all(n == expect for n in notes(energy)), notes(energy)


def test_scatter_copies_and_prints_are_rebuilt_on_load(tmp_path, capfd):
    """Per-thread copies (hidden fields the compiler makes) and print tables come back."""
    cache = tmp_path / "c"
    for expect in ("compiled", "loaded"):
        session(cache, cpu_max_num_threads=2)
        hist = ti.field(ti.i32, shape=8)
        vals = ti.field(ti.i32, shape=4096)

        @ti.kernel
        def histogram():
            for i in vals:
                hist[vals[i]] += 1
            print("total", hist[0] + hist[1])

        vals.from_numpy(np.arange(4096, dtype=np.int32) % 8)
        histogram()
        np.testing.assert_array_equal(hist.to_numpy(), np.full(8, 512))
        assert note(histogram) == expect
        (inst,) = histogram.instances.values()
        assert inst.compiled.meta.private_copies and inst.compiled.private_fields
    out = capfd.readouterr().out
    assert out.count("total 1024") == 2


def test_ndarray_arguments(tmp_path):
    cache = tmp_path / "c"

    @ti.kernel
    def axpy(a: ti.f32, x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] += a * x[i]

    for expect in ("compiled", "loaded"):
        session(cache)
        x = np.arange(10, dtype=np.float32)
        y = np.ones(10, dtype=np.float32)
        axpy(2.0, x, y)
        np.testing.assert_array_equal(y, 1 + 2 * x)
        xd = np.arange(10, dtype=np.float64)
        yd = np.ones(10, dtype=np.float64)
        axpy(2.0, xd, yd)           # another dtype: another instance
        np.testing.assert_array_equal(yd, 1 + 2 * xd)
        assert notes(axpy) == [expect, expect]


def test_environment_is_part_of_the_key(tmp_path, monkeypatch):
    """Another fluxion/LLVM/CPU (the environment hash) must not load this one's code."""
    cache = tmp_path / "c"

    @ti.kernel
    def one() -> ti.i32:
        return 1

    session(cache)
    one()
    session(cache)
    monkeypatch.setattr(offline_cache, "_env", ["another environment"])
    one()
    assert note(one) == "compiled"


def test_source_hash_follows_every_python_file(tmp_path):
    """The environment's hash of fluxion's files (offline_cache.source_hash): an edit of any
    .py file, one added or removed, changes it; caches of bytecode and other files do not."""
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.py").write_text("y = 2\n")
    seen = [offline_cache.source_hash(str(root))]

    def changed():
        h = offline_cache.source_hash(str(root))
        assert h not in seen
        seen.append(h)

    assert offline_cache.source_hash(str(root)) == seen[0]        # nothing changed
    (root / "sub" / "__pycache__" / "b.cpython.pyc").write_bytes(b"\0")
    (root / "notes.txt").write_text("not code")
    assert offline_cache.source_hash(str(root)) == seen[0]
    b = root / "sub" / "b.py"
    st = b.stat()
    b.write_text("y = 3\n")                                       # same size, same times
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed()                                                     # (its change time moved)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))      # touched
    changed()
    b.write_text("y = 30\n")                                      # another size
    changed()
    (root / "c.py").write_text("")
    changed()
    (root / "a.py").unlink()
    changed()


def test_a_load_from_the_cache_never_makes_the_optimizer(tmp_path):
    """A session whose kernels all come from the offline cache links their objects and
    never builds what compiling needs: the optimizer's target machine (CpuJit.tm), on which
    the pass manager is built."""
    cache = tmp_path / "c"
    x = None

    @ti.kernel
    def fill(k: ti.f32):
        for i in x:
            x[i] = ti.sqrt(i + 0.0) * k

    for expect in ("compiled", "loaded"):
        session(cache)
        x = ti.field(ti.f32, shape=32)
        fill(2.0)
        assert note(fill) == expect
        np.testing.assert_allclose(x.to_numpy(), np.sqrt(np.arange(32)) * 2, rtol=1e-6)
        assert (get_jit()._tm is None) == (expect == "loaded")


# -- not cached: what the key cannot see -----------------------------------------------------
def test_field_data_read_while_compiling_is_not_cached(tmp_path):
    cache = tmp_path / "c"
    c = None

    def current():                   # reads the field's data at compile time
        return c[None]

    @ti.kernel
    def k() -> ti.i32:
        return current()

    for v in (3, 4):
        session(cache)
        c = ti.field(ti.i32, shape=())
        c[None] = v
        assert k() == v
        assert note(k).startswith("compiled, not cached")


def test_static_print_runs_in_every_session(tmp_path, capfd):
    cache = tmp_path / "c"

    @ti.kernel
    def k():
        ti.static_print("compiling k")

    for _ in range(2):
        session(cache)
        k()
    assert capfd.readouterr().out.count("compiling k") == 2


def test_random_module_at_compile_time_is_not_cached(tmp_path):
    import random
    cache = tmp_path / "c"

    @ti.kernel
    def k() -> ti.f32:
        return ti.static(random.random())

    session(cache)
    k()
    assert "not cached" in note(k)


# -- entries that do not check out -----------------------------------------------------------
def _fill_one(cache):
    session(cache)
    x = ti.field(ti.f32, shape=32)

    @ti.kernel
    def k(a: ti.f32):
        for i in x:
            x[i] = a * i

    return x, k


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "other_key",
                                    "bad_layout", "bad_meta"])
def test_damaged_entry_is_compiled_again_never_loaded(tmp_path, damage):
    cache = tmp_path / "c"
    x, k = _fill_one(cache)
    k(2.0)
    session(cache)
    (name,) = tic_files(cache)
    path = cache / name
    data = path.read_bytes()
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data = bytearray(data)
        data[len(data) // 2] ^= 0x40
        data = bytes(data)
    elif damage == "garbage":
        data = os.urandom(len(data))
    elif damage == "empty":
        data = b""
    elif damage == "other_key":
        # a valid entry of another kernel under this name
        @ti.kernel
        def other() -> ti.i32:
            return 7
        other()
        ti.reset()
        (other_name,) = [n for n in tic_files(cache) if n != name]
        data = (cache / other_name).read_bytes()
    else:
        header, meta, obj = offline_cache.decode(data)
        d = json.loads(meta)
        if damage == "bad_layout":
            d["trees"][0][2] = d["trees"][0][2].replace("[", "[999,", 1)
        else:
            d["errors"] = "not a list"
            d.pop("layout")
        data = offline_cache.encode(header["key"], header["env"], header["kernel"],
                                    json.dumps(d).encode(), obj)
    path.write_bytes(data)
    x, k = _fill_one(cache)
    k(3.0)
    np.testing.assert_array_equal(x.to_numpy(), 3 * np.arange(32, dtype=np.float32))
    assert note(k).startswith("compiled")
    ti.reset()                       # the replacement is valid
    x, k = _fill_one(cache)
    k(4.0)
    assert note(k) == "loaded"
    np.testing.assert_array_equal(x.to_numpy(), 4 * np.arange(32, dtype=np.float32))


def test_decode_rejects_what_encode_did_not_make():
    good = offline_cache.encode("k" * 40, "env", "kern", b"{}", b"\x7fELF....")
    offline_cache.decode(good, "k" * 40)
    for bad in (good[:-1], good + b"x", b"\0" * len(good), good[:10]):
        with pytest.raises(offline_cache.CorruptEntry):
            offline_cache.decode(bad, "k" * 40)
    with pytest.raises(offline_cache.CorruptEntry):
        offline_cache.decode(good, "j" * 40)


# -- size cap, cleaning, options -------------------------------------------------------------
def _entries(store, n):
    for i in range(n):
        key = f"{i:040x}"
        store.put(key, offline_cache.encode(key, "env", f"k{i}", b"{}", bytes(1000)))
    store.flush("env")


def test_lru_eviction_keeps_the_recently_used(tmp_path):
    store = offline_cache.Store(tmp_path, max_size=10**9, policy="lru", factor=0.5)
    _entries(store, 8)
    paths = sorted(tmp_path.glob("*.tic"))
    for k, p in enumerate(paths):            # used in this order, oldest first ...
        os.utime(p, (1000 + k, 1000 + k))
    assert store.get(paths[0].name[3:-4]) is not None   # ... but the first used again now
    store.max_size = 5000
    store.clean("env")
    left = sorted(p.name for p in tmp_path.glob("*.tic"))
    assert len(left) == 4
    assert paths[0].name in left and paths[7].name in left
    assert paths[1].name not in left and paths[4].name not in left


def test_fifo_version_and_never_policies(tmp_path):
    for policy, keep in (("fifo", 4), ("never", 8), ("version", 8)):
        d = tmp_path / policy
        store = offline_cache.Store(d, max_size=1, policy=policy, factor=0.5)
        _entries(store, 8)
        assert len(list(d.glob("*.tic"))) == keep
    store = offline_cache.Store(tmp_path / "version", max_size=1, policy="version")
    store.clean("another environment")     # every entry is of another version now
    assert list((tmp_path / "version").glob("*.tic")) == []


def test_size_cap_through_init_options(tmp_path):
    cache = tmp_path / "c"
    session(cache)

    def make(c):
        @ti.kernel
        def k() -> ti.i32:
            return c
        return k

    for i in range(4):
        assert make(i)() == i
    ti.reset()
    assert len(tic_files(cache)) == 4
    session(cache, offline_cache_max_size_of_files=1, offline_cache_cleaning_factor=0.5)
    ti.reset()
    assert len(tic_files(cache)) == 2


def test_invalid_options_raise():
    with pytest.raises(ValueError, match="offline_cache_cleaning_policy"):
        ti.init(arch=ti.cpu, offline_cache_cleaning_policy="sometimes")
    with pytest.raises(ValueError, match="offline_cache_cleaning_factor"):
        ti.init(arch=ti.cpu, offline_cache_cleaning_factor=1.5)
    with pytest.raises(ValueError, match="offline_cache_max_size_of_files"):
        ti.init(arch=ti.cpu, offline_cache_max_size_of_files=-1)


def test_default_path_and_environment_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert offline_cache.default_path() == str(tmp_path / "xdg" / "fluxion" / "kernels")
    monkeypatch.setenv("FLUXION_OFFLINE_CACHE", "0")
    ti.init(arch=ti.cpu)
    from fluxion.lang import runtime
    assert runtime.config().offline_cache is False
    monkeypatch.setenv("FLUXION_OFFLINE_CACHE", "1")
    monkeypatch.setenv("FLUXION_OFFLINE_CACHE_FILE_PATH", str(tmp_path / "envdir"))
    ti.init(arch=ti.cpu)
    assert runtime.config().offline_cache is True
    assert ti.cache.path() == str(tmp_path / "envdir")


def test_clean_api_and_command_line(tmp_path):
    cache = tmp_path / "c"

    @ti.kernel
    def one() -> ti.i32:
        return 1

    session(cache)
    one()
    ti.reset()
    assert ti.cache.info(cache)["entries"] == 1
    session(cache)
    assert ti.cache.clean() >= 1
    assert tic_files(cache) == []
    session(cache)
    one()
    ti.reset()
    out = subprocess.run([sys.executable, "-m", "fluxion", "cache", "clean",
                          "--offline-cache-file-path", str(cache)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Deleted" in out.stdout and tic_files(cache) == []


# -- separate processes ----------------------------------------------------------------------
_PROGRAM = """
import json, sys
import numpy as np
import fluxion as ti
import helpers

C = {const}
TABLE = np.array({table}, dtype=np.float32)
ti.init(arch=ti.cpu)
x = ti.field(ti.f32, shape=4)

@ti.kernel
def uses_func() -> ti.i32:
    return helpers.f(7)

@ti.kernel
def uses_const() -> ti.i32:
    return C + 1

@ti.kernel
def uses_template(n: ti.template()) -> ti.i32:
    return n * 2

@ti.kernel
def uses_table() -> ti.f32:
    return TABLE[1] + TABLE[2]

@ti.kernel
def unchanged():
    for i in x:
        x[i] = i * 0.25

out = dict(func=uses_func(), const=uses_const(), template=uses_template({tpl}),
           table=uses_table())
unchanged()
out["x"] = x.to_numpy().tolist()
out["notes"] = {{k.name: [i.cache_note for i in k.instances.values()]
                for k in (uses_func, uses_const, uses_template, uses_table, unchanged)}}
print(json.dumps(out))
"""


def _run(tmp_path, cache, const, table, tpl, body, extra_env=None):
    (tmp_path / "helpers.py").write_text(
        "import fluxion as ti\n\n\n@ti.func\ndef f(a):\n    return " + body + "\n")
    prog = tmp_path / "prog.py"
    prog.write_text(_PROGRAM.format(const=const, table=table, tpl=tpl))
    env = dict(os.environ, FLUXION_OFFLINE_CACHE_FILE_PATH=str(cache))
    env.pop("FLUXION_ARCH", None)
    env.update(extra_env or {})
    res = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_second_process_sees_every_change(tmp_path):
    """Each kernel depends on one thing; between the processes each thing changes, so a key
    that missed it would hand the second process the first one's code."""
    cache = tmp_path / "c"
    a = _run(tmp_path, cache, const=3, table=[1, 2, 3], tpl=5, body="a * 2")
    assert a == dict(func=14, const=4, template=10, table=5.0, x=[0, 0.25, 0.5, 0.75],
                     notes=a["notes"])
    assert all(n == ["compiled"] for n in a["notes"].values()), a["notes"]
    b = _run(tmp_path, cache, const=4, table=[1, 2, 5], tpl=6, body="a * 3 ")
    assert (b["func"], b["const"], b["template"], b["table"]) == (21, 5, 12, 7.0)
    assert b["notes"]["unchanged"] == ["loaded"]
    assert all(b["notes"][k] == ["compiled"] for k in
               ("uses_func", "uses_const", "uses_template", "uses_table")), b["notes"]
    c = _run(tmp_path, cache, const=3, table=[1, 2, 3], tpl=5, body="a * 2")
    assert (c["func"], c["const"], c["template"], c["table"]) == (14, 4, 10, 5.0)
    assert all(n == ["loaded"] for n in c["notes"].values()), c["notes"]


_WRITER = """
import sys, json
import fluxion as ti
me = int(sys.argv[1])
for round in range(2):
    ti.init(arch=ti.cpu)
    x = ti.field(ti.i32, shape=256)

    @ti.kernel
    def shared(a: ti.i32):
        for i in x:
            x[i] = a * i

    def mine(k):
        @ti.kernel
        def own(a: ti.i32):
            for i in x:
                x[i] = a * i + k
        return own

    shared(3)
    assert x[5] == 15
    own = mine(me)
    own(2)
    assert x[5] == 10 + me, (x[5], me)
    ti.reset()
print("ok")
"""


def test_processes_filling_one_cache_at_once(tmp_path):
    cache = tmp_path / "c"
    prog = tmp_path / "writer.py"
    prog.write_text(_WRITER)
    env = dict(os.environ, FLUXION_OFFLINE_CACHE_FILE_PATH=str(cache))
    env.pop("FLUXION_ARCH", None)
    procs = [subprocess.Popen([sys.executable, str(prog), str(k)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for k in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        assert out.strip() == "ok"
    names = os.listdir(cache)
    assert not [n for n in names if n.startswith(offline_cache.TMP_PREFIX)]
    tics = [n for n in names if n.endswith(".tic")]
    assert len(tics) == 4                  # `shared` once, `own` once per closure value
    for n in tics:
        offline_cache.decode((cache / n).read_bytes(), n[3:-4])
    res = subprocess.run([sys.executable, str(prog), "2"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-3000:]
    assert len([n for n in os.listdir(cache) if n.endswith(".tic")]) == 4


def test_quantized_layouts_are_part_of_the_key(tmp_path):
    """Bit-packed fields: the same source over words laid out differently."""
    cache = tmp_path / "c"

    @ti.kernel
    def fill():
        for i in a:
            a[i] = i
            b[i] = -i

    for bits_a, bits_b, expect in ((8, 8, "compiled"), (12, 6, "compiled"), (8, 8, "loaded")):
        session(cache)
        a = ti.field(dtype=ti.types.quant.int(bits_a, True))
        b = ti.field(dtype=ti.types.quant.int(bits_b, True))
        bp = ti.BitpackedFields(max_num_bits=32)
        bp.place(a, b)
        ti.root.dense(ti.i, 8).place(bp)
        fill()
        assert note(fill) == expect
        np.testing.assert_array_equal(a.to_numpy(), np.arange(8))
        np.testing.assert_array_equal(b.to_numpy(), -np.arange(8))


def test_real_functions_and_structured_returns(tmp_path):
    cache = tmp_path / "c"
    s0 = ti.types.struct(a=ti.types.vector(2, ti.f32), b=ti.i32)

    def make(step):
        @ti.real_func
        def count(n: ti.i32) -> ti.i32:
            r = 0
            if n > 0:
                r = count(n - 1) + step
            return r

        @ti.kernel
        def run(n: ti.i32) -> (ti.i32, s0):
            return count(n), s0(a=ti.Vector([n, 0.5]), b=count(2))

        return run

    for step, expect in ((1, "compiled"), (3, "compiled"), (1, "loaded")):
        session(cache)
        run = make(step)
        total, s = run(5)
        assert total == 5 * step and s.b == 2 * step
        np.testing.assert_array_equal(s.a.to_numpy(), [5, 0.5])
        assert note(run) == expect


def test_a_data_oriented_object_with_its_own_tree_is_keyed_by_structure(tmp_path):
    # its SNodeTree (and FieldsBuilder) count by their tree's layout, not by the memory they
    # hold: the values in the fields are no part of the key, a different layout is
    cache = tmp_path / "c"

    @ti.data_oriented
    class Grid:
        def __init__(self, n, start):
            self.x = ti.field(ti.f32)
            fb = ti.FieldsBuilder()
            fb.dense(ti.i, n).place(self.x)
            self.tree = fb.finalize()
            self.x.fill(start)

        @ti.kernel
        def scale(self, v: ti.f32):
            for i in self.x:
                self.x[i] = self.x[i] * v + i

    for n, start, expect in ((8, 1.0, "compiled"), (8, 5.0, "loaded"), (9, 5.0, "compiled")):
        session(cache)
        g = Grid(n, start)
        g.scale(2.0)
        assert note(Grid.scale) == expect, (n, start)
        np.testing.assert_allclose(g.x.to_numpy(), start * 2.0 + np.arange(n))
        ti.reset()
