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
//! A read `B[idx]` of a global `f32` or `f64` buffer becomes part of a vector load when
//! - it is evaluated in every iteration: in the value of a `let`, assignment or store at
//!   the top of the loop body (not under an `if`, a `select` or a short-circuit `&&`/`||`),
//!   so reading all `E` elements before the first iteration reads nothing the loop would
//!   not read;
//! - the body writes nothing to `B`;
//! - `idx`, with the body's `let`s substituted, is `base + v` (coefficient 1 on `v`), and
//!   `base` neither reads a local the body assigns nor depends on `v`;
//! - `base` (at `v = lo`) is a provable multiple of the vector width `W` (`E` for f32,
//!   2 for f64): a sum or difference of products in which some factor is a literal
//!   multiple of `W` (`i * 32 + c_o * 4` for `W = 4`). A param is not a known multiple.
//!   `specialize` turns a width param into such a literal.
//!
//! `W · size` bytes is then the alignment the buffer's address needs: the kernel's
//! [`super::KernelInfo::alignments`] say so for the runtime, which allocates its own
//! buffers 256-byte aligned and refuses a caller's pointer that is not aligned.
//! Other reads stay scalar, and other extents are written as a serial loop: the
//! iterations are the serial loop's in order either way, so the result is the same.

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{BufferKind, Expr, For, Stmt};
use sparsile_ir::{BufferId, DType, VarId};

use crate::c::ctx::Ctx;
use crate::c::expr::emit_as;
use crate::c::stmt::assigned_vars;
use crate::c::types::Ty;
use crate::CodegenError;

/// The largest extent written out iteration by iteration.
pub(super) const VECTOR_EXTENTS: [i64; 2] = [2, 4];

/// One read of the loop body served by vector loads.
pub(super) struct VectorRead {
    pub(super) buffer: BufferId,
    /// The index as the body writes it (what the expression code matches).
    pub(super) index: Expr,
    /// The element offset of the first iteration's element.
    pub(super) base: Expr,
    /// Elements per vector load.
    pub(super) width: usize,
    pub(super) dtype: DType,
}

impl VectorRead {
    /// The CUDA vector type of one load.
    pub(super) fn vector_type(&self) -> &'static str {
        match (self.dtype, self.width) {
            (DType::F64, _) => "double2",
            (_, 2) => "float2",
            _ => "float4",
        }
    }

    /// The alignment one load needs, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.width * self.dtype.size_bytes()
    }
}

/// A read served by a vector load: the buffer, the index as the body writes it, and the
/// C expression of the element (`X_v.y`).
pub(super) type Element = (BufferId, Expr, String);

/// The reads of `f`'s body (a loop of `extent` iterations) that vector loads can serve,
/// in the order the body reads them, each once.
pub(super) fn vector_reads(ctx: &Ctx, f: &For, extent: i64) -> Vec<VectorRead> {
    let Ok(extent_u) = usize::try_from(extent) else {
        return Vec::new();
    };
    let stored = Stmt::stored_buffers(&f.body);
    let assigned = assigned_vars(&f.body);
    let mut lets: HashMap<VarId, Expr> = HashMap::new();
    let mut out: Vec<VectorRead> = Vec::new();
    for s in &f.body {
        let mut reads = Vec::new();
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => {
                unconditional_loads(value, &mut reads)
            }
            Stmt::Store { indices, value, .. } => {
                unconditional_loads(value, &mut reads);
                indices
                    .iter()
                    .for_each(|i| unconditional_loads(i, &mut reads));
            }
            _ => {}
        }
        for (buffer, index) in reads {
            if out.iter().any(|r| r.buffer == buffer && r.index == *index)
                || stored.contains(&buffer)
            {
                continue;
            }
            let Ok(b) = ctx.buffer(buffer) else { continue };
            if matches!(b.kind, BufferKind::Shared | BufferKind::Local) {
                continue;
            }
            let width = match b.dtype {
                DType::F32 => extent_u,
                DType::F64 => 2,
                _ => continue,
            };
            let full = index.substitute(&mut |v| lets.get(&v).cloned());
            if reads_any(&full, &assigned) || coefficient(&full, f.var) != Some(1) {
                continue;
            }
            let base = without_zeros(&full.substitute(&mut |v| (v == f.var).then(|| f.lo.clone())));
            if !multiple_of(&base, width as i64) {
                continue;
            }
            out.push(VectorRead {
                buffer,
                index: index.clone(),
                base,
                width,
                dtype: b.dtype,
            });
        }
        if let Stmt::Let { var, value, .. } = s {
            if !assigned.contains(var) {
                let full = value.substitute(&mut |v| lets.get(&v).cloned());
                lets.insert(*var, full);
            }
        }
    }
    out
}

