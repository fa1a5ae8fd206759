//! The GPU schedule primitive `warp_segment_reduce`: the before/after text files
//! (`schedule/warp_segment_reduce/X.before` names the calls in its leading `# ` lines:
//! `split BLOCK VAR FACTOR`, `reorder BLOCK VAR...`, `bind BLOCK VAR AXIS`,
//! `bind_atomic BLOCK VAR AXIS`, `warp_segment_reduce BLOCK VAR`; `SPARSILE_BLESS=1`
//! rewrites `X.after`), one test per precondition with its exact message, the `Schedule`
//! method with its trace step (JSON round trip and replay), and the scheduled functions
//! run by the SIMT interpreter against the stage-I interpreter.

// `ScheduleError` is large by design (it names the loop, block and span); the library
// allows this lint too.
#![allow(clippy::result_large_err)]

mod expected_text;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_ir::loops::{verify, Func, GpuAxis, GpuDim};
use sparsile_ir::DType;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{
    bind, bind_atomic, reorder, split, warp_segment_reduce, LoopRef, Schedule, ScheduleError,
    SplitTail, Trace,
};

use sparsile::formats::{CooTensor, Format, SparseTensor};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMV: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn axis(text: &str) -> GpuAxis {
    GpuAxis::parse(text).unwrap_or_else(|| panic!("not an axis: {text}"))
}

/// Applies one `# ` call of a `.before` file.
fn call(func: &Func, line: &str) -> Func {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = match words.as_slice() {
        ["split", b, v, f] => {
            split(func, &at(b, v), f.parse().unwrap(), SplitTail::InnerFixed).map(|(f, _, _)| f)
        }
        ["reorder", b, vars @ ..] => {
            let loops: Vec<LoopRef> = vars.iter().map(|v| at(b, v)).collect();
            reorder(func, &loops)
        }
        ["bind", b, v, a] => bind(func, &at(b, v), axis(a)),
        ["bind_atomic", b, v, a] => bind_atomic(func, &at(b, v), axis(a)),
        ["warp_segment_reduce", b, v] => warp_segment_reduce(func, &at(b, v)),
        _ => panic!("unknown call `{line}`"),
    };
    let out = out.unwrap_or_else(|e| panic!("`{line}`: {e}"));
    verify(&out).unwrap_or_else(|e| panic!("`{line}`: does not verify: {e:?}"));
    out
}

#[test]
fn before_after_files() {
    for file in expected_text::before_files("warp_segment_reduce") {
        let mut func = file.func.clone();
        for line in &file.calls {
            func = call(&func, line);
        }
        expected_text::check_after(&file.path, &func.to_string());
    }
}

/// The program `text` after `sparse_fuse` of its rows and columns, lowered.
fn fused(text: &str) -> Func {
    let program = sparsile::compile_notation(text).unwrap();
    let mut sch = Schedule::new(&program);
    sch.sparse_fuse(&program_main(text), &["I_m".into(), "A_J".into()])
        .unwrap();
    sch.func_or_lower().unwrap().clone()
}

fn program_main(text: &str) -> String {
    if text.contains("y[i]") { "y" } else { "C" }.to_string()
}

