//! The statements of a launch as CUDA C++: loops bound to the grid and the block become
//! the index of the block or thread, everything else is written as the C backend writes
//! it (expressions, `let`s, stores, serial loops) or as its CUDA counterpart (barriers,
//! warp reductions, atomic adds).
//!
//! - `for v in lo..hi bind(blockIdx.y)` → `const int64_t v = lo + (int64_t)blockIdx.y;`
//!   followed by the body, in the same scope (every IR local has its own C name, so no
//!   scope is needed). Along `x` the same when one loop spans the grid; when several share
//!   it, consecutive ones form a chain `if (bx < part0_end) { … } else if (bx <
//!   part1_end) { … }` over the boundaries the kernel computes first, and part `k` starts
//!   counting at `part{k-1}_end` (a part that does not follow the one before it in the
//!   same statement list also tests `bx >= part{k-1}_end`).
//! - `for v in lo..hi bind(threadIdx.x)` → `const int64_t v = lo + (int64_t)threadIdx.x;`,
//!   inside `if (threadIdx.x < E) { … }` only when its extent `E` is below the block's.
//! - `for` (serial) → the C backend's loop; `unrolled` adds `#pragma unroll` before it.
//! - `sync_threads` → `__syncthreads();`, `sync_warp` → `__syncwarp();`.
//! - `atomic B[i] += v` → `atomicAdd(&B[i], v);` (a plain add on a `local` buffer, which
//!   one thread owns).
//! - `prefetch` → a comment (the GPU's caches are not steered from here).
//! - `mma` → fragment loads, an inline-PTX `mma.sync` and stores (see `mma.rs`). A serial
//!   loop that adds into one and the same tile on every iteration (its body `let`s and
//!   thread-bound loops around one `mma` whose output indices and guard the loop does
//!   not change) loads the tile into registers before it and stores it after it; inside,
//!   each iteration issues the `mma` on those registers.
//!
//! A bound loop whose variable nothing reads declares nothing. Block names become
//! comments, as in C.

use std::cell::RefCell;
use std::collections::HashMap;

use sparsile_ir::loops::gpu::GpuDim;
use sparsile_ir::loops::{
    constant_extent, vector_loads, BarrierScope, BufferKind, Expr, For, ForKind, GpuAxis,
    LaunchShape, Mma, Stmt, VECTOR_EXTENTS,
};
use sparsile_ir::{BufferId, DType, VarId};

use super::mma::{
    carried_mma, close_carried, emit_carried_mma, emit_mma, open_carried, Accumulator,
};
use super::vector::{dead_vars, load_lines, vector_type};
use super::warp::emit_warp_reduce;
use crate::c::ctx::Ctx;
use crate::c::expr::{emit_as, emit_offset, emit_truth, PREC_ADD};
use crate::c::stmt::{
    assign_line, comment_text, for_header, let_line, loop_comment, store_line, Writer,
};
use crate::c::types::Ty;
use crate::CodegenError;

/// What the statements of one kernel need to know about its launch.
pub(super) struct Launch<'a> {
    pub(super) shape: &'a LaunchShape,
    /// The part of the grid each loop bound to `blockIdx.x` takes (its index in
    /// `shape.grid_x`).
    pub(super) parts: HashMap<VarId, usize>,
    /// When several loops share the grid along `x`: the C name of each part's end (the
    /// first block number after it), and of `(int64_t)blockIdx.x`.
    pub(super) part_ends: Vec<String>,
    pub(super) bx: String,
    /// The `mma`s whose accumulators a loop around them keeps in registers (set while
    /// that loop is written; see `mma::carried_mma`).
    pub(super) carried: RefCell<Vec<(*const Mma, Accumulator)>>,
}

impl Launch<'_> {
    fn shares_grid(&self) -> bool {
        self.part_ends.len() > 1
    }
}

/// Writes `stmts`; `block` is the name of the innermost enclosing block.
pub(super) fn emit_stmts(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    stmts: &[Stmt],
    block: Option<&str>,
) -> Result<(), CodegenError> {
    let mut i = 0;
    while i < stmts.len() {
        if launch.shares_grid() && grid_part(&stmts[i], block).is_some() {
            let run = stmts[i..]
                .iter()
                .take_while(|s| grid_part(s, block).is_some())
                .count();
            emit_part_chain(ctx, launch, w, &stmts[i..i + run], block)?;
            i += run;
        } else {
            emit_stmt(ctx, launch, w, &stmts[i], block)?;
            i += 1;
        }
    }
    Ok(())
}

