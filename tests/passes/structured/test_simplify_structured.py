"""The simplify passes on struct-fors and ndrange-fors that are not lowered yet: they treat
them as range-fors (a parallel one's body starts afresh for CSE and shares the kernel's
locals), their indices as loop indices (CSE merges two reads of the same index, dce drops an
unused one, the bounds pass knows their ranges). The compile driver runs simplify on these
loops, then lowers them (passes/lower_struct_for.py) and runs simplify's cse and bounds
again."""
import pytest

import fluxion as ti
from fluxion.passes import bounds, cse, dce, store_to_load

from ir.irtext import check_pass

pytestmark = pytest.mark.cpu_only


@pytest.fixture
def env():
    return {"x": ti.field(ti.i32, shape=(4, 3), name="x"),
            "y": ti.field(ti.i32, shape=8, name="y")}


def test_cse_merges_reads_of_one_index_but_not_across_a_parallel_loop(env):
    # (cse redirects the uses; dce removes what it replaced.) $2/$3: the same axis of the
    # same loop, merged; $4 another axis, kept. The constant 5 of the kernel body ($0) is not
    # reused inside the parallel loops ($6, $12), but the serial ndrange-for inside the
    # second one sees its enclosing loop's 5 ($12 for $16), and so its two sums are one
    check_pass(cse.run, """
    kernel k() {
      $0 = const i32 5
      $1 : parallel_struct_for i32 @x [(0, 4), (0, 3)]
        $2 = struct_index i32 $1[0]
        $3 = struct_index i32 $1[0]
        $4 = struct_index i32 $1[1]
        $5 = add i32 $2 $3
        $6 = const i32 5
        $7 = add i32 $5 $6
        $8 = global_ptr i32 @x [$2, $4]
        global_store $8 $7
      $9 = arg i32 0
      $10 : parallel_ndrange_for i32 [(0, $9)]
        $11 = struct_index i32 $10[0]
        $12 = const i32 5
        $13 : ndrange_for i32 [(0, 2)]
          $14 = struct_index i32 $13[0]
          $15 = struct_index i32 $13[0]
          $16 = const i32 5
          $17 = add i32 $14 $16
          $18 = add i32 $15 $16
          $19 = global_ptr i32 @y [$17]
          global_store $19 $18
    }""", """
    kernel k() {
      $0 = const i32 5
      $1 : parallel_struct_for i32 @x [(0, 4), (0, 3)]
        $2 = struct_index i32 $1[0]
        $3 = struct_index i32 $1[0]
        $4 = struct_index i32 $1[1]
        $5 = add i32 $2 $2
        $6 = const i32 5
        $7 = add i32 $5 $6
        $8 = global_ptr i32 @x [$2, $4]
        global_store $8 $7
      $9 = arg i32 0
      $10 : parallel_ndrange_for i32 [(0, $9)]
        $11 = struct_index i32 $10[0]
        $12 = const i32 5
        $13 : ndrange_for i32 [(0, 2)]
          $14 = struct_index i32 $13[0]
          $15 = struct_index i32 $13[0]
          $16 = const i32 5
          $17 = add i32 $14 $12
          $18 = add i32 $14 $12
          $19 = global_ptr i32 @y [$17]
          global_store $19 $17
    }""", env)


def test_dce_drops_an_unused_index_and_keeps_the_loop(env):
    check_pass(dce.run, """
    kernel k() {
      $0 : parallel_ndrange_for i32 [(0, 4), (-1, 3)] grouped
        $1 = struct_index i32 $0[0]
        $2 = struct_index i32 $0[1]
        $3 = global_ptr i32 @y [$2]
        $4 = const i32 1
        $5 = atomic_add i32 $3 $4
    }""", """
    kernel k() {
      $0 : parallel_ndrange_for i32 [(0, 4), (-1, 3)] grouped
        $1 = struct_index i32 $0[1]
        $2 = global_ptr i32 @y [$1]
        $3 = const i32 1
        $4 = atomic_add i32 $2 $3
    }""", env)


