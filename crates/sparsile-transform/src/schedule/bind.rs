//! `bind`: spreads a loop's iterations over the blocks of a GPU grid or the threads of a
//! block (TACO's `parallelize(GPUBlock | GPUThread)`, TVM's `bind`).
//!
//! The first `bind` of a function turns it into a GPU function: every top-level block
//! becomes a launch of its own (`launch C_init { block C.init { … } }`, names from the
//! block's with `.` → `_`), which runs on one thread of one block until its loops are
//! bound. The semantics of bound loops, launches and `local` buffers are those of
//! [`sparsile_ir::loops::gpu`].
//!
//! Preconditions (each violation is a [`ScheduleError`] naming the loop, its block and
//! the rule):
//! - every top-level statement is a block, and no loop is `parallel`, `vectorized` or
//!   `batched` (a GPU spreads work by binding) ([`ScheduleError::NotBindable`]);
//! - the loop exists ([`ScheduleError::UnknownLoop`]) and is serial
//!   ([`ScheduleError::NotSerial`]);
//! - its iterations are independent, as for `parallel` ([`ScheduleError::LoopCarriedLocal`],
//!   [`ScheduleError::LoopCarriedAccess`]): they run at once on different blocks or
//!   threads;
//! - to `blockIdx.d`: the loop is the outermost loop of its block, or the whole body of a
//!   loop already bound to the grid; no loop around it is bound to `blockIdx.d`; several
//!   loops of one launch bound to `blockIdx.x` side by side are not combined with `y`/`z`;
//!   its bounds read parameters, literals and input arrays at such indices only (the grid
//!   is sized before the launch);
//! - to `threadIdx.d`: no loop around it is bound to `threadIdx.d`; its bounds are
//!   integer literals (split the loop by a constant or `specialize` its extent first) and
//!   the block has at most 1,024 threads; every `local` buffer the loop stores to is used
//!   inside the loop only (a local is private to each thread); and after binding, every
//!   store to a non-local buffer in the launch lies inside loops bound to every thread
//!   axis with more than one thread (a store outside them would run in every thread).
//!
//! Postcondition: the loop is `bind(axis)`; the function passes the verifier.
//!
//! ```
//! use sparsile_ir::loops::{GpuAxis, GpuDim};
//! use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! let (rows_o, rows_i) = sch.split(&LoopRef::new("y", "i_2"), 128, SplitTail::InnerFixed).unwrap();
//! sch.bind(&rows_o, GpuAxis::Block(GpuDim::X)).unwrap();
//! sch.bind(&rows_i, GpuAxis::Thread(GpuDim::X)).unwrap();
//! let text = sch.func().unwrap().to_string();
//! assert!(text.contains("launch y {"));
//! assert!(text.contains("for i_2_i in 0..128 bind(threadIdx.x) {"));
//! ```

use std::collections::HashSet;

use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    constant_extent, grid_readable, is_gpu_body, launch_shape_all, BufferKind, Expr, For, ForKind,
    Func, GpuAxis, Stmt, MAX_BLOCK_THREADS,
};
use sparsile_ir::Span;

use super::parallel::{check_independent_with, with_loop};
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "bind";

/// Binds `target` to `axis` after checking the preconditions in the module docs.
pub fn bind(func: &Func, target: &LoopRef, axis: GpuAxis) -> Result<Func, ScheduleError> {
    bind_with(func, target, axis, true)
}

/// [`bind`] without the check that the iterations are independent (for primitives that
/// combine them themselves, such as `warp_reduce`).
pub(crate) fn bind_unchecked(
    func: &Func,
    target: &LoopRef,
    axis: GpuAxis,
) -> Result<Func, ScheduleError> {
    bind_with(func, target, axis, false)
}

