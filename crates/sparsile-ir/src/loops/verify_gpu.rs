//! The verifier's GPU rules (the semantics are in [`super::gpu`]).
//!
//! In a function whose body holds a launch (a GPU function):
//! - every top-level statement is a launch, no launch is nested, launch names are unique;
//! - each launch has a well-formed shape ([`super::launch_shape`]): thread-bound loops with
//!   literal bounds, at most 1,024 threads per block, block-bound loops at the top of the
//!   launch, nested alone, with bounds over parameters, literals and input buffers read
//!   at such indices (see [`super::gpu::grid_readable`]);
//! - launches hold only serial, unrolled, vectorized and bound loops (no `parallel`,
//!   `vectorized(reassociate)` or `batched` loop: a GPU spreads work by binding loops; a
//!   `vectorized` loop runs its iterations in order in one thread, its reads of
//!   consecutive elements as vector loads);
//! - `sync_threads` is reached by every thread of the block: it is under no condition,
//!   and in no loop whose bounds, that depends on the thread (a thread-bound loop's
//!   variable, or a local computed from one, from a warp reduction, or assigned under
//!   such a condition), and in no thread-bound loop that leaves some threads out (extent
//!   below the block's);
//! - a launch with a warp reduction or an `mma` has whole warps (its threads a multiple
//!   of 32);
//! - the `shared` buffers a launch uses fit in 48 KiB.
//!
//! In any other function: no launch, bound loop, barrier, warp reduction, `mma` or
//! `shared` buffer.
//!
//! `sync_warp`, warp reductions and `mma`s under thread-dependent conditions are left to the SIMT
//! interpreter: a condition that is the same for the 32 threads of a warp (one row per
//! warp) is common and cannot be told apart here.

use std::collections::{HashMap, HashSet};

use super::expr::Expr;
use super::func::{BufferKind, BufferLayout, Func};
use super::gpu::{
    constant_extent, grid_readable, is_gpu_body, launch_shape_all, BarrierScope, GpuAxis,
    LaunchShape, MAX_SHARED_BYTES, WARP_SIZE,
};
use super::stmt::{For, ForKind, Stmt};
use crate::coord::VerifyError;
use crate::id::{BufferId, VarId};
use crate::Span;

/// The GPU rules of the module docs, all violations in body order.
pub(super) fn verify_gpu(func: &Func) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    let mut err = |span: Span, message: String| errors.push(VerifyError { span, message });
    if !is_gpu_body(&func.body) {
        cpu_function(func, &mut err);
        return errors;
    }
    let mut names = HashSet::new();
    for s in &func.body {
        let Stmt::Launch { name, body, span } = s else {
            err(
                s.span(),
                "a function with launches holds only launches at its top level".to_string(),
            );
            continue;
        };
        if !names.insert(name.as_str()) {
            err(*span, format!("launch `{name}` appears twice"));
        }
        let ctx = format!("launch `{name}`");
        let (shape, shape_errors) = launch_shape_all(body);
        for e in shape_errors {
            let at = if e.span == Span::default() {
                *span
            } else {
                e.span
            };
            err(at, format!("{ctx}: {}", e.message));
        }
        for part in &shape.grid_x {
            grid_bounds(func, &part.lo, &part.hi, *span, &ctx, &mut err);
        }
        for (lo, hi) in shape.grid_yz.iter().flatten() {
            grid_bounds(func, lo, hi, *span, &ctx, &mut err);
        }
        loop_kinds(body, &ctx, &mut err);
        barriers(body, &shape, &ctx, &mut err);
        warps(func, body, &shape, &ctx, &mut err);
        shared_bytes(func, body, *span, &ctx, &mut err);
    }
    errors
}

