//! The start of every CUDA translation unit: NVRTC compiles without standard headers, so
//! the prelude declares the few names the C backend's expression code writes (the
//! fixed-width integer types, `INT64_C`, `INT64_MIN`, `INFINITY`, `NAN`), then the
//! helpers the kernels call (floor division, binary search, …), each emitted only when
//! used: the C backend's definitions as `static __device__ __forceinline__` functions.
//! Math functions (`expf`, `sqrt`, `fmaxf`, …) are built into NVRTC.

use std::collections::BTreeSet;

use sparsile_ir::Span;

use crate::c::prelude::Helper;
use crate::CodegenError;

/// The declarations every translation unit starts with.
pub(super) const BASICS: &str = "\
typedef long long int64_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
#define INT64_C(c) c##LL
#define INT64_MIN (-INT64_C(9223372036854775807) - 1)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
";

/// The definitions of `helpers`, in the enum's order.
pub(super) fn helper_definitions(helpers: &BTreeSet<Helper>) -> Result<String, CodegenError> {
    let mut out = String::new();
    for h in helpers {
        let Some(text) = h.cuda_definition() else {
            return Err(CodegenError::CudaUnsupported {
                what: format!("the C helper {h:?}"),
                span: Span::default(),
            });
        };
        out.push('\n');
        out.push_str(&text);
    }
    Ok(out)
}
