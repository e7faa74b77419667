"""The LLVM types every part of codegen uses, and the LLVM type of a fluxion data type."""
from __future__ import annotations

from llvmlite import ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F64 = ir.DoubleType()
VOID = ir.VoidType()
I64P = I64.as_pointer()
I8P = I8.as_pointer()
# a parallel task's function: (closure, begin, end, worker index)
TASK_TY = ir.FunctionType(VOID, [I64P, I64, I64, I64])


def llvm_type(dt):
    if dt.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dt.bits]
    return ir.IntType(dt.bits)
