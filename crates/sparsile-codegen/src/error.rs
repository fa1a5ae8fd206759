//! Errors of the code generators: each names the problem and where it is (the buffer,
//! local or statement, with its source line and column when the IR came from text).

use sparsile_ir::loops::VerifyError;
use sparsile_ir::{DType, Span};
use thiserror::Error;

/// Why a function cannot be emitted.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CodegenError {
    #[error("function `{func}` is a stage-II (pos) function; the C backend emits stage III (flat) functions only")]
    NotFlat { func: String },
    #[error("{}{what}: the C backend emits CPU functions; GPU functions (with launches) go to the CUDA backend", at(.span))]
    GpuNode { what: String, span: Span },
    #[error("{}buffer `{buffer}` ({dtype}) is summed in place across loop `{var}`: every partial sum would be rounded to {dtype}; sum in an f32 local (`cache_write`, as the `rowwise` recipe does) or use an f32 output", at(.span))]
    HalfPrecisionSum {
        buffer: String,
        dtype: DType,
        var: String,
        span: Span,
    },
    #[error("local `{var}` has type {dtype}: the C backend computes in f32/f64 only")]
    HalfPrecisionLocal { var: String, dtype: DType },
    #[error("local `{var}` has integer type {dtype}: locals are indices (i64) or f32/f64 values")]
    IntegerValueLocal { var: String, dtype: DType },
    #[error("{}buffer `{buffer}` is laid out over axes; stage III buffers are flat", at(.span))]
    AxesLayout { buffer: String, span: Span },
    #[error("{}access to buffer `{buffer}` has {count} indices; stage III accesses take exactly one offset", at(.span))]
    IndexCount {
        buffer: String,
        count: usize,
        span: Span,
    },
    #[error("{}search over buffer `{buffer}` of element type {dtype}: search needs an integer buffer", at(.span))]
    SearchNotInteger {
        buffer: String,
        dtype: DType,
        span: Span,
    },
    #[error("{}`{op}` of an integer has no C lowering (integers support neg, abs and relu)", at(.span))]
    IntegerUnary { op: &'static str, span: Span },
    #[error("{}reference to {what} #{index}, but the function declares only {count}", at(.span))]
    UnknownId {
        what: &'static str,
        index: usize,
        count: usize,
        span: Span,
    },
    #[error("{}top-level local `{var}` is used by a later phase but {reason}; phases cannot share it", at(.span))]
    SharedLocal {
        var: String,
        reason: &'static str,
        span: Span,
    },
    #[error("{}atomic add to buffer `{buffer}` of element type {dtype}: atomic adds go to f32/f64 buffers", at(.span))]
    AtomicType {
        buffer: String,
        dtype: DType,
        span: Span,
    },
    #[error("{}local buffer `{buffer}` must have a constant length of at least 1", at(.span))]
    LocalLength { buffer: String, span: Span },
    #[error("{}the `vectorized(reassociate)` loop over `{var}` cannot reassociate its reductions: {reason}", at(.span))]
    Reassociation {
        var: String,
        reason: String,
        span: Span,
    },
    #[error("{}balanced partition of the parallel loop over `{var}` reads buffer `{buffer}`, which is not a flat integer buffer", at(.span))]
    BalancedIndptr {
        var: String,
        buffer: String,
        span: Span,
    },
    #[error("function `{func}` is a stage-II (pos) function; the CUDA backend emits stage III (flat) functions only")]
    CudaNotFlat { func: String },
    #[error("function `{func}` has no launches: the CUDA backend emits GPU functions (only launches at the top level); CPU functions go to the C backend")]
    NotGpu { func: String },
    #[error("function `{func}` does not pass the loop-IR verifier: {}", messages(.errors))]
    Unverified {
        func: String,
        errors: Vec<VerifyError>,
    },
    #[error("local `{var}` has type {dtype}: the CUDA backend computes in f32 or f64 (declare the local f32; f16/bf16 buffers are loaded and stored as such)")]
    CudaHalfPrecisionLocal { var: String, dtype: DType },
    #[error("{}{what} has no CUDA lowering", at(.span))]
    CudaUnsupported { what: String, span: Span },
}

fn messages(errors: &[VerifyError]) -> String {
    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
    all.join("; ")
}

fn at(span: &Span) -> String {
    if span.line == 0 {
        String::new()
    } else {
        format!("line {}, column {}: ", span.line, span.col)
    }
}
