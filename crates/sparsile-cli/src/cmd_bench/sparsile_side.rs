//! Sparsile's side of a case: the index-notation program (K fixed as a constant, so the
//! kernel is specialised to it), compilation with the case's format and recipe
//! (`sparsile::compile_recipe`: `default`, or any recipe `sparsile recipes` lists), warm-up
//! and timed runs, and the result in the layout the peers write. Timed runs reuse the
//! outputs of the warm-up (`Kernel::run_into`: zeroed and overwritten in place, nothing
//! allocated), as a training loop does; the GraphBLAS peer's zero outputs are likewise
//! made outside its timing.
//!
//! ```text
//! tensor A: f32[m, n] csr
//! tensor X: f32[n, 32]
//! tensor Y: f32[m, 32]
//! Y[i,k] = A[i,j] * X[j,k]
//! ```

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, Result};
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::RunOptions;

use crate::cmd_bench::cases::{Case, Op};
use crate::cmd_bench::operands::{Csr, Dense};

/// The program of `op` with A stored in `format` and dense width `k`.
pub fn program_text(op: Op, format: &str, k: usize) -> String {
    match op {
        Op::Spmm => format!(
            "tensor A: f32[m, n] {format}\ntensor X: f32[n, {k}]\ntensor Y: f32[m, {k}]\n\
             Y[i,c] = A[i,j] * X[j,c]\n"
        ),
        Op::Sddmm => format!(
            "tensor A: f32[m, n] {format}\ntensor X: f32[m, {k}]\ntensor Y: f32[n, {k}]\n\
             tensor O: f32[m, n] {format}\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n"
        ),
        Op::Spmv => format!(
            "tensor A: f32[m, n] {format}\ntensor x: f32[n]\ntensor y: f32[m]\n\
             y[i] = A[i,j] * x[j]\n"
        ),
    }
}

/// The name of the output tensor of `op`'s program.
fn output_name(op: Op) -> &'static str {
    match op {
        Op::Spmm => "Y",
        Op::Sddmm => "O",
        Op::Spmv => "y",
    }
}

/// Sparsile's measurement of one case.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The format and recipe that ran (the automatic choice's, for `auto`).
    pub format: String,
    pub recipe: String,
    /// Where an automatic choice came from (`None` when the case named both).
    pub chosen_by: Option<String>,
    /// Timed runs, in seconds.
    pub times: Vec<f64>,
    /// The result, laid out as the peers write it (see [`crate::cmd_bench::reference`]).
    pub output: Vec<f32>,
    /// Seconds spent compiling (or finding the kernel in the cache).
    pub compile_seconds: f64,
    /// Something the report should say about the measurement.
    pub note: Option<String>,
}

fn dense(shape: &[usize], values: &[f32]) -> Result<SparseTensor<'static>> {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    Ok(SparseTensor::dense_from_f64(shape, &v, DType::F32)?)
}

