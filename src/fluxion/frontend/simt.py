"""`ti.simt.block`: block-level programming for the CUDA backend.

    ti.loop_config(block_dim=128)
    for i in range(n):
        tile = ti.simt.block.SharedArray((128,), ti.f32)   # one array per block
        tid = ti.simt.block.thread_idx()
        tile[tid] = x[i]
        ti.simt.block.sync()                               # every thread of the block waits
        ...

A loop that synchronizes runs one index per thread on exactly enough blocks, so its bounds
must be known when the kernel is launched (constants, arguments, array shapes).
"""
from __future__ import annotations

from fluxion.frontend.access import as_indices, flatten_index
from fluxion.ir import builder
from fluxion.ir.expr import Expr
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSyntaxError


def _in_kernel(what):
    if not builder.in_kernel():
        raise FluxionSyntaxError(f"ti.simt.block.{what} is only available inside kernels")


class SharedArrayValue:
    def __init__(self, stmt, shape, dtype):
        self.stmt, self.shape, self.dtype = stmt, shape, dtype


class _Block:
    @staticmethod
    def SharedArray(shape, dtype):  # noqa: N802  (the original system's name)
        _in_kernel("SharedArray")
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        dtype = T.normalize(dtype)
        st = builder.emit(S.SharedArrayStmt(shape, dtype))
        return SharedArrayValue(st, shape, dtype)

    @staticmethod
    def sync():
        _in_kernel("sync")
        builder.emit(S.BlockSyncStmt())

    @staticmethod
    def thread_idx():
        _in_kernel("thread_idx")
        return Expr(builder.emit(S.ThreadIndexStmt("thread", ret_type=T.i32)))

    @staticmethod
    def block_idx():
        _in_kernel("block_idx")
        return Expr(builder.emit(S.ThreadIndexStmt("block", ret_type=T.i32)))

    @staticmethod
    def global_thread_idx():
        _in_kernel("global_thread_idx")
        return Expr(builder.emit(S.ThreadIndexStmt("global", ret_type=T.i32)))


block = _Block()


def shared_access(sa, index):
    flat = flatten_index(index)
    if len(flat) != len(sa.shape):
        raise FluxionSyntaxError(f"a shared array of shape {sa.shape} indexed with "
                                 f"{len(flat)} indices")
    idx = as_indices(flat, "a shared array")
    ptr = builder.emit(S.SharedPtrStmt(sa.stmt, [i.stmt for i in idx], ret_type=sa.dtype))
    return Expr(builder.emit(S.GlobalLoadStmt(ptr, ret_type=sa.dtype)), lvalue=ptr)
