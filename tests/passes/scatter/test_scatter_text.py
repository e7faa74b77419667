"""passes/scatter.py on IR text: in a parallel loop whose only accesses to a field are atomic
adds with unused results, the adds go into the running thread's copy (a scratch buffer with a
leading thread axis, requested from the runtime), and a parallel loop after it adds the copies into the field and zeroes
them; only when the copies are small and the loop makes enough adds to pay for the merge."""
import types

import pytest

import fluxion as ti
from fluxion.lang import runtime
from fluxion.lang.ndarray import ArrayArg
from fluxion.passes import scatter

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def cfg():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    return runtime.config()


@pytest.fixture
def env(cfg):
    desc = types.SimpleNamespace(ndim=1, elem_shape=(), contiguous=True, dtype=ti.f32,
                                 writable=True)
    return {"g": ti.field(ti.f32, shape=16, name="g"),
            "big": ti.field(ti.f32, shape=4096, name="big"),
            "h": ti.field(ti.f16, shape=16, name="h"),
            "a": ArrayArg("a", desc, 0)}


def test_adds_into_a_small_field_go_to_per_thread_copies_merged_after_the_loop(env, cfg):
    # for p in range(64): g[p % 16] += 1.0, on 2 threads
    k = check_pass(scatter.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 64
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 16
        $5 = mod_nonneg i32 $3 $4
        $6 = global_ptr f32 @g [$5]
        $7 = const f32 1.0
        $8 = atomic_add f32 $6 $7
    }""", """
    kernel k() {
      private_copies threads=2
      scratch @scratch f32[2, 16] copies=@g
      $0 = const i32 0
      $1 = const i32 64
      $2 : parallel_for $0 .. $1
        $3 = worker_index i32
        $4 = loop_index i32 $2
        $5 = const i32 16
        $6 = mod_nonneg i32 $4 $5
        $7 = global_ptr f32 @g [$6]
        $8 = const f32 1.0
        $9 = global_ptr f32 @scratch [$3, $6]
        $10 = global_load f32 $9
        $11 = add f32 $10 $8
        global_store $9 $11
      $12 = const i32 0
      $13 = const i32 16
      $14 : parallel_for $12 .. $13
        $15 = loop_index i32 $14
        $16 = const f32 0.0
        $17 = const i32 0
        $18 = global_ptr f32 @scratch [$17, $15]
        $19 = global_load f32 $18
        global_store $18 $16
        $20 = const i32 1
        $21 = global_ptr f32 @scratch [$20, $15]
        $22 = global_load f32 $21
        global_store $21 $16
        $23 = add f32 $19 $22
        $24 = global_ptr f32 @g [$15]
        $25 = global_load f32 $24
        $26 = add f32 $25 $23
        global_store $24 $26
    }""", env, cfg)
    # requested, not made: the pass allocates nothing (the runtime does, at load)
    assert not k.private_fields
    (copy,) = k.scratch
    assert copy.shape == (2, 16) and copy.dtype is ti.f32 and copy.copy_of is env["g"].places[0]


def test_adds_into_an_array_become_private_adds_the_launch_decides_on(env, cfg):
    # for p in range(64): a[p % 16] += 1.0: the size of `a` is known at launch only
    check_pass(scatter.run, """
    kernel k(i64, i64, i64, i64) {
      $0 = const i32 0
      $1 = const i32 64
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 16
        $5 = mod_nonneg i32 $3 $4
        $6 = external_ptr f32 @a [$5]
        $7 = const f32 1.0
        $8 = atomic_add f32 $6 $7
    }""", """
    kernel k(i64, i64, i64, i64) {
      private_copies threads=2
      private_array @a trips=$0..$1 adds=1
      $0 = const i32 0
      $1 = const i32 64
      $2 : parallel_for $0 .. $1
        $3 = worker_index i32
        $4 = loop_index i32 $2
        $5 = const i32 16
        $6 = mod_nonneg i32 $4 $5
        $7 = external_ptr f32 @a [$6]
        $8 = const f32 1.0
        private_add[copy 0] $7 $8
      merge_copies 0
    }""", env, cfg)


LOOP = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 64
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 16
        $5 = mod_nonneg i32 $3 $4
        $7 = const {t} 1.0
{body}
    }}"""

UNCHANGED = {
    # the loop also reads g: it would miss the adds waiting in the copies
    "field also read": LOOP.format(t="f32", body="""
        $6 = global_ptr f32 @g [$5]
        $8 = atomic_add f32 $6 $7
        $9 = global_ptr f32 @g [$3]
        $10 = global_load f32 $9"""),
    # an add whose old value is used
    "old value used": LOOP.format(t="f32", body="""
        $6 = global_ptr f32 @g [$5]
        $8 = atomic_add f32 $6 $7
        global_store $6 $8"""),
    # 64 adds into 4096 elements do not pay for merging 2 x 4096 copies
    "too few adds for the field": LOOP.format(t="f32", body="""
        $6 = global_ptr f32 @big [$5]
        $8 = atomic_add f32 $6 $7"""),
    # f16 sums round at every add: partial sums would give other values
    "16-bit floats": LOOP.format(t="f16", body="""
        $6 = global_ptr f16 @h [$5]
        $8 = atomic_add f16 $6 $7"""),
    # a call is opaque: the callee may read g
    "a call in the loop": LOOP.format(t="f32", body="""
        $6 = global_ptr f32 @g [$5]
        $8 = atomic_add f32 $6 $7
        $9 = call f#0()""") + """
    function f#0() {
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_privatize(case, env, cfg):
    check_pass(scatter.run, UNCHANGED[case], UNCHANGED[case], env, cfg, changed=False)


def test_not_on_one_thread_nor_in_debug_mode(env):
    text = LOOP.format(t="f32", body="""
        $6 = global_ptr f32 @g [$5]
        $8 = atomic_add f32 $6 $7""")
    for options in (dict(cpu_max_num_threads=1), dict(cpu_max_num_threads=2, debug=True)):
        ti.init(arch=ti.cpu, **options)
        env = {"g": ti.field(ti.f32, shape=16, name="g")}
        check_pass(scatter.run, text, text, env, runtime.config(), changed=False)
