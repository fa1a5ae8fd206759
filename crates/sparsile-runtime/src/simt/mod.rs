//! The SIMT interpreter: runs a GPU function of the loop-level IR (stage III, a body of
//! launches) on the CPU with the semantics of [`sparsile_ir::loops::gpu`], and reports
//! every violation of them it meets. It is how GPU code is tested without a GPU.
//!
//! # Preconditions
//! `func` is a GPU function lowered from the stage-I `program`; `inputs` holds one tensor
//! per input buffer of `program`. It is bound exactly as [`crate::flat_interp::run`] binds
//! a CPU function (same checks, the same [`FlatInterpError`]s wrapped in
//! [`SimtError::Binding`]). `Values`, `Indptr`, `Indices` and `Scratch` buffers are global
//! memory (scratch zeroed once per run); each block gets its own copy of every `shared`
//! buffer and each thread its own copy of every `local` buffer, both undefined (poisoned)
//! when the block starts. With [`SimtOptions::verify_func`] (the default) the function
//! must pass [`sparsile_ir::loops::verify_stage`] for stage III first; without, every
//! rule is still checked as execution meets it.
//!
//! # Execution
//! Launches run in order. Blocks run one at a time in a random order drawn from
//! [`SimtOptions::seed`]. The threads of a block run in lockstep with activity masks
//! (module `exec`): each statement runs for every thread that reaches it, in a seeded
//! random order, each thread with its own variables. Values are computed as in
//! [`crate::flat_interp`]: in f64, rounded to a buffer's element type when stored, with
//! checked i64 arithmetic.
//!
//! # What is checked
//! - **Data races** (module `shadow`): two accesses of one element of a writable global
//!   buffer (outputs, temps, scratch) or of a shared buffer by different threads, one a
//!   store (atomic adds excepted among themselves), not ordered by a `sync_threads` both
//!   passed (one block), a `sync_warp` (one warp) or the end of the launch. Inputs are
//!   not tracked; local buffers are private.
//! - **Barrier divergence**: a `sync_threads` not reached by every thread of the block; a
//!   `sync_warp`, warp reduction or `mma` not reached by every lane of a warp that
//!   reaches it; a warp reduction or `mma` in a short last warp.
//! - **`mma`** (module `mma`): expressions that differ between the lanes of a warp, two
//!   tile positions accumulated into one element; each tile element is read and written
//!   by the lane that holds it in the PTX fragment layout, so races and uninitialised
//!   reads are found as for any access.
//! - **Uninitialised reads**: a load of a shared element no thread of the block stored, or
//!   of a local element the thread did not store.
//! - Unsorted keys of `warp_segment_sum`; grids beyond the hardware limits, or whose
//!   extents read anything but parameters and literals; shared buffers above 48 KiB per
//!   launch; and every rule of the loop-level interpreter (bounds, overflow, division by
//!   zero, types), each naming the launch and the thread.
//!
//! Warp reductions are not barriers: they order no memory access. Loops of other kinds
//! inside a launch (which the verifier refuses) run as serial loops. The copies of
//! shared and local buffers a launch needs are bounded by [`MAX_PRIVATE_ELEMENTS`].
//!
//! # Postconditions
//! On success, the program's output tensors, as [`crate::flat_interp::run`] returns them.
//! A function whose result depends on the order of blocks or threads is reported as a
//! race rather than returned; results may still differ between seeds by floating-point
//! reassociation of atomic adds.
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile_formats::SparseTensor;
//! use sparsile_ir::coord::Program;
//! use sparsile_ir::loops::Func;
//! use sparsile_ir::DType;
//! use sparsile_runtime::simt::{self, SimtError};
//! use sparsile_runtime::InterpOptions;
//!
//! let program: Program = "func scale(n) {
//!   axis I = dense_fixed(n)
//!   buffer X: f32[I] input
//!   buffer Y: f32[I] output
//!   iter s over [I: S] as (i) {
//!     Y[i] = 2.0 * X[i]
//!   }
//! }
//! ".parse().unwrap();
//! let kernel = |store: &str| -> Func {
//!     format!("flat func scale(n) {{
//!   buffer X: f32[n] input values
//!   buffer Y: f32[n] output values
//!   launch main {{
//!     for b in 0..(n + 3) / 4 bind(blockIdx.x) {{
//!       for t in 0..4 bind(threadIdx.x) {{
//!         if b * 4 + t < n {{
//!           {store}
//!         }}
//!       }}
//!     }}
//!   }}
//! }}
//! ").parse().unwrap()
//! };
//! let x = SparseTensor::dense_from_f64(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0], DType::F32).unwrap();
//! let inputs = HashMap::from([("X".to_string(), x)]);
//! let opts = InterpOptions::default();
//!
//! let good = kernel("Y[b * 4 + t] = 2.0 * X[b * 4 + t]");
//! let out = simt::run(&good, &program, &inputs, &opts).unwrap();
//! assert_eq!(out["Y"].values.to_f64_vec(), vec![2.0, 4.0, 6.0, 8.0, 10.0]);
//!
//! // Every thread stores the same element: the threads race.
//! let racy = kernel("Y[0] = X[b * 4 + t]");
//! let err = simt::run(&racy, &program, &inputs, &opts).unwrap_err();
//! assert!(matches!(err, SimtError::DataRace { .. }), "{err}");
//! ```

