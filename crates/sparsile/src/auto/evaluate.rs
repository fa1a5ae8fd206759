//! Measuring candidates of SpMM, SDDMM and SpMV on one sparse matrix: the
//! [`Evaluator`] the tuner's searches run on.
//!
//! The matrix (any format) and seeded random dense operands are fixed once; preparing a
//! candidate converts the matrix to the candidate's format (timed apart), compiles the
//! candidate's recipe for the canonical program of the operator (compile time apart),
//! runs it once and compares the result with an f64 reference computed from the matrix
//! by plain loops: `max|got - ref| <= 1e-3 · (max|ref| + 1)` in f32 (`1e-9` in f64). A
//! wrong answer is a failure, like a recipe that does not apply. Timing runs reuse the
//! outputs (`run_into`), after warm-up runs, as a training loop does: the asked number,
//! and more until [`WARMUP_TIME`] has passed (none when none is asked for).
//!
//! ```text
//! spmm:  Y[i,c] = A[i,j] * X[j,c]          X: n × K
//! sddmm: O[i,j] = A[i,j] * X[i,c] * Y[j,c] X: m × K, Y: n × K
//! spmv:  y[i] = A[i,j] * x[j]
//! ```

use std::collections::HashMap;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, SparseTensor, Values};
use sparsile_ir::DType;
use sparsile_runtime::jit::{pool_stats, PoolStats};
use sparsile_runtime::Outputs;
use sparsile_tune::op::Operator;
use sparsile_tune::search::{Evaluator, Prepared};
use sparsile_tune::space::Candidate;

use crate::compile::{Kernel, RunOptions};
use crate::recipe::recipe_trace;

/// The least time a candidate's warm-up runs take (unless [`MAX_WARMUP_RUNS`] come
/// first). After the pause a search makes between candidates (checks, other candidates'
/// conversions), calls of tens of microseconds run slow for the first few hundred
/// microseconds on this project's host, both threads working (pubmed SpMV, 2 threads,
/// call by call: 136, 86, 60, 50, 44, 48, 41, 35 µs); with a fixed two warm-up runs a
/// five-run measurement fell on that ramp, and how far depended on the kernel's phases,
/// which reordered candidates a longer measurement ranks the other way.
pub const WARMUP_TIME: std::time::Duration = std::time::Duration::from_millis(1);

/// The most warm-up runs [`WARMUP_TIME`] adds.
pub const MAX_WARMUP_RUNS: usize = 200;

/// Whether a warm-up that has made `runs` runs in `elapsed` goes on, `warmup` runs asked:
/// until those are made and [`WARMUP_TIME`] has passed (at most [`MAX_WARMUP_RUNS`]);
/// none when none is asked for.
fn keep_warming(runs: usize, warmup: usize, elapsed: std::time::Duration) -> bool {
    runs < warmup || (warmup > 0 && runs < MAX_WARMUP_RUNS && elapsed < WARMUP_TIME)
}

/// The canonical program of `op` with the sparse operand in `format`.
pub fn program_text(op: Operator, format: &str, dtype: DType) -> Option<String> {
    let d = dtype;
    Some(match op {
        Operator::Spmm => format!(
            "tensor A: {d}[m, n] {format}\ntensor X: {d}[n, k]\ntensor Y: {d}[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"
        ),
        Operator::Sddmm => format!(
            "tensor A: {d}[m, n] {format}\ntensor X: {d}[m, k]\ntensor Y: {d}[n, k]\ntensor O: {d}[m, n] {format}\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n"
        ),
        Operator::Spmv => format!(
            "tensor A: {d}[m, n] {format}\ntensor x: {d}[n]\ntensor y: {d}[m]\ny[i] = A[i,j] * x[j]\n"
        ),
        _ => return None,
    })
}

fn output_name(op: Operator) -> &'static str {
    match op {
        Operator::Spmm => "Y",
        Operator::Sddmm => "O",
        _ => "y",
    }
}

