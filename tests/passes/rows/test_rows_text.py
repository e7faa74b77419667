"""passes/rows.py on IR text: a parallel loop whose body, at its top level, computes both
`index % W` and `index // W` for one loop-invariant W gets `rows=W`, and those statements
become col_index / row_index statements (same type, location and operand W); nothing else
changes."""
import pytest

import fluxion as ti
from fluxion.passes import rows

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"g": ti.field(ti.f32, shape=(8, 4), name="g"),
            "n": ti.field(ti.i32, shape=(), name="n")}


def test_the_flattened_ndrange_becomes_rows(env):
    # for i, j in g: g[i, j] = 1.0 (as the frontend flattens it: each constant its own)
    check_pass(rows.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 32
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = mod_nonneg i32 $3 $4            # k.py:2
        $6 = const i32 4
        $7 = div_nonneg i32 $3 $6
        $8 = global_ptr f32 @g [$7, $5]
        $9 = const f32 1.0
        global_store $8 $9
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 32
      $2 : parallel_for $0 .. $1 rows=$4
        $3 = loop_index i32 $2
        $4 = const i32 4
        $5 = col_index i32 $2 width=$4       # k.py:2
        $6 = const i32 4
        $7 = row_index i32 $2 width=$6
        $8 = global_ptr f32 @g [$7, $5]
        $9 = const f32 1.0
        global_store $8 $9
    }""", env)


def test_a_width_computed_before_the_loop_is_invariant(env):
    # for i in range(8 * w): g[i // w, i % w] with w an argument
    check_pass(rows.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = const i32 0
      $2 = const i32 32
      $3 : parallel_for $1 .. $2
        $4 = loop_index i32 $3
        $5 = div_nonneg i32 $4 $0
        $6 = mod_nonneg i32 $4 $0
        $7 = global_ptr f32 @g [$5, $6]
        $8 = const f32 1.0
        global_store $7 $8
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = const i32 0
      $2 = const i32 32
      $3 : parallel_for $1 .. $2 rows=$0
        $4 = loop_index i32 $3
        $5 = row_index i32 $3 width=$0
        $6 = col_index i32 $3 width=$0
        $7 = global_ptr f32 @g [$5, $6]
        $8 = const f32 1.0
        global_store $7 $8
    }""", env)


LOOP = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 32
      $2 : {kind} $0 .. $1
        $3 = loop_index i32 $2
{width}
        $5 = mod_nonneg i32 $3 $4
        $6 = div_nonneg i32 $3 $4
        $7 = global_ptr f32 @g [$6, $5]
        $8 = const f32 1.0
        global_store $7 $8
    }}"""

UNCHANGED = {
    # W loaded inside the loop may differ per iteration
    "width computed in the loop": LOOP.format(kind="parallel_for", width="""
        $9 = global_ptr i32 @n []
        $4 = global_load i32 $9"""),
    # no rows of width 0: the division's own semantics stay
    "width zero": LOOP.format(kind="parallel_for", width="""
        $4 = const i32 0"""),
    # a serial loop is not split
    "serial loop": LOOP.format(kind="for", width="""
        $4 = const i32 4"""),
    # only `% W`: not a flattened ndrange
    "remainder only": """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 32
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = const i32 3
        $5 = mod_nonneg i32 $3 $4
        $6 = global_ptr f32 @g [$5, $5]
        $8 = const f32 1.0
        global_store $6 $8
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_split(case, env):
    check_pass(rows.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)
