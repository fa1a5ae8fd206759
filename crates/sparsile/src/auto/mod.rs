//! The automatic choice of format and schedule, and kernels that make it per input.
//!
//! With no recipe or schedule named, every entry point runs what [`select`] chooses for
//! the input at hand: the tuning database's measured best for that exact input (written
//! by `sparsile tune`), else the learned selector's prediction from the input's
//! features, else the static rule (`sparsile_tune::rule`). The choice costs a hash-map
//! look-up once a structure was seen: the pattern, its features and fingerprint are
//! remembered per structure ([`pattern`]); a call like the one before it (same structure,
//! dense shapes and threads: [`call_key`]) skips even that. [`AutoKernel`] compiles each
//! chosen candidate once and keeps the input's format; callers that may convert the operand
//! (the command line, which reads it from a file) ask [`select`] with other formats
//! allowed.

pub mod call_key;
pub mod evaluate;
mod gpu_rule;
mod kernel;
pub mod pattern;
pub mod select;
pub mod stile;
pub mod trial_run;
pub mod tune;
mod widened;

pub use gpu_rule::{gpu_rule, gpu_rule_for, gpu_rule_on};
pub use kernel::AutoKernel;
pub use select::{select, Context, Selection, Source};

use std::collections::HashMap;

use sparsile_formats::SparseTensor;
use sparsile_ir::settings::Settings;

use crate::compile::CompileError;

/// The choice for running `program` (index notation) on `inputs` with `threads`
/// threads; with `other_formats`, candidates may store the sparse operand in another
/// format (the caller converts it).
pub fn choose(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
    threads: usize,
    other_formats: bool,
) -> Result<Selection, CompileError> {
    let ast = crate::notation::parse(program)?;
    let stage1 = crate::notation::lower(&ast)?;
    let info = sparsile_tune::op::classify(&stage1);
    let hash = sparsile_tune::target::fingerprint(&[program.as_bytes()]);
    let ctx = Context {
        program: &hash,
        info: &info,
        threads,
        other_formats,
    };
    Ok(select(&ctx, inputs, &Settings::from_env()))
}
