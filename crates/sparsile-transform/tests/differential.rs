//! Differential tests: every kernel × format through the stage-I interpreter and
//! through the lowering pipeline (executed by `common::flat_eval`), on seeded random
//! inputs with empty rows, empty matrices, single rows, long rows and block sizes that
//! do not divide the shape.

mod common;

use common::{differential, Pattern};

const FORMATS_2D: [&str; 11] = [
    "csr",
    "csc",
    "coo",
    "dcsr",
    "bsr:2x2",
    "dbsr:2x3",
    "ell",
    "ell:7",
    "dia",
    "srbcrs:2x2",
    "ragged",
];

const PATTERNS: [Pattern; 4] = [
    Pattern::Random(0.35),
    Pattern::EmptyRows(0.5),
    Pattern::Empty,
    Pattern::LongRow(0.2),
];

#[test]
fn spmv_every_format() {
    for (s, f) in FORMATS_2D.iter().enumerate() {
        let text = format!(
            "tensor A: f64[m, n] {f}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
        );
        for (p, pat) in PATTERNS.iter().enumerate() {
            differential(&text, &[("m", 7), ("n", 5)], *pat, (s * 10 + p) as u64);
        }
    }
}

#[test]
fn spmm_every_format() {
    for (s, f) in FORMATS_2D.iter().enumerate() {
        let text = format!(
            "tensor A: f64[m, n] {f}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
        );
        for (p, pat) in PATTERNS.iter().enumerate() {
            differential(
                &text,
                &[("m", 7), ("n", 5), ("k", 3)],
                *pat,
                (s * 10 + p) as u64,
            );
        }
        // A single row, and a shape no block size divides.
        differential(
            &text,
            &[("m", 1), ("n", 9), ("k", 2)],
            Pattern::Random(0.5),
            500 + s as u64,
        );
        differential(
            &text,
            &[("m", 11), ("n", 7), ("k", 2)],
            Pattern::Random(0.3),
            600 + s as u64,
        );
    }
}

#[test]
fn sddmm_and_elementwise() {
    for (s, f) in FORMATS_2D.iter().enumerate() {
        let sddmm = format!(
            "tensor A: f64[m, n] {f}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {f}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"
        );
        let ew = format!(
            "tensor A: f64[m, n] {f}\ntensor B: f64[m, n]\ntensor C: f64[m, n]\ntensor D: f64[m, n] {f}\nC[i,j] = A[i,j] * B[i,j]\nD[i,j] = -A[i,j] * relu(B[i,j])\n"
        );
        for (p, pat) in PATTERNS.iter().enumerate() {
            let seed = (s * 10 + p) as u64;
            differential(&sddmm, &[("m", 5), ("n", 7), ("k", 3)], *pat, seed);
            differential(&ew, &[("m", 5), ("n", 7)], *pat, seed);
        }
    }
}

#[test]
fn tensor_kernels() {
    let mttkrp = "tensor B: f64[m, n, o] csf\ntensor C: f64[n, r]\ntensor D: f64[o, r]\ntensor A: f64[m, r]\nA[i,j] = B[i,k,l] * C[k,j] * D[l,j]\n";
    for f in ["csf", "coo"] {
        let ttv = format!("tensor B: f64[m, n, o] {f}\ntensor c: f64[o]\ntensor Y: f64[m, n]\nY[i,j] = B[i,j,k] * c[k]\n");
        let rgms = format!("tensor A: f64[r, m, n] {f}\ntensor X: f64[n, k]\ntensor W: f64[r, k, l]\ntensor Y: f64[m, l]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n");
        for (p, pat) in PATTERNS.iter().enumerate() {
            let seed = 40 + p as u64;
            differential(
                mttkrp,
                &[("m", 4), ("n", 3), ("o", 5), ("r", 2)],
                *pat,
                seed,
            );
            differential(&ttv, &[("m", 4), ("n", 3), ("o", 5)], *pat, seed);
            differential(
                &rgms,
                &[("r", 3), ("m", 4), ("n", 5), ("k", 2), ("l", 3)],
                *pat,
                seed,
            );
        }
    }
}

