//! Random integer expressions (floor division and remainder by constants and by
//! loaded values of either sign, max/min, comparisons, short-circuit logic, select,
//! nested negative literals) emitted as C, compiled and run, against an evaluation in
//! Rust with the loop IR's semantics. Checks precedence, parentheses and helpers.

mod common;

use common::build::*;
use common::harness::{compiler, Data, Kernel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_codegen::emit_c;
use sparsile_ir::coord::BufferRole;
use sparsile_ir::loops::{CmpOp, Expr, LogicOp};
use sparsile_ir::{BufferId, DType};

const INPUTS: usize = 4;

/// A random expression whose divisors are never 0 (nonzero literals or loads of the
/// nonzero inputs) and whose values stay far from overflow.
fn gen(rng: &mut ChaCha8Rng, a: BufferId, depth: u32) -> Expr {
    let leaf = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.5) {
            int(rng.random_range(-9..=9))
        } else {
            ld(a, int(rng.random_range(0..INPUTS as i64)))
        }
    };
    if depth == 0 || rng.random_bool(0.2) {
        return leaf(rng);
    }
    let divisor = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.5) {
            let v: i64 = rng.random_range(1..=7);
            int(if rng.random_bool(0.3) { -v } else { v })
        } else {
            ld(a, int(rng.random_range(0..INPUTS as i64)))
        }
    };
    let sub_expr = |rng: &mut ChaCha8Rng| gen(rng, a, depth - 1);
    match rng.random_range(0..10) {
        0 => add(sub_expr(rng), sub_expr(rng)),
        1 => sub(sub_expr(rng), sub_expr(rng)),
        2 => mul(sub_expr(rng), leaf(rng)),
        3 => div(sub_expr(rng), divisor(rng)),
        4 => rem(sub_expr(rng), divisor(rng)),
        5 => max(sub_expr(rng), sub_expr(rng)),
        6 => min(sub_expr(rng), sub_expr(rng)),
        7 => {
            let op = CmpOp::ALL[rng.random_range(0..6)];
            cmp(op, sub_expr(rng), sub_expr(rng))
        }
        8 => {
            if rng.random_bool(0.5) {
                and(sub_expr(rng), sub_expr(rng))
            } else {
                or(sub_expr(rng), sub_expr(rng))
            }
        }
        _ => select(sub_expr(rng), sub_expr(rng), sub_expr(rng)),
    }
}

fn eval(e: &Expr, inputs: &[i64]) -> i64 {
    match e {
        Expr::Int(n) => *n,
        Expr::Load { indices, .. } => inputs[eval(&indices[0], inputs) as usize],
        Expr::Binary { op, lhs, rhs } => {
            let (l, r) = (eval(lhs, inputs), eval(rhs, inputs));
            op.apply_i64(l, r)
                .unwrap_or_else(|| panic!("{op:?} {l} {r} has no value"))
        }
        Expr::Cmp { op, lhs, rhs } => op.apply(eval(lhs, inputs), eval(rhs, inputs)) as i64,
        Expr::Logic { op, lhs, rhs } => {
            let l = eval(lhs, inputs) != 0;
            let value = match op {
                LogicOp::And => l && eval(rhs, inputs) != 0,
                LogicOp::Or => l || eval(rhs, inputs) != 0,
            };
            value as i64
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            if eval(cond, inputs) != 0 {
                eval(then, inputs)
            } else {
                eval(otherwise, inputs)
            }
        }
        other => unreachable!("not generated: {other:?}"),
    }
}

#[test]
fn random_integer_expressions_match_rust() {
    let count = 200usize;
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut b = FuncBuilder::new("exprs");
    let a = b.values("a", DType::I64, int(INPUTS as i64), BufferRole::Input);
    let out = b.values("out", DType::I64, int(count as i64), BufferRole::Output);
    let exprs: Vec<Expr> = (0..count).map(|_| gen(&mut rng, a, 4)).collect();
    let body = exprs
        .iter()
        .enumerate()
        .map(|(k, e)| store(out, int(k as i64), e.clone()))
        .collect();
    let func = b.finish(vec![block("exprs", body)]);
    sparsile_ir::flat::verify(&func).unwrap();
    let src = emit_c(&func).unwrap();
    let Some(cc) = compiler() else {
        eprintln!("no C compiler: random expression check skipped");
        return;
    };
    // Random trees compare constants with comparison results (`-8 > (a < b)`), which
    // compilers rightly call pointless; that warning is off here only.
    let kernel = Kernel::compile_with(&cc, &src, &["-Wno-bool-compare"]);
    for trial in 0..5 {
        let inputs: Vec<i64> = (0..INPUTS)
            .map(|_| {
                let v: i64 = rng.random_range(1..=12);
                if rng.random_bool(0.5) {
                    -v
                } else {
                    v
                }
            })
            .collect();
        let mut bufs = vec![Data::I64(inputs.clone()), Data::I64(vec![0; count])];
        kernel.run(&mut bufs, &[], 1);
        let Data::I64(got) = &bufs[1] else {
            unreachable!()
        };
        for (k, e) in exprs.iter().enumerate() {
            let want = eval(e, &inputs);
            assert_eq!(
                got[k],
                want,
                "trial {trial}, expression {k} with inputs {inputs:?}: {}",
                src.code
                    .lines()
                    .find(|l| l.contains(&format!("out[{k}] =")))
                    .unwrap_or("")
            );
        }
    }
}