/// No GPU node in a function without launches.
fn cpu_function(func: &Func, err: &mut impl FnMut(Span, String)) {
    Stmt::visit_all(&func.body, &mut |s| match s {
        Stmt::Launch { name, span, .. } => err(
            *span,
            format!("launch `{name}` is nested (launches sit at the top level of a function)"),
        ),
        Stmt::For(l) if l.kind.gpu_axis().is_some() => err(
            l.span,
            format!(
                "loop `{}` is bound to `{}` outside a launch",
                var_name(func, l.var),
                l.kind.gpu_axis().expect("bound")
            ),
        ),
        Stmt::Barrier { scope, span } => {
            err(*span, format!("`{}` outside a launch", scope.keyword()))
        }
        Stmt::WarpReduce { span, .. } => err(*span, "a warp reduction outside a launch".into()),
        Stmt::Mma(m) => err(m.span, "an `mma` outside a launch".into()),
        _ => {}
    });
    for b in func.buffers.values() {
        if b.kind == BufferKind::Shared {
            err(
                b.span,
                format!(
                    "buffer `{}`: a shared buffer in a function without launches",
                    b.name
                ),
            );
        }
    }
}

/// Grid extents are computed before the launch: they read parameters, literals and
/// elements of input buffers at such indices ([`grid_readable`]).
fn grid_bounds(
    func: &Func,
    lo: &Expr,
    hi: &Expr,
    span: Span,
    ctx: &str,
    err: &mut impl FnMut(Span, String),
) {
    if !grid_readable(func, lo) || !grid_readable(func, hi) {
        err(
            span,
            format!("{ctx}: the bounds of a block-bound loop read parameters, literals and input buffers at such indices only"),
        );
    }
}

fn loop_kinds(body: &[Stmt], ctx: &str, err: &mut impl FnMut(Span, String)) {
    Stmt::visit_all(body, &mut |s| {
        match s {
        Stmt::For(l)
            if !matches!(
                l.kind,
                ForKind::Serial | ForKind::Unrolled | ForKind::Vectorized | ForKind::Bound(_)
            ) =>
        {
            err(
                l.span,
                format!(
                    "{ctx}: a `{}` loop in a launch (GPU loops are serial, unrolled, vectorized or bound)",
                    l.kind.name()
                ),
            )
        }
        Stmt::Launch { name, span, .. } => err(*span, format!("{ctx}: launch `{name}` is nested")),
        _ => {}
    }
    });
}

/// The variables whose value may differ between the threads of a block (see the module
/// docs), to a fixed point.
fn thread_dependent(body: &[Stmt]) -> HashSet<VarId> {
    fn reads(e: &Expr, dep: &HashSet<VarId>) -> bool {
        let mut found = false;
        e.visit(&mut |x| found |= matches!(x, Expr::Var(v) if dep.contains(v)));
        found
    }
    fn walk(stmts: &[Stmt], under: bool, dep: &mut HashSet<VarId>) -> bool {
        let mut changed = false;
        for s in stmts {
            match s {
                Stmt::For(l) => {
                    let bound = l.kind.gpu_axis().is_some_and(GpuAxis::is_thread);
                    let inner = under || bound || reads(&l.lo, dep) || reads(&l.hi, dep);
                    if (bound || inner) && dep.insert(l.var) {
                        changed = true;
                    }
                    changed |= walk(&l.body, inner, dep);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    let inner = under || reads(cond, dep);
                    changed |= walk(then_body, inner, dep);
                    changed |= walk(else_body, inner, dep);
                }
                Stmt::Let { var, value, .. } | Stmt::Assign { var, value, .. } => {
                    if (under || reads(value, dep)) && dep.insert(*var) {
                        changed = true;
                    }
                }
                Stmt::WarpReduce { var, .. } => changed |= dep.insert(*var),
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    changed |= walk(body, under, dep)
                }
                Stmt::Store { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Prefetch { .. }
                | Stmt::Barrier { .. }
                | Stmt::Mma(_) => {}
            }
        }
        changed
    }
    let mut dep = HashSet::new();
    while walk(body, false, &mut dep) {}
    dep
}

