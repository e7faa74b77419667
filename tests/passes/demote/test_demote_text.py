"""passes/demote.py on IR text: in a parallel loop, an atomic update of the loop's own element
(every access to that field in the loop at the own index, old value unused) becomes a load,
the operation and a store."""
import pytest

import fluxion as ti
from fluxion.passes import demote

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.f32, shape=8, name="x"),
            "g": ti.field(ti.i32, shape=(4, 4), name="g"),
            "v": ti.field(ti.f32, shape=8, name="v")}


def test_an_update_of_the_own_element_loses_its_atomic(env):
    # for i in x: x[i] += v[i]
    check_pass(demote.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @v [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @x [$3]
        $7 = atomic_add f32 $6 $5        # k.py:3
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @v [$3]
        $5 = global_load f32 $4
        $6 = global_ptr f32 @x [$3]
        $7 = global_load f32 $6          # k.py:3
        $8 = add f32 $7 $5               # k.py:3
        global_store $6 $8               # k.py:3
    }""", env)


def test_the_own_element_of_an_ndrange_is_its_decomposed_index(env):
    # for i, j in g: g[i, j] = max(g[i, j], 1) (atomic max); the frontend's decomposition
    # (i // 4, i % 4) of the flat index, each constant its own statement
    check_pass(demote.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 16
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 4
        $7 = div_nonneg i32 $3 $6
        $8 = global_ptr i32 @g [$7, $5]
        $9 = const i32 1
        $10 = atomic_max i32 $8 $9
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 16
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = mod_nonneg i32 $3 $4
        $6 = const i32 4
        $7 = div_nonneg i32 $3 $6
        $8 = global_ptr i32 @g [$7, $5]
        $9 = const i32 1
        $11 = global_load i32 $8
        $12 = max i32 $11 $9
        global_store $8 $12
    }""", env)


LOOP = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 8
      $2 : {kind} $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @v [$3]
        $5 = global_load f32 $4
{body}
    }}"""

UNCHANGED = {
    # another iteration may touch x[0]
    "another index of the field": LOOP.format(kind="parallel_for", body="""
        $6 = global_ptr f32 @x [$3]
        $7 = atomic_add f32 $6 $5
        $8 = const i32 0
        $9 = global_ptr f32 @x [$8]
        $10 = global_load f32 $9"""),
    # x[i + 1] is the next iteration's element
    "not the own index": LOOP.format(kind="parallel_for", body="""
        $6 = const i32 1
        $7 = add i32 $3 $6
        $8 = global_ptr f32 @x [$7]
        $9 = atomic_add f32 $8 $5"""),
    # the old value is used
    "old value used": LOOP.format(kind="parallel_for", body="""
        $6 = global_ptr f32 @x [$3]
        $7 = atomic_add f32 $6 $5
        global_store $4 $7"""),
    # a serial loop has no atomics to save (its updates are not parallel)
    "serial loop": LOOP.format(kind="for", body="""
        $6 = global_ptr f32 @x [$3]
        $7 = atomic_add f32 $6 $5"""),
    # a call is opaque: the callee may access x anywhere
    "a call in the loop": LOOP.format(kind="parallel_for", body="""
        $6 = global_ptr f32 @x [$3]
        $7 = atomic_add f32 $6 $5
        $8 = call f#0()""") + """
    function f#0() {
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_demote(case, env):
    check_pass(demote.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)
