//! Compiled kernels with decomposed operands: SpMM with `A` (CSR) decomposed by hyb(c, k)
//! (parts horizontally fused into one loop), by its dense tiles and the rest (`blocks`,
//! also through the `blocks` recipe, SpMM and SpMV), by nested tiles chosen by cost
//! (`tiles`, also through the `tiles` recipe), converted to DBSR and to SR-BCRS, and RGMS
//! with a 3-D hyb, run through `Kernel::run` (which derives the parts from `A`, caching
//! the plan per pattern) against the reference interpreter on the original program, f32
//! and f64. Without a C compiler the test prints that it skipped.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::formats::decompose::{DecomposeRule, TileLevel};
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::transform::schedule::Schedule;
use sparsile::{compile_notation, compile_program_with, evaluate, RunOptions};

fn have_compiler() -> bool {
    match sparsile::runtime::jit::Compiler::detect(&Settings::from_env()) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipping compiled kernels: {e}");
            false
        }
    }
}

fn matrix(m: usize, n: usize, long_row: bool, rng: &mut ChaCha8Rng) -> CooTensor {
    let mut t = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let keep = (long_row && i == m / 2) || (i % 4 != 3 && rng.random::<f64>() < 0.25);
            if keep {
                t.push((i, j, rng.random_range(-1.0..1.0)));
            }
        }
    }
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

fn dense(shape: &[usize], dtype: DType, rng: &mut ChaCha8Rng) -> SparseTensor<'static> {
    let len: usize = shape.iter().product();
    let v: Vec<f64> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
    SparseTensor::dense_from_f64(shape, &v, dtype).unwrap()
}

