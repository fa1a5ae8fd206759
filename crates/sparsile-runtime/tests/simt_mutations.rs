//! Mutated GPU functions never make the SIMT interpreter panic: each mutant (one
//! expression replaced, one loop's kind or axis changed, one buffer's kind or length
//! changed, a barrier added or removed, a reduction's lanes changed) runs without the
//! verifier and either gives outputs or an error (kernels with shared memory, a warp
//! reduction, a segmented sum and tensor-core `mma`s).
//!
//! Replacement constants are small or extreme (`i64::MIN`, `i64::MAX`: overflow), never
//! merely large, so that no mutant runs a loop for hours.

#[path = "simt/mod.rs"]
mod support;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::coord::{BinaryOp, Program, UnaryOp};
use sparsile_ir::loops::{
    BarrierScope, BufferKind, BufferLayout, CmpOp, Expr, ForKind, Func, GpuAxis, GpuDim, LogicOp,
    Stmt,
};
use sparsile_ir::{BufferId, DType, ParamId, Span, VarId};
use sparsile_runtime::simt::{self, SimtOptions};
use sparsile_runtime::InterpOptions;

use support::{dense, rng, rows, Inputs};

/// Calls `f` on every expression of `stmts` (parents first).
fn exprs(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Expr)) {
    fn expr(e: &mut Expr, f: &mut impl FnMut(&mut Expr)) {
        f(e);
        match e {
            Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Param(_) => {}
            Expr::Load { indices, .. } => indices.iter_mut().for_each(|i| expr(i, f)),
            Expr::Unary { arg, .. } => expr(arg, f),
            Expr::Binary { lhs, rhs, .. }
            | Expr::Cmp { lhs, rhs, .. }
            | Expr::Logic { lhs, rhs, .. } => {
                expr(lhs, f);
                expr(rhs, f);
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                expr(cond, f);
                expr(then, f);
                expr(otherwise, f);
            }
            Expr::Search { lo, hi, value, .. } => {
                expr(lo, f);
                expr(hi, f);
                expr(value, f);
            }
        }
    }
    for s in stmts {
        match s {
            Stmt::For(l) => {
                expr(&mut l.lo, f);
                expr(&mut l.hi, f);
                exprs(&mut l.body, f);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                expr(cond, f);
                exprs(then_body, f);
                exprs(else_body, f);
            }
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => expr(value, f),
            Stmt::Store { indices, value, .. } | Stmt::AtomicAdd { indices, value, .. } => {
                indices.iter_mut().for_each(|i| expr(i, f));
                expr(value, f);
            }
            Stmt::Prefetch { indices, .. } => indices.iter_mut().for_each(|i| expr(i, f)),
            Stmt::WarpReduce { value, key, .. } => {
                expr(value, f);
                key.iter_mut().for_each(|k| expr(k, f));
            }
            Stmt::Mma(m) => {
                m.c_indices.iter_mut().for_each(|i| expr(i, f));
                expr(&mut m.a, f);
                expr(&mut m.b, f);
                m.guard.iter_mut().for_each(|g| expr(g, f));
            }
            Stmt::Barrier { .. } => {}
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => exprs(body, f),
        }
    }
}

/// Calls `f` on every statement list of `stmts` (itself first).
fn lists(stmts: &mut Vec<Stmt>, f: &mut impl FnMut(&mut Vec<Stmt>)) {
    f(stmts);
    for s in stmts {
        match s {
            Stmt::For(l) => lists(&mut l.body, f),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                lists(then_body, f);
                lists(else_body, f);
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => lists(body, f),
            _ => {}
        }
    }
}