/// Runs `case` with Sparsile: `warmup` untimed runs, then `repeat` timed ones.
pub fn measure(
    case: &Case,
    coo: &CooTensor,
    csr: &Csr,
    operands: &Dense,
    threads: usize,
    warmup: usize,
    repeat: usize,
) -> Result<Measured> {
    let k = case.k.unwrap_or(1);
    // `auto` resolves against A stored as CSR (or the case's format): the choice may name
    // another format when the case left the format to it.
    let first = if case.format == "auto" {
        "csr"
    } else {
        case.format.as_str()
    };
    let (format, recipe, chosen_by) = if case.recipe == "auto" {
        let inputs = operand_tensors(case, coo, csr, operands, first, k)?;
        let text = program_text(case.op, first, k);
        let s = sparsile::auto::choose(&text, &inputs, threads, case.format == "auto")
            .with_context(|| format!("cannot choose for {}", case.label()))?;
        let by = s.source.name().to_string();
        match settle(case, coo, csr, operands, threads, &s.trial) {
            Some((c, n)) => (c.format, c.recipe, Some(format!("{by}, timed against {n}"))),
            None => (s.candidate.format, s.candidate.recipe, Some(by)),
        }
    } else {
        (first.to_string(), case.recipe.clone(), None)
    };
    let inputs = operand_tensors(case, coo, csr, operands, &format, k)?;
    let text = program_text(case.op, &format, k);
    let t0 = Instant::now();
    let kernel = sparsile::compile_recipe(&text, &inputs, &recipe).with_context(|| {
        format!(
            "cannot compile {} ({format}, recipe {recipe})",
            case.label()
        )
    })?;
    let compile_seconds = t0.elapsed().as_secs_f64();
    // The parts of a decomposed operand are computed once, as a conversion is, before
    // the timed runs (a run would compute their values again).
    let mut inputs = inputs;
    inputs.extend(kernel.derive_parts(&inputs)?);
    let options = RunOptions {
        threads: Some(threads),
        ..RunOptions::default()
    };
    // The first run allocates the outputs; every later one overwrites them in place
    // (`run_into`), as a training loop calling the kernel each step does.
    let mut outputs = kernel.run(&inputs, &options)?;
    for _ in 1..warmup {
        kernel.run_into(&inputs, &mut outputs, &options)?;
    }
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let t = Instant::now();
        kernel.run_into(&inputs, &mut outputs, &options)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let output = result_values(case.op, csr, &outputs)?;
    Ok(Measured {
        format,
        recipe,
        chosen_by,
        times,
        output,
        compile_seconds,
        note: None,
    })
}

/// The automatic choice's trial of `list` (the selector's short list, its pick first:
/// [`sparsile::tune::trial`]), run before the case's warm-up as a first call runs it:
/// the winner and how many others it was timed against. `None` without a trial.
fn settle(
    case: &Case,
    coo: &CooTensor,
    csr: &Csr,
    operands: &Dense,
    threads: usize,
    list: &[sparsile::tune::space::Candidate],
) -> Option<(sparsile::tune::space::Candidate, usize)> {
    let k = case.k.unwrap_or(1);
    let options = RunOptions {
        threads: Some(threads),
        ..RunOptions::default()
    };
    let built = |c: &sparsile::tune::space::Candidate| {
        let inputs = operand_tensors(case, coo, csr, operands, &c.format, k).ok()?;
        Some((program_text(case.op, &c.format, k), inputs))
    };
    sparsile::auto::trial_run::settle_list(list, built, &options).map(|s| (s.candidate, s.others))
}

/// The result of `op` among a kernel's `outputs`, laid out as the peers write it.
pub fn result_values(op: Op, csr: &Csr, outputs: &sparsile::runtime::Outputs) -> Result<Vec<f32>> {
    let out = outputs
        .get(output_name(op))
        .context("the kernel returned no output")?;
    Ok(match op {
        Op::Sddmm => on_pattern(csr, &out.to_coo()?),
        Op::Spmm | Op::Spmv => out.to_dense_f64().iter().map(|&v| v as f32).collect(),
    })
}

/// A in `format` and the dense operands of `case`, by tensor name.
pub fn operand_tensors(
    case: &Case,
    coo: &CooTensor,
    csr: &Csr,
    operands: &Dense,
    format: &str,
    k: usize,
) -> Result<HashMap<String, SparseTensor<'static>>> {
    let parsed: Format = format
        .parse()
        .map_err(|e| anyhow::anyhow!("format `{format}`: {e}"))?;
    let a = SparseTensor::from_coo_with(coo, &parsed, DType::F32)
        .with_context(|| format!("cannot store {} as {format}", case.matrix))?;
    let mut inputs = HashMap::from([("A".to_string(), a)]);
    match case.op {
        Op::Spmm => {
            inputs.insert("X".into(), dense(&[csr.n, k], &operands.x)?);
        }
        Op::Sddmm => {
            let y = operands.y.as_deref().expect("SDDMM operands have Y");
            inputs.insert("X".into(), dense(&[csr.m, k], &operands.x)?);
            inputs.insert("Y".into(), dense(&[csr.n, k], y)?);
        }
        Op::Spmv => {
            inputs.insert("x".into(), dense(&[csr.n], &operands.x)?);
        }
    }
    Ok(inputs)
}

