"""`ti.types.primitive_types`: the scalar types and the lists the original system keeps of
them (`all_types`, `integer_types`, `real_types`, with Python's int/float/bool)."""
from fluxion.ir.types import (i8, i16, i32, i64, u1, u8, u16, u32, u64, f16, f32,  # noqa: F401
                                f64, int8, int16, int32, int64, uint1, uint8, uint16, uint32, uint64,
                                float16, float32, float64)


from fluxion.lang.real_func import RefType, ref  # noqa: E402,F401  (real functions' by-reference)


real_types = [f16, f32, f64, float]
real_type_ids = [id(t) for t in real_types]

integer_types = [i8, i16, i32, i64, u1, u8, u16, u32, u64, int, bool]
integer_type_ids = [id(t) for t in integer_types]

all_types = real_types + integer_types
type_ids = [id(t) for t in all_types]