mod access;
mod error;
mod exec;
mod launch;
mod mma;
mod shadow;
mod state;
mod warp;

use std::cell::RefCell;
use std::collections::HashMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{is_gpu_body, Func, Stage, Stmt};

pub use error::{AccessKind, Dim3, PrivateMemory, RaceAccess, SimtError, ThreadRef};

use crate::flat_interp::{self, ids};
use crate::{InterpOptions, Outputs};
use exec::Sim;
use launch::Launch;
use state::Block;

/// The most elements of shared and local buffers the interpreter allocates for one
/// launch: one copy of each shared buffer the launch uses, and one per thread of the
/// block of each local buffer it uses (an implementation limit, about 300 MB).
pub const MAX_PRIVATE_ELEMENTS: usize = 1 << 25;

/// Options of [`run_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimtOptions {
    /// Seeds the order of blocks and of threads at each statement.
    pub seed: u64,
    /// Runs [`sparsile_ir::loops::verify_stage`] (stage III) first; a violation is a
    /// [`SimtError::InvalidFunc`]. Turn it off to run functions the verifier refuses
    /// (a barrier under a thread-dependent condition): the rules are then checked as
    /// execution meets them.
    pub verify_func: bool,
}

impl Default for SimtOptions {
    /// Seed 0, verification on.
    fn default() -> Self {
        SimtOptions {
            seed: 0,
            verify_func: true,
        }
    }
}

/// Runs GPU function `func`, lowered from `program`, on `inputs` with the default
/// [`SimtOptions`].
pub fn run(
    func: &Func,
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<Outputs, SimtError> {
    run_with(func, program, inputs, options, &SimtOptions::default())
}

/// [`run`] with explicit [`SimtOptions`].
pub fn run_with(
    func: &Func,
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
    simt: &SimtOptions,
) -> Result<Outputs, SimtError> {
    if simt.verify_func {
        sparsile_ir::loops::verify_stage(func, Stage::Flat)
            .map_err(|errors| SimtError::InvalidFunc { errors })?;
    }
    ids::check_ids(func)?;
    if !is_gpu_body(&func.body) {
        return Err(SimtError::NotGpu {
            func: func.name.clone(),
        });
    }
    let mut launches = Vec::new();
    for s in &func.body {
        match s {
            Stmt::Launch { name, body, span } => launches.push((name.as_str(), body, *span)),
            other => {
                return Err(SimtError::Misplaced {
                    what: format!(
                        "a statement outside any launch in GPU function `{}` (its top level holds only launches)",
                        func.name
                    ),
                    at: other.span(),
                })
            }
        }
    }
    let (bound, exec) = flat_interp::bind(func, program, inputs, options, false, true)
        .map_err(SimtError::Binding)?;
    let mut sim = Sim {
        func,
        params: exec.params,
        globals: exec.mems,
        space: state::spaces(func),
        rng: ChaCha8Rng::seed_from_u64(simt.seed),
        shadow: RefCell::default(),
        launch: Launch::default(),
        block: Block::default(),
    };
    for (name, body, span) in launches {
        sim.run_launch(name, body, span)?;
    }
    Ok(flat_interp::outputs(program, &bound, &sim.globals))
}
