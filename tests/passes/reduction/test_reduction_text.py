"""passes/reduction.py on IR text: an atomic update of one fixed element (or of a kernel-level
local) in a parallel loop, old value unused, target not otherwise touched in the loop, is
recorded in the loop's reductions; a field pointer is hoisted before the loop (the one in the
loop stays for dce)."""
import pytest

import fluxion as ti
from fluxion.passes import reduction

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.f32, shape=8, name="x"),
            "s": ti.field(ti.f32, shape=(), name="s"),
            "h": ti.field(ti.i32, shape=4, name="h")}


def test_a_sum_into_a_scalar_field_becomes_a_reduction(env):
    # for i in x: s[None] += x[i]
    check_pass(reduction.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @s []
        $7 = atomic_add f32 $6 $5
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $20 = global_ptr f32 @s []
      $2 : parallel_for $0 .. $1 reduce=[add $20]
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @s []
        $7 = atomic_add f32 $20 $5
    }""", env)


def test_a_constant_index_is_recreated_before_the_loop(env):
    # for i in range(8): h[3] = max(h[3], i) (atomic max)
    check_pass(reduction.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 3
        $5 = global_ptr i32 @h [$4]
        $6 = atomic_max i32 $5 $3
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $20 = const i32 3
      $21 = global_ptr i32 @h [$20]
      $2 : parallel_for $0 .. $1 reduce=[max $21]
        $3 = loop_index i32 $2
        $4 = const i32 3
        $5 = global_ptr i32 @h [$4]
        $6 = atomic_max i32 $21 $3
    }""", env)


def test_a_kernel_level_local_is_a_reduction_even_beside_a_call(env):
    # t = 0.0; for i in x: t += x[i]; f()  (the callee reaches no local of the caller)
    check_pass(reduction.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 = alloca f32
      $3 : parallel_for $0 .. $1
        $4 = loop_index i32 $3
        $5 = global_ptr f32 @x [$4]
        $6 = global_load f32 $5
        $7 = atomic_add f32 $2 $6
        $8 = call f#0()
    }
    function f#0() {
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 = alloca f32
      $3 : parallel_for $0 .. $1 reduce=[add $2]
        $4 = loop_index i32 $3
        $5 = global_ptr f32 @x [$4]
        $6 = global_load f32 $5
        $7 = atomic_add f32 $2 $6
        $8 = call f#0()
    }
    function f#0() {
    }""", env)


LOOP = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 8
      $9 = alloca f32
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @s []
{body}
    }}"""

UNCHANGED = {
    # the loop also reads s: per-thread sums would change what it reads
    "target read in the loop": LOOP.format(body="""
        $7 = atomic_add f32 $6 $5
        $10 = global_ptr f32 @s []
        $8 = global_load f32 $10
        global_store $4 $8"""),
    # the same, through the update's own pointer (as after common subexpression elimination;
    # the pass counted pointer statements, not their uses, and fired here)
    "target read through the update's pointer": LOOP.format(body="""
        $7 = atomic_add f32 $6 $5
        $8 = global_load f32 $6
        global_store $4 $8"""),
    # the old value is used (`k = ti.atomic_add(s[None], v)`)
    "old value used": LOOP.format(body="""
        $7 = atomic_add f32 $6 $5
        global_store $4 $7"""),
    # two operations on one target
    "mixed operations": LOOP.format(body="""
        $7 = atomic_add f32 $6 $5
        $8 = atomic_max f32 $6 $5"""),
    # the element depends on the iteration: not one fixed element
    "index of the iteration": LOOP.format(body="""
        $7 = atomic_add f32 $4 $5"""),
    # a call in the loop may read or write s
    "a field beside a call": LOOP.format(body="""
        $7 = atomic_add f32 $6 $5
        $8 = call f#0()""") + """
    function f#0() {
    }""",
    # a local the loop also loads
    "a local also loaded": LOOP.format(body="""
        $7 = atomic_add f32 $9 $5
        $8 = load f32 $9
        global_store $4 $8"""),
    # a local passed by reference to a call in the loop
    "a local passed to a call": LOOP.format(body="""
        $7 = atomic_add f32 $9 $5
        $8 = call f#0($9)""") + """
    function f#0(ref f32) {
      $0 = ref_arg f32 0
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_privatize(case, env):
    check_pass(reduction.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)


def test_the_tapes_log_of_the_target_does_not_stop_the_reduction(env):
    # a kernel recorded by the Tape logs s[None] before each update; the value before the
    # kernel's first update (what a restore needs) is the same with per-thread sums
    env = dict(env, **{f"m{k}": ti.field(ti.u8, shape=(), name=f"m{k}") for k in range(2)})
    check_pass(reduction.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @s []
        $7 = global_ptr u8 @m0 []
        $8 = global_ptr u8 @m1 []
        tape_log atomic $6 read=$7 written=$8 grad=none
        $9 = atomic_add f32 $6 $5
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $20 = global_ptr f32 @s []
      $2 : parallel_for $0 .. $1 reduce=[add $20]
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @s []
        $7 = global_ptr u8 @m0 []
        $8 = global_ptr u8 @m1 []
        tape_log atomic $6 read=$7 written=$8 grad=none
        $9 = atomic_add f32 $20 $5
    }""", env)
