//! Measures SpMM `C = A * B` (f32) with `A` decomposed by hyb(c, k) (parts horizontally
//! fused into one loop) against the default CSR schedule, on Matrix Market files.
//!
//! ```text
//! cargo run --release -p sparsile --example hyb_spmm -- THREADS C K FILE...
//! ```
//! Prints, per matrix and dense width (32 and 128): the median of 10 runs of each kernel
//! (after one warm-up run), the one-off pre-processing time (planning the
//! decomposition from `A`'s pattern) and the per-run value gather.

use std::collections::HashMap;
use std::time::Instant;

use sparsile::formats::decompose::{DecomposePlan, DecomposeRule};
use sparsile::formats::mtx::{read_path, MtxReadOptions};
use sparsile::formats::{Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::transform::schedule::Schedule;
use sparsile::{compile, compile_notation, compile_program_with, Kernel, RunOptions};

const PROGRAM: &str =
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_runs(
    kernel: &Kernel,
    inputs: &HashMap<String, SparseTensor<'static>>,
    threads: usize,
) -> (f64, Vec<f64>) {
    let options = RunOptions {
        threads: Some(threads),
        ..RunOptions::default()
    };
    let first = kernel.run(inputs, &options).expect("run");
    let times = (0..10)
        .map(|_| {
            let t = Instant::now();
            kernel.run(inputs, &options).expect("run");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    (median(times), first["C"].to_dense_f64())
}

fn hyb_kernel(c: usize, k: u32) -> Kernel {
    let program = compile_notation(PROGRAM).unwrap();
    let mut sch = Schedule::new(&program);
    sch.decompose_format("A", DecomposeRule::Hyb { c, k })
        .unwrap();
    sch.func_or_lower().unwrap();
    let parts: Vec<String> = sch
        .func()
        .unwrap()
        .body
        .iter()
        .filter_map(|s| match s {
            sparsile::ir::loops::Stmt::Block { name, .. } if name.starts_with("C_p") => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    if parts.len() > 1 {
        sch.horizontal_fuse(&parts).unwrap();
    }
    compile_program_with(program, sch.trace()).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: usize = args[0].parse().unwrap();
    let c: usize = args[1].parse().unwrap();
    let k: u32 = args[2].parse().unwrap();
    let csr = compile(PROGRAM).unwrap();
    let hyb = hyb_kernel(c, k);
    for path in &args[3..] {
        let data = read_path(path, &MtxReadOptions::default()).unwrap();
        let mut coo = data.into_coo();
        for (e, v) in coo.values.iter_mut().enumerate() {
            *v = ((e * 7919) % 13) as f64 * 0.125 - 0.75;
        }
        let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
        let (m, n) = (coo.shape[0], coo.shape[1]);
        let rule = DecomposeRule::Hyb { c, k };
        let t = Instant::now();
        let plan = DecomposePlan::new(&rule, &a.structure).unwrap();
        let plan_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let parts = plan.gather(&a.values);
        let gather_ms = t.elapsed().as_secs_f64() * 1e3;
        let stored: usize = parts.iter().map(|p| p.values.len()).sum();
        for width in [32usize, 128] {
            let b: Vec<f64> = (0..n * width)
                .map(|x| ((x * 31) % 17) as f64 * 0.0625)
                .collect();
            let inputs = HashMap::from([
                ("A".to_string(), a.clone()),
                (
                    "B".to_string(),
                    SparseTensor::dense_from_f64(&[n, width], &b, DType::F32).unwrap(),
                ),
            ]);
            let (csr_ms, want) = time_runs(&csr, &inputs, threads);
            let (hyb_ms, got) = time_runs(&hyb, &inputs, threads);
            let err = want
                .iter()
                .zip(&got)
                .map(|(w, g)| (w - g).abs() / (1.0 + w.abs()))
                .fold(0.0, f64::max);
            println!(
                "{path} m={m} n={n} nnz={} K={width} threads={threads}: csr {csr_ms:.3} ms, hyb({c},{k}) {hyb_ms:.3} ms (stored {stored}, plan {plan_ms:.2} ms once, gather {gather_ms:.2} ms per run), max rel diff {err:.1e}",
                coo.nnz()
            );
        }
    }
}
