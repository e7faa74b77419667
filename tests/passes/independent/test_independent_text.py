"""passes/independent.py on IR text: a parallel loop is marked `independent` (its iterations
touch memory independently: codegen tells LLVM) unless its body adds into per-thread copies
(worker_index, private_add) or calls a real function; nothing else changes."""
import pytest

import fluxion as ti
from fluxion.passes import independent

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.f32, shape=8, name="x"), "y": ti.field(ti.i32, shape=8, name="y")}


LOOP = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 8
      $2 : {kind} $0 .. $1{mark}
        $3 = loop_index i32 $2
        $4 = global_ptr i32 @y [$3]
        $5 = global_load i32 $4
        $6 = global_ptr f32 @x [$5]
        $7 = const f32 1.0
        global_store $6 $7
{extra}
    }}"""


def test_a_parallel_loop_gathering_through_computed_indices_is_marked(env):
    check_pass(independent.run, LOOP.format(kind="parallel_for", mark="", extra=""),
               LOOP.format(kind="parallel_for", mark=" independent", extra=""), env)


UNCHANGED = {
    "serial loop": LOOP.format(kind="for", mark="", extra=""),
    # several iterations of one thread add into one element of its copy
    "per-thread copies": LOOP.format(kind="parallel_for", mark="", extra="""
        $8 = worker_index i32"""),
    "a call": LOOP.format(kind="parallel_for", mark="", extra="""
        $8 = call f#0()""") + """
    function f#0() {
    }""",
    "already marked": LOOP.format(kind="parallel_for", mark=" independent", extra=""),
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_mark(case, env):
    check_pass(independent.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)