fn is_part_block(name: &str) -> bool {
    name.rsplit_once("_p")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Schedules `text` with `A` (or `buffer`) decomposed by `rule`, parts fused, compiles it
/// and compares two runs (the second reusing the cached plan) with the interpreter.
fn check(
    text: &str,
    buffer: &str,
    rule: DecomposeRule,
    inputs: &HashMap<String, SparseTensor<'static>>,
    dtype: DType,
    what: &str,
) {
    let expected = evaluate(text, inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let program = compile_notation(text).unwrap();
    let mut sch = Schedule::new(&program);
    sch.decompose_format(buffer, rule).unwrap();
    sch.func_or_lower().unwrap();
    let parts: Vec<String> = sch
        .func()
        .unwrap()
        .body
        .iter()
        .filter_map(|s| match s {
            sparsile::ir::loops::Stmt::Block { name, .. } if is_part_block(name) => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    if parts.len() > 1 {
        sch.horizontal_fuse(&parts).unwrap();
    }
    let kernel = compile_program_with(program, sch.trace())
        .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
    assert!(kernel.ir(sparsile::Stage::Stage1).contains("derived "));
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
    for threads in [1, 2, 1] {
        let options = RunOptions {
            threads: Some(threads),
            parallelism: sparsile::Parallelism::Always,
            ..RunOptions::default()
        };
        let got = kernel
            .run(inputs, &options)
            .unwrap_or_else(|e| panic!("{what}: run: {e}"));
        for (name, t) in &expected {
            let (g, w) = (got[name].to_dense_f64(), t.to_dense_f64());
            assert_eq!(g.len(), w.len());
            for (k, (x, y)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "{what} ({threads} threads): {name}[{k}]: compiled {x}, interpreted {y}"
                );
            }
        }
    }
}

#[test]
fn spmm_with_decomposed_operands() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(40);
    let rules = [
        DecomposeRule::Hyb { c: 1, k: 2 },
        DecomposeRule::Hyb { c: 3, k: 1 },
        DecomposeRule::Convert {
            format: "dbsr:2x2".into(),
        },
        DecomposeRule::Convert {
            format: "srbcrs:4x2".into(),
        },
        DecomposeRule::Blocks {
            r: 2,
            c: 2,
            fill: 50,
        },
        DecomposeRule::Blocks {
            r: 3,
            c: 4,
            fill: 25,
        },
        DecomposeRule::Blocks {
            r: 4,
            c: 4,
            fill: 100,
        },
        DecomposeRule::Tiles {
            levels: vec![
                TileLevel {
                    r: 4,
                    c: 4,
                    cost: 6,
                },
                TileLevel {
                    r: 2,
                    c: 2,
                    cost: 2,
                },
            ],
        },
        DecomposeRule::Tiles {
            levels: vec![
                TileLevel {
                    r: 6,
                    c: 4,
                    cost: 5,
                },
                TileLevel {
                    r: 3,
                    c: 2,
                    cost: 1,
                },
                TileLevel {
                    r: 1,
                    c: 1,
                    cost: 1,
                },
            ],
        },
    ];
    for dtype in [DType::F32, DType::F64] {
        let text = format!(
            "tensor A: {dtype}[m, n] csr\ntensor B: {dtype}[n, k]\ntensor C: {dtype}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
        );
        for (m, n, long_row) in [(13, 11, false), (9, 40, true), (6, 5, false)] {
            let a =
                SparseTensor::from_coo_with(&matrix(m, n, long_row, &mut rng), &Format::Csr, dtype)
                    .unwrap();
            let inputs = HashMap::from([
                ("A".to_string(), a),
                ("B".to_string(), dense(&[n, 6], dtype, &mut rng)),
            ]);
            for rule in &rules {
                check(
                    &text,
                    "A",
                    rule.clone(),
                    &inputs,
                    dtype,
                    &format!("{rule} {m}x{n} {dtype}"),
                );
            }
        }
    }
}

#[test]
fn rgms_with_a_3d_hyb() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (rels, outs, ins) = (3, 12, 10);
    let mut coo = CooTensor::empty(vec![rels, outs, ins]);
    for r in 0..rels {
        for o in 0..outs {
            for i in 0..ins {
                if (r == 2 && o == 5) || (o % 4 != 0 && rng.random::<f64>() < 0.3) {
                    coo.coords.extend([r, o, i]);
                    coo.values.push(rng.random_range(-1.0..1.0));
                }
            }
        }
    }
    let m = SparseTensor::from_coo(&coo, &Format::Csf).unwrap();
    let inputs = HashMap::from([
        ("M".to_string(), m),
        ("X".to_string(), dense(&[ins, 2], DType::F64, &mut rng)),
        ("W".to_string(), dense(&[rels, 2, 3], DType::F64, &mut rng)),
    ]);
    let text = "tensor M: f64[kk, outs, ins] csf\ntensor X: f64[ins, ci]\ntensor W: f64[kk, ci, co]\ntensor Y: f64[outs, co]\nY[o,c] = M[r,o,i] * X[i,d] * W[r,d,c]\n";
    check(
        text,
        "M",
        DecomposeRule::Hyb { c: 1, k: 2 },
        &inputs,
        DType::F64,
        "rgms hyb(1, 2)",
    );
}

#[test]
fn hyb_and_rgms_hyb_recipes() {
    use sparsile::recipe::{self, RecipeContext, RecipeError};
    let spmm = "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let rgms = "tensor M: f64[kk, outs, ins] csf\ntensor X: f64[ins, ci]\ntensor W: f64[kk, ci, co]\ntensor Y: f64[outs, co]\nY[o,c] = M[r,o,i] * X[i,d] * W[r,d,c]\n";
    let ctx = RecipeContext::default();
    let steps = |program: &str, spec: &str| {
        let stage1 = compile_notation(program).unwrap();
        let trace = recipe::trace(spec, &stage1, &ctx).unwrap();
        trace
            .steps
            .iter()
            .map(|s| s.primitive())
            .collect::<Vec<_>>()
    };
    let hyb = steps(spmm, "hyb:c=2,k=2");
    assert_eq!(hyb.first(), Some(&"decompose_format"));
    // The parts run as one fused loop, in parallel with atomic adds.
    assert!(hyb.contains(&"horizontal_fuse"), "{hyb:?}");
    assert_eq!(hyb.last(), Some(&"parallel_reduce"));
    let r = steps(rgms, "rgms_hyb:k=2");
    assert_eq!(r.first(), Some(&"decompose_format"));
    // rgms_hyb needs an order-3 sparse input.
    let stage1 = compile_notation(spmm).unwrap();
    assert!(matches!(
        recipe::trace("rgms_hyb", &stage1, &ctx),
        Err(RecipeError::NotApplicable { .. })
    ));
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let a = SparseTensor::from_coo(&matrix(10, 21, true, &mut rng), &Format::Csr).unwrap();
    let inputs = HashMap::from([
        ("A".to_string(), a),
        ("B".to_string(), dense(&[21, 4], DType::F64, &mut rng)),
    ]);
    let kernel = sparsile::compile_recipe(spmm, &inputs, "hyb:c=2,k=2").unwrap();
    let want = evaluate(spmm, &inputs).unwrap()["C"].to_dense_f64();
    let got = kernel.run(&inputs, &RunOptions::default()).unwrap()["C"].to_dense_f64();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-10 * (1.0 + w.abs()), "{g} vs {w}");
    }
}

