"""passes/independent.py on IR text: a parallel loop is marked `independent` (its iterations
touch memory independently: codegen tells LLVM) unless its body adds into per-thread copies
(worker_index, private_add), calls a real function or reads memory it wrote; nothing else
changes."""
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
    # an iteration reads what it wrote: LLVM, told the loop is parallel, grouped the load
    # with the accesses before the store (found by tests/fuzz, seed 3002557)
    "a load after a store of the field": LOOP.format(kind="parallel_for", mark="", extra="""
        $8 = global_ptr f32 @x [$3]
        $9 = global_load f32 $8"""),
    "a load and a store in an inner loop": LOOP.format(kind="parallel_for", mark="", extra="""
        $8 = const i32 0
        $9 : for $8 .. $1
          $10 = global_ptr i32 @y [$3]
          $11 = global_load i32 $10
          global_store $10 $11"""),
}


def test_a_local_of_the_kernel_stored_and_loaded_by_iterations_is_not_marked(env):
    # s = s * 2.0 in a parallel loop, s a local of the kernel's body (tests/fuzz seed 4000809)
    text = """
    kernel k() {
      $0 = alloca f32
      $1 = const f32 1.0
      store $0 $1
      $2 = const i32 0
      $3 = const i32 8
      $4 : parallel_for $2 .. $3
        $5 = load f32 $0
        $6 = const f32 2.0
        $7 = mul f32 $5 $6
        store $0 $7
    }"""
    check_pass(independent.run, text, text, env, changed=False)


def test_a_read_before_the_writes_keeps_the_mark(env):
    # x[i] = x[i] + 1 (`x[p] += dt * v[p]`): the read comes first
    text = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1{mark}
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = global_load f32 $4
        $6 = const f32 1.0
        $7 = add f32 $5 $6
        global_store $4 $7
    }}"""
    check_pass(independent.run, text.format(mark=""), text.format(mark=" independent"), env)


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_mark(case, env):
    check_pass(independent.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)