/// The loop bound to `blockIdx.x` that `s` is, or that blocks holding only it hold, with
/// the innermost block around it.
fn grid_part<'s>(s: &'s Stmt, block: Option<&'s str>) -> Option<(&'s For, Option<&'s str>)> {
    match s {
        Stmt::For(f) if f.kind == ForKind::Bound(GpuAxis::Block(GpuDim::X)) => Some((f, block)),
        Stmt::Block { name, body, .. } => match body.as_slice() {
            [inner] => grid_part(inner, Some(name)),
            _ => None,
        },
        _ => None,
    }
}

/// Consecutive loops sharing the grid along `x`, as one `if … else if …` chain.
fn emit_part_chain(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    stmts: &[Stmt],
    block: Option<&str>,
) -> Result<(), CodegenError> {
    let bx = &launch.bx;
    let mut previous: Option<usize> = None;
    for s in stmts {
        let (f, inner_block) = grid_part(s, block).expect("a run of grid parts");
        ctx.span = f.span;
        let k = *launch
            .parts
            .get(&f.var)
            .ok_or_else(|| CodegenError::CudaUnsupported {
                what: format!(
                    "loop `{}` bound to `blockIdx.x` outside the launch's grid",
                    ctx.var(f.var).map_or("?", |v| v.name.as_str())
                ),
                span: f.span,
            })?;
        let end = &launch.part_ends[k];
        let first = k.checked_sub(1).map(|j| launch.part_ends[j].as_str());
        let cond = match (first, previous) {
            (Some(first), prev) if prev != Some(k - 1) => {
                format!("{bx} >= {first} && {bx} < {end}")
            }
            _ => format!("{bx} < {end}"),
        };
        let comment = match inner_block {
            Some(b) => format!(" /* {}, part {k} of blockIdx.x */", comment_text(b)),
            None => format!(" /* part {k} of blockIdx.x */"),
        };
        if previous.is_none() {
            w.line(&format!("if ({cond}) {{{comment}"));
        } else {
            w.line(&format!("}} else if ({cond}) {{{comment}"));
        }
        w.indent += 1;
        let index = match first {
            Some(first) => format!("{bx} - {first}"),
            None => bx.clone(),
        };
        if ctx.live.contains(&f.var) {
            let value = offset_by(ctx, f, &index, first.is_some())?;
            w.line(&format!(
                "const int64_t {} = {value};",
                ctx.var_name(f.var)?
            ));
        }
        emit_stmts(ctx, launch, w, &f.body, inner_block)?;
        w.indent -= 1;
        previous = Some(k);
    }
    if previous.is_some() {
        w.line("}");
    }
    Ok(())
}

/// `lo + index` (`index` alone when `lo` is 0); `sum` says that `index` is a sum or
/// difference (parenthesised after `lo + `).
fn offset_by(ctx: &mut Ctx, f: &For, index: &str, sum: bool) -> Result<String, CodegenError> {
    Ok(if f.lo == Expr::Int(0) {
        index.to_string()
    } else {
        let lo = emit_as(ctx, &f.lo, Ty::I64)?;
        if sum {
            format!("{} + ({index})", lo.at(PREC_ADD))
        } else {
            format!("{} + {index}", lo.at(PREC_ADD))
        }
    })
}

