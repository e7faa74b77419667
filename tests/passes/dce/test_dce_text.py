"""passes/dce.py on IR text: pure statements, loads and pointers without a use go, and so do
locals never loaded (with their stores), until nothing more can go; side effects stay."""
import pytest

import fluxion as ti
from fluxion.passes import dce

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.f32, shape=8, name="x")}


def test_removes_unused_values_and_locals_never_loaded_to_a_fixpoint(env):
    # $8 is unused; then $7 (only $8 used it); the local $2 is never loaded, so its store goes,
    # then the local, then the constant $3 that only dead statements used
    check_pass(dce.run, """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 = alloca f32
      $3 = const f32 1.0
      store $2 $3
      $4 : parallel_for $0 .. $1
        $5 = loop_index i32 $4
        $6 = global_ptr f32 @x [$5]
        $7 = global_load f32 $6
        $8 = mul f32 $7 $3
        $9 = const f32 2.0
        global_store $6 $9
    }""", """
    kernel k() {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_for $0 .. $1
        $3 = loop_index i32 $2
        $4 = global_ptr f32 @x [$3]
        $5 = const f32 2.0
        global_store $4 $5
    }""", env)


def test_dead_code_in_a_function_body_goes_too(env):
    check_pass(dce.run, """
    kernel k() {
      $0 = const i32 1
      $1 = call f#0($0)
    }
    function f#0(i32) -> (i32) {
      $0 = func_arg i32 0
      $1 = add i32 $0 $0
      $2 = mul i32 $0 $0
      return_from_function $2
    }""", """
    kernel k() {
      $0 = const i32 1
      $1 = call f#0($0)
    }
    function f#0(i32) -> (i32) {
      $0 = func_arg i32 0
      $2 = mul i32 $0 $0
      return_from_function $2
    }""", env)


UNCHANGED = {
    # stores, atomics (even with their old value unused), prints, asserts, loops and
    # branches have effects
    "effects": """
    kernel k(f32) {
      $0 = arg f32 0
      $1 = const i32 0
      $2 = const i32 8
      $3 : for $1 .. $2
        $4 = loop_index i32 $3
        $5 = global_ptr f32 @x [$4]
        $6 = atomic_add f32 $5 $0
        $7 = cmp_lt i32 $4 $2
        assert $7 error=0 args=[$4]
        if $7
          print 'i=' $4 '\\n'
    }""",
    # a local an atomic updates is read by it: the store before it stays
    "local updated by an atomic": """
    kernel k(f32) {
      $0 = arg f32 0
      $1 = alloca f32
      store $1 $0
      $2 = atomic_add f32 $1 $0
    }""",
    # a local passed by reference may be read by the callee; a reference parameter is the
    # caller's local, so the function's store to it stays although it never reads it back
    "references": """
    kernel k() {
      $0 = alloca i32
      $1 = const i32 5
      store $0 $1
      $2 = call f#0($0)
    }
    function f#0(ref i32) {
      $0 = ref_arg i32 0
      $1 = const i32 1
      store $0 $1
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_keeps(case, env):
    check_pass(dce.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)
