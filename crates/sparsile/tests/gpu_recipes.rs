//! Every GPU recipe on every operator it names, run by the SIMT interpreter (target
//! `cuda-sim`, which reports races, divergent barriers and warp reductions with inactive
//! lanes) and compared with the reference interpreter: f32 and f64, widths that fill a
//! warp, do not fill one and need several passes (1, 20, 32, 70), matrices with empty
//! rows, no non-zeros, no rows, one row longer than a block, duplicate and unsorted
//! coordinates, sizes that no block size divides. Every kernel's CUDA source compiles
//! with NVRTC for sm_80 and sm_90 without register spills (when NVRTC is found: otherwise
//! that part says it skipped), and each trace replays to the same function.

mod support;

use std::collections::HashMap;

use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::recipe::{compile_recipe_for, list, recipe_trace};
use sparsile::runtime::cuda::{CudaError, Nvrtc};
use sparsile::{evaluate, RunOptions, Stage, Target};
use support::{close, dense, matrix, rng};

fn program(op: &str, dtype: DType) -> String {
    match op {
        "spmm" => format!("tensor A: {dtype}[m, n] csr\ntensor X: {dtype}[n, k]\ntensor Y: {dtype}[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"),
        "sddmm" => format!("tensor A: {dtype}[m, n] csr\ntensor X: {dtype}[m, k]\ntensor Y: {dtype}[n, k]\ntensor O: {dtype}[m, n] csr\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n"),
        _ => format!("tensor A: {dtype}[m, n] csr\ntensor x: {dtype}[n]\ntensor y: {dtype}[m]\ny[i] = A[i,j] * x[j]\n"),
    }
}

fn inputs(
    op: &str,
    a: &CooTensor,
    k: usize,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let (m, n) = (a.shape[0], a.shape[1]);
    let mut g = rng(seed);
    let sparse = SparseTensor::from_coo_with(a, &Format::Csr, dtype).unwrap();
    let mut ins = HashMap::from([("A".to_string(), sparse)]);
    match op {
        "spmm" => {
            ins.insert("X".into(), dense(&[n, k], dtype, &mut g));
        }
        "sddmm" => {
            ins.insert("X".into(), dense(&[m, k], dtype, &mut g));
            ins.insert("Y".into(), dense(&[n, k], dtype, &mut g));
        }
        _ => {
            ins.insert("x".into(), dense(&[n], dtype, &mut g));
        }
    }
    ins
}

/// The matrices every recipe runs on.
fn matrices() -> Vec<(&'static str, CooTensor)> {
    let mut g = rng(11);
    // Duplicate and unsorted coordinates, summed and sorted as user input is.
    let entries = [
        (4, 6, 1.0),
        (0, 3, -2.0),
        (4, 6, 0.5),
        (8, 0, 3.0),
        (0, 1, 1.5),
        (4, 2, -1.0),
    ];
    let mut dup = CooTensor {
        shape: vec![9, 7],
        coords: entries.iter().flat_map(|&(i, j, _)| [i, j]).collect(),
        values: entries.iter().map(|e| e.2).collect(),
    };
    dup.sort_and_sum_duplicates();
    assert_eq!(dup.nnz(), 5);
    vec![
        ("random", matrix("random", 37, 29, &mut g)),
        ("long_row", matrix("long_row", 13, 300, &mut g)),
        ("no_nonzeros", matrix("empty", 11, 5, &mut g)),
        (
            "no_rows",
            CooTensor::from_triplets(vec![0, 6], &[]).unwrap(),
        ),
        ("duplicates", dup),
    ]
}

