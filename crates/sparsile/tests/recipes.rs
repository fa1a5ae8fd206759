//! Every named recipe on the operators it applies to, compiled and compared with the
//! reference interpreter on seeded random inputs (empty rows, an empty matrix, one long
//! row, widths that are not multiples of a vector); the recorded trace replays to the
//! same IR; every spec error is a named error. Without a C compiler the compiled checks
//! print that they skipped.

mod support;

use std::collections::HashMap;

use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::recipe::{self, RecipeContext, RecipeError, RecipeSpec};
use sparsile::transform::schedule::{Step, Trace};
use sparsile::{compile_notation, compile_recipe, CompileError, RunOptions};
use support::{check_kernel, dense, have_compiler, matrix, rng};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SDDMM: &str = "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[j,k]\n";
const SPMV: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";

const SHAPES: [(&str, usize, usize); 4] = [
    ("random", 13, 11),
    ("empty", 7, 5),
    ("long_row", 9, 40),
    ("empty", 0, 4),
];

/// (operator, program, inputs) for one matrix shape and dense width.
fn cases(
    kind: &str,
    m: usize,
    n: usize,
    k: usize,
    seed: u64,
) -> Vec<(
    &'static str,
    &'static str,
    HashMap<String, SparseTensor<'static>>,
)> {
    let mut g = rng(seed);
    let coo = matrix(kind, m, n, &mut g);
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    let f32 = DType::F32;
    vec![
        (
            "spmm",
            SPMM,
            HashMap::from([
                ("A".to_string(), a.clone()),
                ("B".to_string(), dense(&[n, k], f32, &mut g)),
            ]),
        ),
        (
            "sddmm",
            SDDMM,
            HashMap::from([
                ("A".to_string(), a.clone()),
                ("X".to_string(), dense(&[m, k], f32, &mut g)),
                ("Y".to_string(), dense(&[n, k], f32, &mut g)),
            ]),
        ),
        (
            "spmv",
            SPMV,
            HashMap::from([
                ("A".to_string(), a),
                ("x".to_string(), dense(&[n], f32, &mut g)),
            ]),
        ),
    ]
}

#[test]
fn every_recipe_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    // GPU recipes run in the SIMT interpreter instead (tests/gpu_recipes.rs).
    for info in recipe::list().into_iter().filter(|r| !r.gpu) {
        for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
            for k in [1, 5, 17, 32, 40] {
                for (op, program, inputs) in cases(kind, m, n, k, s as u64 * 100 + k as u64) {
                    if !info.ops.contains(&op) && !info.ops.contains(&"any") {
                        continue;
                    }
                    let what = format!("{} {op} {kind} {m}x{n} k={k}", info.name);
                    let kernel = compile_recipe(program, &inputs, info.name)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    check_kernel(&kernel, program, &inputs, DType::F32, &what);
                }
            }
        }
    }
}

/// Every design of the recipes with parameters, on SpMM (and SpMV where it applies).
#[test]
fn every_design_matches_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let mut specs: Vec<String> = Vec::new();
    for b in ["row", "nnz"] {
        for d in ["row", "col"] {
            for r in ["seq", "par"] {
                specs.push(format!("daspmm:balance={b},dense={d},reduce={r}"));
            }
        }
    }
    for p in ["static", "dynamic", "balanced"] {
        specs.push(format!("rowwise:partition={p},cache=off"));
        specs.push(format!("rowwise:partition={p},prefetch=3"));
        specs.push(format!("rowwise:partition={p},lanes=4"));
        specs.push(format!("rowwise:partition={p},dot=off"));
    }
    specs.push("hyb:c=2,k=2".into());
    specs.push("hyb:c=1,k=0".into());
    for spec in &specs {
        for (s, (kind, m, n)) in SHAPES.into_iter().enumerate() {
            for k in [1, 5, 32] {
                for (op, program, inputs) in cases(kind, m, n, k, s as u64 * 7 + k as u64) {
                    let applies = match spec.split(':').next().unwrap() {
                        "daspmm" => op == "spmm",
                        "hyb" => op != "sddmm",
                        _ => true,
                    };
                    if !applies {
                        continue;
                    }
                    let what = format!("{spec} {op} {kind} {m}x{n} k={k}");
                    let kernel = compile_recipe(program, &inputs, spec)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    check_kernel(&kernel, program, &inputs, DType::F32, &what);
                }
            }
        }
    }
}

