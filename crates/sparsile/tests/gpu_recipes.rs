//! Every GPU recipe on every operator it names, run by the SIMT interpreter (target
//! `cuda-sim`, which reports races, divergent barriers and warp reductions with inactive
//! lanes) and compared with the reference interpreter: f32 and f64, widths that fill a
//! warp, do not fill one and need several passes (1, 20, 32, 70), f16 and bf16 (summed
//! in f32, rounded once when stored; a recipe that adds into the output atomically
//! refuses them) at widths 20 and 32, matrices with empty
//! rows, no non-zeros, no rows, one row longer than a block, duplicate and unsorted
//! coordinates, sizes that no block size divides. Every kernel's CUDA source compiles
//! with NVRTC for sm_80 and sm_90 without register spills (when NVRTC is found: otherwise
//! that part says it skipped), and each trace replays to the same function. Where a GPU
//! and NVRTC are present, each kernel also runs on the GPU against the same reference
//! (`support::check_simt`).
//!
//! The tensor-core recipe `gpu_bsr_mma` runs on BSR inputs (16x16, 32x32, 16x8 and 16x4
//! blocks) and SR-BCRS inputs (16x8, 16x16, 32x8 and 16x4 tiles and groups, the groups'
//! gathered rows of `X` as the mma's right operand) with f16, bf16 and (as tf32) f32
//! operands and f32 outputs, against the interpreter on the same (rounded) inputs: widths
//! that are not multiples of 8 or of the blocks, block rows with no blocks, matrices with no rows or no non-zeros, sizes that no block size
//! divides; its refusals have their messages.

mod support;

use std::collections::HashMap;

use rand::Rng;
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::recipe::{compile_recipe_for, list, recipe_trace};
use sparsile::runtime::cuda::{CudaError, Nvrtc};
use sparsile::{evaluate, RunOptions, Stage, Target};
use support::{check_simt, close, dense, matrix, rng};

