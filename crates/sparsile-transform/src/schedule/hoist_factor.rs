//! `hoist_factor`: takes the factors of a reduction's addend that do not change across
//! a loop out of it: `Σ_k a·g(k)` becomes `a·Σ_k g(k)`.
//!
//! Purpose: SDDMM's dot product `C_local[0] = C_local[0] + A[i, jp] * X[i, k] * Y[j, k]`
//! multiplies by the sparse value `A[i, jp]` once per `k`; hoisted, it multiplies once
//! per non-zero, and the loop over `k` is a plain dot product whose vector form is one
//! multiply-add per lane. Floating-point results differ from the original order by
//! rounding only (distributivity, like the reassociation `vectorize_reduction` allows).
//!
//! Preconditions (each its own [`ScheduleError`], naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]) and is serial
//!   ([`ScheduleError::NotSerial`]);
//! - its reductions follow the rules of reassociable local reductions
//!   ([`sparsile_ir::loops::local_reductions`]: `L[e] = L[e] + v` into a local buffer
//!   `L`, `e` fixed across the loop, `L` touched by nothing else in it;
//!   [`ScheduleError::NotReassociable`]);
//! - at least one reduced element has exactly one update, whose addend is a product
//!   with at least one factor that reads no variable of the loop (its own or one
//!   declared inside it) and no buffer the loop writes, and at least one that does
//!   ([`ScheduleError::HoistNothing`]).
//!
//! Postcondition: for each such element a new local `<L>_sum` of one element: it is
//! zeroed before the loop, the update adds the product of the varying factors into it,
//! and after the loop `L[e] = L[e] + (product of the fixed factors) * <L>_sum[0]`.
//! Other reductions are left as they are.
//!
//! Example (`tests/schedule/hoist_factor/sddmm.before` → `.after`):
//! ```text
//! C_local[0] = 0.0                                C_local[0] = 0.0
//! for k in 0..32 {                                C_local_sum[0] = 0.0
//!   C_local[0] = C_local[0]                →      for k in 0..32 {
//!       + A[i_2, j_p_2] * X[i_2, k] * Y[j_2, k]     C_local_sum[0] = C_local_sum[0] + X[i_2, k] * Y[j_2, k]
//! }                                               }
//!                                                 C_local[0] = C_local[0] + A[i_2, j_p_2] * C_local_sum[0]
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    local_reductions, reduction_addend, Buffer, BufferKind, BufferLayout, Expr, ForKind, Func, Stmt,
};
use sparsile_ir::Span;

use super::loop_ref::{fresh_name, parent_list_mut};
use super::parallel::{find_loop, not_serial};
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "hoist_factor";

