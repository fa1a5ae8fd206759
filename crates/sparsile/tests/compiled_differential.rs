//! Every operator × format × default schedule: the compiled C kernel against the
//! reference interpreter, on seeded random inputs with empty rows, an empty matrix, a
//! single row, one very long row, and sizes that do not divide block sizes; f32 and f64.
//!
//! Tolerance: |compiled − interpreted| ≤ tol · (1 + Σ|terms|) per element, with
//! tol = 1e-4 for f32 and 1e-10 for f64; the interpreter accumulates in f64, the kernel
//! in the buffer's type. Without a C compiler the test prints that it skipped.

mod support;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::DType;
use sparsile::ir::IndexType;
use sparsile::{compile, compile_for, evaluate, RunOptions};
use support::{check_kernel, close, dense, have_compiler, matrix};

fn check(program: &str, inputs: &HashMap<String, SparseTensor<'static>>, dtype: DType, what: &str) {
    let kernel = compile(program).unwrap_or_else(|e| panic!("{what}: compile: {e}\n{program}"));
    check_kernel(&kernel, program, inputs, dtype, what);
}

const FORMATS_2D: [&str; 10] = [
    "csr",
    "csc",
    "coo",
    "dcsr",
    "bsr:2x3",
    "dbsr:4x4",
    "ell",
    "dia",
    "srbcrs:4x2",
    "ragged",
];
const SHAPES: [(&str, usize, usize); 5] = [
    ("random", 13, 11),
    ("empty", 7, 5),
    ("random", 1, 9),
    ("long_row", 9, 40),
    ("empty", 0, 4),
];

#[test]
fn spmv_spmm_sddmm_on_every_format() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for dtype in [DType::F32, DType::F64] {
        let ty = dtype.name();
        for format in FORMATS_2D {
            for (kind, m, n) in SHAPES {
                let coo = matrix(kind, m, n, &mut rng);
                let a =
                    SparseTensor::from_coo_with(&coo, &format.parse::<Format>().unwrap(), dtype)
                        .unwrap();
                let what = format!("{format} {kind} {m}x{n} {ty}");
                let spmv = format!("tensor A: {ty}[m, n] {format}\ntensor x: {ty}[n]\ntensor y: {ty}[m]\ny[i] = A[i,j] * x[j]\n");
                let inputs = HashMap::from([
                    ("A".to_string(), a.clone()),
                    ("x".to_string(), dense(&[n], dtype, &mut rng)),
                ]);
                check(&spmv, &inputs, dtype, &format!("spmv {what}"));
                let spmm = format!("tensor A: {ty}[m, n] {format}\ntensor B: {ty}[n, k]\ntensor C: {ty}[m, k]\nC[i,k] = A[i,j] * B[j,k]\n");
                let inputs = HashMap::from([
                    ("A".to_string(), a.clone()),
                    ("B".to_string(), dense(&[n, 5], dtype, &mut rng)),
                ]);
                check(&spmm, &inputs, dtype, &format!("spmm {what}"));
                if format == "srbcrs:4x2" {
                    continue; // an SR-BCRS output cannot be randomly accessed: sampled outputs use the other formats
                }
                let sddmm = format!(
                    "tensor A: {ty}[m, n] {format}\ntensor X: {ty}[m, k]\ntensor Y: {ty}[k, n]\ntensor C: {ty}[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"
                );
                let inputs = HashMap::from([
                    ("A".to_string(), a.clone()),
                    ("X".to_string(), dense(&[m, 3], dtype, &mut rng)),
                    ("Y".to_string(), dense(&[3, n], dtype, &mut rng)),
                ]);
                check(&sddmm, &inputs, dtype, &format!("sddmm {what}"));
            }
        }
    }
}

#[test]
fn higher_order_and_elementwise_kernels() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let dtype = DType::F64;
    // A random 3-D tensor.
    let (p, q, r) = (5, 4, 6);
    let mut t3 = CooTensor::empty(vec![p, q, r]);
    for i in 0..p {
        for j in 0..q {
            for k in 0..r {
                if rng.random_bool(0.2) && i != 2 {
                    t3.coords.extend([i, j, k]);
                    t3.values.push(rng.random_range(-1.0..1.0));
                }
            }
        }
    }
    for format in ["csf", "coo"] {
        let a3 =
            SparseTensor::from_coo_with(&t3, &format.parse::<Format>().unwrap(), dtype).unwrap();
        let mttkrp = format!("tensor A: f64[p, q, r] {format}\ntensor B: f64[q, l]\ntensor C: f64[r, l]\ntensor D: f64[p, l]\nD[i,l] = A[i,j,k] * B[j,l] * C[k,l]\n");
        let inputs = HashMap::from([
            ("A".to_string(), a3.clone()),
            ("B".to_string(), dense(&[q, 3], dtype, &mut rng)),
            ("C".to_string(), dense(&[r, 3], dtype, &mut rng)),
        ]);
        check(&mttkrp, &inputs, dtype, &format!("mttkrp {format}"));
        let ttv = format!("tensor A: f64[p, q, r] {format}\ntensor v: f64[r]\ntensor Y: f64[p, q]\nY[i,j] = A[i,j,k] * v[k]\n");
        let inputs = HashMap::from([
            ("A".to_string(), a3.clone()),
            ("v".to_string(), dense(&[r], dtype, &mut rng)),
        ]);
        check(&ttv, &inputs, dtype, &format!("ttv {format}"));
        // RGMS: Y[i,l] = sum_r sum_j sum_k A[r,i,j] X[j,k] W[r,k,l] with A of shape (p relations) x q x r.
        let rgms = format!(
            "tensor A: f64[nr, m, n] {format}\ntensor X: f64[n, kk]\ntensor W: f64[nr, kk, ll]\ntensor Y: f64[m, ll]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n"
        );
        let inputs = HashMap::from([
            ("A".to_string(), a3.clone()),
            ("X".to_string(), dense(&[r, 2], dtype, &mut rng)),
            ("W".to_string(), dense(&[p, 2, 3], dtype, &mut rng)),
        ]);
        check(&rgms, &inputs, dtype, &format!("rgms {format}"));
    }
    let coo = matrix("random", 8, 6, &mut rng);
    for format in ["csr", "bsr:3x3", "ell", "coo"] {
        let a =
            SparseTensor::from_coo_with(&coo, &format.parse::<Format>().unwrap(), dtype).unwrap();
        let batched = format!("tensor A: f64[m, n] {format}\ntensor B: f64[h, n, k]\ntensor C: f64[h, m, k]\nC[b,i,k] = A[i,j] * B[b,j,k]\n");
        let inputs = HashMap::from([
            ("A".to_string(), a.clone()),
            ("B".to_string(), dense(&[3, 6, 4], dtype, &mut rng)),
        ]);
        check(&batched, &inputs, dtype, &format!("batched spmm {format}"));
        let ew = format!("tensor A: f64[m, n] {format}\ntensor D: f64[m, n]\ntensor C: f64[m, n] {format}\nC[i,j] = A[i,j] * relu(D[i,j]) + 0.5 * A[i,j]\n");
        let inputs = HashMap::from([
            ("A".to_string(), a.clone()),
            ("D".to_string(), dense(&[8, 6], dtype, &mut rng)),
        ]);
        check(&ew, &inputs, dtype, &format!("elementwise {format}"));
    }
}

