//! The automatic choice: every candidate of the SpMM, SDDMM and SpMV spaces (other
//! formats allowed) compiled and compared with the reference interpreter on small
//! seeded inputs — random rows with empty ones, an empty matrix, one long row, dense
//! blocks (so that the block formats are candidates) —, widths 1, 5 and 17; a
//! candidate may refuse the program (a design the compiler cannot express) with a
//! named error, never answer wrongly. `AutoKernel` runs its choice correctly, remembers
//! it per pattern, names it, and runs a named recipe when told. Without a C compiler the
//! compiled checks print that they skipped.

mod support;

use sparsile::auto::{AutoKernel, Source};
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::tune::features::Features;
use sparsile::tune::op::Operator;
use sparsile::tune::space::space;
use sparsile::{compile_recipe, RunOptions};
use support::{check_kernel, have_compiler, matrix, op_inputs, rng};

fn program(op: Operator, format: &str) -> String {
    match op {
        Operator::Spmm => format!("tensor A: f32[m, n] {format}\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"),
        Operator::Sddmm => format!("tensor A: f32[m, n] {format}\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor O: f32[m, n] {format}\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n"),
        _ => format!("tensor A: f32[m, n] {format}\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n"),
    }
}

/// An m x n matrix of full 4 x 4 blocks on the block diagonal (and a few loose entries).
fn blocks(m: usize, n: usize) -> CooTensor {
    let mut t = Vec::new();
    for b in 0..m.min(n) / 4 {
        for r in 0..4 {
            for c in 0..4 {
                t.push((b * 4 + r, b * 4 + c, (r * 4 + c) as f64 * 0.1 - 0.7));
            }
        }
    }
    t.push((m - 1, 0, 0.5));
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

fn features(a: &SparseTensor<'_>, op: Operator, k: usize) -> Features {
    let p = sparsile::auto::pattern::pattern(a).unwrap();
    Features::of(&p.csr(), op, k, 2, 4)
}

#[test]
fn every_candidate_matches_the_interpreter_or_refuses() {
    if !have_compiler() {
        return;
    }
    let mut g = rng(5);
    let mut coos: Vec<(String, CooTensor)> =
        [("random", 13, 11), ("empty", 7, 5), ("long_row", 9, 40)]
            .into_iter()
            .map(|(kind, m, n)| (format!("{kind} {m}x{n}"), matrix(kind, m, n, &mut g)))
            .collect();
    coos.push(("blocks 20x20".into(), blocks(20, 20)));
    let mut refused = 0;
    let mut checked = 0;
    for (label, coo) in &coos {
        let csr = SparseTensor::from_coo_with(coo, &Format::Csr, DType::F32).unwrap();
        for op in [Operator::Spmm, Operator::Sddmm, Operator::Spmv] {
            let widths: &[usize] = if op == Operator::Spmv {
                &[1]
            } else {
                &[1, 5, 17]
            };
            for &k in widths {
                let f = features(&csr, op, k);
                let cands = space(op, &f, "csr", true);
                if label.starts_with("blocks") && op != Operator::Sddmm {
                    assert!(
                        cands.iter().any(|c| c.format.starts_with("bsr:4x4")),
                        "{label} {op}: {cands:?}"
                    );
                }
                for c in cands {
                    let format: Format = c.format.parse().unwrap();
                    let a = SparseTensor::from_coo_with(coo, &format, DType::F32).unwrap();
                    let ins = op_inputs(op, &a, k, checked as u64);
                    let text = program(op, &c.format);
                    let what = format!("{label} {op} k={k} {c}");
                    match compile_recipe(&text, &ins, &c.recipe) {
                        Ok(kernel) => {
                            check_kernel(&kernel, &text, &ins, DType::F32, &what);
                            checked += 1;
                        }
                        Err(e) => {
                            let msg = e.to_string();
                            assert!(
                                msg.contains("does not apply") || msg.contains("not expressible"),
                                "{what}: {msg}"
                            );
                            refused += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 100, "{checked} checked");
    println!("{checked} candidates matched the interpreter, {refused} refused the program");
}

#[test]
fn auto_kernels_run_their_choice_and_remember_it() {
    if !have_compiler() {
        return;
    }
    let mut g = rng(9);
    let coo = matrix("random", 30, 20, &mut g);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    for op in [Operator::Spmm, Operator::Sddmm, Operator::Spmv] {
        let text = program(op, "csr");
        let k = AutoKernel::new(&text).unwrap();
        assert_eq!(k.op(), op);
        let ins = op_inputs(op, &a, 8, 1);
        let out = k.run(&ins, &RunOptions::default()).unwrap();
        support::matches_interpreter(&text, &ins, &out, &op.to_string());
        let s = k.last_selection().unwrap();
        assert!(
            matches!(s.source, Source::Rule | Source::Selector | Source::Database),
            "{s:?}"
        );
        assert_eq!(s.candidate.format, "csr", "the input's format is kept");
        // The same pattern: the remembered choice.
        let again = k.select(&ins, 2);
        assert_eq!(again.candidate, k.select(&ins, 2).candidate);
        // A named recipe runs as named.
        let named = AutoKernel::with_recipe(&text, "default").unwrap();
        named.run(&ins, &RunOptions::default()).unwrap();
        let s = named.last_selection().unwrap();
        assert_eq!(
            (s.source, s.candidate.recipe.as_str()),
            (Source::Explicit, "default")
        );
    }
}

#[test]
fn a_named_recipe_that_does_not_apply_is_an_error() {
    if !have_compiler() {
        return;
    }
    let text = program(Operator::Sddmm, "csr");
    let mut g = rng(3);
    let coo = matrix("random", 8, 8, &mut g);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    let ins = op_inputs(Operator::Sddmm, &a, 4, 2);
    // daspmm is an SpMM design: named for SDDMM it is an error.
    let named = AutoKernel::with_recipe(&text, "daspmm").unwrap();
    assert!(named.run(&ins, &RunOptions::default()).is_err());
    assert!(AutoKernel::with_recipe(&text, "rowwise:k").is_err());
}
