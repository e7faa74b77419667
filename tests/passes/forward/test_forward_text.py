"""passes/forward.py on IR text: a local stored exactly once, at the top level of its body,
and otherwise only loaded, reads as the stored value (the loads stay, for dce)."""
import pytest

import fluxion as ti
from fluxion.passes import forward

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.i32, shape=8, name="x")}


def test_a_scalar_argument_read_through_its_local_becomes_the_argument(env):
    # `for i in range(n): x[i] = n`: the loop bound and the stored value read the local
    check_pass(forward.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = const i32 0
      $3 = load i32 $1
      $4 : parallel_for $2 .. $3
        $5 = loop_index i32 $4
        $6 = load i32 $1
        $7 = global_ptr i32 @x [$5]
        global_store $7 $6
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = const i32 0
      $3 = load i32 $1
      $4 : parallel_for $2 .. $0
        $5 = loop_index i32 $4
        $6 = load i32 $1
        $7 = global_ptr i32 @x [$5]
        global_store $7 $0
    }""", env)


def test_a_load_before_the_store_keeps_reading_the_local(env):
    # only loads after the store (in program order) are forwarded
    check_pass(forward.run, """
    kernel k() {
      $0 = alloca i32
      $1 = load i32 $0
      $2 = const i32 7
      store $0 $2
      $3 = load i32 $0
      $4 = add i32 $1 $3
      $5 = const i32 0
      $6 = global_ptr i32 @x [$5]
      global_store $6 $4
    }""", """
    kernel k() {
      $0 = alloca i32
      $1 = load i32 $0
      $2 = const i32 7
      store $0 $2
      $3 = load i32 $0
      $4 = add i32 $1 $2
      $5 = const i32 0
      $6 = global_ptr i32 @x [$5]
      global_store $6 $4
    }""", env)


UNCHANGED = {
    # stored twice: which value a load sees depends on the path
    "stored twice": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = const i32 1
      store $1 $2
      $3 = load i32 $1
      $4 = global_ptr i32 @x [$2]
      global_store $4 $3
    }""",
    # the only store is inside an `if`: it may not run
    "stored in a branch": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      if $0
        store $1 $0
      $3 = load i32 $1
      $4 = global_ptr i32 @x [$0]
      global_store $4 $3
    }""",
    # an atomic on the local changes it (the frontend's `s += v` inside a parallel loop)
    "updated by an atomic": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = atomic_add i32 $1 $0
      $3 = load i32 $1
      $4 = global_ptr i32 @x [$0]
      global_store $4 $3
    }""",
    # passed by reference to a real function, which may assign it
    "passed by reference": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = call f#0($1)
      $3 = load i32 $1
      $4 = global_ptr i32 @x [$0]
      global_store $4 $3
    }
    function f#0(ref i32) {
      $0 = ref_arg i32 0
      $1 = const i32 3
      store $0 $1
    }""",
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_does_not_forward(case, env):
    check_pass(forward.run, UNCHANGED[case], UNCHANGED[case], env, changed=False)


def test_a_function_body_forwards_its_parameters(env):
    # a real function's parameters are locals stored once from its arguments
    check_pass(forward.run, """
    kernel k() {
      $0 = const i32 2
      $1 = call f#0($0)
    }
    function f#0(i32) {
      $0 = func_arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = load i32 $1
      $3 = global_ptr i32 @x [$2]
      global_store $3 $2
    }""", """
    kernel k() {
      $0 = const i32 2
      $1 = call f#0($0)
    }
    function f#0(i32) {
      $0 = func_arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = load i32 $1
      $3 = global_ptr i32 @x [$0]
      global_store $3 $0
    }""", env)