/// Hoists the loop-invariant factors of `target`'s reductions (see the module docs).
pub fn hoist_factor(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    if f.kind != ForKind::Serial {
        return Err(not_serial(PRIMITIVE, target, f));
    }
    let reductions = local_reductions(func, f).map_err(|e| ScheduleError::NotReassociable {
        block: target.block.clone(),
        var: target.var.clone(),
        reason: e.message,
        span: e.span,
        loop_span: f.span,
    })?;
    let mut inside: HashSet<VarId> = Stmt::declared_vars(&f.body).into_iter().collect();
    inside.insert(f.var);
    let mut stored: HashSet<BufferId> = HashSet::new();
    Stmt::visit_all(&f.body, &mut |s| match s {
        Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } => {
            stored.insert(*buffer);
        }
        Stmt::Mma(m) => {
            stored.insert(m.c);
        }
        _ => {}
    });
    let fixed = |e: &Expr| {
        let mut ok = true;
        e.visit(&mut |x| match x {
            Expr::Var(v) if inside.contains(v) => ok = false,
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if stored.contains(buffer) => {
                ok = false
            }
            _ => {}
        });
        ok
    };
    // Each element with one update whose product splits into fixed and varying factors.
    let mut plans: Vec<Plan> = Vec::new();
    for r in &reductions {
        let mut updates = Vec::new();
        Stmt::visit_all(&f.body, &mut |s| {
            if let Stmt::Store {
                buffer, indices, ..
            } = s
            {
                if *buffer == r.buffer && indices.as_slice() == std::slice::from_ref(&r.index) {
                    updates.push(s);
                }
            }
        });
        let [update] = updates.as_slice() else {
            continue;
        };
        let Some(addend) = reduction_addend(update) else {
            continue;
        };
        let (outside, varying): (Vec<&Expr>, Vec<&Expr>) =
            addend.factors().into_iter().partition(|e| fixed(e));
        if outside.is_empty() || varying.is_empty() {
            continue;
        }
        plans.push(Plan {
            buffer: r.buffer,
            index: r.index.clone(),
            outside: Expr::product(outside).expect("checked: not empty"),
            varying: Expr::product(varying).expect("checked: not empty"),
        });
    }
    if plans.is_empty() {
        return Err(ScheduleError::HoistNothing {
            block: target.block.clone(),
            var: target.var.clone(),
            span: f.span,
        });
    }
    let mut out = func.clone();
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut sums = Vec::new();
    for p in &plans {
        let dtype = func.buffers[p.buffer].dtype.compute_type();
        let name = fresh_name(&out, &format!("{}_sum", func.buffers[p.buffer].name));
        let sum = out.buffers.push(Buffer {
            name,
            dtype,
            layout: BufferLayout::Flat(Expr::Int(1)),
            role: BufferRole::Temp,
            kind: BufferKind::Local,
            span: Span::default(),
        });
        let at = || vec![Expr::Int(0)];
        before.push(Stmt::Store {
            buffer: sum,
            indices: at(),
            value: Expr::Float(0.0),
            span: f.span,
        });
        after.push(Stmt::Store {
            buffer: p.buffer,
            indices: vec![p.index.clone()],
            value: Expr::binary(
                BinaryOp::Add,
                Expr::load(p.buffer, vec![p.index.clone()]),
                Expr::binary(BinaryOp::Mul, p.outside.clone(), Expr::load(sum, at())),
            ),
            span: f.span,
        });
        sums.push(sum);
    }
    let body = Stmt::map_leaves(&f.body, &mut |s| {
        let Stmt::Store {
            buffer,
            indices,
            span,
            ..
        } = s
        else {
            return None;
        };
        let k = plans
            .iter()
            .position(|p| p.buffer == *buffer && indices.as_slice() == [p.index.clone()])?;
        let sum = sums[k];
        Some(Stmt::Store {
            buffer: sum,
            indices: vec![Expr::Int(0)],
            value: Expr::binary(
                BinaryOp::Add,
                Expr::load(sum, vec![Expr::Int(0)]),
                plans[k].varying.clone(),
            ),
            span: *span,
        })
    });
    let (list, at) = parent_list_mut(&mut out.body, f.var).expect("the loop was found above");
    let Stmt::For(g) = &mut list[at] else {
        unreachable!("loop_stmt_mut points at the loop")
    };
    g.body = body;
    for (k, s) in after.into_iter().enumerate() {
        list.insert(at + 1 + k, s);
    }
    for s in before.into_iter().rev() {
        list.insert(at, s);
    }
    Ok(out)
}

/// One element's hoisting: the fixed and the varying product.
struct Plan {
    buffer: BufferId,
    index: Expr,
    outside: Expr,
    varying: Expr,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_flatten_and_rebuild_left_to_right() {
        let x = |n: i64| Expr::Int(n);
        let e = Expr::binary(BinaryOp::Mul, x(1), Expr::binary(BinaryOp::Mul, x(2), x(3)));
        let f = e.factors();
        assert_eq!(f, vec![&x(1), &x(2), &x(3)]);
        let p = Expr::product(f).unwrap();
        assert_eq!(
            p,
            Expr::binary(BinaryOp::Mul, Expr::binary(BinaryOp::Mul, x(1), x(2)), x(3))
        );
    }
}