/// A random small expression; ids may be undeclared.
fn random_expr(r: &mut ChaCha8Rng, func: &Func, depth: u32) -> Expr {
    let leaf = depth == 0 || r.random_bool(0.4);
    let id = |r: &mut ChaCha8Rng, n: usize| r.random_range(0..n as u32 + 2);
    if leaf {
        return match r.random_range(0..6) {
            0 => Expr::Int([-1, 0, 1, 3, 33, i64::MIN, i64::MAX][r.random_range(0..7)]),
            1 => Expr::Float([0.0, -1.5, f64::NAN, f64::INFINITY][r.random_range(0..4)]),
            2 | 3 => Expr::Var(VarId(id(r, func.vars.len()))),
            4 => Expr::Param(ParamId(id(r, func.params.len()))),
            _ => Expr::Int(r.random_range(-5..40)),
        };
    }
    let sub = |r: &mut ChaCha8Rng| Box::new(random_expr(r, func, depth - 1));
    match r.random_range(0..7) {
        0 => Expr::Load {
            buffer: BufferId(r.random_range(0..func.buffers.len() as u32 + 1)),
            indices: (0..r.random_range(0..3))
                .map(|_| random_expr(r, func, depth - 1))
                .collect(),
        },
        1 => Expr::Unary {
            op: UnaryOp::ALL[r.random_range(0..UnaryOp::ALL.len())],
            arg: sub(r),
        },
        2 => {
            let ops = [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Rem,
                BinaryOp::Max,
                BinaryOp::Min,
            ];
            Expr::Binary {
                op: ops[r.random_range(0..ops.len())],
                lhs: sub(r),
                rhs: sub(r),
            }
        }
        3 => Expr::Cmp {
            op: CmpOp::ALL[r.random_range(0..6)],
            lhs: sub(r),
            rhs: sub(r),
        },
        4 => Expr::Logic {
            op: if r.random_bool(0.5) {
                LogicOp::And
            } else {
                LogicOp::Or
            },
            lhs: sub(r),
            rhs: sub(r),
        },
        5 => Expr::Select {
            cond: sub(r),
            then: sub(r),
            otherwise: sub(r),
        },
        _ => Expr::Search {
            buffer: BufferId(r.random_range(0..func.buffers.len() as u32 + 1)),
            lo: sub(r),
            hi: sub(r),
            value: sub(r),
        },
    }
}

fn random_kind(r: &mut ChaCha8Rng) -> ForKind {
    let dim = GpuDim::ALL[r.random_range(0..3)];
    match r.random_range(0..5) {
        0 => ForKind::Serial,
        1 => ForKind::Unrolled,
        2 => ForKind::Parallel,
        3 => ForKind::Bound(GpuAxis::Block(dim)),
        _ => ForKind::Bound(GpuAxis::Thread(dim)),
    }
}

fn mutate(r: &mut ChaCha8Rng, base: &Func) -> Func {
    let mut f = base.clone();
    let mut count = 0;
    match r.random_range(0..9) {
        0..=3 => {
            exprs(&mut f.body, &mut |_| count += 1);
            let target = r.random_range(0..count);
            let mut replacement = Some(random_expr(r, base, 3));
            let mut n = 0;
            exprs(&mut f.body, &mut |e| {
                if n == target {
                    if let Some(x) = replacement.take() {
                        *e = x;
                    }
                }
                n += 1;
            });
        }
        4 => {
            // One loop gets another kind or axis.
            lists(&mut f.body, &mut |l| {
                count += l.iter().filter(|s| matches!(s, Stmt::For(_))).count()
            });
            let target = r.random_range(0..count.max(1));
            let kind = random_kind(r);
            let mut n = 0;
            lists(&mut f.body, &mut |l| {
                for s in l.iter_mut() {
                    if let Stmt::For(lp) = s {
                        if n == target {
                            lp.kind = kind;
                        }
                        n += 1;
                    }
                }
            });
        }
        5 => {
            let b = BufferId(r.random_range(0..f.buffers.len() as u32));
            f.buffers[b].layout = BufferLayout::Flat(random_expr(r, base, 1));
        }
        6 => {
            let b = BufferId(r.random_range(0..f.buffers.len() as u32));
            f.buffers[b].kind = [BufferKind::Shared, BufferKind::Local, BufferKind::Scratch]
                [r.random_range(0..3)]
            .clone();
        }
        7 => {
            // A barrier added somewhere, or one removed.
            lists(&mut f.body, &mut |_| count += 1);
            let target = r.random_range(0..count);
            let scope = if r.random_bool(0.5) {
                BarrierScope::Block
            } else {
                BarrierScope::Warp
            };
            let remove = r.random_bool(0.3);
            let at = r.random_range(0..8usize);
            let mut n = 0;
            lists(&mut f.body, &mut |l| {
                if n == target {
                    let barrier = l.iter().position(|s| matches!(s, Stmt::Barrier { .. }));
                    match barrier {
                        Some(p) if remove => {
                            l.remove(p);
                        }
                        _ => l.insert(
                            at.min(l.len()),
                            Stmt::Barrier {
                                scope,
                                span: Span::default(),
                            },
                        ),
                    }
                }
                n += 1;
            });
        }
        _ => {
            let lanes = r.random_range(0..40);
            lists(&mut f.body, &mut |l| {
                for s in l.iter_mut() {
                    if let Stmt::WarpReduce { lanes: x, .. } = s {
                        *x = lanes;
                    }
                }
            });
        }
    }
    f
}