fn emit_stmt(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    s: &Stmt,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    match s {
        Stmt::For(f) => {
            ctx.span = f.span;
            emit_loop(ctx, launch, w, s, f, block)?;
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
            span,
        } => {
            ctx.span = *span;
            let c = emit_truth(ctx, cond)?;
            w.line(&format!("if ({}) {{", c.text));
            w.indent += 1;
            emit_stmts(ctx, launch, w, then_body, block)?;
            w.indent -= 1;
            if !else_body.is_empty() {
                w.line("} else {");
                w.indent += 1;
                emit_stmts(ctx, launch, w, else_body, block)?;
                w.indent -= 1;
            }
            w.line("}");
        }
        Stmt::Let { var, .. } | Stmt::Assign { var, .. } | Stmt::WarpReduce { var, .. }
            if !ctx.live.contains(var) => {}
        Stmt::Let { var, value, span } => {
            ctx.span = *span;
            w.line(&let_line(ctx, *var, value)?);
        }
        Stmt::Assign { var, value, span } => {
            ctx.span = *span;
            w.line(&assign_line(ctx, *var, value)?);
        }
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } => {
            ctx.span = *span;
            w.line(&store_line(ctx, *buffer, indices, value)?);
        }
        Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            span,
        } => {
            ctx.span = *span;
            w.line(&atomic_add_line(ctx, *buffer, indices, value)?);
        }
        Stmt::Prefetch { buffer, span, .. } => {
            ctx.span = *span;
            w.line(&format!(
                "/* prefetch from {}: nothing to do on the GPU */",
                comment_text(&ctx.buffer(*buffer)?.name)
            ));
        }
        Stmt::Block { name, body, span } => {
            ctx.span = *span;
            w.line(&format!("{{ /* block {} */", comment_text(name)));
            w.indent += 1;
            emit_stmts(ctx, launch, w, body, Some(name))?;
            w.indent -= 1;
            w.line("}");
        }
        Stmt::Barrier { scope, span } => {
            ctx.span = *span;
            w.line(match scope {
                BarrierScope::Block => "__syncthreads();",
                BarrierScope::Warp => "__syncwarp();",
            });
        }
        Stmt::WarpReduce {
            var,
            op,
            value,
            key,
            lanes,
            span,
        } => {
            ctx.span = *span;
            emit_warp_reduce(
                ctx,
                w,
                launch.shape.block,
                *var,
                *op,
                value,
                key.as_ref(),
                *lanes,
            )?;
        }
        Stmt::Mma(m) => {
            ctx.span = m.span;
            let carried = launch.carried.borrow();
            match carried.iter().find(|(p, _)| std::ptr::eq(*p, m)) {
                Some((_, acc)) => emit_carried_mma(ctx, w, m, acc)?,
                None => emit_mma(ctx, w, m)?,
            }
        }
        Stmt::Launch { name, span, .. } => {
            return Err(CodegenError::CudaUnsupported {
                what: format!("launch `{name}` inside a launch"),
                span: *span,
            })
        }
    }
    Ok(())
}

fn emit_loop(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    s: &Stmt,
    f: &For,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    match f.kind {
        ForKind::Serial => match carried_mma(f, launch.shape.block) {
            Some(m) => {
                let acc = open_carried(ctx, w, m)?;
                launch.carried.borrow_mut().push((m as *const Mma, acc));
                emit_serial(ctx, launch, w, f, block)?;
                let (_, acc) = launch.carried.borrow_mut().pop().expect("pushed above");
                close_carried(w, m, &acc);
            }
            None => emit_serial(ctx, launch, w, f, block)?,
        },
        ForKind::Unrolled => {
            w.line("#pragma unroll");
            emit_serial(ctx, launch, w, f, block)?;
        }
        ForKind::Bound(GpuAxis::Block(GpuDim::X)) if launch.shares_grid() => {
            emit_part_chain(ctx, launch, w, std::slice::from_ref(s), block)?;
        }
        ForKind::Bound(axis) => {
            let extent = match axis {
                GpuAxis::Thread(_) => {
                    Some(
                        constant_extent(f).ok_or_else(|| CodegenError::CudaUnsupported {
                            what: format!("a loop bound to `{axis}` without literal bounds"),
                            span: f.span,
                        })?,
                    )
                }
                GpuAxis::Block(_) => None,
            };
            let guard = extent.filter(|&e| e < launch.shape.block[axis.dim().index()]);
            let place = match block {
                Some(b) => format!("{}, over {axis}", comment_text(b)),
                None => format!("over {axis}"),
            };
            if let Some(e) = guard {
                w.line(&format!("if ({axis} < {e}) {{ /* {place} */"));
                w.indent += 1;
            }
            if ctx.live.contains(&f.var) {
                let value = offset_by(ctx, f, &format!("(int64_t){axis}"), false)?;
                let decl = format!("const int64_t {} = {value};", ctx.var_name(f.var)?);
                w.line(&if guard.is_some() {
                    decl
                } else {
                    format!("{decl} /* {place} */")
                });
            } else if guard.is_none() {
                let var = comment_text(&ctx.var(f.var)?.name);
                w.line(&format!("/* {var}: {place} */"));
            }
            emit_stmts(ctx, launch, w, &f.body, block)?;
            if guard.is_some() {
                w.indent -= 1;
                w.line("}");
            }
        }
        ForKind::Vectorized => match constant_extent(f) {
            Some(e) if VECTOR_EXTENTS.contains(&e) => {
                emit_vectorized(ctx, launch, w, f, e, block)?;
            }
            _ => {
                // Any other extent: the serial loop (the same iterations in the same order).
                emit_serial(ctx, launch, w, f, block)?;
            }
        },
        kind => {
            return Err(CodegenError::CudaUnsupported {
                what: format!("a `{}` loop in a launch", kind.name()),
                span: f.span,
            })
        }
    }
    Ok(())
}