/// The values of `coo` at the stored positions of `pattern`, in CSR order (0 where
/// `coo` has no entry).
pub fn on_pattern(pattern: &Csr, coo: &CooTensor) -> Vec<f32> {
    let mut entries: Vec<(usize, usize, f64)> = (0..coo.nnz())
        .map(|e| (coo.coord(e)[0], coo.coord(e)[1], coo.values[e]))
        .collect();
    if !entries
        .windows(2)
        .all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1))
    {
        entries.sort_by_key(|a| (a.0, a.1));
    }
    let mut out = vec![0.0f32; pattern.nnz()];
    let mut e = 0;
    for i in 0..pattern.m {
        let (start, end) = (pattern.indptr[i] as usize, pattern.indptr[i + 1] as usize);
        for (slot, &j) in out[start..end].iter_mut().zip(&pattern.indices[start..end]) {
            let j = j as usize;
            while e < entries.len() && (entries[e].0, entries[e].1) < (i, j) {
                e += 1;
            }
            if e < entries.len() && (entries[e].0, entries[e].1) == (i, j) {
                *slot = entries[e].2 as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd_bench::reference::{compare, reference};

    fn random_coo(m: usize, n: usize, seed: u64) -> CooTensor {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut triplets = Vec::new();
        for i in 0..m {
            for j in 0..n {
                if rng.random_bool(0.2) {
                    triplets.push((i, j, rng.random_range(-2.0..2.0)));
                }
            }
        }
        CooTensor::from_triplets(vec![m, n], &triplets).unwrap()
    }

    #[test]
    fn programs_parse() {
        for op in [Op::Spmm, Op::Sddmm, Op::Spmv] {
            let text = program_text(op, "csr", 8);
            sparsile::compile_notation(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn on_pattern_fills_missing_entries_with_zero() {
        let pattern = Csr {
            m: 2,
            n: 3,
            indptr: vec![0, 2, 3],
            indices: vec![0, 2, 1],
            values: vec![1.0; 3],
        };
        let coo = CooTensor::from_triplets(vec![2, 3], &[(0, 2, 4.0), (1, 1, 5.0)]).unwrap();
        assert_eq!(on_pattern(&pattern, &coo), vec![0.0, 4.0, 5.0]);
    }

    /// Needs a C compiler: the kernels are compiled natively.
    #[test]
    fn every_op_matches_the_reference() {
        if sparsile_runtime::jit::Cache::new(&sparsile_ir::settings::Settings::from_env()).is_err()
        {
            eprintln!("skipped: no C compiler");
            return;
        }
        let coo = random_coo(13, 9, 3);
        let csr = Csr::from_coo(&coo).unwrap();
        for (op, k) in [(Op::Spmm, Some(4)), (Op::Sddmm, Some(3)), (Op::Spmv, None)] {
            let case = Case {
                path: "r.mtx".into(),
                matrix: "r".into(),
                op,
                k,
                format: "csr".into(),
                recipe: "default".into(),
            };
            let d = Dense::random(op, csr.m, csr.n, k.unwrap_or(1), 5);
            let got = measure(&case, &coo, &csr, &d, 2, 1, 2).unwrap();
            assert_eq!(got.times.len(), 2);
            let check = compare(&got.output, &reference(op, &csr, &d, k.unwrap_or(1)));
            assert!(check.correct, "{op:?}: {check:?}");
        }
    }

    #[test]
    fn unknown_recipes_are_errors() {
        let coo = random_coo(4, 4, 1);
        let csr = Csr::from_coo(&coo).unwrap();
        let case = Case {
            path: "r.mtx".into(),
            matrix: "r".into(),
            op: Op::Spmv,
            k: None,
            format: "csr".into(),
            recipe: "nonsense".into(),
        };
        let d = Dense::random(Op::Spmv, 4, 4, 1, 0);
        let err = measure(&case, &coo, &csr, &d, 1, 1, 1).unwrap_err();
        assert!(format!("{err:#}").contains("nonsense"), "{err:#}");
    }
}
