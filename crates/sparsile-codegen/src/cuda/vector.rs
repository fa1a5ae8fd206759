//! `vectorized` loops in a launch: each thread runs the loop's iterations itself, written
//! out one after the other, and reads consecutive elements of global memory with one
//! vector load (`float2`, `float4`, `double2`) where it can prove the load aligned.
//!
//! A loop `for v in lo..hi vectorized` with a constant extent `E` of 2 or 4 becomes
//! ```text
//! { /* block, vectorized over v: 4 iterations, X in float4 loads */
//!   const float4 X_v = *(const float4 *)&X[base];
//!   { const int64_t v = 0; body, X[base + v] read as X_v.x }
//!   { const int64_t v = 1; body, X[base + v] read as X_v.y }
//!   …
//! }
//! ```
//! Which reads become vector loads is [`sparsile_ir::loops::vector_loads`]: reads every
//! iteration makes, of buffers the loop does not write, at `base + v` with `base` a
//! provable multiple of the vector width (`float4`/`float2` for f32, `double2` for f64).
//!
//! `W · size` bytes is then the alignment the buffer's address needs: the kernel's
//! [`super::KernelInfo::alignments`] say so for the runtime, which allocates its own
//! buffers 256-byte aligned and refuses a caller's pointer that is not aligned.
//! Other reads stay scalar, and other extents are written as a serial loop: the
//! iterations are the serial loop's in order either way, so the result is the same.

use std::collections::HashSet;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{Expr, For, Stmt, VectorLoad};
use sparsile_ir::{BufferId, DType, VarId};

use crate::c::ctx::Ctx;
use crate::c::expr::emit_as;
use crate::c::types::Ty;
use crate::CodegenError;

/// The CUDA vector type of one load.
pub(super) fn vector_type(r: &VectorLoad) -> &'static str {
    match (r.dtype, r.width) {
        (DType::F64, _) => "double2",
        (_, 2) => "float2",
        _ => "float4",
    }
}

/// A read served by a vector load: the buffer, the index as the body writes it, and the
/// C expression of the element (`X_v.y`).
pub(super) type Element = (BufferId, Expr, String);

/// Declares the vector loads of `reads` (lines for the writer) and returns, per
/// iteration, what each read's element is called.
pub(super) fn load_lines(
    ctx: &mut Ctx,
    reads: &[VectorLoad],
    extent: usize,
) -> Result<(Vec<String>, Vec<Vec<Element>>), CodegenError> {
    const PARTS: [&str; 4] = ["x", "y", "z", "w"];
    let mut lines = Vec::new();
    let mut per_iteration = vec![Vec::new(); extent];
    for r in reads {
        let buffer = ctx.buffer_name(r.buffer)?.to_string();
        let ty = vector_type(r);
        let mut names = Vec::new();
        for chunk in 0..extent.div_ceil(r.width) {
            let name = ctx.names.fresh(&format!("{buffer}_v"));
            let offset = if chunk == 0 {
                r.base.clone()
            } else {
                Expr::binary(
                    BinaryOp::Add,
                    r.base.clone(),
                    Expr::Int((chunk * r.width) as i64),
                )
            };
            let at = emit_as(ctx, &offset, Ty::I64)?;
            lines.push(format!(
                "const {ty} {name} = *(const {ty} *)&{buffer}[{}];",
                at.text
            ));
            names.push(name);
        }
        for (u, it) in per_iteration.iter_mut().enumerate() {
            let text = format!("{}.{}", names[u / r.width], PARTS[u % r.width]);
            it.push((r.buffer, r.index.clone(), text));
        }
    }
    Ok((lines, per_iteration))
}

/// The loop variable and locals of `f`'s body that nothing reads once `reads` are served
/// by vector loads (such as the index `c` of `X[i * K + c]`): the body is written
/// without them, since NVRTC warns about locals never referenced. To a fixed point: a
/// dead local's value reads nothing.
pub(super) fn dead_vars(f: &For, reads: &[VectorLoad]) -> HashSet<VarId> {
    if reads.is_empty() {
        return HashSet::new();
    }
    let body = Stmt::map_exprs(&f.body, &mut |e| {
        e.map(&mut |x| match x {
            Expr::Load { buffer, indices }
                if reads.iter().any(|r| {
                    r.buffer == *buffer && indices.as_slice() == std::slice::from_ref(&r.index)
                }) =>
            {
                Some(Expr::Float(0.0))
            }
            _ => None,
        })
    });
    let mut candidates: HashSet<VarId> = Stmt::declared_vars(&body)
        .into_iter()
        .filter(|v| {
            let mut let_bound = false;
            Stmt::visit_all(&body, &mut |s| {
                let_bound |= matches!(s, Stmt::Let { var, .. } if var == v);
            });
            let_bound
        })
        .collect();
    candidates.insert(f.var);
    let mut dead = HashSet::new();
    loop {
        let mut read = HashSet::new();
        Stmt::visit_all(&body, &mut |s| {
            let skip =
                matches!(s, Stmt::Let { var, .. } | Stmt::Assign { var, .. } if dead.contains(var));
            if !skip {
                for e in s.own_exprs() {
                    e.visit(&mut |x| {
                        if let Expr::Var(v) = x {
                            read.insert(*v);
                        }
                    });
                }
            }
        });
        let next: HashSet<VarId> = candidates.difference(&read).copied().collect();
        if next == dead {
            return dead;
        }
        dead = next;
    }
}