#[test]
fn co_iteration_is_an_error_that_points_to_the_interpreter() {
    if !have_compiler() {
        return;
    }
    let program = "tensor A: f64[m, n] csr\ntensor B: f64[m, n] csr\ntensor C: f64[m, n] csr\nC[i,j] = A[i,j] + B[i,j]\n";
    let err = compile(program).unwrap_err().to_string();
    assert!(err.contains("interpreter"), "{err}");
}

#[test]
fn kernels_specialise_to_i64_indices() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let coo = matrix("long_row", 9, 30, &mut rng);
    for format in ["csr", "csc", "ell", "bsr:2x2", "coo"] {
        let f: Format = format.parse().unwrap();
        let a =
            SparseTensor::from_coo_with_index(&coo, &f, DType::F64, Some(IndexType::I64)).unwrap();
        let program = format!("tensor A: f64[m, n] {format}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n");
        let inputs = HashMap::from([
            ("A".to_string(), a),
            ("B".to_string(), dense(&[30, 4], DType::F64, &mut rng)),
        ]);
        // The plain kernel assumes i32 indices and says so.
        let err = compile(&program)
            .unwrap()
            .run(&inputs, &RunOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("i64") || err.contains("index type"),
            "{format}: {err}"
        );
        let kernel = compile_for(&program, &inputs).unwrap();
        assert!(
            kernel.ir(sparsile::Stage::C).contains("int64_t *restrict"),
            "{format}"
        );
        let got = kernel.run(&inputs, &RunOptions::default()).unwrap();
        let expected = evaluate(&program, &inputs).unwrap();
        close(
            &got["C"].to_dense_f64(),
            &expected["C"].to_dense_f64(),
            1e-10,
            &format!("i64 {format}"),
        );
    }
}

#[test]
fn sparse_convolution_as_rgms_and_as_a_gather() {
    if !have_compiler() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    // A 1-D convolution over 10 points with 3 kernel offsets: output o reads input o + r - 1.
    let (points, offsets, cin, cout) = (10usize, 3usize, 2usize, 3usize);
    let mut map = CooTensor::empty(vec![offsets, points, points]);
    let mut nbr = Vec::new();
    for o in 0..points {
        for r in 0..offsets {
            let i = o as i64 + r as i64 - 1;
            nbr.push(if (0..points as i64).contains(&i) {
                i as f64
            } else {
                -1.0
            });
        }
    }
    for r in 0..offsets {
        for o in 0..points {
            let i = o as i64 + r as i64 - 1;
            if (0..points as i64).contains(&i) {
                map.coords.extend([r, o, i as usize]);
                map.values.push(1.0);
            }
        }
    }
    let x = dense(&[points, cin], DType::F64, &mut rng);
    let w = dense(&[offsets, cin, cout], DType::F64, &mut rng);
    for format in ["coo", "csf"] {
        let m = SparseTensor::from_coo_with(&map, &format.parse::<Format>().unwrap(), DType::F64)
            .unwrap();
        let rgms = format!(
            "tensor M: f64[kk, outs, ins] {format}\ntensor X: f64[ins, ci]\ntensor W: f64[kk, ci, co]\ntensor Y: f64[outs, co]\nY[o,c] = M[r,o,i] * X[i,d] * W[r,d,c]\n"
        );
        let inputs = HashMap::from([
            ("M".to_string(), m),
            ("X".to_string(), x.clone()),
            ("W".to_string(), w.clone()),
        ]);
        check(
            &rgms,
            &inputs,
            DType::F64,
            &format!("convolution as rgms ({format})"),
        );
    }
    // The gather form: an integer neighbour map, -1 where the input point is outside.
    let nbr = SparseTensor::dense_from_f64(&[points, offsets], &nbr, DType::F64).unwrap();
    let gather = "tensor X: f64[ins, ci]\ntensor nbr: i32[outs, kk]\ntensor W: f64[kk, ci, co]\ntensor Y: f64[outs, co]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n";
    let inputs = HashMap::from([
        ("nbr".to_string(), nbr),
        ("X".to_string(), x),
        ("W".to_string(), w),
    ]);
    check(gather, &inputs, DType::F64, "convolution as a gather");
}
