//! Every lowered program passes the stage-I verifier, prints to the text IR in
//! `tests/notation/<case>.sir` (regenerated with `SPARSILE_BLESS=1`), and the printed text
//! parses back to a program that prints the same.

use std::path::PathBuf;

use sparsile::compile_notation;
use sparsile_ir::coord::{verify, Program};
use sparsile_ir::settings::Settings;

/// (case name, index notation source).
const CASES: &[(&str, &str)] = &[
    ("spmv_csr", "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n"),
    ("spmm_csr", SPMM_CSR),
    ("spmm_csc", "tensor A: f32[m, n] csc\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_coo", "tensor A: f32[m, n] coo\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_dcsr", "tensor A: f32[m, n] dcsr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_bsr", "tensor A: f32[m, n] bsr:4x4\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_dbsr", "tensor A: f32[m, n] dbsr:2x4\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_ell", "tensor A: f32[m, n] ell\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_ell8", "tensor A: f32[m, n] ell:8\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_dia", "tensor A: f32[m, n] dia\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_srbcrs", "tensor A: f32[m, n] srbcrs:4x2\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("spmm_ragged", "tensor A: f32[m, n] ragged\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"),
    ("sddmm", "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[k, n]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"),
    ("sddmm_bsr", "tensor A: f32[m, n] bsr:2x2\ntensor X: f32[m, k]\ntensor Y: f32[k, n]\ntensor C: f32[m, n] bsr:2x2\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"),
    ("mttkrp", "tensor B: f32[m, n, o] csf\ntensor C: f32[n, r]\ntensor D: f32[o, r]\ntensor A: f32[m, r]\nA[i,j] = B[i,k,l] * C[k,j] * D[l,j]\n"),
    ("ttv", "tensor B: f32[m, n, o] csf\ntensor c: f32[o]\ntensor Y: f32[m, n]\nY[i,j] = B[i,j,k] * c[k]\n"),
    ("rgms", "tensor A: f32[r, m, n] csf\ntensor X: f32[n, k]\ntensor W: f32[r, k, l]\ntensor Y: f32[m, l]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n"),
    ("sparse_conv", "tensor M: f32[offsets, outs, ins] coo\ntensor X: f32[ins, cin]\ntensor W: f32[offsets, cin, cout]\ntensor Y: f32[outs, cout]\nY[o,c] = M[r,o,p] * X[p,d] * W[r,d,c]\n"),
    ("sparse_conv_gather", "tensor X: f32[ins, cin]\ntensor nbr: i32[outs, offsets]\ntensor W: f32[offsets, cin, cout]\ntensor Y: f32[outs, cout]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n"),
    ("sparse_conv_scatter", "tensor X: f32[ins, cin]\ntensor inmap: i32[offsets, pairs]\ntensor outmap: i32[offsets, pairs]\ntensor W: f32[offsets, cin, cout]\ntensor Y: f32[outs, cout]\nY[outmap[r,q], c] = X[inmap[r,q], d] * W[r,d,c]\n"),
    ("batched_spmm", "tensor A: f32[m, n] csr\ntensor B: f32[b, n, k]\ntensor C: f32[b, m, k]\nC[t,i,k] = A[i,j] * B[t,j,k]\n"),
    ("batched_sddmm", "tensor A: f32[m, n] csr\ntensor X: f32[b, m, k]\ntensor Y: f32[b, k, n]\ntensor C: f32[b, m, n]\nC[t,i,j] = A[i,j] * X[t,i,k] * Y[t,k,j]\n"),
    ("elementwise_dense_out", "tensor A: f32[m, n] csr\ntensor B: f32[m, n]\ntensor C: f32[m, n]\nC[i,j] = A[i,j] * B[i,j]\n"),
    ("elementwise_sparse_out", "tensor A: f32[m, n] csr\ntensor B: f32[m, n]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * B[i,j]\n"),
    ("sparse_add_union", "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] + B[i,j]\n"),
    ("sparse_mul_intersect", "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * B[i,j]\n"),
    ("linear_terms", "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor b: f32[m]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j] - b[i]\ny[i] += relu(b[i])\n"),
    ("row_max", "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor M: f32[m]\nM[i] max= A[i,j] * x[j]\n"),
    ("scatter_min", "tensor A: f64[m, n] csr\ntensor idx: i64[m]\ntensor M: f64[k]\nM[idx[i]] min= A[i,j]\n"),
    ("scalar_outputs", "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor s: f64[]\ntensor t: f64[]\ns = A[i,j]\nt[] max= x[j] * s[]\n"),
    ("gcn_layer", "tensor A: f32[m, m] csr\ntensor X: f32[m, f]\ntensor W: f32[f, h]\ntensor XW: f32[m, h]\ntensor Z: f32[m, h]\ntensor H: f32[m, h]\nXW[i,k] = X[i,j] * W[j,k]\nZ[i,k] = A[i,j] * XW[j,k]\nH[i,k] = max(Z[i,k], 0.0)\n"),
    ("dense_nonlinear", "tensor A: f32[m, n] csr\ntensor C: f32[m, n]\nC[i,j] = exp(A[i,j]) / 2\n"),
    ("integer_ops", "tensor a: i32[n]\ntensor b: i32[n]\nb[i] = -a[i] * 2 + 1\n"),
    ("reserved_names", "tensor init: f32[iter, as]\ntensor over: f32[as]\ntensor union: f32[iter]\nunion[i] = init[i, k] * over[k]\n"),
];

const SPMM_CSR: &str =
    "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("notation")
}

fn lowered(name: &str, src: &str) -> Program {
    let p = compile_notation(src).unwrap_or_else(|e| panic!("{name}: {e}"));
    if let Err(errors) = verify(&p) {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!(
            "{name}: verifier rejects the lowered program:\n{}\n{p}",
            lines.join("\n")
        );
    }
    p
}

#[test]
fn lowered_programs_verify_and_match_snapshots() {
    let bless = Settings::from_env().bless;
    let dir = snapshot_dir();
    let mut mismatches = Vec::new();
    for (name, src) in CASES {
        let text = lowered(name, src).to_string();
        let path = dir.join(format!("{name}.sir"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with SPARSILE_BLESS=1)", path.display()));
        if expected != text {
            mismatches.push(format!("{name}:\n--- expected\n{expected}--- got\n{text}"));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn printed_programs_parse_back() {
    for (name, src) in CASES {
        let text = lowered(name, src).to_string();
        let reparsed: Program = text
            .parse()
            .unwrap_or_else(|e| panic!("{name}: printed IR does not parse: {e}\n{text}"));
        assert_eq!(reparsed.to_string(), text, "{name}");
        assert!(verify(&reparsed).is_ok(), "{name}");
    }
}

#[test]
fn index_variables_named_like_tensors_or_parameters_round_trip() {
    for src in [
        "tensor x: f32[n]\ntensor y: f32[n]\ny[x] = x[x] * 2\n",
        "tensor A: f32[n, m] csr\ntensor m: f32[m]\ntensor y: f32[n]\ny[n] = A[n, m] * m[m]\n",
    ] {
        let p = lowered(src, src);
        let text = p.to_string();
        let reparsed: Program = text
            .parse()
            .unwrap_or_else(|e| panic!("printed IR does not parse: {e}\n{text}"));
        assert_eq!(reparsed.to_string(), text);
    }
}