/// A prepared candidate: its kernel, its inputs and the outputs it reuses.
struct Ready {
    kernel: Kernel,
    /// The matrix in the candidate's format; the dense operands are the evaluator's,
    /// shared by every candidate (a copy each would hold gigabytes for a wide matrix).
    a: SparseTensor<'static>,
    /// The parts of `a` that a decomposing schedule runs on, computed once with the
    /// conversion (a run would compute their values again).
    parts: HashMap<String, SparseTensor<'static>>,
    outputs: Outputs,
    /// What the worker pool gave this candidate's timed runs so far.
    pool: PoolStats,
}

/// `dense` and `a` as a kernel's inputs, borrowed.
fn inputs_of<'t>(
    dense: &'t HashMap<String, SparseTensor<'static>>,
    a: &'t SparseTensor<'static>,
) -> HashMap<String, SparseTensor<'t>> {
    let mut inputs: HashMap<String, SparseTensor<'t>> =
        dense.iter().map(|(k, t)| (k.clone(), t.view())).collect();
    inputs.insert("A".to_string(), a.view());
    inputs
}

/// Candidates of one operator on one matrix (see the module docs).
pub struct OpEvaluator {
    op: Operator,
    coo: CooTensor,
    dtype: DType,
    dense: HashMap<String, SparseTensor<'static>>,
    /// The f64 reference: SpMM/SpMV dense values; SDDMM `(row, col, value)` entries.
    reference: Vec<f64>,
    entries: Vec<(usize, usize)>,
    threads: usize,
    ready: HashMap<Candidate, Ready>,
}

/// Why an evaluator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error("the tuner measures spmm, sddmm and spmv; {0} has no canonical program")]
    Operator(Operator),
    #[error("the sparse operand must be a matrix (order 2), got order {0}")]
    Order(usize),
    #[error("{0}")]
    Format(#[from] sparsile_formats::FormatError),
    /// A calibration kernel of the STile strategy could not run.
    #[error("calibrating the tile costs: `{recipe}`: {reason}")]
    Calibration { recipe: String, reason: String },
}

impl OpEvaluator {
    /// What the worker pool gave the timed runs of `c` so far (jobs that no worker
    /// joined ran on the calling thread alone), `None` when `c` was not prepared. Other
    /// threads' calls in the same time count too.
    pub fn pool_stats_of(&self, c: &Candidate) -> Option<PoolStats> {
        self.ready.get(c).map(|r| r.pool)
    }