/// Dense `b × b` blocks along the diagonal (every other one 3/4 full), entries scattered
/// elsewhere, one long row and one empty row; sizes that no tile side divides.
fn tiles_and_scatter(m: usize, n: usize, b: usize, rng: &mut ChaCha8Rng) -> CooTensor {
    let mut t = Vec::new();
    for i in 0..m {
        for j in 0..n {
            let (bi, bj) = (i / b, j / b);
            let in_tile = bi == bj && (bi % 2 == 0 || (i + j) % 4 != 0);
            let keep = i != 1 && (in_tile || i == m / 2 || rng.random::<f64>() < 0.06);
            if keep {
                t.push((i, j, rng.random_range(-1.0..1.0)));
            }
        }
    }
    CooTensor::from_triplets(vec![m, n], &t).unwrap()
}

/// SpMM (`C = A·B`, `B` of width `k`) and SpMV (`y = A·x`) with a CSR `A` of `dtype`.
fn spmm_and_spmv(dtype: DType) -> (String, String) {
    (
        format!(
            "tensor A: {dtype}[m, n] csr\ntensor B: {dtype}[n, k]\ntensor C: {dtype}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
        ),
        format!(
            "tensor A: {dtype}[m, n] csr\ntensor x: {dtype}[n]\ntensor y: {dtype}[m]\ny[i] = A[i,j] * x[j]\n"
        ),
    )
}

