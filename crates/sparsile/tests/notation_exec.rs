//! Runs lowered index notation programs in the reference interpreter on seeded random
//! inputs and compares every output with a direct dense evaluation of the notation.
//!
//! The dense evaluation follows the notation's meaning: statements in order; the
//! right-hand side is a sum of terms, each summed over its own indices that are not on
//! the left; reads outside a dimension (an indirect index out of range) give zero.

use std::collections::{BTreeMap, HashMap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::ast::{Access, AssignOp, Dim, Expr, Index, Program as Ast};
use sparsile::notation::{check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::coord::{verify, BinaryOp, UnaryOp};
use sparsile_runtime::{interpret, InterpOptions};

/// Dense row-major arrays by tensor name, with their shapes.
type Dense = HashMap<String, (Vec<usize>, Vec<f64>)>;

fn dim_value(d: &Dim, sizes: &HashMap<&str, usize>) -> usize {
    match d {
        Dim::Named(n) => sizes[n.as_str()],
        Dim::Const(c) => *c as usize,
    }
}

fn offset(shape: &[usize], coord: &[i64]) -> Option<usize> {
    let mut off = 0usize;
    for (&c, &d) in coord.iter().zip(shape) {
        if c < 0 || c as usize >= d {
            return None;
        }
        off = off * d + c as usize;
    }
    Some(off)
}

fn read(dense: &Dense, a: &Access, env: &HashMap<String, i64>) -> f64 {
    let coord: Vec<i64> = a
        .indices
        .iter()
        .map(|ix| match ix {
            Index::Var { name, .. } => env[name],
            Index::Indirect(inner) => read(dense, inner, env) as i64,
        })
        .collect();
    let (shape, values) = &dense[&a.tensor];
    offset(shape, &coord).map_or(0.0, |o| values[o])
}

fn eval(dense: &Dense, e: &Expr, env: &HashMap<String, i64>) -> f64 {
    match e {
        Expr::Access(a) => read(dense, a, env),
        Expr::Int { value, .. } => *value as f64,
        Expr::Float { value, .. } => *value,
        Expr::Unary { op, arg, .. } => op.apply_f64(eval(dense, arg, env)),
        Expr::Binary { op, lhs, rhs, .. } => {
            op.apply_f64(eval(dense, lhs, env), eval(dense, rhs, env))
        }
    }
}

fn terms<'a>(e: &'a Expr, sign: f64, out: &mut Vec<(&'a Expr, f64)>) {
    match e {
        Expr::Binary {
            op: op @ (BinaryOp::Add | BinaryOp::Sub),
            lhs,
            rhs,
            ..
        } => {
            terms(lhs, sign, out);
            terms(rhs, if *op == BinaryOp::Sub { -sign } else { sign }, out);
        }
        Expr::Unary {
            op: UnaryOp::Neg,
            arg,
            ..
        } => terms(arg, -sign, out),
        _ => out.push((e, sign)),
    }
}

/// Evaluates every statement densely; returns the arrays of all tensors.
fn dense_reference(ast: &Ast, sizes: &HashMap<&str, usize>, mut dense: Dense) -> Dense {
    let checked = check(ast).unwrap();
    for (s, cs) in ast.statements.iter().zip(&checked.statements) {
        let out = &ast.tensors[cs.output];
        let shape: Vec<usize> = out.dims.iter().map(|d| dim_value(d, sizes)).collect();
        let mut result = match s.op {
            AssignOp::Assign => vec![0.0; shape.iter().product()],
            AssignOp::Accumulate => dense[&out.name].1.clone(),
            AssignOp::Max | AssignOp::Min => unimplemented!("sums only (see extremum.rs)"),
        };
        let lhs_vars: Vec<String> = Expr::Access(s.lhs.clone()).vars();
        let mut ts = Vec::new();
        terms(&s.rhs, 1.0, &mut ts);
        for (term, sign) in ts {
            let mut vars: Vec<String> = lhs_vars.clone();
            for v in term.vars() {
                if !vars.contains(&v) {
                    vars.push(v);
                }
            }
            let ranges: Vec<usize> = vars
                .iter()
                .map(|v| dim_value(&cs.var_dims[v], sizes))
                .collect();
            let total: usize = ranges.iter().product();
            for flat in 0..total {
                let mut rest = flat;
                let mut env = HashMap::new();
                for (v, &r) in vars.iter().zip(&ranges).rev() {
                    env.insert(v.clone(), (rest % r) as i64);
                    rest /= r;
                }
                let coord: Vec<i64> = s
                    .lhs
                    .indices
                    .iter()
                    .map(|ix| match ix {
                        Index::Var { name, .. } => env[name],
                        Index::Indirect(inner) => read(&dense, inner, &env) as i64,
                    })
                    .collect();
                // Writes outside the output (a scatter index out of range) are skipped.
                if let Some(o) = offset(&shape, &coord) {
                    result[o] += sign * eval(&dense, term, &env);
                }
            }
        }
        dense.insert(out.name.clone(), (shape, result));
    }
    dense
}

/// Like [`check_against_dense`] but returns `false` (checking nothing) when the program
/// is rejected by the front end.
fn check_if_accepted(text: &str, sizes: &[(&str, usize)], seed: u64) -> bool {
    if sparsile::compile_notation(text).is_err() {
        return false;
    }
    check_against_dense_inner(text, sizes, seed, false);
    true
}

fn check_against_dense(text: &str, sizes: &[(&str, usize)], seed: u64) {
    check_against_dense_inner(text, sizes, seed, true);
}

/// Compiles `text`, builds random inputs (sparse ones with about `density` stored
/// entries), runs the interpreter and compares every output with the dense reference.
fn check_against_dense_inner(text: &str, sizes: &[(&str, usize)], seed: u64, nonzero: bool) {
    let sizes: HashMap<&str, usize> = sizes.iter().copied().collect();
    let ast = parse(text).unwrap();
    let program = lower(&ast).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify(&program).unwrap_or_else(|e| panic!("{e:?}\n{program}"));
    let checked = check(&ast).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inputs = HashMap::new();
    let mut dense: Dense = HashMap::new();
    for (t, decl) in ast.tensors.iter().enumerate() {
        if checked.is_output[t] {
            continue;
        }
        let shape: Vec<usize> = decl.dims.iter().map(|d| dim_value(d, &sizes)).collect();
        let total: usize = shape.iter().product();
        let sparse = checked.is_sparse(t);
        let mut coo = CooTensor::empty(shape.clone());
        let mut values = vec![0.0; total];
        for (flat, slot) in values.iter_mut().enumerate() {
            if sparse && rng.random::<f64>() > 0.35 {
                continue;
            }
            let v = if decl.dtype.is_int() {
                // An index: mostly in range of the largest size, sometimes out of range.
                let hi = sizes.values().copied().max().unwrap_or(1) as i64 + 1;
                rng.random_range(0..hi) as f64
            } else {
                (rng.random_range(-8..=8) as f64) * 0.25
            };
            *slot = v;
            let mut rest = flat;
            let mut coord = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&coord);
            coo.values.push(v);
        }
        let dtype = if decl.dtype.is_int() {
            sparsile_ir::DType::F64
        } else {
            decl.dtype
        };
        let tensor = SparseTensor::from_coo_with(&coo, &decl.format, dtype)
            .unwrap_or_else(|e| panic!("{}: {e}", decl.name));
        dense.insert(decl.name.clone(), (shape, values));
        inputs.insert(decl.name.clone(), tensor);
    }
    let options = InterpOptions {
        params: program
            .params
            .values()
            .filter_map(|p| {
                sizes
                    .get(p.name.as_str())
                    .map(|&v| (p.name.clone(), v as i64))
            })
            .collect(),
        ..InterpOptions::default()
    };
    let outputs = interpret(&program, &inputs, &options)
        .unwrap_or_else(|e| panic!("interpreter: {e}\n{program}"));
    let reference = dense_reference(&ast, &sizes, dense);
    let mut checked_any = BTreeMap::new();
    for (t, decl) in ast.tensors.iter().enumerate() {
        if !checked.is_output[t] {
            continue;
        }
        let got = outputs[&decl.name].to_dense_f64();
        let (_, want) = &reference[&decl.name];
        assert_eq!(got.len(), want.len(), "{}", decl.name);
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
                "{}: element {k}: interpreter {g}, dense {w}\n{text}\n{program}",
                decl.name
            );
        }
        checked_any.insert(decl.name.clone(), want.iter().any(|v| *v != 0.0));
    }
    assert!(
        !nonzero || checked_any.values().any(|nonzero| *nonzero),
        "all outputs are zero: the test would not catch a wrong program\n{text}"
    );
}

