//! `parallel_with`: marks a loop parallel with a chosen partition of its iterations
//! between threads ([`LoopPartition`]).
//!
//! Purpose: rows of a sparse matrix carry very different amounts of work. `parallel`
//! divides the iterations into even chunks; `parallel_with` can instead hand out small
//! chunks dynamically ([`LoopPartition::Dynamic`]), or divide them by the non-zeros an
//! `indptr` array assigns to each iteration ([`LoopPartition::Balanced`]): the runtime
//! computes chunk boundaries when the loop starts, by binary search of the `indptr` over
//! the loop's range, so that each chunk covers about the same number of non-zeros. An
//! iteration is never divided between chunks, so the independence argument of
//! `parallel` carries over unchanged.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - everything [`super::parallel()`] requires (outermost loop of a top-level block,
//!   serial or already parallel, independent iterations);
//! - for `Balanced { indptr }`: `indptr` names a buffer of the function
//!   ([`ScheduleError::UnknownBuffer`]) that is a flat integer array
//!   ([`ScheduleError::PartitionBufferNotIndex`]), and the loop body reads both
//!   `indptr[v]` and `indptr[v + 1]` for the loop variable `v` in every iteration (not
//!   under a condition)
//!   ([`ScheduleError::PartitionBufferNotRead`]), which makes `indptr[lo..=hi]` valid
//!   memory and ties the weights to the loop's rows.
//!
//! Postcondition: the loop has kind `parallel`, `parallel(dynamic)` or
//! `parallel(balanced INDPTR)` ([`sparsile_ir::loops::ForKind`]); nothing else changes.
//!
//! Example (`tests/schedule/partition/spmm_balanced.before` → `.after`):
//! ```text
//! block C {                                  block C {
//!   for i_2 in 0..m {               →          for i_2 in 0..m parallel(balanced A_J_indptr) {
//!     for j_p in A_J_indptr[i_2]..A_J_indptr[i_2 + 1] {   ...
//! ```
//!
//! ```
//! use sparsile_transform::schedule::partition::{parallel_with, LoopPartition};
//! use sparsile_transform::schedule::LoopRef;
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let rows = LoopRef { block: "y".into(), var: "i_2".into() };
//! let indptr = func.buffers.values().find(|b| b.name.ends_with("indptr")).unwrap().name.clone();
//! let balanced = LoopPartition::Balanced { indptr: indptr.clone() };
//! let scheduled = parallel_with(&func, &rows, &balanced).unwrap();
//! assert!(scheduled.to_string().contains(&format!("parallel(balanced {indptr})")));
//! ```

use serde::{Deserialize, Serialize};
use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{BufferLayout, Expr, ForKind, Func, Partition};

use super::parallel::{check_independent, check_position, find_loop, with_loop};
use super::{LoopRef, ScheduleError};

/// How the iterations of a parallel loop are divided between threads (by name, as a
/// schedule trace records it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoopPartition {
    /// Even chunks of iterations.
    #[default]
    Static,
    /// Small chunks taken by threads as they become free.
    Dynamic,
    /// Chunks of about equal `indptr[v + 1] - indptr[v]` summed over their iterations.
    Balanced { indptr: String },
}

/// Marks `target` parallel with `partition` after checking the preconditions in the
/// module docs.
pub fn parallel_with(
    func: &Func,
    target: &LoopRef,
    partition: &LoopPartition,
) -> Result<Func, ScheduleError> {
    let kind = parallel_kind(func, target, partition, "parallel_with")?;
    Ok(with_loop(func, target, |f| f.kind = kind))
}

/// Checks the preconditions of a parallel loop with `partition` (independence included)
/// and returns its kind.
pub(crate) fn parallel_kind(
    func: &Func,
    target: &LoopRef,
    partition: &LoopPartition,
    primitive: &'static str,
) -> Result<ForKind, ScheduleError> {
    let kind = check_partition(func, target, partition, primitive, true)?;
    let found = find_loop(func, target, primitive)?;
    check_independent(func, found.for_, target, primitive, false)?;
    Ok(kind)
}

/// Checks everything but independence: the loop's position ([`check_position`], a loop
/// inside a panel loop accepted when `panel_ok`), and that the partition is valid for it.
/// Returns the loop kind to set.
pub(crate) fn check_partition(
    func: &Func,
    target: &LoopRef,
    partition: &LoopPartition,
    primitive: &'static str,
    panel_ok: bool,
) -> Result<ForKind, ScheduleError> {
    let f = check_position(func, target, primitive, panel_ok)?;
    let partition = match partition {
        LoopPartition::Static => Partition::Static,
        LoopPartition::Dynamic => Partition::Dynamic,
        LoopPartition::Balanced { indptr } => {
            let id = func
                .buffer_by_name(indptr)
                .ok_or_else(|| ScheduleError::UnknownBuffer {
                    primitive,
                    buffer: indptr.clone(),
                })?;
            let b = &func.buffers[id];
            if !b.dtype.is_int() || !matches!(b.layout, BufferLayout::Flat(_)) {
                return Err(ScheduleError::PartitionBufferNotIndex {
                    primitive,
                    block: target.block.clone(),
                    var: target.var.clone(),
                    buffer: indptr.clone(),
                    span: f.span,
                });
            }
            let at_v = Expr::load(id, vec![Expr::Var(f.var)]);
            let at_next = Expr::load(
                id,
                vec![Expr::binary(BinaryOp::Add, Expr::Var(f.var), Expr::Int(1))],
            );
            let (mut reads_v, mut reads_next) = (false, false);
            // Read in every iteration, not under a condition (a loop `bound` extended
            // guards its body, and its extra iterations read nothing).
            each_iteration_expr(&f.body, &mut |e| {
                reads_v |= *e == at_v;
                reads_next |= *e == at_next;
            });
            if !(reads_v && reads_next) {
                return Err(ScheduleError::PartitionBufferNotRead {
                    primitive,
                    block: target.block.clone(),
                    var: target.var.clone(),
                    buffer: indptr.clone(),
                    span: f.span,
                });
            }
            Partition::Balanced { indptr: id }
        }
    };
    Ok(ForKind::parallel(partition))
}

/// Calls `visit` on every expression (and sub-expression) of `stmts`.
/// Calls `visit` on the expressions every execution of `stmts` evaluates: those of its
/// statements and the bounds of its loops, not the bodies of loops or conditions.
fn each_iteration_expr(stmts: &[sparsile_ir::loops::Stmt], visit: &mut impl FnMut(&Expr)) {
    use sparsile_ir::loops::Stmt;
    for s in stmts {
        match s {
            Stmt::For(f) => {
                f.lo.visit(visit);
                f.hi.visit(visit);
            }
            Stmt::If { cond, .. } => cond.visit(visit),
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                each_iteration_expr(body, visit)
            }
            other => other.own_exprs().into_iter().for_each(|e| e.visit(visit)),
        }
    }
}