fn barriers(body: &[Stmt], shape: &LaunchShape, ctx: &str, err: &mut impl FnMut(Span, String)) {
    let dep = thread_dependent(body);
    let uses = |e: &Expr| {
        let mut found = false;
        e.visit(&mut |x| found |= matches!(x, Expr::Var(v) if dep.contains(v)));
        found
    };
    // `why` says which enclosing construct leaves threads out, if any.
    fn walk(
        stmts: &[Stmt],
        why: Option<&str>,
        shape: &LaunchShape,
        uses: &dyn Fn(&Expr) -> bool,
        ctx: &str,
        err: &mut dyn FnMut(Span, String),
    ) {
        for s in stmts {
            match s {
                Stmt::Barrier {
                    scope: BarrierScope::Block,
                    span,
                } => {
                    if let Some(why) = why {
                        err(
                            *span,
                            format!("{ctx}: `sync_threads` {why}, so not every thread of the block reaches it"),
                        );
                    }
                }
                Stmt::For(l) => {
                    let why = why.or_else(|| loop_leaves_threads_out(l, shape, uses));
                    walk(&l.body, why, shape, uses, ctx, err);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    let why = why.or_else(|| {
                        uses(cond).then_some("is under a condition that depends on the thread")
                    });
                    walk(then_body, why, shape, uses, ctx, err);
                    walk(else_body, why, shape, uses, ctx, err);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    walk(body, why, shape, uses, ctx, err)
                }
                _ => {}
            }
        }
    }
    walk(body, None, shape, &uses, ctx, err);
}

/// Why loop `l` does not run alike in every thread of the block, if it does not.
fn loop_leaves_threads_out(
    l: &For,
    shape: &LaunchShape,
    uses: &dyn Fn(&Expr) -> bool,
) -> Option<&'static str> {
    match l.kind {
        ForKind::Bound(GpuAxis::Thread(d)) => (constant_extent(l) != Some(shape.block[d.index()]))
            .then_some("is in a thread-bound loop that leaves some threads out"),
        _ if uses(&l.lo) || uses(&l.hi) => Some("is in a loop whose bounds depend on the thread"),
        _ => None,
    }
}

fn warps(
    func: &Func,
    body: &[Stmt],
    shape: &LaunchShape,
    ctx: &str,
    err: &mut impl FnMut(Span, String),
) {
    let threads = shape.threads();
    Stmt::visit_all(body, &mut |s| {
        let what = match s {
            Stmt::WarpReduce { var, span, .. } => (
                *span,
                format!("warp reduction into `{}`", var_name(func, *var)),
            ),
            Stmt::Mma(m) => (
                m.span,
                format!(
                    "`mma` into `{}`",
                    func.buffers
                        .get(m.c)
                        .map_or_else(|| m.c.to_string(), |b| b.name.clone())
                ),
            ),
            _ => return,
        };
        if threads % i64::from(WARP_SIZE) != 0 {
            err(
                what.0,
                format!(
                    "{ctx}: {} in a block of {threads} threads (whole warps of {WARP_SIZE} are needed)",
                    what.1
                ),
            );
        }
    });
}

/// The bytes of the `shared` buffers `body` uses.
fn shared_bytes(
    func: &Func,
    body: &[Stmt],
    span: Span,
    ctx: &str,
    err: &mut impl FnMut(Span, String),
) {
    let mut used: HashSet<BufferId> = Stmt::loaded_buffers(body);
    used.extend(Stmt::stored_buffers(body));
    let mut bytes: HashMap<BufferId, usize> = HashMap::new();
    for id in used {
        let Some(b) = func.buffers.get(id) else {
            continue;
        };
        if let (BufferKind::Shared, BufferLayout::Flat(Expr::Int(n))) = (&b.kind, &b.layout) {
            let n = usize::try_from(*n).unwrap_or(usize::MAX);
            bytes.insert(id, n.saturating_mul(b.dtype.size_bytes()));
        }
    }
    let total = bytes.values().fold(0usize, |a, &b| a.saturating_add(b));
    if total > MAX_SHARED_BYTES {
        err(
            span,
            format!("{ctx}: its shared buffers take {total} bytes (at most {MAX_SHARED_BYTES})"),
        );
    }
}

fn var_name(func: &Func, v: VarId) -> String {
    func.vars
        .get(v)
        .map_or_else(|| v.to_string(), |x| x.name.clone())
}