/// The message of the error `f` returns on `func` after `setup` calls.
fn error(func: Func, setup: &[&str], f: impl Fn(&Func) -> Result<Func, ScheduleError>) -> String {
    let mut func = func;
    for line in setup {
        func = call(&func, line);
    }
    match f(&func) {
        Ok(out) => panic!("{setup:?}: expected an error, got\n{out}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn warp_segment_reduce_preconditions() {
    let lowered =
        |text: &str| lower_iterations(&sparsile::compile_notation(text).unwrap()).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            error(fused(SPMM), &["split C j_p 24"], |f| {
                warp_segment_reduce(f, &at("C", "j_p_i"))
            }),
            "warp_segment_reduce: loop `j_p_i` in block `C` (line 4, column 1) cannot be bound to `threadIdx.x`: a warp reduction runs `0..lanes` with lanes a power of two from 2 to 32",
        ),
        (
            error(lowered(SPMV), &["split y.init i 32"], |f| {
                warp_segment_reduce(f, &at("y.init", "i_i"))
            }),
            "warp_segment_reduce: loop `i_i` in block `y.init`: the iterations share `y` but not as a sum: a store in the loop is not an update of it (line 4, column 1)",
        ),
        (
            error(lowered(SPMV), &["split y j_p 32", "reorder y j_p_i j_p_o"], |f| {
                warp_segment_reduce(f, &at("y", "j_p_i"))
            }),
            "warp_segment_reduce: loop `j_p_i` in block `y`: the iterations share `y` as one element in every lane: nothing to segment (use warp_reduce) (line 4, column 1)",
        ),
        (
            error(lowered(SPMV), &["split y i_2 32"], |f| {
                warp_segment_reduce(f, &at("y", "i_2_i"))
            }),
            "warp_segment_reduce: loop `i_2_i` in block `y`: the iterations share `y` by key `i_2`, which is not read as the parent position of a position that steps by one with the lane (so the keys may decrease along the lanes) (line 4, column 1)",
        ),
        (
            error(fused(SPMM), &["split C j_p 32", "split C k2_2 4"], |f| {
                warp_segment_reduce(f, &at("C", "k2_2_i"))
            }),
            "warp_segment_reduce: loop `k2_2_i` in block `C`: the iterations share `C` by key `k2_2`, which is not read as the parent position of a position that steps by one with the lane (so the keys may decrease along the lanes) (line 4, column 1)",
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
fn warp_segment_reduce_is_recorded_and_replays() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    let mut sch = Schedule::new(&program);
    sch.sparse_fuse("C", &["I_m".into(), "A_J".into()]).unwrap();
    let (_, lanes) = sch
        .split(&at("C", "j_p"), 32, SplitTail::InnerFixed)
        .unwrap();
    sch.warp_segment_reduce(&lanes).unwrap();
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"warp_segment_reduce\""), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    // A failing call changes nothing and records nothing.
    let before = sch.trace().steps.len();
    assert!(sch.warp_segment_reduce(&at("C", "j_p_o")).is_err());
    assert_eq!(sch.trace().steps.len(), before);
}

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn dense(shape: &[usize], g: &mut ChaCha8Rng) -> SparseTensor<'static> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|_| g.random_range(-1.0..1.0)).collect();
    SparseTensor::dense_from_f64(shape, &values, DType::F32).unwrap()
}

/// `m × n` with rows of the given lengths (columns spread over `0..n`).
fn rows(lengths: &[usize], n: usize) -> CooTensor {
    let mut triplets = Vec::new();
    for (i, &len) in lengths.iter().enumerate() {
        for t in 0..len {
            triplets.push((i, (t * 7 + i) % n, 1.0 + (i + t) as f64 / 8.0));
        }
    }
    triplets.sort_by_key(|&(i, j, _)| (i, j));
    triplets.dedup_by_key(|&mut (i, j, _)| (i, j));
    CooTensor::from_triplets(vec![lengths.len(), n], &triplets).unwrap()
}

/// The element-balanced SpMM with segmented sums, in the SIMT interpreter, equals the
/// stage-I interpreter: runs that end inside a warp, span several warps, empty rows,
/// a last warp that is not full, no non-zeros at all.
#[test]
fn segmented_spmm_in_the_simt_interpreter_equals_stage1() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    let mut sch = Schedule::new(&program);
    sch.sparse_fuse("C", &["I_m".into(), "A_J".into()]).unwrap();
    let (outer, lanes) = sch
        .split(&at("C", "j_p"), 32, SplitTail::InnerFixed)
        .unwrap();
    sch.warp_segment_reduce(&lanes).unwrap();
    let (o, i) = sch.split(&outer, 2, SplitTail::InnerFixed).unwrap();
    sch.bind_atomic(&o, GpuAxis::Block(GpuDim::X)).unwrap();
    sch.bind_atomic(&i, GpuAxis::Thread(GpuDim::Y)).unwrap();
    let (io, ii) = sch
        .split(&at("C.init", "i"), 64, SplitTail::InnerFixed)
        .unwrap();
    sch.bind(&io, GpuAxis::Block(GpuDim::X)).unwrap();
    sch.bind(&ii, GpuAxis::Thread(GpuDim::X)).unwrap();
    let flat = sch.finish().unwrap().stage3;
    let mut g = rng(5);
    let cases: Vec<(&str, CooTensor)> = vec![
        ("mixed", rows(&[3, 0, 40, 1, 1, 0, 70, 2, 5], 90)),
        ("one long row", rows(&[0, 130, 0], 200)),
        ("short rows", rows(&[1; 45], 6)),
        ("no non-zeros", rows(&[0, 0, 0], 4)),
    ];
    for (what, a) in cases {
        for k in [1, 5] {
            let inputs = HashMap::from([
                (
                    "A".to_string(),
                    SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap(),
                ),
                ("B".to_string(), dense(&[a.shape[1], k], &mut g)),
            ]);
            let got = sparsile_runtime::simt::run(&flat, &program, &inputs, &Default::default())
                .unwrap_or_else(|e| panic!("{what}, k = {k}: {e}"));
            let want = sparsile_runtime::interp::interpret(&program, &inputs, &Default::default())
                .unwrap();
            let (got, want) = (got["C"].to_dense_f64(), want["C"].to_dense_f64());
            for (x, y) in got.iter().zip(&want) {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                    "{what}, k = {k}: {got:?} vs {want:?}"
                );
            }
        }
    }
}