/// Compiles `program` with recipe `spec`, checks that it decomposes `A` into `parts`
/// parts, and compares its results on 1 and 2 threads, with the parts derived by the
/// kernel and passed along precomputed, against the interpreter.
fn compare_with_parts(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    spec: &str,
    parts: usize,
    dtype: DType,
) {
    let what = format!("{spec} {dtype}\n{program}");
    let kernel =
        sparsile::compile_recipe(program, inputs, spec).unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = evaluate(program, inputs).unwrap();
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
    // The parts computed once and passed along give the same result.
    let derived = kernel.derive_parts(inputs).unwrap();
    assert_eq!(derived.len(), parts, "{what}");
    let mut with_parts = inputs.clone();
    with_parts.extend(derived);
    for (threads, inputs) in [(1, inputs), (2, inputs), (2, &with_parts)] {
        let options = RunOptions {
            threads: Some(threads),
            parallelism: sparsile::Parallelism::Always,
            ..RunOptions::default()
        };
        let got = kernel.run(inputs, &options).unwrap();
        for (name, t) in &want {
            let (g, w) = (got[name].to_dense_f64(), t.to_dense_f64());
            for (x, y) in g.iter().zip(&w) {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "{what} ({threads} threads): {name}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn blocks_recipe_splits_dense_tiles_from_the_rest() {
    use sparsile::recipe::{self, RecipeContext};
    let ctx = RecipeContext::default();
    for dtype in [DType::F32, DType::F64] {
        let (spmm, spmv) = spmm_and_spmv(dtype);
        let stage1 = compile_notation(&spmm).unwrap();
        let trace = recipe::trace("blocks:r=4,c=4,fill=50,k=20", &stage1, &ctx).unwrap();
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.primitive()).collect();
        assert!(steps.contains(&"decompose_format"), "{steps:?}");
        // No part adds into another's rows concurrently: no atomics.
        assert!(!steps.contains(&"parallel_reduce"), "{steps:?}");
        // With the width fixed: the tiles in registers, the rest's rows in a local.
        assert!(steps.contains(&"register_tile"), "{steps:?}");
        assert!(steps.contains(&"cache_write"), "{steps:?}");
        if !have_compiler() {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(43);
        for (m, n) in [(37, 45), (8, 8), (3, 70)] {
            let coo = tiles_and_scatter(m, n, 4, &mut rng);
            let a = SparseTensor::from_coo_with(&coo, &Format::Csr, dtype).unwrap();
            for spec in [
                "blocks:r=4,c=4,fill=50",
                "blocks:r=8,c=8,fill=25",
                "blocks:r=3,c=5,fill=100",
            ] {
                for (program, dense_input) in [
                    (&spmm, ("B".to_string(), dense(&[n, 20], dtype, &mut rng))),
                    (&spmv, ("x".to_string(), dense(&[n], dtype, &mut rng))),
                ] {
                    let inputs = HashMap::from([("A".to_string(), a.clone()), dense_input]);
                    compare_with_parts(program, &inputs, spec, 2, dtype);
                }
            }
        }
    }
}

#[test]
fn tiles_recipe_runs_every_level_and_the_rest() {
    use sparsile::recipe::{self, RecipeContext};
    let ctx = RecipeContext::default();
    for dtype in [DType::F32, DType::F64] {
        let (spmm, spmv) = spmm_and_spmv(dtype);
        let stage1 = compile_notation(&spmm).unwrap();
        let trace = recipe::trace("tiles:t16=40,t8=12,t4=3,k=20", &stage1, &ctx).unwrap();
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.primitive()).collect();
        assert!(steps.contains(&"decompose_format"), "{steps:?}");
        assert!(!steps.contains(&"parallel_reduce"), "{steps:?}");
        assert_eq!(
            steps.iter().filter(|s| **s == "register_tile").count(),
            3,
            "one register tile per level: {steps:?}"
        );
        assert!(steps.contains(&"cache_write"), "{steps:?}");
        // No level asked for: refused with a reason.
        let e = recipe::trace("tiles:t8=0", &stage1, &ctx).unwrap_err();
        assert!(e.to_string().contains("at least one of"), "{e}");
        if !have_compiler() {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(44);
        // Sizes no side divides, a matrix smaller than every tile, and an empty one.
        for (m, n, b) in [(37, 45, 8), (70, 19, 4), (3, 5, 2), (0, 9, 4)] {
            let coo = tiles_and_scatter(m, n, b, &mut rng);
            let a = SparseTensor::from_coo_with(&coo, &Format::Csr, dtype).unwrap();
            for (spec, levels) in [
                ("tiles:t16=40,t8=12,t4=3", 3),
                ("tiles:t8=20,t2=1", 2),
                ("tiles:t32=1,t8=0", 1),
                ("tiles:t4=16,t8=0", 1),
            ] {
                for (program, dense_input) in [
                    (&spmm, ("B".to_string(), dense(&[n, 20], dtype, &mut rng))),
                    (&spmv, ("x".to_string(), dense(&[n], dtype, &mut rng))),
                ] {
                    let inputs = HashMap::from([("A".to_string(), a.clone()), dense_input]);
                    compare_with_parts(program, &inputs, spec, levels + 1, dtype);
                }
            }
        }
    }
}
