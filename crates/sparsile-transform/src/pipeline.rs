//! The lowering pipeline: stage I → stage II → default schedule → stage III.
//!
//! Purpose: run the passes in order, checking each output with the loop-level verifier
//! (always: it costs far less than the C compiler; [`LowerError::PassOutputInvalid`]
//! when it fails),
//! and print the IR (text form) after every pass on stderr when `SPARSILE_DUMP_IR` is set
//! ([`Settings::dump_ir`]).
//!
//! Preconditions: `program` passes the stage-I verifier (checked; an
//! [`LowerError::InvalidProgram`] otherwise) and uses no co-iteration.
//!
//! Postconditions: [`Lowered::stage2`] is the scheduled stage-II function,
//! [`Lowered::stage3`] its flattened stage-III form; both hold the same buffers, in the
//! same order (values buffers first, with the stage-I buffer ids), then the structure
//! arrays.
//!
//! ```
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let lowered = sparsile_transform::pipeline::compile_to_flat(&program).unwrap();
//! assert_eq!(lowered.stage3.stage, sparsile_ir::loops::Stage::Flat);
//! assert!(lowered.stage3.buffers.values().any(|b| b.name == "A_J_indptr" || b.name.ends_with("_indptr")));
//! ```

use sparsile_ir::coord::Program;
use sparsile_ir::loops::{verify_stage, Func, Stage};
use sparsile_ir::settings::Settings;

use crate::{default_schedule, lower_buffers, lower_iterations, LowerError};

/// The result of [`compile_to_flat`].
#[derive(Debug, Clone)]
pub struct Lowered {
    /// Stage II after the default schedule.
    pub stage2: Func,
    /// Stage III.
    pub stage3: Func,
}

/// Runs `lower_iterations`, `default_schedule` and `lower_buffers` on `program`.
pub fn compile_to_flat(program: &Program) -> Result<Lowered, LowerError> {
    let dump = Settings::from_env().dump_ir;
    if dump {
        eprintln!("=== stage I (input) ===\n{program}");
    }
    let stage2 = lower_iterations(program)?;
    after(dump, "lower_iterations", &stage2, Stage::Pos)?;
    let stage2 = default_schedule(program, stage2)?;
    after(dump, "default_schedule", &stage2, Stage::Pos)?;
    let stage3 = lower_buffers(&stage2)?;
    after(dump, "lower_buffers", &stage3, Stage::Flat)?;
    Ok(Lowered { stage2, stage3 })
}

/// Prints (when asked) and verifies the output of `pass`.
pub fn after(dump: bool, pass: &'static str, func: &Func, stage: Stage) -> Result<(), LowerError> {
    if dump {
        eprintln!("=== after {pass} ===\n{func}");
    }
    verify_stage(func, stage).map_err(|errors| LowerError::PassOutputInvalid { pass, errors })
}
