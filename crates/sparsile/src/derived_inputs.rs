//! Binding derived buffers when a compiled kernel runs.
//!
//! A kernel whose schedule decomposed an input (`decompose_format`) declares part
//! buffers derived from that input; the caller still passes only the input. Before the
//! kernel runs, [`with_derived`] adds every part's tensor, computed by
//! [`sparsile_runtime::interp::derived::derive_inputs`] with the kernel's
//! [`DecomposeCache`]: the structure of the parts is computed once per sparsity pattern
//! of the input (the pre-processing step), the values gathered on every run.
//!
//! The interpreter path (`sparsile::evaluate`, `sparsile_runtime::interpret`) derives
//! the parts itself, without a cache.

use std::collections::HashMap;

use sparsile_formats::decompose::DecomposeCache;
use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_runtime::interp::derived::derive_inputs;
use sparsile_runtime::{InterpError, KernelError};

/// `inputs` (by buffer name) plus the tensors of the derived buffers of `program` that
/// they lack.
pub(crate) fn with_derived<'a>(
    program: &Program,
    mut inputs: HashMap<String, SparseTensor<'a>>,
    cache: &DecomposeCache,
) -> Result<HashMap<String, SparseTensor<'a>>, KernelError> {
    if program.derived.is_empty() {
        return Ok(inputs);
    }
    let derived = derive_inputs(program, &inputs, Some(cache)).map_err(KernelError::from)?;
    inputs.extend(derived);
    Ok(inputs)
}

/// Runs the stage-I `program` (e.g. a scheduled one with derived buffers) with the
/// reference interpreter on `inputs` by buffer name; derived buffers are computed.
pub fn interpret_program(
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    params: &HashMap<String, i64>,
) -> Result<sparsile_runtime::Outputs, InterpError> {
    let options = sparsile_runtime::InterpOptions {
        params: params.clone(),
        ..sparsile_runtime::InterpOptions::default()
    };
    sparsile_runtime::interpret(program, inputs, &options)
}