/// The threads per block (x, y, z) of the launch holding `target`.
pub(crate) fn block_of(func: &Func, target: &LoopRef) -> Option<[i64; 3]> {
    let (launch, _, _) = locate(func, target).ok()?;
    let Stmt::Launch { body, .. } = &func.body[launch] else {
        return None;
    };
    Some(launch_shape_all(body).0.block)
}

fn bind_with(
    func: &Func,
    target: &LoopRef,
    axis: GpuAxis,
    independent: bool,
) -> Result<Func, ScheduleError> {
    let func = if is_gpu_body(&func.body) {
        func.clone()
    } else {
        into_launches(func)?
    };
    let (launch, path, f) = locate(&func, target)?;
    let refuse = |reason: String| ScheduleError::NotBindable {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        axis,
        reason,
        span: f.span,
    };
    if f.kind != ForKind::Serial {
        return Err(ScheduleError::NotSerial {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            kind: f.kind.name(),
            span: f.span,
        });
    }
    let around: Vec<GpuAxis> = path
        .iter()
        .filter_map(|p| match p {
            PathItem::Loop(kind) => kind.gpu_axis(),
            _ => None,
        })
        .collect();
    if around.contains(&axis) {
        return Err(refuse(format!("a loop around it is bound to `{axis}`")));
    }
    match axis {
        GpuAxis::Block(_) => {
            let at_grid_top = path.iter().all(|p| match p {
                PathItem::Block => true,
                PathItem::Loop(kind) => matches!(kind.gpu_axis(), Some(GpuAxis::Block(_))),
                PathItem::Other => false,
            });
            if !at_grid_top || !sole_bodies(&func.body[launch], target, &func) {
                return Err(refuse(
                    "a loop bound to the grid must be the outermost loop of its block, or the whole body of a loop bound to the grid".to_string(),
                ));
            }
            if !grid_readable(&func, &f.lo) || !grid_readable(&func, &f.hi) {
                return Err(refuse(
                    "its bounds read a variable or a buffer that is not an input; the grid is sized before the launch, from parameters, literals and input arrays"
                        .to_string(),
                ));
            }
        }
        GpuAxis::Thread(_) => {
            match constant_extent(f) {
                Some(n) if (1..=MAX_BLOCK_THREADS).contains(&n) => {}
                Some(n) => {
                    return Err(refuse(format!(
                        "it runs {n} iterations (a block has 1 to {MAX_BLOCK_THREADS} threads)"
                    )))
                }
                None => return Err(refuse(
                    "its bounds are not integer literals (split it by a constant, or specialize its extent)"
                        .to_string(),
                )),
            }
            if let Some(local) = escaping_local(&func, f) {
                return Err(refuse(format!(
                    "it stores to local `{local}`, which is used outside the loop too (a local is private to each thread)"
                )));
            }
        }
    }
    if independent {
        check_independent_with(&func, f, target, PRIMITIVE, false, !axis.is_thread())?;
    }
    let span = f.span;
    let out = with_loop(&func, target, |l| l.kind = ForKind::Bound(axis));
    if axis.is_thread() {
        threads_cover_stores(&out, launch, target, axis, span, PRIMITIVE)?;
    }
    Ok(out)
}

/// One statement on the way from a launch's body down to the target loop.
pub(crate) enum PathItem {
    Block,
    Loop(ForKind),
    /// A conditional or anything else that is not a block or a loop.
    Other,
}