/// Declares the vector loads of `reads` (lines for the writer) and returns, per
/// iteration, what each read's element is called.
pub(super) fn load_lines(
    ctx: &mut Ctx,
    reads: &[VectorRead],
    extent: usize,
) -> Result<(Vec<String>, Vec<Vec<Element>>), CodegenError> {
    const PARTS: [&str; 4] = ["x", "y", "z", "w"];
    let mut lines = Vec::new();
    let mut per_iteration = vec![Vec::new(); extent];
    for r in reads {
        let buffer = ctx.buffer_name(r.buffer)?.to_string();
        let ty = r.vector_type();
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
pub(super) fn dead_vars(f: &For, reads: &[VectorRead]) -> HashSet<VarId> {
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

/// `e` without additions and subtractions of 0 (the first iteration's `+ 0`).
fn without_zeros(e: &Expr) -> Expr {
    match e {
        Expr::Binary { op, lhs, rhs } => {
            let (l, r) = (without_zeros(lhs), without_zeros(rhs));
            match (op, &l, &r) {
                (BinaryOp::Add | BinaryOp::Sub, x, Expr::Int(0)) => x.clone(),
                (BinaryOp::Add, Expr::Int(0), x) => x.clone(),
                _ => Expr::binary(*op, l, r),
            }
        }
        _ => e.clone(),
    }
}

/// The loads `e` evaluates whenever it is evaluated: not under a `select` or a logic
/// operator, and not inside another load's index.
fn unconditional_loads<'e>(e: &'e Expr, out: &mut Vec<(BufferId, &'e Expr)>) {
    match e {
        Expr::Load { buffer, indices } => {
            if let [index] = indices.as_slice() {
                out.push((*buffer, index));
            }
        }
        Expr::Unary { arg, .. } => unconditional_loads(arg, out),
        Expr::Binary { lhs, rhs, .. } | Expr::Cmp { lhs, rhs, .. } => {
            unconditional_loads(lhs, out);
            unconditional_loads(rhs, out);
        }
        _ => {}
    }
}

fn reads_any(e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Var(v) if vars.contains(v)));
    found
}

fn mentions(e: &Expr, var: VarId) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= *x == Expr::Var(var));
    found
}

/// The coefficient of `var` in `e` when `e` is `c · var + (terms without var)`.
pub(super) fn coefficient(e: &Expr, var: VarId) -> Option<i64> {
    if !mentions(e, var) {
        return Some(0);
    }
    match e {
        Expr::Var(v) if *v == var => Some(1),
        Expr::Binary { op, lhs, rhs } => match op {
            BinaryOp::Add => coefficient(lhs, var)?.checked_add(coefficient(rhs, var)?),
            BinaryOp::Sub => coefficient(lhs, var)?.checked_sub(coefficient(rhs, var)?),
            BinaryOp::Mul => match (lhs.as_ref(), rhs.as_ref()) {
                (Expr::Int(n), x) | (x, Expr::Int(n)) => coefficient(x, var)?.checked_mul(*n),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` is a multiple of `n` whatever its variables' values: a literal multiple,
/// a sum or difference of multiples, a product with a multiple as a factor.
pub(super) fn multiple_of(e: &Expr, n: i64) -> bool {
    match e {
        Expr::Int(k) => n != 0 && k % n == 0,
        Expr::Binary { op, lhs, rhs } => match op {
            BinaryOp::Add | BinaryOp::Sub => multiple_of(lhs, n) && multiple_of(rhs, n),
            BinaryOp::Mul => multiple_of(lhs, n) || multiple_of(rhs, n),
            _ => false,
        },
        _ => false,
    }
}