    /// An evaluator of `op` on `a` with dense width `width` and `threads` threads; the
    /// dense operands are seeded random values.
    pub fn new(
        op: Operator,
        a: &SparseTensor<'_>,
        width: usize,
        threads: usize,
        seed: u64,
    ) -> Result<OpEvaluator, EvaluateError> {
        if program_text(op, "csr", DType::F32).is_none() {
            return Err(EvaluateError::Operator(op));
        }
        let coo = a.to_coo()?;
        if coo.shape.len() != 2 {
            return Err(EvaluateError::Order(coo.shape.len()));
        }
        let dtype = a.dtype();
        let (m, n, k) = (coo.shape[0], coo.shape[1], width.max(1));
        // The random draws (f64), the operands stored in `dtype` and the reference (f64),
        // at once: refused with a named error before anything is drawn.
        let dense_elements = match op {
            Operator::Spmm => (n as u128 + m as u128) * k as u128,
            Operator::Sddmm => (n as u128 + m as u128) * k as u128 + coo.nnz() as u128,
            _ => n as u128 + m as u128,
        };
        sparsile_formats::memory::check_fits(
            "the dense operands and reference of the search",
            dense_elements,
            16 + dtype.size_bytes(),
        )?;
        let mut g = ChaCha8Rng::seed_from_u64(seed);
        let mut rand =
            |len: usize| -> Vec<f64> { (0..len).map(|_| g.random_range(-1.0..1.0)).collect() };
        let mut dense = HashMap::new();
        let mut add = |name: &str, shape: &[usize], v: &[f64]| -> Result<(), EvaluateError> {
            dense.insert(
                name.to_string(),
                SparseTensor::dense_from_f64(shape, v, dtype)?,
            );
            Ok(())
        };
        // Values rounded to the operand type, so that the reference sees what the
        // kernels see.
        let round = |v: Vec<f64>| -> Vec<f64> {
            match dtype {
                DType::F32 => v.into_iter().map(|x| x as f32 as f64).collect(),
                DType::F16 | DType::BF16 => Values::from_f64(&v, dtype).to_f64_vec(),
                _ => v,
            }
        };
        let a_vals = round(coo.values.clone());
        let mut entries = Vec::new();
        let reference = match op {
            Operator::Spmm => {
                let x = round(rand(n * k));
                add("X", &[n, k], &x)?;
                let mut y = vec![0.0; m * k];
                for (e, v) in a_vals.iter().enumerate() {
                    let (i, j) = (coo.coord(e)[0], coo.coord(e)[1]);
                    for c in 0..k {
                        y[i * k + c] += v * x[j * k + c];
                    }
                }
                y
            }
            Operator::Sddmm => {
                let x = round(rand(m * k));
                let y = round(rand(n * k));
                add("X", &[m, k], &x)?;
                add("Y", &[n, k], &y)?;
                (0..coo.nnz())
                    .map(|e| {
                        let (i, j) = (coo.coord(e)[0], coo.coord(e)[1]);
                        entries.push((i, j));
                        let dot: f64 = (0..k).map(|c| x[i * k + c] * y[j * k + c]).sum();
                        a_vals[e] * dot
                    })
                    .collect()
            }
            _ => {
                let x = round(rand(n));
                add("x", &[n], &x)?;
                let mut y = vec![0.0; m];
                for (e, v) in a_vals.iter().enumerate() {
                    y[coo.coord(e)[0]] += v * x[coo.coord(e)[1]];
                }
                y
            }
        };
        Ok(OpEvaluator {
            op,
            coo,
            dtype,
            dense,
            reference,
            entries,
            threads,
            ready: HashMap::new(),
        })
    }

    /// Whether `out` matches the reference (see the module docs).
    fn check(&self, out: &SparseTensor<'_>) -> Result<(), String> {
        let got: Vec<f64> = match self.op {
            Operator::Sddmm => {
                let coo = out.to_coo().map_err(|e| e.to_string())?;
                let mut at: HashMap<(usize, usize), f64> = HashMap::with_capacity(coo.nnz());
                for e in 0..coo.nnz() {
                    at.insert((coo.coord(e)[0], coo.coord(e)[1]), coo.values[e]);
                }
                self.entries
                    .iter()
                    .map(|ij| at.get(ij).copied().unwrap_or(0.0))
                    .collect()
            }
            _ => out.to_dense_f64(),
        };
        if got.len() != self.reference.len() {
            return Err(format!(
                "wrong answer: {} values, expected {}",
                got.len(),
                self.reference.len()
            ));
        }
        // Relative to the largest result: the rounding of results (and of f32 sums).
        let tol = match self.dtype {
            DType::F64 => 1e-9,
            DType::BF16 => 1e-2,
            _ => 1e-3,
        };
        let scale = self.reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(&self.reference)
            .map(|(g, r)| (g - r).abs())
            .fold(0.0f64, |m, d| {
                if d.is_finite() {
                    m.max(d)
                } else {
                    f64::INFINITY
                }
            });
        if err <= tol * (scale + 1.0) {
            Ok(())
        } else {
            Err(format!(
                "wrong answer: max |error| {err:.3e} (scale {scale:.3e})"
            ))
        }
    }