/// `f` as a C `for` loop around its body.
fn emit_serial(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    f: &For,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    let header = for_header(ctx, f)?;
    w.line(&format!("{header} {{{}", loop_comment(block, f.kind)));
    w.indent += 1;
    emit_stmts(ctx, launch, w, &f.body, block)?;
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// A `vectorized` loop of `extent` (2 or 4) iterations written out one after the other,
/// its reads of consecutive elements as vector loads before them (see `vector.rs`).
fn emit_vectorized(
    ctx: &mut Ctx,
    launch: &Launch,
    w: &mut Writer,
    f: &For,
    extent: i64,
    block: Option<&str>,
) -> Result<(), CodegenError> {
    let reads = vector_loads(ctx.func, f);
    let n = usize::try_from(extent).unwrap_or(0);
    let var = comment_text(&ctx.var(f.var)?.name);
    let place = match block {
        Some(b) => format!("{}, vectorized over {var}", comment_text(b)),
        None => format!("vectorized over {var}"),
    };
    let loads = if reads.is_empty() {
        "scalar loads".to_string()
    } else {
        let names: Vec<String> = reads
            .iter()
            .map(|r| {
                Ok(format!(
                    "{} in {} loads",
                    comment_text(&ctx.buffer(r.buffer)?.name),
                    vector_type(r)
                ))
            })
            .collect::<Result<_, CodegenError>>()?;
        names.join(", ")
    };
    w.line(&format!("{{ /* {place}: {extent} iterations, {loads} */"));
    w.indent += 1;
    for r in &reads {
        let bytes = ctx.vector_alignment.entry(r.buffer).or_insert(0);
        *bytes = (*bytes).max(r.bytes());
    }
    let (lines, elements) = load_lines(ctx, &reads, n)?;
    for line in &lines {
        w.line(line);
    }
    let dead = dead_vars(f, &reads);
    let live = ctx.live.clone();
    ctx.live.retain(|v| !dead.contains(v));
    let outer = std::mem::take(&mut ctx.vector_elements);
    for (u, elements) in elements.into_iter().enumerate() {
        w.line("{");
        w.indent += 1;
        if ctx.live.contains(&f.var) {
            let lo = match &f.lo {
                Expr::Int(lo) => *lo,
                _ => 0,
            };
            w.line(&format!(
                "const int64_t {} = {};",
                ctx.var_name(f.var)?,
                lo + u as i64
            ));
        }
        ctx.vector_elements = outer.iter().cloned().chain(elements).collect();
        let done = emit_stmts(ctx, launch, w, &f.body, block);
        ctx.vector_elements.clone_from(&outer);
        if done.is_err() {
            ctx.live = live;
            return done;
        }
        w.indent -= 1;
        w.line("}");
    }
    ctx.live = live;
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// `atomicAdd(&B[i], v);` for a buffer of global or shared memory, `B[i] = B[i] + v;` for
/// a `local` one.
fn atomic_add_line(
    ctx: &mut Ctx,
    buffer: BufferId,
    indices: &[Expr],
    value: &Expr,
) -> Result<String, CodegenError> {
    let b = ctx.buffer(buffer)?;
    if !matches!(b.dtype, DType::F32 | DType::F64) {
        return Err(CodegenError::AtomicType {
            buffer: b.name.clone(),
            dtype: b.dtype,
            span: ctx.span,
        });
    }
    let offset = emit_offset(ctx, buffer, indices)?;
    let ty = ctx.buffer_ty(buffer)?;
    let v = emit_as(ctx, value, ty)?;
    let name = ctx.buffer_name(buffer)?;
    Ok(if b.kind == BufferKind::Local {
        format!(
            "{name}[{0}] = {name}[{0}] + {1};",
            offset.text,
            v.at(PREC_ADD + 1)
        )
    } else {
        format!("atomicAdd(&{name}[{}], {});", offset.text, v.text)
    })
}
