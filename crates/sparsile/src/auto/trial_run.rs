//! The first-call trial of a short list for callers that build each candidate's operands
//! themselves (the command line's `run` and `bench`, which read the operand from a file and
//! may store it in another format per candidate).
//!
//! [`settle_list`] compiles each candidate of the selector's short list (its pick first,
//! see [`sparsile_tune::trial`]) from the program text and inputs the caller builds for
//! it, times the compiled kernels with [`sparsile_tune::trial::settle`] and returns the
//! winner with its kernel. A candidate whose operands cannot be built, or that does not
//! compile, is left out of the trial; it never fails the call.
//!
//! Precondition: `operands` returns the same computation for every candidate (the same
//! program over the same values, the sparse operand stored in the candidate's format).
//!
//! ```no_run
//! use std::collections::HashMap;
//! use sparsile::auto::trial_run::settle_list;
//! # fn demo(list: &[sparsile::tune::space::Candidate], text: &str,
//! #         inputs: &HashMap<String, sparsile::formats::SparseTensor<'static>>) {
//! let options = sparsile::RunOptions::default();
//! if let Some(s) = settle_list(list, |_| Some((text.to_string(), inputs.clone())), &options) {
//!     println!("{} won against {} others", s.candidate, s.others);
//! }
//! # }
//! ```

use std::collections::HashMap;

use sparsile_formats::SparseTensor;
use sparsile_runtime::Outputs;
use sparsile_tune::space::Candidate;

use crate::{compile_recipe, Kernel, RunOptions};

/// The winner of a trial: its candidate, how many others it was timed against, and its
/// compiled kernel.
pub struct Settled {
    pub candidate: Candidate,
    pub others: usize,
    pub kernel: Kernel,
}

/// Times the candidates of `list` that compile on the program text and inputs `operands`
/// gives for each, run with `options`, and returns the fastest (see the module docs).
/// `None` when `list` holds fewer than two candidates or none compiled.
pub fn settle_list<'a>(
    list: &[Candidate],
    mut operands: impl FnMut(&Candidate) -> Option<(String, HashMap<String, SparseTensor<'a>>)>,
    options: &RunOptions,
) -> Option<Settled> {
    if list.len() < 2 {
        return None;
    }
    let mut ready: Vec<(
        Candidate,
        Kernel,
        HashMap<String, SparseTensor<'a>>,
        Outputs,
    )> = Vec::new();
    for c in list {
        let Some((text, mut inputs)) = operands(c) else {
            continue;
        };
        let Ok(kernel) = compile_recipe(&text, &inputs, &c.recipe) else {
            continue;
        };
        let Ok(parts) = kernel.derive_parts(&inputs) else {
            continue;
        };
        inputs.extend(parts);
        ready.push((c.clone(), kernel, inputs, Outputs::new()));
    }
    let outcome = sparsile_tune::trial::settle(ready.len(), |i| {
        let (_, kernel, inputs, outputs) = &mut ready[i];
        let t = std::time::Instant::now();
        kernel.run_into(inputs, outputs, options).ok()?;
        Some(t.elapsed().as_secs_f64())
    });
    let others = ready.len().saturating_sub(1);
    let (candidate, kernel, _, _) = ready.into_iter().nth(outcome.winner)?;
    Some(Settled {
        candidate,
        others,
        kernel,
    })
}