#[test]
fn batched_and_convolution() {
    let bspmm = "tensor A: f64[m, n] csr\ntensor B: f64[b, n, k]\ntensor C: f64[b, m, k]\nC[t,i,k] = A[i,j] * B[t,j,k]\n";
    let bsddmm = "tensor A: f64[m, n] csr\ntensor X: f64[b, m, k]\ntensor Y: f64[b, k, n]\ntensor C: f64[b, m, n]\nC[t,i,j] = A[i,j] * X[t,i,k] * Y[t,k,j]\n";
    let gather = "tensor X: f64[ins, cin]\ntensor nbr: i32[outs, offsets]\ntensor W: f64[offsets, cin, cout]\ntensor Y: f64[outs, cout]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n";
    let scatter = "tensor X: f64[ins, cin]\ntensor out: i32[ins]\ntensor Y: f64[outs, cin]\nY[out[p], c] = X[p, c]\n";
    for (p, pat) in PATTERNS.iter().enumerate() {
        let seed = 70 + p as u64;
        differential(bspmm, &[("m", 4), ("n", 5), ("k", 3), ("b", 2)], *pat, seed);
        differential(
            bsddmm,
            &[("m", 4), ("n", 5), ("k", 3), ("b", 2)],
            *pat,
            seed,
        );
    }
    let conv = [
        ("ins", 6),
        ("cin", 2),
        ("outs", 4),
        ("offsets", 3),
        ("cout", 2),
    ];
    differential(gather, &conv, Pattern::Random(1.0), 80);
    differential(
        scatter,
        &[("ins", 7), ("cin", 2), ("outs", 4)],
        Pattern::Random(1.0),
        81,
    );
}

#[test]
fn multi_statement_programs() {
    let gcn = "tensor A: f64[m, m] csr\ntensor X: f64[m, f]\ntensor W: f64[f, h]\ntensor b: f64[h]\ntensor XW: f64[m, h]\ntensor Z: f64[m, h]\nXW[i,k] = X[i,j] * W[j,k]\nZ[i,k] = A[i,j] * XW[j,k] + b[k]\nZ[i,k] += max(XW[i,k], 0.5) / 2\n";
    differential(
        gcn,
        &[("m", 5), ("f", 3), ("h", 2)],
        Pattern::Random(0.4),
        90,
    );
    let nonlinear = "tensor A: f64[m, n] csr\ntensor C: f64[m, n]\ntensor y: f64[m]\nC[i,j] = exp(A[i,j]) - 1\ny[i] = abs(A[i,j]) * 3 + min(A[i,j], 0)\n";
    differential(
        nonlinear,
        &[("m", 4), ("n", 5)],
        Pattern::EmptyRows(0.6),
        91,
    );
}

/// Coordinate accesses into sparse operands (binary search, dense_variable offsets,
/// padding) through indirect indices.
#[test]
fn gathers_from_sparse_operands() {
    for (s, f) in FORMATS_2D.iter().enumerate() {
        let text = format!(
            "tensor A: f64[m, n] {f}\ntensor idx: i32[m]\ntensor y: f64[m]\ny[i] = A[i, idx[i]]\n"
        );
        // Some formats (SR-BCRS) can only be iterated: the front end refuses the access.
        let Ok(program) = sparsile::compile_notation(&text) else {
            assert_eq!(*f, "srbcrs:2x2");
            continue;
        };
        match sparsile_transform::compile_to_flat(&program) {
            Ok(_) => {
                for (p, pat) in PATTERNS.iter().enumerate() {
                    differential(&text, &[("m", 40), ("n", 5)], *pat, (s * 10 + p) as u64);
                }
            }
            // COO rows are not unique: a coordinate access into them is refused.
            Err(sparsile_transform::LowerError::RandomAccessNonUnique { axis, .. }) => {
                assert_eq!(*f, "coo", "{axis}");
            }
            Err(e) => panic!("{f}: {e}\n{program}"),
        }
    }
}

/// Reductions whose output is indexed by an inner axis (column sums: the outer axis is
/// a reduction, so nothing runs in parallel), and the reductions to a scalar the front
/// end may accept.
#[test]
fn full_reductions() {
    let mut accepted = Vec::new();
    for text in [
        "tensor A: f64[m, n] csr\ntensor s: f64[]\ns[] = A[i,j]\n",
        "tensor A: f64[m, n] csr\ntensor s: f64[1]\ns[z] = A[i,j] * 1\n",
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor s: f64[n]\ns[j] = A[i,j] * x[j]\n",
    ] {
        match sparsile::compile_notation(text) {
            Ok(_) => {
                differential(text, &[("m", 6), ("n", 4)], Pattern::Random(0.5), 95);
                accepted.push(text);
            }
            Err(e) => eprintln!("not accepted by the front end: {e}\n{text}"),
        }
    }
    assert!(!accepted.is_empty());
}
