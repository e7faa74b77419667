"""passes/jam.py on IR text: a parallel loop whose body is straight-line code around exactly
one serial loop that loads memory and stores none gets `jam=K` (8 iterations fused, or 4 when
8 iterations' accumulators would take more than three quarters of the vector registers);
nothing else changes."""
import pytest

import fluxion as ti
from fluxion.passes import jam

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"a": ti.field(ti.f32, shape=(16, 32), name="a"),
            "w": ti.field(ti.f32, shape=32, name="w"),
            "out": ti.field(ti.f32, shape=16, name="out")}


# out[i] = sum_j a[i, j] * w[j], with one accumulator, or two (`acc2` sums w[j] too)
DOT = """
    kernel k() {{
      $0 = const i32 0
      $1 = const i32 16
      $2 = const i32 32
      $3 : parallel_for $0 .. $1{mark}
        $4 = loop_index i32 $3
        $5 = alloca f32
        $20 = alloca f32
        $6 = const f32 0.0
        store $5 $6
        store $20 $6
        $7 : for $0 .. $2
          $8 = loop_index i32 $7
          $9 = global_ptr f32 @a [$4, $8]
          $10 = global_load f32 $9
          $11 = global_ptr f32 @w [$8]
          $12 = global_load f32 $11
          $13 = mul f32 $10 $12
          $14 = load f32 $5
          $15 = add f32 $14 $13
          store $5 $15
{second}
        $16 = global_ptr f32 @out [$4]
        $17 = load f32 $5
        global_store $16 $17
    }}"""
SECOND = """
          $21 = load f32 $20
          $22 = add f32 $21 $12
          store $20 $22"""


def test_a_serial_reduction_per_iteration_is_jammed_by_eight(env):
    check_pass(jam.run, DOT.format(mark="", second=""),
               DOT.format(mark=" jam=8", second=""), env)


def test_two_accumulators_on_eight_registers_jam_by_four(env):
    # 8 iterations x 2 accumulators = 16 registers > 3/4 of 8: four iterations
    check_pass(lambda k, cfg: jam.run(k, cfg, vector_registers=8),
               DOT.format(mark="", second=SECOND), DOT.format(mark=" jam=4", second=SECOND), env)
    # with 32 registers (AVX-512) 16 <= 24: eight
    check_pass(lambda k, cfg: jam.run(k, cfg, vector_registers=32),
               DOT.format(mark="", second=SECOND), DOT.format(mark=" jam=8", second=SECOND), env)


UNCHANGED = {
    # the inner loop stores: fused loops would interleave the stores differently
    "inner loop stores": DOT.format(mark="", second="""
          global_store $9 $13"""),
    # a break in the body
    "break": DOT.format(mark="", second="""
          break"""),
    # a second inner loop
    "two loops": DOT.format(mark="", second="""
          $23 : for $0 .. $2
            $24 = loop_index i32 $23"""),
    # a call may store anywhere
    "a call": DOT.format(mark="", second="""
          $23 = call f#0()""") + """
    function f#0() {
    }""",
    # a serial outer loop is not a parallel task
    "serial outer loop": DOT.format(mark="", second="").replace("parallel_for", "for"),
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_jam(case, env):
    check_pass(jam.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)


def test_an_inner_loop_that_loads_nothing_is_not_jammed(env):
    text = """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 16
      $3 : parallel_for $0 .. $1
        $4 = loop_index i32 $3
        $5 = alloca i32
        store $5 $0
        $7 : for $0 .. $1
          $8 = loop_index i32 $7
          $14 = load i32 $5
          $15 = add i32 $14 $8
          store $5 $15
    }"""
    check_pass(jam.run, text, text, env, changed=False)