/// The launch (its index in the body) holding `target`, what encloses the loop inside
/// the launch (outermost first), and the loop.
pub(crate) fn locate<'f>(
    func: &'f Func,
    target: &LoopRef,
) -> Result<(usize, Vec<PathItem>, &'f For), ScheduleError> {
    fn walk<'f>(
        func: &'f Func,
        stmts: &'f [Stmt],
        target: &LoopRef,
        block: Option<&str>,
        path: &mut Vec<PathItem>,
    ) -> Option<&'f For> {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if block == Some(target.block.as_str()) && func.vars[f.var].name == target.var {
                        return Some(f);
                    }
                    path.push(PathItem::Loop(f.kind));
                    if let Some(found) = walk(func, &f.body, target, block, path) {
                        return Some(found);
                    }
                    path.pop();
                }
                Stmt::Block { name, body, .. } => {
                    path.push(PathItem::Block);
                    if let Some(found) = walk(func, body, target, Some(name), path) {
                        return Some(found);
                    }
                    path.pop();
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    path.push(PathItem::Other);
                    for b in [then_body, else_body] {
                        if let Some(found) = walk(func, b, target, block, path) {
                            return Some(found);
                        }
                    }
                    path.pop();
                }
                _ => {}
            }
        }
        None
    }
    for (k, s) in func.body.iter().enumerate() {
        let Stmt::Launch { body, .. } = s else {
            continue;
        };
        let mut path = Vec::new();
        if let Some(f) = walk(func, body, target, None, &mut path) {
            return Ok((k, path, f));
        }
    }
    Err(ScheduleError::UnknownLoop {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
    })
}

/// Whether every loop on the way from `launch` down to `target` has it (or the next loop
/// towards it) as its whole body.
fn sole_bodies(launch: &Stmt, target: &LoopRef, func: &Func) -> bool {
    fn walk(stmts: &[Stmt], target: &LoopRef, func: &Func, block: Option<&str>) -> Option<bool> {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if block == Some(target.block.as_str()) && func.vars[f.var].name == target.var {
                        return Some(true);
                    }
                    if let Some(found) = walk(&f.body, target, func, block) {
                        return Some(found && f.body.len() == 1);
                    }
                }
                Stmt::Block { name, body, .. } => {
                    if let Some(found) = walk(body, target, func, Some(name)) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        None
    }
    let Stmt::Launch { body, .. } = launch else {
        return false;
    };
    walk(body, target, func, None).unwrap_or(false)
}

/// A local buffer the loop stores to and that is accessed outside the loop too.
fn escaping_local(func: &Func, f: &For) -> Option<String> {
    let stored: HashSet<BufferId> = Stmt::stored_buffers(&f.body)
        .into_iter()
        .filter(|b| func.buffers[*b].kind == BufferKind::Local)
        .collect();
    if stored.is_empty() {
        return None;
    }
    let uses_inside = count_accesses(&f.body, &stored);
    let uses_all = count_accesses(&func.body, &stored);
    let mut escaping: Vec<BufferId> = stored
        .into_iter()
        .filter(|b| {
            uses_all.iter().filter(|x| *x == b).count()
                > uses_inside.iter().filter(|x| *x == b).count()
        })
        .collect();
    escaping.sort();
    escaping.first().map(|b| func.buffers[*b].name.clone())
}

/// Every access (load, search, store, atomic add, prefetch) of the buffers in `of`.
fn count_accesses(stmts: &[Stmt], of: &HashSet<BufferId>) -> Vec<BufferId> {
    let mut out = Vec::new();
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::Store { buffer, .. }
        | Stmt::AtomicAdd { buffer, .. }
        | Stmt::Prefetch { buffer, .. }
        | Stmt::Mma(sparsile_ir::loops::Mma { c: buffer, .. }) = s
        {
            if of.contains(buffer) {
                out.push(*buffer);
            }
        }
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                    if of.contains(buffer) {
                        out.push(*buffer);
                    }
                }
            });
        }
    });
    out
}