const SPMM_FORMATS: [&str; 11] = [
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

#[test]
fn spmv_and_spmm_on_every_2d_format() {
    for (seed, f) in SPMM_FORMATS.iter().enumerate() {
        let spmm = format!(
            "tensor A: f64[m, n] {f}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
        );
        check_against_dense(&spmm, &[("m", 5), ("n", 7), ("k", 3)], seed as u64);
        let spmv = format!(
            "tensor A: f64[m, n] {f}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
        );
        check_against_dense(&spmv, &[("m", 6), ("n", 5)], 100 + seed as u64);
    }
}

#[test]
fn sddmm_and_elementwise() {
    for f in ["csr", "bsr:2x2", "coo", "ell"] {
        let sddmm = format!(
            "tensor A: f64[m, n] {f}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {f}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"
        );
        check_against_dense(&sddmm, &[("m", 5), ("n", 6), ("k", 4)], 7);
        let ew = format!(
            "tensor A: f64[m, n] {f}\ntensor B: f64[m, n]\ntensor C: f64[m, n]\ntensor D: f64[m, n] {f}\nC[i,j] = A[i,j] * B[i,j]\nD[i,j] = -A[i,j] * relu(B[i,j])\n"
        );
        check_against_dense(&ew, &[("m", 5), ("n", 6)], 8);
    }
}

#[test]
fn union_and_intersection() {
    let text = "tensor A: f64[m, n] csr\ntensor B: f64[m, n] csr\ntensor U: f64[m, n] csr\ntensor P: f64[m, n] csr\nU[i,j] = A[i,j] - 2 * B[i,j]\nP[i,j] = A[i,j] * B[i,j]\n";
    check_against_dense(text, &[("m", 6), ("n", 7)], 9);
}

#[test]
fn tensor_kernels() {
    let mttkrp = "tensor B: f64[m, n, o] csf\ntensor C: f64[n, r]\ntensor D: f64[o, r]\ntensor A: f64[m, r]\nA[i,j] = B[i,k,l] * C[k,j] * D[l,j]\n";
    check_against_dense(mttkrp, &[("m", 4), ("n", 3), ("o", 5), ("r", 2)], 10);
    let ttv = "tensor B: f64[m, n, o] coo\ntensor c: f64[o]\ntensor Y: f64[m, n]\nY[i,j] = B[i,j,k] * c[k]\n";
    check_against_dense(ttv, &[("m", 4), ("n", 3), ("o", 5)], 11);
    for f in ["csf", "coo"] {
        let rgms = format!("tensor A: f64[r, m, n] {f}\ntensor X: f64[n, k]\ntensor W: f64[r, k, l]\ntensor Y: f64[m, l]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n");
        check_against_dense(
            &rgms,
            &[("r", 3), ("m", 4), ("n", 5), ("k", 2), ("l", 3)],
            12,
        );
    }
}

#[test]
fn batched_and_convolution() {
    let bspmm = "tensor A: f64[m, n] csr\ntensor B: f64[b, n, k]\ntensor C: f64[b, m, k]\nC[t,i,k] = A[i,j] * B[t,j,k]\n";
    check_against_dense(bspmm, &[("m", 4), ("n", 5), ("k", 3), ("b", 2)], 13);
    let bsddmm = "tensor A: f64[m, n] csr\ntensor X: f64[b, m, k]\ntensor Y: f64[b, k, n]\ntensor C: f64[b, m, n]\nC[t,i,j] = A[i,j] * X[t,i,k] * Y[t,k,j]\n";
    check_against_dense(bsddmm, &[("m", 4), ("n", 5), ("k", 3), ("b", 2)], 14);
    let gather = "tensor X: f64[ins, cin]\ntensor nbr: i32[outs, offsets]\ntensor W: f64[offsets, cin, cout]\ntensor Y: f64[outs, cout]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n";
    check_against_dense(
        gather,
        &[
            ("ins", 6),
            ("cin", 2),
            ("outs", 4),
            ("offsets", 3),
            ("cout", 2),
        ],
        15,
    );
}

#[test]
fn multi_statement_programs() {
    let text = "tensor A: f64[m, m] csr\ntensor X: f64[m, f]\ntensor W: f64[f, h]\ntensor b: f64[h]\ntensor XW: f64[m, h]\ntensor Z: f64[m, h]\nXW[i,k] = X[i,j] * W[j,k]\nZ[i,k] = A[i,j] * XW[j,k] + b[k]\nZ[i,k] += max(XW[i,k], 0.5) / 2\n";
    check_against_dense(text, &[("m", 5), ("f", 3), ("h", 2)], 16);
    let nonlinear = "tensor A: f64[m, n] csr\ntensor C: f64[m, n]\ntensor y: f64[m]\nC[i,j] = exp(A[i,j]) - 1\ny[i] = abs(A[i,j]) * 3 + min(A[i,j], 0)\n";
    check_against_dense(nonlinear, &[("m", 4), ("n", 5)], 17);
}

/// A random right-hand side over `A` (csr), `B` (bsr:2x2), `D` (dense) `[m, n]`, `x[n]`
/// and `y[m]`, indexed by `i` and `j`.
fn random_expr(rng: &mut ChaCha8Rng, depth: u32) -> String {
    const LEAVES: [&str; 7] = ["A[i,j]", "B[i,j]", "D[i,j]", "x[j]", "y[i]", "2", "0.5"];
    if depth == 0 || rng.random_range(0..3) == 0 {
        return LEAVES[rng.random_range(0..LEAVES.len())].to_string();
    }
    let a = random_expr(rng, depth - 1);
    match rng.random_range(0..9) {
        0 => format!("({a} + {})", random_expr(rng, depth - 1)),
        1 => format!("({a} - {})", random_expr(rng, depth - 1)),
        2 | 3 => format!("{a} * {}", random_expr(rng, depth - 1)),
        4 => format!("{a} / 2"),
        5 => format!("max({a}, {})", random_expr(rng, depth - 1)),
        6 => format!("-{a}"),
        7 => format!("relu({a})"),
        _ => format!("abs({a})"),
    }
}

#[test]
fn random_expressions_match_the_dense_evaluation() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let decls = "tensor A: f64[m, n] csr\ntensor B: f64[m, n] bsr:2x2\ntensor D: f64[m, n]\ntensor x: f64[n]\ntensor y: f64[m]\ntensor C: f64[m, n]\ntensor v: f64[m]\ntensor S: f64[m, n] csr\n";
    let mut accepted = 0;
    for case in 0..300 {
        let rhs = random_expr(&mut rng, 3);
        let lhs = ["C[i,j]", "v[i]", "S[i,j]"][case % 3];
        let text = format!("{decls}{lhs} = {rhs}\n");
        accepted += usize::from(check_if_accepted(&text, &[("m", 5), ("n", 3)], case as u64));
    }
    assert!(accepted > 100, "only {accepted} random programs accepted");
}