def test_store_to_load_leaves_a_local_shared_by_a_parallel_loops_iterations(env):
    # $0 is read and written in the parallel struct-for: another iteration may store to it
    # between this iteration's store and load, so the load $5 stays; the loop's own local
    # $7 is forwarded (its load $9 reads $8)
    check_pass(store_to_load.run, """
    kernel k() {
      $0 = alloca i32
      $1 = const i32 0
      store $0 $1
      $2 : parallel_struct_for i32 @y [(0, 8)]
        $3 = struct_index i32 $2[0]
        store $0 $3
        $5 = load i32 $0
        $6 = global_ptr i32 @y [$3]
        $7 = alloca i32
        store $7 $5
        $9 = load i32 $7
        global_store $6 $9
    }""", """
    kernel k() {
      $0 = alloca i32
      $1 = const i32 0
      store $0 $1
      $2 : parallel_struct_for i32 @y [(0, 8)]
        $3 = struct_index i32 $2[0]
        store $0 $3
        $4 = load i32 $0
        $5 = global_ptr i32 @y [$3]
        $6 = alloca i32
        store $6 $4
        $7 = load i32 $6
        global_store $5 $4
    }""", env)


def test_bounds_knows_the_range_of_a_struct_index_and_of_an_ndrange_index(env):
    # y has 8 cells. Proven: $3 in [0, 7] (struct-for over y), $9 in [2, 7] (ndrange-for from
    # 2 to 8). Kept: $15 + 1 reaches 8; $20 under a bound of the kernel's argument
    check_pass(lambda kernel, cfg: bounds.run(kernel, cfg, parallel=False), """
    kernel k(i32) {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_struct_for i32 @y [(0, 8)]
        $3 = struct_index i32 $2[0]
        $4 = cmp_ge i32 $3 $0
        $5 = cmp_lt i32 $3 $1
        $6 = bit_and i32 $4 $5
        assert $6 error=0
      $7 = const i32 8
      $8 : parallel_ndrange_for i32 [(2, $7)]
        $9 = struct_index i32 $8[0]
        $10 = cmp_ge i32 $9 $0
        $11 = cmp_lt i32 $9 $1
        $12 = bit_and i32 $10 $11
        assert $12 error=1
      $14 : parallel_ndrange_for i32 [(0, 8)]
        $15 = struct_index i32 $14[0]
        $16 = const i32 1
        $17 = add i32 $15 $16
        $18 = cmp_lt i32 $17 $1
        assert $18 error=2
      $19 = arg i32 0
      $21 : parallel_ndrange_for i32 [(0, $19)]
        $20 = struct_index i32 $21[0]
        $22 = cmp_lt i32 $20 $1
        assert $22 error=3
    }""", """
    kernel k(i32) {
      $0 = const i32 0
      $1 = const i32 8
      $2 : parallel_struct_for i32 @y [(0, 8)]
        $3 = struct_index i32 $2[0]
        $4 = cmp_ge i32 $3 $0
        $5 = cmp_lt i32 $3 $1
        $6 = bit_and i32 $4 $5
      $7 = const i32 8
      $8 : parallel_ndrange_for i32 [(2, $7)]
        $9 = struct_index i32 $8[0]
        $10 = cmp_ge i32 $9 $0
        $11 = cmp_lt i32 $9 $1
        $12 = bit_and i32 $10 $11
      $14 : parallel_ndrange_for i32 [(0, 8)]
        $15 = struct_index i32 $14[0]
        $16 = const i32 1
        $17 = add i32 $15 $16
        $18 = cmp_lt i32 $17 $1
        assert $18 error=2
      $19 = arg i32 0
      $21 : parallel_ndrange_for i32 [(0, $19)]
        $20 = struct_index i32 $21[0]
        $22 = cmp_lt i32 $20 $1
        assert $22 error=3
    }""", env)
