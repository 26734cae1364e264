//! Atomic datatypes and operations (fi_atomic(3)), applied on local memory by whichever side
//! executes the operation (the target, for emulated and shared-memory atomics).

use crate::abi::consts::*;

/// Byte size of one element of `datatype`, or None for datatypes this library does not know.
pub fn datatype_size(datatype: u32) -> Option<usize> {
    Some(match datatype {
        FI_INT8 | FI_UINT8 => 1,
        FI_INT16 | FI_UINT16 => 2,
        FI_INT32 | FI_UINT32 | FI_FLOAT => 4,
        FI_INT64 | FI_UINT64 | FI_DOUBLE | FI_FLOAT_COMPLEX => 8,
        FI_DOUBLE_COMPLEX | FI_LONG_DOUBLE | FI_INT128 | FI_UINT128 => 16,
        FI_LONG_DOUBLE_COMPLEX => 32,
        FI_FLOAT16 | FI_BFLOAT16 => 2,
        FI_FLOAT8_E4M3 | FI_FLOAT8_E5M2 => 1,
        _ => return None,
    })
}
