"""passes/offload.py on IR text: the kernel's top-level statements split into tasks, in
order: each top-level parallel loop a task of its own, each run of other statements (serial
loops included) one serial task. The body itself does not change."""
import pytest

import fluxion as ti
from fluxion.passes import offload

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.i32, shape=8, name="x")}


def test_parallel_loops_are_tasks_and_what_lies_between_is_serial(env):
    k = check_pass(offload.run, """
    kernel k(i32) {
      $0 = arg i32 0
      $1 = const i32 0
      $2 = const i32 8
      $3 : parallel_for $1 .. $2
        $4 = loop_index i32 $3
        $5 = global_ptr i32 @x [$4]
        global_store $5 $0
      $6 : parallel_for $1 .. $2
        $7 = loop_index i32 $6
      $8 : for $1 .. $0
        $9 = loop_index i32 $8
        $10 = global_ptr i32 @x [$1]
        $11 = atomic_add i32 $10 $9
      $12 = global_ptr i32 @x [$2]
      $13 = global_load i32 $12
      return[0] $13
    }""", """
    kernel k(i32) offloaded {
      task serial
      $0 = arg i32 0
      $1 = const i32 0
      $2 = const i32 8
      task range_for
      $3 : parallel_for $1 .. $2
        $4 = loop_index i32 $3
        $5 = global_ptr i32 @x [$4]
        global_store $5 $0
      task range_for
      $6 : parallel_for $1 .. $2
        $7 = loop_index i32 $6
      task serial
      $8 : for $1 .. $0
        $9 = loop_index i32 $8
        $10 = global_ptr i32 @x [$1]
        $11 = atomic_add i32 $10 $9
      $12 = global_ptr i32 @x [$2]
      $13 = global_load i32 $12
      return[0] $13
    }""", env)
    assert [kind for kind, _ in k.tasks] == ["serial", "range_for", "range_for", "serial"]


def test_a_kernel_of_serial_code_is_one_serial_task_and_an_empty_one_has_none(env):
    serial = """
    kernel k() {{
      $1 = const i32 0
      $2 = const i32 8
      $3 : for $1 .. $2
        $4 = loop_index i32 $3
        $5 = global_ptr i32 @x [$4]
        global_store $5 $4
    }}"""
    check_pass(offload.run, serial.format(), serial.format().replace(
        "k() {\n", "k() offloaded {\n      task serial\n"), env)
    k = check_pass(offload.run, "kernel k() {\n}", "kernel k() offloaded {\n}", env)
    assert k.tasks == []
