//! GPU kernels written in the text IR (stage III, `tests/simt/*.flat`), run by the SIMT
//! interpreter next to their stage-I programs and compared with the stage-I interpreter
//! on seeded inputs: empty rows, no rows, no entries, a row longer than a block, sizes
//! that divide no block size, and coordinates given unsorted with duplicates. Every
//! kernel runs under several seeds (orders of blocks and threads); kernels without
//! atomic adds must give the same bits under each.

#[path = "simt/mod.rs"]
mod support;

use std::collections::HashMap;

use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::DType;
use sparsile_runtime::InterpOptions;

use support::{check, csr, dense, matrices, parse, rng, Inputs};

const SPMM_SIR: &str = include_str!("simt/spmm.sir");

#[test]
fn spmm_rows_per_thread_equals_stage1() {
    let (p, f) = parse(SPMM_SIR, include_str!("simt/spmm_rows.flat"));
    let mut r = rng(1);
    for k in [32, 20, 45] {
        for (case, coo) in matrices(2) {
            let inputs: Inputs = HashMap::from([
                ("A".to_string(), csr(&coo)),
                ("B".to_string(), dense(&mut r, &[coo.shape[1], k])),
            ]);
            let what = format!("{case}, k = {k}");
            check(&f, &p, &inputs, &InterpOptions::default(), "C", true, &what);
        }
    }
}

#[test]
fn spmm_staging_indices_in_shared_memory_equals_stage1() {
    let (p, f) = parse(SPMM_SIR, include_str!("simt/spmm_shared.flat"));
    let mut r = rng(3);
    for k in [32, 20] {
        for (case, coo) in matrices(4) {
            let inputs: Inputs = HashMap::from([
                ("A".to_string(), csr(&coo)),
                ("B".to_string(), dense(&mut r, &[coo.shape[1], k])),
            ]);
            let what = format!("{case}, k = {k}");
            check(&f, &p, &inputs, &InterpOptions::default(), "C", true, &what);
        }
    }
}

#[test]
fn spmv_with_a_row_per_warp_equals_stage1() {
    let (p, f) = parse(
        include_str!("simt/spmv.sir"),
        include_str!("simt/spmv_warp.flat"),
    );
    let mut r = rng(5);
    for (case, coo) in matrices(6) {
        let inputs: Inputs = HashMap::from([
            ("A".to_string(), csr(&coo)),
            ("x".to_string(), dense(&mut r, &[coo.shape[1]])),
        ]);
        check(&f, &p, &inputs, &InterpOptions::default(), "y", true, case);
    }
}

#[test]
fn sddmm_with_a_warp_dot_product_per_nonzero_equals_stage1() {
    let (p, f) = parse(
        include_str!("simt/sddmm.sir"),
        include_str!("simt/sddmm_warp.flat"),
    );
    let mut r = rng(7);
    for feat in [40, 16] {
        for (case, coo) in matrices(8) {
            let (m, n) = (coo.shape[0], coo.shape[1]);
            let inputs: Inputs = HashMap::from([
                ("S".to_string(), csr(&coo)),
                ("X".to_string(), dense(&mut r, &[m, feat])),
                ("Y".to_string(), dense(&mut r, &[n, feat])),
            ]);
            let what = format!("{case}, feat = {feat}");
            check(&f, &p, &inputs, &InterpOptions::default(), "O", true, &what);
        }
    }
}

#[test]
fn element_balanced_spmm_with_segmented_sums_and_atomics_equals_stage1() {
    let (p, f) = parse(
        include_str!("simt/spmm_coo.sir"),
        include_str!("simt/spmm_segment.flat"),
    );
    let mut r = rng(9);
    for k in [3, 8] {
        for (case, coo) in matrices(10) {
            let a = SparseTensor::from_coo_with(&coo, &Format::Coo, DType::F32).unwrap();
            let inputs: Inputs = HashMap::from([
                ("A".to_string(), a),
                ("B".to_string(), dense(&mut r, &[coo.shape[1], k])),
            ]);
            // The row count is not stored by a COO tensor's structure alone.
            let opts = InterpOptions {
                params: HashMap::from([("m".to_string(), coo.shape[0] as i64)]),
                ..Default::default()
            };
            let what = format!("{case}, k = {k}");
            check(&f, &p, &inputs, &opts, "Y", false, &what);
        }
    }
}

#[test]
fn horizontally_fused_launch_equals_stage1() {
    let (p, f) = parse(
        include_str!("simt/fused.sir"),
        include_str!("simt/fused.flat"),
    );
    let mut r = rng(11);
    for (q, (case, coo)) in matrices(12).into_iter().enumerate() {
        let len = [45, 0, 32, 1, 100, 7, 64][q % 7];
        let inputs: Inputs = HashMap::from([
            ("A".to_string(), csr(&coo)),
            ("x".to_string(), dense(&mut r, &[coo.shape[1]])),
            ("w".to_string(), dense(&mut r, &[len])),
        ]);
        let what = format!("{case}, p = {len}");
        let opts = InterpOptions::default();
        check(&f, &p, &inputs, &opts, "y", true, &what);
        check(&f, &p, &inputs, &opts, "z", true, &what);
    }
}