/// Every GPU recipe with its defaults, and the variants whose schedules differ in kind
/// (a block per reduction: the warps' sums meet in shared memory).
fn gpu_recipes() -> Vec<(&'static str, &'static [&'static str])> {
    let mut out: Vec<(&'static str, &'static [&'static str])> = list()
        .into_iter()
        .filter(|r| r.gpu)
        .map(|r| (r.name, r.ops))
        .collect();
    out.push(("gpu_warp:lanes=128,rows=1", &["sddmm", "spmv"]));
    out.push(("gpu_warp:lanes=64,rows=1", &["spmv"]));
    out
}

#[test]
fn every_gpu_recipe_matches_the_interpreter_in_the_simt_interpreter() {
    let recipes = gpu_recipes();
    assert!(recipes.len() >= 3, "GPU recipes: {recipes:?}");
    let nvrtc = match Nvrtc::load(&Settings::from_env()) {
        Ok(nvrtc) => Some(nvrtc),
        Err(e @ CudaError::NvrtcMissing { .. }) => {
            println!("NVRTC compile checks skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    };
    let mut compiled = std::collections::HashSet::new();
    let mut runs = 0;
    for (recipe, ops) in &recipes {
        for op in *ops {
            for dtype in [DType::F32, DType::F64] {
                let text = program(op, dtype);
                let widths: &[usize] = if *op == "spmv" {
                    &[1]
                } else {
                    &[1, 20, 32, 70]
                };
                for &k in widths {
                    for (kind, a) in matrices() {
                        let what = format!("{recipe} {op} {dtype} k={k} {kind}");
                        let ins = inputs(op, &a, k, dtype, runs as u64);
                        let kernel = compile_recipe_for(&text, &ins, recipe, Target::CudaSim)
                            .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
                        let cuda = kernel.ir(Stage::Cuda);
                        assert!(cuda.contains("__global__"), "{what}: no CUDA kernel");
                        if let Some(nvrtc) = &nvrtc {
                            if compiled.insert(cuda.clone()) {
                                for arch in ["sm_80", "sm_90"] {
                                    let cubin = nvrtc
                                        .compile(&cuda, "kernel.cu", arch)
                                        .unwrap_or_else(|e| panic!("{what}, {arch}: {e}"));
                                    assert!(!cubin.kernels.is_empty(), "{what}, {arch}");
                                    for k in &cubin.kernels {
                                        assert!(
                                            k.spill_stores == 0 && k.spill_loads == 0,
                                            "{what}, {arch}: `{}` spills:\n{}",
                                            k.name,
                                            cubin.log
                                        );
                                    }
                                }
                            }
                        }
                        let got = kernel
                            .run(&ins, &RunOptions::default())
                            .unwrap_or_else(|e| panic!("{what}: SIMT run: {e}"));
                        let expected = evaluate(&text, &ins)
                            .unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
                        let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
                        for (name, t) in &expected {
                            assert_eq!(got[name].shape(), t.shape(), "{what}: {name}");
                            close(
                                &got[name].to_dense_f64(),
                                &t.to_dense_f64(),
                                tol,
                                &format!("{what}: {name}"),
                            );
                        }
                        runs += 1;
                    }
                }
            }
        }
    }
    assert!(runs >= 100, "only {runs} runs");
    if nvrtc.is_some() {
        println!(
            "{} distinct kernels compiled for sm_80 and sm_90",
            compiled.len()
        );
    }
}

#[test]
fn gpu_recipe_traces_replay_to_the_same_function() {
    let a = matrices().remove(0).1;
    for (recipe, ops) in gpu_recipes() {
        for op in ops {
            let text = program(op, DType::F32);
            let ins = inputs(op, &a, 40, DType::F32, 1);
            let (_, stage1, trace) = recipe_trace(&text, &ins, recipe).unwrap();
            let json = trace.to_json();
            let replayed = sparsile::transform::schedule::Trace::from_json(&json)
                .unwrap()
                .replay(&stage1)
                .unwrap();
            let again = trace.replay(&stage1).unwrap();
            assert_eq!(
                replayed.func().unwrap().to_string(),
                again.func().unwrap().to_string(),
                "{recipe} {op}"
            );
            assert!(json.contains("\"step\": \"bind\""), "{recipe} {op}: {json}");
        }
    }
}

#[test]
fn gpu_functions_refuse_the_cpu_target_and_cpu_functions_the_gpu_targets() {
    let text = program("spmv", DType::F32);
    let a = matrices().remove(0).1;
    let ins = inputs("spmv", &a, 1, DType::F32, 2);
    let err = compile_recipe_for(&text, &ins, "gpu_warp", Target::Cpu).unwrap_err();
    assert_eq!(
        err.to_string(),
        "target cpu: the schedule makes a GPU function (it binds loops to the GPU); run it on the cuda or cuda-sim target, or schedule it with a CPU recipe"
    );
    let err = compile_recipe_for(&text, &ins, "rowwise", Target::CudaSim).unwrap_err();
    assert_eq!(
        err.to_string(),
        "target cuda-sim: the schedule makes a CPU function; schedule the program with a GPU recipe (gpu_rowwise, gpu_warp) or run it on the cpu target"
    );
    let spmm = inputs("spmm", &a, 8, DType::F32, 3);
    let err = compile_recipe_for(
        &program("spmm", DType::F32),
        &spmm,
        "gpu_warp",
        Target::CudaSim,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("gpu_warp` does not apply"),
        "{err}"
    );
}