#[test]
fn rowwise_specialises_the_width_and_refuses_another() {
    if !have_compiler() {
        return;
    }
    let (_, program, inputs) = cases("random", 13, 11, 8, 1).remove(0);
    let kernel = compile_recipe(program, &inputs, "rowwise").unwrap();
    let c = kernel.ir(sparsile::Stage::C);
    assert!(c.contains("< 8;"), "{c}");
    let (_, _, wider) = cases("random", 13, 11, 9, 1).remove(0);
    let err = kernel.run(&wider, &RunOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("length is declared 8 but is 9"),
        "{err}"
    );
    // `k=none` keeps the width a parameter.
    let kernel = compile_recipe(program, &inputs, "rowwise:k=none").unwrap();
    assert!(kernel.run(&wider, &RunOptions::default()).is_ok());
}

#[test]
fn recipe_traces_replay_to_the_same_ir() {
    for info in recipe::list() {
        for (op, program) in [("spmm", SPMM), ("sddmm", SDDMM), ("spmv", SPMV)] {
            // Recipes for one format family replay in their own tests (`gpu_recipes.rs`).
            if !info.ops.contains(&op) && !info.ops.contains(&"any")
                || !info.formats.contains(&"any")
            {
                continue;
            }
            let stage1 = compile_notation(program).unwrap();
            let context = RecipeContext {
                params: HashMap::from([("k".to_string(), 16)]),
            };
            // The programs are f32: `gpu_tiles` takes them rounded to tf32 on its tiles.
            let spec = if info.name == "gpu_tiles" {
                "gpu_tiles:tf32=on"
            } else {
                info.name
            };
            let sch = recipe::schedule(spec, &stage1, &context).unwrap();
            let json = sch.trace().to_json();
            let replayed = Trace::from_json(&json).unwrap().replay(&stage1).unwrap();
            assert_eq!(
                replayed.func().map(|f| f.to_string()),
                sch.func().map(|f| f.to_string()),
                "{}",
                info.name
            );
        }
    }
    let stage1 = compile_notation(SPMM).unwrap();
    let context = RecipeContext {
        params: HashMap::from([("k".to_string(), 16)]),
    };
    let trace = recipe::trace("rowwise", &stage1, &context).unwrap();
    assert_eq!(
        trace.steps[0],
        Step::Specialize {
            param: "k".into(),
            value: 16
        }
    );
}

#[test]
fn spec_errors_are_named() {
    let stage1 = compile_notation(SPMM).unwrap();
    let ctx = RecipeContext::default();
    let err = |spec: &str| recipe::trace(spec, &stage1, &ctx).unwrap_err();
    assert!(
        matches!(err("nosuch"), RecipeError::UnknownRecipe { name, known } if name == "nosuch" && known.contains("rowwise"))
    );
    assert!(matches!(err("rowwise:q=1"), RecipeError::UnknownArg { arg, .. } if arg == "q"));
    assert!(
        matches!(err("rowwise:k=-3"), RecipeError::BadArg { arg, value, .. } if arg == "k" && value == "-3")
    );
    assert!(matches!(err("rowwise:k"), RecipeError::BadSpec { .. }));
    assert!(matches!(
        err("rowwise:k=1,k=2"),
        RecipeError::BadSpec { .. }
    ));
    assert!(matches!(err("row wise"), RecipeError::BadSpec { .. }));
    assert!(
        matches!(err("default:k=1"), RecipeError::UnknownArg { allowed, .. } if allowed == "none")
    );
    let spec: RecipeSpec = "rowwise:k=32".parse().unwrap();
    assert_eq!(spec.to_string(), "rowwise:k=32");
    // Through the compile API the error keeps its message.
    let inputs = cases("random", 4, 4, 2, 3).remove(0).2;
    let e = compile_recipe(SPMM, &inputs, "nosuch").unwrap_err();
    assert!(matches!(e, CompileError::Recipe(_)), "{e}");
}
