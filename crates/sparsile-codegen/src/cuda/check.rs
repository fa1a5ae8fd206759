//! What the CUDA backend accepts, checked before anything is written: a stage-III
//! function, with launches, that passes the loop-IR verifier (so every launch has a
//! well-formed shape and its barriers are reached by whole blocks), with no f16/bf16
//! local (f16/bf16 buffers are fine: their elements are loaded and stored as raw 16-bit
//! words and computed with in f32), and no f16/bf16 buffer summed in place across a loop
//! (the C backend's rule: every partial sum would be rounded to 16 bits; a schedule sums
//! in an f32 local instead). Each refusal is its own [`CodegenError`].

use sparsile_ir::loops::{is_gpu_body, verify, Func, Stage, VarType};
use sparsile_ir::DType;

use crate::CodegenError;

/// Refuses what [`super::emit_cuda`] cannot emit, in this order: a stage-II function, a
/// CPU function, a function the verifier rejects, half-precision sums in place,
/// half-precision locals.
pub(super) fn supported(func: &Func) -> Result<(), CodegenError> {
    if func.stage != Stage::Flat {
        return Err(CodegenError::CudaNotFlat {
            func: func.name.clone(),
        });
    }
    if !is_gpu_body(&func.body) {
        return Err(CodegenError::NotGpu {
            func: func.name.clone(),
        });
    }
    verify(func).map_err(|errors| CodegenError::Unverified {
        func: func.name.clone(),
        errors,
    })?;
    // f16/bf16 outputs are summed in f32 locals and rounded once (as on the CPU).
    crate::c::half_sums::check(func)?;
    for v in func.vars.values() {
        if let VarType::Value(dtype) = v.ty {
            if is_half(dtype) {
                return Err(CodegenError::CudaHalfPrecisionLocal {
                    var: v.name.clone(),
                    dtype,
                });
            }
        }
    }
    Ok(())
}

fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}