/// After binding `target` to a thread axis: the block's size is within limits, and every
/// store to a non-local buffer of the launch (an `mma`'s accumulator included) lies
/// inside loops bound to every thread axis with more than one thread.
pub(crate) fn threads_cover_stores(
    func: &Func,
    launch: usize,
    target: &LoopRef,
    axis: GpuAxis,
    span: Span,
    primitive: &'static str,
) -> Result<(), ScheduleError> {
    let Stmt::Launch { body, .. } = &func.body[launch] else {
        unreachable!("located in a launch")
    };
    let refuse = |reason: String| ScheduleError::NotBindable {
        primitive,
        block: target.block.clone(),
        var: target.var.clone(),
        axis,
        reason,
        span,
    };
    let (shape, _) = launch_shape_all(body);
    let threads = shape.threads();
    if threads > MAX_BLOCK_THREADS {
        return Err(refuse(format!(
            "the block would have {} x {} x {} = {threads} threads (at most {MAX_BLOCK_THREADS})",
            shape.block[0], shape.block[1], shape.block[2]
        )));
    }
    fn walk(
        func: &Func,
        stmts: &[Stmt],
        inside: [bool; 3],
        shape: [i64; 3],
        bad: &mut Option<(String, Span, usize)>,
    ) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    let mut inner = inside;
                    if let Some(GpuAxis::Thread(d)) = f.kind.gpu_axis() {
                        inner[d.index()] = true;
                    }
                    walk(func, &f.body, inner, shape, bad);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, inside, shape, bad);
                    walk(func, else_body, inside, shape, bad);
                }
                Stmt::Block { body, .. } => walk(func, body, inside, shape, bad),
                Stmt::Store { buffer, span, .. }
                | Stmt::AtomicAdd { buffer, span, .. }
                | Stmt::Mma(sparsile_ir::loops::Mma {
                    c: buffer, span, ..
                }) => {
                    let b = &func.buffers[*buffer];
                    if b.kind == BufferKind::Local || bad.is_some() {
                        continue;
                    }
                    if let Some(d) = (0..3).find(|&d| shape[d] > 1 && !inside[d]) {
                        *bad = Some((b.name.clone(), *span, d));
                    }
                }
                _ => {}
            }
        }
    }
    let mut bad = None;
    walk(func, body, [false; 3], shape.block, &mut bad);
    match bad {
        Some((buffer, at, d)) => Err(refuse(format!(
            "the launch would have {threads} threads per block, but the store to `{buffer}` ({at}) is outside every loop bound to `threadIdx.{}`, so every thread would store it",
            ["x", "y", "z"][d]
        ))),
        None => Ok(()),
    }
}

/// Every top-level block as a launch of its own (see the module docs).
fn into_launches(func: &Func) -> Result<Func, ScheduleError> {
    let mut out = func.clone();
    let mut used: HashSet<String> = HashSet::new();
    let mut body = Vec::with_capacity(func.body.len());
    for s in &func.body {
        let Stmt::Block { name, span, .. } = s else {
            return Err(ScheduleError::NotGpuFunction {
                primitive: PRIMITIVE,
                reason: format!(
                    "the statement at {} is not a block: a GPU function runs each top-level block as a launch",
                    s.span()
                ),
                span: s.span(),
            });
        };
        let base = name.replace('.', "_");
        let mut launch = base.clone();
        let mut k = 2;
        while !sparsile_ir::loops::parser::is_valid_name(&launch) || !used.insert(launch.clone()) {
            launch = format!("{base}_{k}");
            k += 1;
        }
        body.push(Stmt::Launch {
            name: launch,
            body: vec![s.clone()],
            span: *span,
        });
    }
    let mut kinds = Vec::new();
    Stmt::visit_all(&body, &mut |s| {
        if let Stmt::For(f) = s {
            if !matches!(
                f.kind,
                ForKind::Serial | ForKind::Unrolled | ForKind::Bound(_)
            ) {
                kinds.push((f.var, f.kind, f.span));
            }
        }
    });
    if let Some((var, kind, span)) = kinds.first() {
        return Err(ScheduleError::NotGpuFunction {
            primitive: PRIMITIVE,
            reason: format!(
                "loop `{}` is `{}`: a GPU function runs serial, unrolled and bound loops only",
                func.vars[*var].name,
                kind.name()
            ),
            span: *span,
        });
    }
    out.body = body;
    Ok(out)
}