fn program(op: &str, dtype: DType) -> String {
    match op {
        "spmm" => format!("tensor A: {dtype}[m, n] csr\ntensor X: {dtype}[n, k]\ntensor Y: {dtype}[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"),
        // The dense operand column-major: declared as its transpose.
        "spmm_cm" => format!("tensor A: {dtype}[m, n] csr\ntensor X: {dtype}[k, n]\ntensor Y: {dtype}[m, k]\nY[i,c] = A[i,j] * X[c,j]\n"),
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
        "spmm_cm" => {
            ins.insert("X".into(), dense(&[k, n], dtype, &mut g));
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

/// The eight DA-SpMM designs of `gpu_da`, each with the operator it runs: SpMM with the
/// dense operand row-major (`spmm`) or column-major (`spmm_cm`).
fn da_designs() -> Vec<(String, Vec<&'static str>)> {
    let mut out = Vec::new();
    for balance in ["rb", "eb"] {
        for order in ["rm", "cm"] {
            for reduce in ["sr", "pr"] {
                let op = if order == "rm" { "spmm" } else { "spmm_cm" };
                out.push((
                    format!("gpu_da:balance={balance},order={order},reduce={reduce}"),
                    vec![op],
                ));
            }
        }
    }
    out
}

/// The GPU recipes for any format (those for one format family have their own tests)
/// with their operators: each by name with its defaults, `gpu_da` as its eight designs,
/// and the variants whose schedules differ in kind (a block per reduction: the warps'
/// sums meet in shared memory).
fn gpu_recipes() -> Vec<(String, Vec<&'static str>)> {
    let mut out: Vec<(String, Vec<&'static str>)> = list()
        .into_iter()
        // `gpu_tiles` runs its tiles on tensor cores (f16, bf16, tf32): its own test.
        .filter(|r| r.gpu && r.formats.contains(&"any") && r.name != "gpu_tiles")
        .flat_map(|r| {
            if r.name == "gpu_da" {
                da_designs()
            } else {
                vec![(r.name.to_string(), r.ops.to_vec())]
            }
        })
        .collect();
    out.push(("gpu_warp:lanes=128,rows=1".into(), vec!["sddmm", "spmv"]));
    out.push(("gpu_warp:lanes=64,rows=1".into(), vec!["spmv"]));
    // Vector loads of two elements, one non-zero per block, a block per non-zero.
    out.push(("gpu_sddmm_vec:vec=2".into(), vec!["sddmm"]));
    out.push(("gpu_sddmm_vec:rows=1".into(), vec!["sddmm"]));
    out.push(("gpu_sddmm_vec:lanes=64,rows=1".into(), vec!["sddmm"]));
    // A row per warp (no search), and a row per block of 64 lanes.
    out.push(("gpu_sddmm_vec:balance=rows".into(), vec!["sddmm"]));
    out.push((
        "gpu_sddmm_vec:balance=rows,lanes=64,rows=1".into(),
        vec!["sddmm"],
    ));
    out
}

#[test]
fn every_gpu_recipe_matches_the_interpreter_in_the_simt_interpreter() {
    let recipes = gpu_recipes();
    assert!(recipes.len() >= 3, "GPU recipes: {recipes:?}");
    let nvrtc = nvrtc();
    let mut compiled = std::collections::HashSet::new();
    let mut runs = 0;
    let mut refused_half = 0;
    for (recipe, ops) in &recipes {
        for op in ops {
            for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
                let text = program(op, dtype);
                let widths: &[usize] = match (*op, dtype.is_half()) {
                    ("spmv", _) => &[1],
                    (_, true) => &[20, 32],
                    _ => &[1, 20, 32, 70],
                };
                for &k in widths {
                    for (kind, a) in matrices() {
                        let what = format!("{recipe} {op} {dtype} k={k} {kind}");
                        let ins = inputs(op, &a, k, dtype, runs as u64);
                        let kernel = match compile_recipe_for(&text, &ins, recipe, Target::CudaSim)
                        {
                            Ok(kernel) => kernel,
                            // Atomic adds into f16/bf16 outputs would sum in 16 bits.
                            Err(e) if dtype.is_half() && e.to_string().contains("atomic") => {
                                refused_half += 1;
                                continue;
                            }
                            Err(e) => panic!("{what}: compile: {e}"),
                        };
                        let cuda = kernel.ir(Stage::Cuda);
                        assert!(cuda.contains("__global__"), "{what}: no CUDA kernel");
                        if let Some(nvrtc) = &nvrtc {
                            if compiled.insert(cuda.clone()) {
                                for arch in ["sm_80", "sm_90"] {
                                    let cubin = nvrtc
                                        .compile(&cuda, "kernel.cu", arch)
                                        .unwrap_or_else(|e| panic!("{what}, {arch}: {e}"));
                                    assert!(
                                        // NVRTC 13 leaves the report out for the GPU a
                                        // process has opened (see cuda/resources.rs).
                                        !cubin.kernels.is_empty() || support::gpu_here(),
                                        "{what}, {arch}: no ptxas report in the log:\n{}",
                                        cubin.log
                                    );
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
                        // f16/bf16: f32 sums, rounded once when stored (the interpreter
                        // rounds its f64 sum: a last-bit difference at most).
                        let tol = match dtype {
                            DType::F32 => 1e-4,
                            DType::F16 => 1e-3,
                            DType::BF16 => 8e-3,
                            _ => 1e-10,
                        };
                        check_simt(&kernel, &text, &ins, tol, &what);
                        runs += 1;
                    }
                }
            }
        }
    }
    assert!(runs >= 100, "only {runs} runs");
    // Only the recipes that add into the output atomically (gpu_nnz) refuse 16-bit outputs.
    assert!(
        refused_half > 0 && refused_half < runs / 4,
        "{refused_half} refusals in {runs} runs"
    );
    if nvrtc.is_some() {
        println!(
            "{} distinct kernels compiled for sm_80 and sm_90",
            compiled.len()
        );
    }
}

/// The CUDA of `gpu_sddmm_vec` on SDDMM of width `k` with `spec`.
fn sddmm_vec_cuda(spec: &str, k: usize, dtype: DType) -> String {
    let text = program("sddmm", dtype);
    let a = matrices().remove(0).1;
    let ins = inputs("sddmm", &a, k, dtype, 5);
    let kernel = compile_recipe_for(&text, &ins, spec, Target::CudaSim)
        .unwrap_or_else(|e| panic!("{spec} k={k}: {e}"));
    // The vector loads give the same result as the interpreter.
    let got = kernel.run(&ins, &RunOptions::default()).unwrap();
    let expected = evaluate(&text, &ins).unwrap();
    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
    close(
        &got["O"].to_dense_f64(),
        &expected["O"].to_dense_f64(),
        tol,
        &format!("{spec} k={k} {dtype}"),
    );
    kernel.ir(Stage::Cuda)
}

#[test]
fn gpu_sddmm_vec_loads_vectors_only_where_the_rows_start_aligned() {
    let vector = |code: &str, ty: &str| code.matches(&format!("*(const {ty} *)&")).count();
    // K = 32, specialised: one float4 of X's row and one of Y's per lane.
    let code = sddmm_vec_cuda("gpu_sddmm_vec", 32, DType::F32);
    assert_eq!(vector(&code, "float4"), 2, "{code}");
    assert!(code.contains("X_v.w"), "{code}");
    // vec=2: float2; f64: double2 (two per vector of four).
    let code = sddmm_vec_cuda("gpu_sddmm_vec:vec=2", 32, DType::F32);
    assert_eq!(
        (vector(&code, "float2"), vector(&code, "float4")),
        (2, 0),
        "{code}"
    );
    let code = sddmm_vec_cuda("gpu_sddmm_vec", 32, DType::F64);
    assert_eq!(vector(&code, "double2"), 4, "{code}");
    // K = 70 is not a multiple of 4, and with k=none K is unknown: scalar loads.
    for (spec, k) in [("gpu_sddmm_vec:vec=4", 70), ("gpu_sddmm_vec:k=none", 32)] {
        let code = sddmm_vec_cuda(spec, k, DType::F32);
        for ty in ["float4", "float2", "double2"] {
            assert_eq!(vector(&code, ty), 0, "{spec} k={k}: {code}");
        }
        assert!(!code.contains("vectorized over"), "{spec} k={k}: {code}");
    }
    // K = 70 with vec=2: float2.
    let code = sddmm_vec_cuda("gpu_sddmm_vec:vec=2", 70, DType::F32);
    assert_eq!(vector(&code, "float2"), 2, "{code}");
}

#[test]
fn gpu_sddmm_vec_refuses_bad_parameters_and_other_operators() {
    let text = program("sddmm", DType::F32);
    let a = matrices().remove(0).1;
    let ins = inputs("sddmm", &a, 32, DType::F32, 6);
    for (spec, arg) in [
        ("gpu_sddmm_vec:vec=3", "vec"),
        ("gpu_sddmm_vec:vec=8", "vec"),
        ("gpu_sddmm_vec:lanes=12", "lanes"),
        ("gpu_sddmm_vec:lanes=64,rows=2", "rows"),
        ("gpu_sddmm_vec:lanes=8", "lanes"),
    ] {
        let err = compile_recipe_for(&text, &ins, spec, Target::CudaSim).unwrap_err();
        assert!(err.to_string().contains(arg), "{spec}: {err}");
    }
    let spmv = inputs("spmv", &a, 1, DType::F32, 7);
    let err = compile_recipe_for(
        &program("spmv", DType::F32),
        &spmv,
        "gpu_sddmm_vec",
        Target::CudaSim,
    )
    .unwrap_err();
    assert!(err.to_string().contains("SDDMM-shaped"), "{err}");
}

/// `gpu_warp` with fewer than 32 lanes would put several reductions in a warp whose last
/// rows' guard leaves lanes out of the shuffles: refused with why, for SpMV and SDDMM.
#[test]
fn gpu_warp_refuses_reductions_narrower_than_a_warp() {
    let a = matrices().remove(0).1;
    for op in ["spmv", "sddmm"] {
        let ins = inputs(op, &a, 32, DType::F32, 8);
        for lanes in [2, 8, 16, 48] {
            let spec = format!("gpu_warp:lanes={lanes}");
            let err = compile_recipe_for(&program(op, DType::F32), &ins, &spec, Target::CudaSim)
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!("recipe `gpu_warp`: parameter `lanes` = `{lanes}`: 32, 64, 128, 256, 512 or 1024: a reduction takes whole warps (with fewer lanes the last rows' guard would leave lanes of a warp out of its shuffles)"),
                "{op}"
            );
        }
    }
}

#[test]
fn gpu_recipe_traces_replay_to_the_same_function() {
    let a = matrices().remove(0).1;
    for (recipe, ops) in gpu_recipes() {
        for op in ops {
            let text = program(op, DType::F32);
            let ins = inputs(op, &a, 40, DType::F32, 1);
            let (_, stage1, trace) = recipe_trace(&text, &ins, &recipe).unwrap();
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

/// Loads NVRTC, or says the compile checks are skipped.
fn nvrtc() -> Option<std::sync::Arc<Nvrtc>> {
    match Nvrtc::load(&Settings::from_env()) {
        Ok(nvrtc) => Some(nvrtc),
        Err(e @ CudaError::NvrtcMissing { .. }) => {
            println!("NVRTC compile checks skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// BSR SpMM with operands of `dtype` (blocks `block`) and an f32 output.
fn bsr_program(dtype: DType, block: &str) -> String {
    tiled_program(dtype, &format!("bsr:{block}"))
}

/// SpMM with operands of `dtype`, the sparse one in `format`, and an f32 output.
fn tiled_program(dtype: DType, format: &str) -> String {
    format!(
        "tensor A: {dtype}[m, n] {format}\ntensor X: {dtype}[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"
    )
}

/// `v` for operands of `dtype`: f16 and bf16 values are rounded to the type by the
/// tensors' constructors (the reference then computes with those same values); f32
/// values get at most 11 significant bits, so that the tensor cores' tf32 keeps them.
fn representable(v: f64, dtype: DType) -> f64 {
    if dtype == DType::F32 {
        (v * 1024.0).round() / 1024.0
    } else {
        v
    }
}

fn bsr_inputs(
    a: &CooTensor,
    block: &str,
    k: usize,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    tiled_inputs(a, &format!("bsr:{block}"), k, dtype, seed)
}

/// `A` (`a` in `format`) and a random dense `X` with `k` columns, both of `dtype`.
fn tiled_inputs(
    a: &CooTensor,
    format: &str,
    k: usize,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let mut g = rng(seed);
    let mut a = a.clone();
    a.values
        .iter_mut()
        .for_each(|v| *v = representable(*v, dtype));
    let format: Format = format.parse().unwrap();
    let n = a.shape[1];
    let x: Vec<f64> = (0..n * k)
        .map(|_| representable(g.random_range(-1.0..1.0), dtype))
        .collect();
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&a, &format, dtype).unwrap(),
        ),
        (
            "X".to_string(),
            SparseTensor::dense_from_f64(&[n, k], &x, dtype).unwrap(),
        ),
    ])
}

/// The matrices the tensor-core recipe runs on: those of the other recipes, and one
/// whose middle block rows hold no blocks.
fn bsr_matrices() -> Vec<(&'static str, CooTensor)> {
    let mut g = rng(17);
    let mut out = matrices();
    let entries: Vec<(usize, usize, f64)> = (0..70)
        .filter(|i| !(16..48).contains(i))
        .flat_map(|i| [(i, (i * 7) % 40, 0.5), (i, (i * 3 + 1) % 40, -0.25)])
        .collect();
    let mut empty_rows = CooTensor::from_triplets(vec![70, 40], &entries).unwrap();
    empty_rows.sort_and_sum_duplicates();
    out.push(("empty_block_rows", empty_rows));
    out.push(("blocks_fill", matrix("random", 64, 48, &mut g)));
    out.push(("tiles_and_scatter", tiles_and_scatter(&mut g)));
    out
}

/// A 75 x 61 matrix of dense regions among scattered entries, for the tile levels: a full
/// 16 x 16 block, a 32 x 32 block three quarters full, a 16 x 16 block a third full on the
/// matrix's last rows and columns (cut by the edge), a dense row, an empty row, and
/// scattered entries.
fn tiles_and_scatter(g: &mut impl Rng) -> CooTensor {
    let mut t: Vec<(usize, usize, f64)> = Vec::new();
    for i in 0..16 {
        for j in 16..32 {
            t.push((i, j, g.random_range(-1.0..1.0)));
        }
    }
    for i in 32..64 {
        for j in 0..32 {
            if g.random_bool(0.75) {
                t.push((i, j, g.random_range(-1.0..1.0)));
            }
        }
    }
    for i in 64..75 {
        for j in 48..61 {
            if g.random_bool(0.33) {
                t.push((i, j, g.random_range(-1.0..1.0)));
            }
        }
    }
    for j in 0..61 {
        t.push((20, j, g.random_range(-1.0..1.0)));
    }
    for i in 0..75 {
        if i == 21 {
            continue;
        }
        for _ in 0..2 {
            t.push((i, g.random_range(0..61), g.random_range(-1.0..1.0)));
        }
    }
    // The scattered entries may repeat a coordinate: summed, as user input is.
    let mut a = CooTensor {
        shape: vec![75, 61],
        coords: t.iter().flat_map(|&(i, j, _)| [i, j]).collect(),
        values: t.iter().map(|e| e.2).collect(),
    };
    a.sort_and_sum_duplicates();
    a
}

#[test]
fn bsr_spmm_on_tensor_cores_matches_the_interpreter_in_the_simt_interpreter() {
    let cases = [
        (DType::F16, "bsr:16x16", "gpu_bsr_mma", "m16n8k16 f16"),
        (DType::BF16, "bsr:16x16", "gpu_bsr_mma", "m16n8k16 bf16"),
        (
            DType::F16,
            "bsr:32x32",
            "gpu_bsr_mma:warps=2",
            "m16n8k16 f16",
        ),
        (DType::BF16, "bsr:16x8", "gpu_bsr_mma", "m16n8k8 bf16"),
        (
            DType::F16,
            "bsr:16x16",
            "gpu_bsr_mma:acc=registers",
            "m16n8k16 f16",
        ),
        (
            DType::F32,
            "bsr:16x16",
            "gpu_bsr_mma:tf32=on",
            "m16n8k8 tf32",
        ),
        (
            DType::F32,
            "bsr:16x4",
            "gpu_bsr_mma:tf32=on",
            "m16n8k4 tf32",
        ),
    ];
    assert_eq!(tensor_core_spmm(&cases), 7 * 4 * 8);
}

/// SR-BCRS: each group of `G` gathered columns is the depth of `G / K` mmas whose right
/// operand is the rows of `X` at the group's column indices (padding included).
#[test]
fn srbcrs_spmm_on_tensor_cores_matches_the_interpreter_in_the_simt_interpreter() {
    let cases = [
        (DType::F16, "srbcrs:16x8", "gpu_bsr_mma", "m16n8k8 f16"),
        (DType::BF16, "srbcrs:16x8", "gpu_bsr_mma", "m16n8k8 bf16"),
        (DType::F16, "srbcrs:16x16", "gpu_bsr_mma", "m16n8k16 f16"),
        (
            DType::BF16,
            "srbcrs:16x16",
            "gpu_bsr_mma:warps=2",
            "m16n8k16 bf16",
        ),
        (DType::F16, "srbcrs:32x8", "gpu_bsr_mma", "m16n8k8 f16"),
        (
            DType::BF16,
            "srbcrs:32x8",
            "gpu_bsr_mma:warps=1",
            "m16n8k8 bf16",
        ),
        (
            DType::F32,
            "srbcrs:16x4",
            "gpu_bsr_mma:tf32=on",
            "m16n8k4 tf32",
        ),
    ];
    assert_eq!(tensor_core_spmm(&cases), 7 * 4 * 8);
}

/// `gpu_tiles`: the CSR operand cut into 32 x 32 and 16 x 16 tiles (on tensor cores) and a
/// rest (rows over lanes), on every tensor-core test matrix, with one level, two levels,
/// tiles at any fill (`t16=1`) and at none (no tile is cheaper than its entries).
#[test]
fn gpu_tiles_matches_the_interpreter_in_the_simt_interpreter() {
    let cases = [
        (DType::F16, "csr", "gpu_tiles", "m16n8k16 f16"),
        (
            DType::BF16,
            "csr",
            "gpu_tiles:t32=512,t16=64",
            "m16n8k16 bf16",
        ),
        (DType::F16, "csr", "gpu_tiles:t16=1,warps=2", "m16n8k16 f16"),
        (DType::F16, "csr", "gpu_tiles:acc=registers", "m16n8k16 f16"),
        (DType::F16, "csr", "gpu_tiles:t16=100000", "m16n8k16 f16"),
        (DType::F16, "csr", "gpu_tiles:t32=256,t16=0", "m16n8k16 f16"),
        (DType::F32, "csr", "gpu_tiles:tf32=on", "m16n8k8 tf32"),
    ];
    assert_eq!(tensor_core_spmm(&cases), 7 * 4 * 8);
}

/// Runs each `(operand type, format, recipe, mma)` case on every test matrix with widths
/// 8, 20, 3 and 70 in the SIMT interpreter against the reference interpreter, checks the
/// stage-III `mma` and the CUDA `mma.sync`, and compiles each distinct kernel with NVRTC
/// for sm_80 and sm_90 (no warnings, no spills); returns the number of runs.
fn tensor_core_spmm(cases: &[(DType, &str, &str, &str)]) -> usize {
    let nvrtc = nvrtc();
    let mut compiled = std::collections::HashSet::new();
    let mut runs = 0;
    for &(dtype, format, spec, mma) in cases {
        let text = tiled_program(dtype, format);
        for k in [8, 20, 3, 70] {
            for (kind, a) in bsr_matrices() {
                let what = format!("{spec} {dtype} {format} k={k} {kind}");
                let ins = tiled_inputs(&a, format, k, dtype, runs as u64);
                let kernel = compile_recipe_for(&text, &ins, spec, Target::CudaSim)
                    .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
                let stage3 = kernel.ir(Stage::Stage3);
                assert!(
                    stage3.contains(&format!("mma {mma} (")),
                    "{what}:\n{stage3}"
                );
                let cuda = kernel.ir(Stage::Cuda);
                assert!(
                    cuda.contains(&format!(
                        "mma.sync.aligned.{}.row.col.f32.",
                        mma.split(' ').next().unwrap()
                    )),
                    "{what}: no mma.sync"
                );
                if let Some(nvrtc) = &nvrtc {
                    if compiled.insert(cuda.clone()) {
                        for arch in ["sm_80", "sm_90"] {
                            let cubin = nvrtc
                                .compile(&cuda, "kernel.cu", arch)
                                .unwrap_or_else(|e| panic!("{what}, {arch}: {e}"));
                            assert!(
                                !cubin.log.to_lowercase().contains("warning"),
                                "{what}, {arch}: warnings:\n{}",
                                cubin.log
                            );
                            assert!(
                                !cubin.kernels.is_empty() || support::gpu_here(),
                                "{what}, {arch}: no ptxas report in the log:\n{}",
                                cubin.log
                            );
                            for r in &cubin.kernels {
                                assert!(
                                    r.spill_stores == 0 && r.spill_loads == 0,
                                    "{what}, {arch}: `{}` spills:\n{}",
                                    r.name,
                                    cubin.log
                                );
                                println!(
                                    "{arch} {spec} {dtype} {format} k={k}: `{}` {} registers, no spills",
                                    r.name, r.registers
                                );
                            }
                        }
                    }
                }
                // The reference computes in f64 from the same (f16-, bf16- or
                // tf32-representable) values; the products are exact on tensor cores too,
                // and their sums are rounded to f32 once per block of the row.
                check_simt(&kernel, &text, &ins, 1e-5, &what);
                runs += 1;
            }
        }
    }
    if nvrtc.is_some() {
        println!(
            "{} distinct tensor-core kernels compiled for sm_80 and sm_90",
            compiled.len()
        );
    }
    runs
}

/// `gpu_tiles` runs its rest with the block shape `gpu_rowwise` picks for the same width
/// (at K = 128: 128 lanes, one pass over a row per thread, not 32 lanes in four passes).
#[test]
fn gpu_tiles_rest_has_gpu_rowwise_block_shape() {
    let mut g = rng(37);
    let a = matrix("random", 37, 29, &mut g);
    for k in [20, 128] {
        let text = tiled_program(DType::F16, "csr");
        let ins = tiled_inputs(&a, "csr", k, DType::F16, 3);
        // The block shape of `spec`'s launch `part`.
        let launch_of = |spec: &str, part: &str| {
            let cuda = compile_recipe_for(&text, &ins, spec, Target::CudaSim)
                .unwrap()
                .ir(Stage::Cuda);
            let line = cuda
                .lines()
                .find(|l| l.starts_with(&format!("/* Launch `{part}`")))
                .unwrap_or_else(|| panic!("{spec}: no launch {part}:\n{cuda}"))
                .to_string();
            line.split(" x block ").nth(1).unwrap().to_string()
        };
        assert_eq!(
            launch_of("gpu_tiles", "Y_p0"),
            launch_of("gpu_rowwise", "Y"),
            "k={k}"
        );
    }
}

/// With `acc=registers` a warp's tile of `Y` stays in registers across the blocks of its
/// block row: the CUDA code loads it once before the loop over the blocks and stores it
/// once after; by default (`acc=memory`) it is loaded and stored around every block's
/// `mma`.
#[test]
fn mma_tiles_stay_in_registers_across_a_block_row_with_acc_registers() {
    let mut g = rng(31);
    let a = matrix("random", 37, 29, &mut g);
    let text = bsr_program(DType::F16, "16x16");
    let ins = bsr_inputs(&a, "16x16", 20, DType::F16, 7);
    let cuda = |spec: &str| {
        compile_recipe_for(&text, &ins, spec, Target::CudaSim)
            .unwrap()
            .ir(Stage::Cuda)
    };
    let carried = cuda("gpu_bsr_mma:acc=registers");
    let (before, inside) = carried
        .split_once("for (int64_t jo_p")
        .expect("a loop over the blocks");
    assert!(
        before.contains("kept in registers across the loop") && before.contains("mma_c[3] = "),
        "{carried}"
    );
    let (inside, after) = inside.split_once("mma_c[3] = mma_d[3];").expect("the mma");
    assert!(
        !inside.contains("Y["),
        "no access to Y inside the loop:\n{carried}"
    );
    assert!(after.contains("] = mma_c[3];"), "{carried}");
    let memory = cuda("gpu_bsr_mma");
    assert!(!memory.contains("kept in registers"), "{memory}");
    let (_, inside) = memory.split_once("for (int64_t jo_p").unwrap();
    assert!(inside.contains("] = mma_d[3];"), "{memory}");
}

/// Without rounding the inputs first, tf32 loses their low bits: the result is within
/// tf32's precision of the f32 reference, not f32's.
#[test]
fn tf32_rounds_f32_operands() {
    let mut g = rng(23);
    let a = matrix("random", 37, 29, &mut g);
    let text = bsr_program(DType::F32, "16x16");
    let x = dense(&[29, 20], DType::F32, &mut g);
    let ins = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&a, &"bsr:16x16".parse().unwrap(), DType::F32).unwrap(),
        ),
        ("X".to_string(), x),
    ]);
    let kernel = compile_recipe_for(&text, &ins, "gpu_bsr_mma:tf32=on", Target::CudaSim).unwrap();
    let got = kernel.run(&ins, &RunOptions::default()).unwrap()["Y"].to_dense_f64();
    let want = evaluate(&text, &ins).unwrap()["Y"].to_dense_f64();
    close(&got, &want, 4e-3, "tf32");
    assert!(
        got.iter()
            .zip(&want)
            .any(|(g, w)| (g - w).abs() > 1e-6 * (1.0 + w.abs())),
        "tf32 rounding left no trace"
    );
}

#[test]
fn gpu_bsr_mma_refusals_are_named() {
    let mut g = rng(29);
    let a = matrix("random", 37, 29, &mut g);
    let refuse = |text: &str, ins: &HashMap<String, SparseTensor<'static>>, spec: &str| {
        compile_recipe_for(text, ins, spec, Target::CudaSim)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "compiled".to_string())
    };
    let cases = vec![
        (
            refuse(
                &program("spmm", DType::F16),
                &inputs("spmm", &a, 8, DType::F16, 1),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: the main nest has 3 loops; it runs SpMM with the sparse operand in BSR (`bsr:16x16`, ...) or SR-BCRS (`srbcrs:16x8`, ...), whose nest loops over block rows, a row's blocks (groups), a block's rows and columns (a group's columns and a tile's rows), and the dense width",
        ),
        (
            refuse(
                &bsr_program(DType::F64, "16x16").replace("tensor Y: f32", "tensor Y: f64"),
                &bsr_inputs(&a, "16x16", 8, DType::F64, 2),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: f64 operands: tensor cores multiply f16, bf16 or (rounded) f32 values",
        ),
        (
            refuse(
                &bsr_program(DType::F32, "16x16"),
                &bsr_inputs(&a, "16x16", 8, DType::F32, 3),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: f32 operands: tensor cores multiply f16 or bf16 values exactly; pass `tf32=on` to round f32 operands to tf32",
        ),
        (
            refuse(
                &bsr_program(DType::F16, "8x8"),
                &bsr_inputs(&a, "8x8", 8, DType::F16, 4),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: blocks of 8 rows: an mma covers 16 rows (use bsr:16x16, bsr:32x32, ...)",
        ),
        (
            refuse(
                &bsr_program(DType::F16, "16x4"),
                &bsr_inputs(&a, "16x4", 8, DType::F16, 5),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: blocks of 4 columns: an mma on f16 operands needs a multiple of 8",
        ),
        (
            refuse(
                &tiled_program(DType::F16, "srbcrs:8x8"),
                &tiled_inputs(&a, "srbcrs:8x8", 8, DType::F16, 9),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: tiles of 8 rows: an mma covers 16 rows (use srbcrs:16x8, srbcrs:32x16, ...)",
        ),
        (
            refuse(
                &tiled_program(DType::BF16, "srbcrs:16x4"),
                &tiled_inputs(&a, "srbcrs:16x4", 8, DType::BF16, 10),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: groups of 4 columns: an mma on bf16 operands needs a multiple of 8",
        ),
        (
            refuse(
                &tiled_program(DType::F32, "srbcrs:16x2"),
                &tiled_inputs(&a, "srbcrs:16x2", 8, DType::F32, 11),
                "gpu_bsr_mma:tf32=on",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: groups of 2 columns: an mma on tf32 operands needs a multiple of 4",
        ),
        (
            refuse(
                &bsr_program(DType::F16, "16x16").replace("tensor Y: f32", "tensor Y: f16"),
                &bsr_inputs(&a, "16x16", 8, DType::F16, 6),
                "gpu_bsr_mma",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: the output is f16; tensor cores accumulate in f32 (declare the output f32: f16 and bf16 operands may be assigned to it)",
        ),
        (
            refuse(
                &bsr_program(DType::F16, "16x16"),
                &bsr_inputs(&a, "16x16", 8, DType::F16, 7),
                "gpu_bsr_mma:k=none",
            ),
            "recipe `gpu_bsr_mma` does not apply to this program: the dense width must be known at compile time (`k=auto` or a number): the warps take its columns",
        ),
        (
            refuse(
                &bsr_program(DType::F16, "16x16"),
                &bsr_inputs(&a, "16x16", 8, DType::F16, 8),
                "gpu_bsr_mma:tf32=maybe",
            ),
            "recipe `gpu_bsr_mma`: parameter `tf32` = `maybe`: expected one of on, off",
        ),
    ];
    let mut failures = Vec::new();
    for (got, want) in &cases {
        if got != want {
            failures.push(format!("got:  {got}\nwant: {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn gpu_bsr_mma_traces_replay_to_the_same_function() {
    let a = matrices().remove(0).1;
    for (dtype, format, spec) in [
        (DType::F16, "bsr:16x16", "gpu_bsr_mma"),
        (DType::F16, "bsr:32x32", "gpu_bsr_mma:warps=1"),
        (DType::F32, "bsr:16x8", "gpu_bsr_mma:tf32=on"),
        (DType::F16, "srbcrs:16x8", "gpu_bsr_mma"),
        (DType::BF16, "srbcrs:32x16", "gpu_bsr_mma:warps=2"),
    ] {
        let text = tiled_program(dtype, format);
        let ins = tiled_inputs(&a, format, 40, dtype, 1);
        let (_, stage1, trace) = recipe_trace(&text, &ins, spec).unwrap();
        let json = trace.to_json();
        let replayed = sparsile::transform::schedule::Trace::from_json(&json)
            .unwrap()
            .replay(&stage1)
            .unwrap();
        let again = trace.replay(&stage1).unwrap();
        assert_eq!(
            replayed.func().unwrap().to_string(),
            again.func().unwrap().to_string(),
            "{spec} {format}"
        );
        assert!(
            json.contains("\"step\": \"tensorize\""),
            "{spec} {format}: {json}"
        );
    }
}

/// Runs `spec` on `op` at width `k` over every test matrix in the SIMT interpreter
/// against the reference interpreter, compiling each new kernel with NVRTC (sm_80,
/// sm_90, no spills) when it loads; returns the CUDA sources.
fn check_design(spec: &str, op: &str, dtype: DType, k: usize, seed: u64) -> Vec<String> {
    let nvrtc = Nvrtc::load(&Settings::from_env()).ok();
    let text = program(op, dtype);
    let mut sources = Vec::new();
    for (kind, a) in matrices() {
        let what = format!("{spec} {op} {dtype} k={k} {kind}");
        let ins = inputs(op, &a, k, dtype, seed);
        let kernel = compile_recipe_for(&text, &ins, spec, Target::CudaSim)
            .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
        let cuda = kernel.ir(Stage::Cuda);
        if !sources.contains(&cuda) {
            if let Some(nvrtc) = &nvrtc {
                for arch in ["sm_80", "sm_90"] {
                    let cubin = nvrtc
                        .compile(&cuda, "kernel.cu", arch)
                        .unwrap_or_else(|e| panic!("{what}, {arch}: {e}"));
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
            sources.push(cuda);
        }
        let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
        check_simt(&kernel, &text, &ins, tol, &what);
    }
    sources
}

/// With `lanes` below 32, a parallel reduction runs on `lanes` threads and the other
/// `32 / lanes` threads of the warp take as many columns of the width side by side
/// (along `threadIdx.y`, the rows or groups of non-zeros along `threadIdx.z`).
#[test]
fn gpu_da_parallel_reductions_with_several_columns_per_warp() {
    for balance in ["rb", "eb"] {
        for (order, op) in [("rm", "spmm"), ("cm", "spmm_cm")] {
            for (lanes, k) in [(8, 20), (16, 32), (2, 32)] {
                let spec =
                    format!("gpu_da:balance={balance},order={order},reduce=pr,lanes={lanes}");
                let sources = check_design(&spec, op, DType::F32, k, lanes as u64);
                let cuda = &sources[0];
                assert!(cuda.contains("threadIdx.z"), "{spec}: {cuda}");
                let shuffle = if balance == "rb" {
                    format!("__shfl_xor_sync(0xffffffffu, Y_sum, Y_sum_off, {lanes})")
                } else {
                    format!("__shfl_down_sync(0xffffffffu, Y_sum, Y_sum_off, {lanes})")
                };
                assert!(cuda.contains(&shuffle), "{spec}: {cuda}");
            }
        }
    }
}

/// The CUDA each design makes: parallel reductions combine lanes with shuffles (a
/// butterfly for RB, a segmented scan keyed by row for EB), sequential ones do not;
/// element balance adds into the output atomically, row balance does not (its output
/// starts at zero in registers, with no initialisation launch).
#[test]
fn gpu_da_designs_make_the_kernels_they_name() {
    let a = matrices().remove(0).1;
    for (spec, ops) in da_designs() {
        let op = ops[0];
        let ins = inputs(op, &a, 32, DType::F32, 7);
        let kernel = compile_recipe_for(&program(op, DType::F32), &ins, &spec, Target::CudaSim)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        let cuda = kernel.ir(Stage::Cuda);
        let has = |s: &str| cuda.contains(s);
        let (eb, pr) = (spec.contains("balance=eb"), spec.contains("reduce=pr"));
        assert_eq!(has("__shfl_xor_sync"), !eb && pr, "{spec}: {cuda}");
        assert_eq!(has("__shfl_down_sync"), eb && pr, "{spec}: {cuda}");
        assert_eq!(
            has("atomicAdd") || has("sparsile_atomic_add"),
            eb,
            "{spec}: {cuda}"
        );
        let launches = cuda.matches("__global__").count();
        assert_eq!(launches, if eb || pr { 2 } else { 1 }, "{spec}: {cuda}");
    }
}

/// `order` states the layout of the dense operand the design is for: a program that
/// reads it the other way is refused with how to declare it; `auto` takes the program's.
/// Parameters outside the designs are named.
#[test]
fn gpu_da_checks_the_dense_layout_and_its_parameters() {
    let a = matrices().remove(0).1;
    let err = |op: &str, k: usize, spec: &str| {
        let ins = inputs(op, &a, k, DType::F32, 8);
        compile_recipe_for(&program(op, DType::F32), &ins, spec, Target::CudaSim)
            .unwrap_err()
            .to_string()
    };
    let cases = [
        ("spmm", 20, "gpu_da:order=cm", "recipe `gpu_da` does not apply to this program: order=cm, but the program reads its dense operand row-major (B[j, k]); a column-major B is declared as its transpose, `tensor B: f32[k, n]`, and read `B[k, j]`"),
        ("spmm_cm", 20, "gpu_da:order=rm", "recipe `gpu_da` does not apply to this program: order=rm, but the program reads its dense operand column-major (B[k, j]); declare it `tensor B: f32[n, k]` and read `B[j, k]`"),
        ("spmm", 20, "gpu_da:reduce=pr,lanes=24", "recipe `gpu_da`: parameter `lanes` = `24`: 2, 4, 8, 16 or 32 with reduce=pr"),
        ("spmm", 32, "gpu_da:reduce=pr,lanes=8,rows=64", "recipe `gpu_da`: parameter `rows` = `64`: at most 32 with reduce=pr (a warp per row or group of non-zeros)"),
        ("spmm", 70, "gpu_da:reduce=pr,lanes=8", "recipe `gpu_da` does not apply to this program: reduce=pr with lanes=8 puts 4 columns of the width side by side in a warp, but the width 70 is not a multiple of 4 (use lanes=32)"),
        ("spmm", 20, "gpu_da:reduce=pr,lanes=8,k=none", "recipe `gpu_da` does not apply to this program: reduce=pr with lanes=8 puts 4 columns of the width side by side in a warp, which needs the width fixed (k=auto with the inputs, or k=N)"),
        ("spmm", 20, "gpu_da:balance=cb", "recipe `gpu_da`: parameter `balance` = `cb`: expected one of rb, eb"),
        ("sddmm", 20, "gpu_da", "recipe `gpu_da` does not apply to this program: the main iteration is not SpMM-shaped (row: spatial, sparse column: reduction, width: spatial)"),
    ];
    for (op, k, spec, want) in cases {
        let got = err(op, k, spec);
        assert!(got.contains(want), "{spec}:\n got: {got}\nwant: {want}");
    }
    // `auto` (the default) runs either layout.
    for op in ["spmm", "spmm_cm"] {
        check_design("gpu_da:balance=eb,reduce=pr", op, DType::F64, 20, 9);
    }
}