    fn options(&self) -> RunOptions {
        RunOptions {
            threads: Some(self.threads),
            ..RunOptions::default()
        }
    }
}

impl Evaluator for OpEvaluator {
    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, String> {
        let format: Format = c
            .format
            .parse()
            .map_err(|e| format!("format `{}`: {e}", c.format))?;
        let t0 = Instant::now();
        let a = SparseTensor::from_coo_with(&self.coo, &format, self.dtype)
            .map_err(|e| format!("cannot store the matrix as {}: {e}", c.format))?;
        let convert_ms = t0.elapsed().as_secs_f64() * 1e3;
        let inputs = inputs_of(&self.dense, &a);
        let text = program_text(self.op, &c.format, self.dtype).expect("checked in new");
        let t1 = Instant::now();
        let (ast, stage1, trace) =
            recipe_trace(&text, &inputs, &c.recipe).map_err(|e| e.to_string())?;
        let kernel = crate::compile::compile_program_with(stage1, &trace)
            .map_err(|e| e.to_string())?
            .with_ast(ast);
        let compile_ms = t1.elapsed().as_secs_f64() * 1e3;
        let t2 = Instant::now();
        let parts = kernel.derive_parts(&inputs).map_err(|e| e.to_string())?;
        let convert_ms = convert_ms + t2.elapsed().as_secs_f64() * 1e3;
        // The check runs on the parts the timed runs take.
        let mut checked = inputs.clone();
        checked.extend(parts.iter().map(|(k, t)| (k.clone(), t.view())));
        let outputs = kernel
            .run(&checked, &self.options())
            .map_err(|e| e.to_string())?;
        let out = outputs
            .get(output_name(self.op))
            .ok_or_else(|| "the kernel returned no output".to_string())?;
        self.check(out)?;
        drop(checked);
        drop(inputs);
        let trace = serde_json::to_value(&trace).ok();
        self.ready.insert(
            c.clone(),
            Ready {
                kernel,
                a,
                parts,
                outputs,
                pool: PoolStats::default(),
            },
        );
        Ok(Prepared {
            compile_ms,
            convert_ms,
            trace,
        })
    }

    fn time(&mut self, c: &Candidate, warmup: usize, repeat: usize) -> Result<Vec<f64>, String> {
        let options = self.options();
        let r = self
            .ready
            .get_mut(c)
            .ok_or_else(|| format!("{c} was not prepared"))?;
        let mut inputs = inputs_of(&self.dense, &r.a);
        inputs.extend(r.parts.iter().map(|(k, t)| (k.clone(), t.view())));
        // `warmup` runs, and more until WARMUP_TIME has passed (see there); none when
        // none is asked for.
        let start = Instant::now();
        let mut runs = 0;
        while keep_warming(runs, warmup, start.elapsed()) {
            r.kernel
                .run_into(&inputs, &mut r.outputs, &options)
                .map_err(|e| e.to_string())?;
            runs += 1;
        }
        let mut times = Vec::with_capacity(repeat);
        let before = pool_stats();
        for _ in 0..repeat {
            let t = Instant::now();
            r.kernel
                .run_into(&inputs, &mut r.outputs, &options)
                .map_err(|e| e.to_string())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        r.pool = r.pool.plus(&pool_stats().since(&before));
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_warm_up_lasts_its_runs_and_its_time_unless_none_is_asked() {
        let short = Duration::from_micros(10);
        // The asked runs first, however long they take.
        assert!(keep_warming(1, 2, WARMUP_TIME * 2));
        // Then more runs until the time has passed, at most MAX_WARMUP_RUNS.
        assert!(keep_warming(2, 2, short));
        assert!(!keep_warming(2, 2, WARMUP_TIME));
        assert!(!keep_warming(MAX_WARMUP_RUNS, 2, short));
        // `--warmup 0` means none.
        assert!(!keep_warming(0, 0, Duration::ZERO));
    }
}
