"""passes/forward.py on IR text: a local stored exactly once, and otherwise only loaded, reads
as the stored value wherever the store dominates the load (the loads stay, for dce)."""
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
    "loaded after the branch that stores": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      if $0
        store $1 $0
      $3 = load i32 $1
      $4 = global_ptr i32 @x [$0]
      global_store $4 $3
    }""",
    # stored in a loop's body, read after the loop: the loop may not run, and the value of
    # the last iteration is not an SSA value there
    "loaded after the loop that stores": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      $2 = const i32 0
      $3 : for $2 .. $0
        $4 = loop_index i32 $3
        store $1 $4
      $5 = load i32 $1
      $6 = global_ptr i32 @x [$0]
      global_store $6 $5
    }""",
    # read before the store in the same body: the previous iteration's value
    "loaded before the store in a loop": """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      $2 = const i32 0
      $3 : for $2 .. $0
        $4 = loop_index i32 $3
        $5 = load i32 $1
        $6 = global_ptr i32 @x [$4]
        global_store $6 $5
        store $1 $4
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


def test_a_local_stored_inside_a_branch_is_forwarded_to_the_loads_it_dominates(env):
    # `if c: b = n * 8; for e in range(4): x[b + e] = b`: the nested loop's loads too
    check_pass(forward.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      if $0
        $2 = const i32 8
        $3 = mul i32 $0 $2
        store $1 $3
        $4 = const i32 0
        $5 = const i32 4
        $6 : for $4 .. $5
          $7 = loop_index i32 $6
          $8 = load i32 $1
          $9 = add i32 $8 $7
          $10 = global_ptr i32 @x [$9]
          $11 = load i32 $1
          global_store $10 $11
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      if $0
        $2 = const i32 8
        $3 = mul i32 $0 $2
        store $1 $3
        $4 = const i32 0
        $5 = const i32 4
        $6 : for $4 .. $5
          $7 = loop_index i32 $6
          $8 = load i32 $1
          $9 = add i32 $3 $7
          $10 = global_ptr i32 @x [$9]
          $11 = load i32 $1
          global_store $10 $3
    }""", env)


def test_a_local_stored_once_in_a_loop_body_is_forwarded_within_the_iteration(env):
    # `for i in range(n): c = i * 2; x[c] = c`: each iteration stores before it loads
    check_pass(forward.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      $2 = const i32 0
      $3 : parallel_for $2 .. $0
        $4 = loop_index i32 $3
        $5 = add i32 $4 $4
        store $1 $5
        $6 = load i32 $1
        $7 = global_ptr i32 @x [$6]
        global_store $7 $6
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      $2 = const i32 0
      $3 : parallel_for $2 .. $0
        $4 = loop_index i32 $3
        $5 = add i32 $4 $4
        store $1 $5
        $6 = load i32 $1
        $7 = global_ptr i32 @x [$5]
        global_store $7 $5
    }""", env)


def test_a_value_that_is_itself_a_forwarded_load_is_followed_to_its_source(env):
    # an inlined function's parameter `t` stored (in a branch) from a read of the kernel
    # argument's local: the parameter's loads become the argument, not the dead read
    check_pass(forward.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = alloca i32
      if $0
        $3 = load i32 $1
        store $2 $3
        $4 = load i32 $2
        $5 = global_ptr i32 @x [$4]
        global_store $5 $4
    }""", """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = alloca i32
      store $1 $0
      $2 = alloca i32
      if $0
        $3 = load i32 $1
        store $2 $0
        $4 = load i32 $2
        $5 = global_ptr i32 @x [$0]
        global_store $5 $0
    }""", env)
