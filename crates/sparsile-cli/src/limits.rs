//! Limits on what command-line input decides the size of: dense tensors made from
//! `--dim` sizes, repeat counts and thread counts. Each refusal names the option and the
//! limit, and exits non-zero like every other error.
//!
//! Dense tensors that the command creates itself (random inputs, dense outputs) are
//! checked together against the memory the system reports as available
//! ([`sparsile_formats::memory`]) before any of them is allocated: `--dim k=10^17` is an
//! error, not an allocation failure.

use anyhow::{bail, Result};
use sparsile_ir::DType;

/// The most timed runs `--repeat` may ask for.
pub const MAX_REPEAT: usize = 1_000_000;

/// Checks `--repeat`.
pub fn check_repeat(repeat: usize) -> Result<()> {
    if repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if repeat > MAX_REPEAT {
        bail!("--repeat {repeat} is more than the most, {MAX_REPEAT}");
    }
    Ok(())
}

/// Checks `--threads` against the pool's limit.
pub fn check_threads(threads: Option<usize>) -> Result<()> {
    match threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(t) if t > sparsile_runtime::jit::MAX_THREADS => bail!(
            "--threads {t} is more than the most, {}",
            sparsile_runtime::jit::MAX_THREADS
        ),
        _ => Ok(()),
    }
}

/// A dense tensor the command will create: name, shape and value type.
pub struct DenseTensor<'a> {
    pub name: &'a str,
    pub shape: &'a [usize],
    pub dtype: DType,
}

/// Checks that every tensor of `tensors` fits, all together, in the memory available
/// (each element counted as an f64, which random inputs are generated in, plus its
/// stored type).
pub fn check_dense_memory(tensors: &[DenseTensor<'_>]) -> Result<()> {
    let mut elements: u128 = 0;
    let mut names = Vec::new();
    for t in tensors {
        let n = t
            .shape
            .iter()
            .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
            .unwrap_or(u128::MAX);
        let weight = (8 + t.dtype.size_bytes()) as u128;
        elements = elements.saturating_add(n.saturating_mul(weight));
        names.push(format!("{} ({})", t.name, shape_text(t.shape)));
    }
    let what = format!("making the dense tensors {}", names.join(", "));
    sparsile_formats::memory::check_fits(&what, elements, 1)?;
    Ok(())
}

fn shape_text(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ")
}