/// Runs `count` mutants of `flat` (which must run as it is).
fn mutants_of(
    sir: &str,
    flat: &str,
    inputs: &Inputs,
    opts: &InterpOptions,
    seed: u64,
    count: usize,
) {
    let p: Program = sir.parse().unwrap();
    let base: Func = flat.parse().unwrap();
    simt::run(&base, &p, inputs, opts).expect("the unmutated function runs");
    let mut r = rng(seed);
    let (mut ok, mut errors) = (0, 0);
    for k in 0..count {
        let f = mutate(&mut r, &base);
        let simt = SimtOptions {
            seed: k as u64,
            verify_func: false,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            simt::run_with(&f, &p, inputs, opts, &simt)
        }));
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty());
                errors += 1;
            }
            Err(_) => panic!("mutant {k} panicked:\n{f}"),
        }
    }
    eprintln!("{ok} mutants ran, {errors} returned errors");
    assert!(
        ok > count / 20 && errors > count / 4,
        "{ok} ran, {errors} failed"
    );
}

fn csr_inputs(r: &mut ChaCha8Rng, k: usize) -> Inputs {
    let coo = rows(r, 9, 7, |i| [0, 3, 7, 1, 0, 5, 2, 7, 4][i]);
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap(),
        ),
        ("B".to_string(), dense(r, &[7, k])),
    ])
}

#[test]
fn mutants_of_a_shared_memory_kernel_never_panic() {
    let mut r = rng(41);
    let inputs = csr_inputs(&mut r, 5);
    mutants_of(
        include_str!("simt/spmm.sir"),
        include_str!("simt/spmm_shared.flat"),
        &inputs,
        &InterpOptions::default(),
        42,
        400,
    );
}

#[test]
fn mutants_of_a_warp_reduction_kernel_never_panic() {
    let mut r = rng(43);
    let coo = rows(&mut r, 9, 40, |i| [0, 33, 7, 1, 0, 5, 2, 40, 4][i]);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap(),
        ),
        ("x".to_string(), dense(&mut r, &[40])),
    ]);
    mutants_of(
        include_str!("simt/spmv.sir"),
        include_str!("simt/spmv_warp.flat"),
        &inputs,
        &InterpOptions::default(),
        44,
        400,
    );
}

#[test]
fn mutants_of_a_segmented_sum_kernel_never_panic() {
    let mut r = rng(45);
    let coo = rows(&mut r, 9, 7, |i| [0, 3, 7, 1, 0, 5, 2, 7, 4][i]);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Coo, DType::F32).unwrap(),
        ),
        ("B".to_string(), dense(&mut r, &[7, 3])),
    ]);
    let opts = InterpOptions {
        params: HashMap::from([("m".to_string(), 9)]),
        ..Default::default()
    };
    mutants_of(
        include_str!("simt/spmm_coo.sir"),
        include_str!("simt/spmm_segment.flat"),
        &inputs,
        &opts,
        46,
        400,
    );
}

#[test]
fn mutants_of_a_tensor_core_kernel_never_panic() {
    let mut r = rng(47);
    let coo = rows(&mut r, 37, 29, |i| 1 + i % 4);
    let bsr: Format = "bsr:16x16".parse().unwrap();
    let b: Vec<f64> = (0..29 * 20).map(|i| (i % 7) as f64 - 3.0).collect();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &bsr, DType::F16).unwrap(),
        ),
        (
            "B".to_string(),
            SparseTensor::dense_from_f64(&[29, 20], &b, DType::F16).unwrap(),
        ),
    ]);
    let opts = InterpOptions {
        params: HashMap::from([("m".to_string(), 37)]),
        ..Default::default()
    };
    let flat = include_str!("simt/bsr_mma.flat")
        .replace("TYPE", "f16")
        .replace("MMA", "m16n8k16 f16")
        .replace("DEPTH", "1");
    mutants_of(
        &include_str!("simt/bsr.sir").replace("TYPE", "f16"),
        &flat,
        &inputs,
        &opts,
        48,
        300,
    );
}
