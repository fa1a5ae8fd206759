//! The last resort for f16/bf16 outputs: the program compiled with f32 outputs, rounded
//! to their own type after each run.
//!
//! A kernel keeps a half-precision output's partial sums in f32 only where its schedule
//! gives them a local (`rowwise`'s row accumulator); where none does (a batched SpMM's
//! rows, whose batch width is not fixed), the C backend refuses it rather than round
//! every partial sum. [`AutoKernel`](super::AutoKernel) then runs the program with f32
//! outputs under the default schedule (f16/bf16 operands into an f32 output is a valid
//! program: mixed precision) and rounds each such output once, at the cost of an f32
//! output and one pass over it.

use std::collections::HashMap;

use sparsile_formats::{SparseTensor, Values};
use sparsile_ir::coord::BufferRole;
use sparsile_ir::DType;
use sparsile_runtime::Outputs;

use crate::compile::{compile_program, specialize_index_types, CompileError, Kernel};
use crate::evaluate::buffer_name;
use crate::notation;

/// The outputs of `program` with f16 or bf16 values: (tensor name, type).
pub(super) fn half_outputs(
    ast: &notation::ast::Program,
    stage1: &sparsile_ir::coord::Program,
) -> Vec<(String, DType)> {
    ast.tensors
        .iter()
        .filter_map(|decl| {
            let b = stage1.buffer_by_name(&buffer_name(&decl.name))?;
            let b = &stage1.buffers[b];
            (b.role == BufferRole::Output && b.dtype.is_half())
                .then(|| (decl.name.clone(), b.dtype))
        })
        .collect()
}

/// `program` compiled with its f16/bf16 outputs made f32 (default schedule), for the
/// index types of `inputs`.
pub(super) fn compile(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
) -> Result<Kernel, CompileError> {
    let ast = notation::parse(program)?;
    let mut stage1 = notation::lower(&ast)?;
    for (_, b) in stage1.buffers.iter_mut() {
        if b.role == BufferRole::Output {
            b.dtype = b.dtype.compute_type();
        }
    }
    let by_buffer: HashMap<String, &SparseTensor<'_>> =
        inputs.iter().map(|(n, t)| (buffer_name(n), t)).collect();
    specialize_index_types(&mut stage1, &by_buffer);
    Ok(compile_program(stage1)?.with_ast(ast))
}

/// Rounds each output of `half` that `outputs` holds in f32 to its own type.
pub(super) fn round_outputs(outputs: &mut Outputs, half: &[(String, DType)]) {
    for (name, dtype) in half {
        if let Some(t) = outputs.get_mut(name) {
            if t.values.dtype() != *dtype {
                t.values = Values::from_f64(&t.values.to_f64_vec(), *dtype);
            }
        }
    }
}

/// Runs a kernel from [`compile`] with `options`: the caller's `out` buffers of half
/// outputs (which that kernel writes in f32) are filled from the rounded results instead
/// of being handed to the run.
pub(super) fn run_into(
    kernel: &Kernel,
    inputs: &HashMap<String, SparseTensor<'_>>,
    outputs: &mut Outputs,
    options: &crate::RunOptions,
    half: &[(String, DType)],
) -> Result<(), CompileError> {
    let widened: Vec<&(String, DType)> = half
        .iter()
        .filter(|(name, _)| options.out.contains_key(name) && !writes_half(kernel, name))
        .collect();
    if widened.is_empty() {
        kernel.run_into(inputs, outputs, options)?;
        round_outputs(outputs, half);
        return Ok(());
    }
    let mut inner = options.clone();
    for (name, _) in &widened {
        inner.out.remove(name);
    }
    kernel.run_into(inputs, outputs, &inner)?;
    round_outputs(outputs, half);
    for (name, dtype) in widened {
        let t = outputs
            .remove(name)
            .expect("a run returns every output not written in place");
        let b = options.out[name];
        if b.dtype() != *dtype || b.len() != t.values.len() {
            return Err(CompileError::from(
                sparsile_runtime::KernelError::OutBufferMismatch {
                    buffer: name.clone(),
                    reason: format!(
                        "it takes {} values of {dtype}, the given memory holds {} of {}",
                        t.values.len(),
                        b.len(),
                        b.dtype()
                    ),
                },
            ));
        }
        // SAFETY: `b` holds `len` writable values of `dtype` that only this run uses
        // (`OutBuffer::new`); the bytes copied are `len` values of that type.
        unsafe { b.write_bytes(value_bytes(&t.values)) };
    }
    Ok(())
}

/// Whether `kernel` computes the output `name` in its declared half type (not widened).
fn writes_half(kernel: &Kernel, name: &str) -> bool {
    let stage1 = &kernel.lowered().stage1;
    stage1
        .buffer_by_name(&buffer_name(name))
        .is_some_and(|b| stage1.buffers[b].dtype.is_half())
}

/// The bytes of `values`, in their own type.
fn value_bytes<'a>(values: &'a Values<'_>) -> &'a [u8] {
    fn bytes<T>(v: &[T]) -> &[u8] {
        // SAFETY: plain numbers (no padding, every byte initialised) viewed as bytes,
        // for as long as the slice is borrowed.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }
    match values {
        Values::F16(v) => bytes(v),
        Values::BF16(v) => bytes(v),
        Values::F32(v) => bytes(v),
        Values::F64(v) => bytes(v),
    }
}
