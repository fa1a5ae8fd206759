//! Mutated loop-level functions never make the interpreter panic: each mutant (one
//! expression replaced, or one loop made parallel, or one buffer length changed) either
//! runs or returns an error.

mod common;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::coord::{BinaryOp, Program, UnaryOp};
use sparsile_ir::loops::{BufferLayout, CmpOp, Expr, ForKind, Func, LogicOp, Stmt};
use sparsile_ir::{BufferId, DType, ParamId, VarId};
use sparsile_runtime::{flat_interp, InterpOptions};

const SIR: &str = "\
func spmm(m, n, k, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JB = dense_fixed(n)
  axis K = dense_fixed(k)
  buffer A: f32[I, J] input
  buffer B: f32[JB, K] input
  buffer C: f32[I, K] output
  iter spmm over [I: S, J: R, K: S] as (i, j, kp) {
    C[i, kp] = C[i, kp] + A[i, j] * B[j, kp]
  }
}
";

const FLAT: &str = "\
flat func spmm(m, n, k, nnz) {
  buffer A: f32[nnz] input values
  buffer B: f32[n * k] input values
  buffer C: f32[m * k] output values
  buffer A_J_indptr: i32[m + 1] input indptr(A, 1)
  buffer A_J_indices: i32[nnz] input indices(A, 1)
  buffer T: f64[4] temp scratch
  block spmm {
    for i in 0..m parallel {
      for kp in 0..k {
        let acc: f32 = 0.0
        for jp in A_J_indptr[i]..A_J_indptr[i + 1] {
          let j: idx = A_J_indices[jp]
          let q: idx = search(A_J_indices, A_J_indptr[i], A_J_indptr[i + 1], j)
          if q >= 0 && j < n {
            acc = acc + A[q] * B[j * k + kp]
          }
        }
        T[kp % 4] = acc
        C[i * k + kp] = select(i % 2 == 0, C[i * k + kp] + T[kp % 4], acc / 1.0)
      }
    }
  }
}
";

fn count(stmts: &[Stmt]) -> usize {
    let mut n = 0;
    walk(&mut stmts.to_vec(), &mut |_| n += 1);
    n
}

/// Calls `f` on every expression of `stmts` (parents first).
fn walk(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Expr)) {
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
                walk(&mut l.body, f);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                expr(cond, f);
                walk(then_body, f);
                walk(else_body, f);
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
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk(body, f),
        }
    }
}

fn loops(stmts: &mut [Stmt], f: &mut impl FnMut(&mut sparsile_ir::loops::For)) {
    for s in stmts {
        match s {
            Stmt::For(l) => {
                f(l);
                loops(&mut l.body, f);
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                loops(then_body, f);
                loops(else_body, f);
            }
            Stmt::Block { body, .. } => loops(body, f),
            _ => {}
        }
    }
}

/// A random small expression; ids may be undeclared.
fn random_expr(r: &mut ChaCha8Rng, func: &Func, depth: u32) -> Expr {
    let leaf = depth == 0 || r.random_bool(0.4);
    let id = |r: &mut ChaCha8Rng, n: usize| r.random_range(0..n as u32 + 2);
    if leaf {
        return match r.random_range(0..5) {
            0 => Expr::Int(
                *[-1, 0, 1, 3, 1 << 40, i64::MIN, i64::MAX]
                    .get(id(r, 5) as usize)
                    .unwrap_or(&2),
            ),
            1 => Expr::Float(
                *[0.0, -1.5, f64::NAN, f64::INFINITY]
                    .get(id(r, 2) as usize)
                    .unwrap_or(&2.5),
            ),
            2 => Expr::Var(VarId(id(r, func.vars.len()))),
            3 => Expr::Param(ParamId(id(r, func.params.len()))),
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

fn mutate(r: &mut ChaCha8Rng, base: &Func) -> Func {
    let mut f = base.clone();
    match r.random_range(0..6) {
        0..=3 => {
            let target = r.random_range(0..count(&f.body));
            let replacement = random_expr(r, base, 3);
            let mut n = 0;
            let mut replacement = Some(replacement);
            walk(&mut f.body, &mut |e| {
                if n == target {
                    if let Some(x) = replacement.take() {
                        *e = x;
                    }
                }
                n += 1;
            });
        }
        4 => {
            let target = r.random_range(0..3);
            let mut n = 0;
            loops(&mut f.body, &mut |l| {
                if n == target {
                    l.kind = ForKind::Parallel;
                    l.lo = Expr::Int(r.random_range(-2..2));
                }
                n += 1;
            });
        }
        _ => {
            let b = BufferId(r.random_range(0..f.buffers.len() as u32));
            f.buffers[b].layout = BufferLayout::Flat(random_expr(r, base, 1));
        }
    }
    f
}

#[test]
fn mutants_never_panic() {
    let p: Program = SIR.parse().unwrap();
    let base: Func = FLAT.parse().unwrap();
    let mut r = common::rng(31);
    let coo = common::random_coo(&mut r, &[6, 5], 0.4);
    let (_, b) = common::random_dense(&mut r, &[5, 3]);
    let b = b.convert(&Format::Dense).unwrap();
    let b = SparseTensor::dense_from_f64(&[5, 3], &b.values.to_f64_vec(), DType::F32).unwrap();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap(),
        ),
        ("B".to_string(), b),
    ]);
    let opts = InterpOptions::default();
    flat_interp::run(&base, &p, &inputs, &opts).expect("the unmutated function runs");
    let (mut ok, mut errors) = (0, 0);
    for k in 0..600 {
        let f = mutate(&mut r, &base);
        let result = catch_unwind(AssertUnwindSafe(|| {
            flat_interp::run(&f, &p, &inputs, &opts)
        }));
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                assert!(!e.to_string().is_empty());
                errors += 1;
            }
            Err(_) => panic!("mutant {k} panicked:\n{f:#?}"),
        }
    }
    eprintln!("{ok} mutants ran, {errors} returned errors");
    assert!(ok > 20 && errors > 100, "{ok} ran, {errors} failed");
}
