//! One launch as one `extern "C" __global__` kernel, and what the runtime needs to launch
//! it ([`KernelInfo`]): its grid and block, its static shared memory and its arguments.

use std::collections::HashMap;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::gpu::part_extent;
use sparsile_ir::loops::{launch_shape, BufferKind, BufferLayout, Expr, ExprDisplay, Stmt};
use sparsile_ir::Span;

use super::stmt::{emit_stmts, Launch};
use super::{BufferAlignment, KernelArg, KernelInfo};
use crate::c::ctx::Ctx;
use crate::c::expr::{emit_as, PREC_ADD};
use crate::c::phases::live_uses;
use crate::c::stmt::{comment_text, Writer};
use crate::c::types::{storage_name, Ty};
use crate::CodegenError;

/// The kernel for `launch NAME { body }`: its text and its launch plan.
pub(super) fn emit_kernel(
    ctx: &mut Ctx,
    name: &str,
    body: &[Stmt],
    span: Span,
) -> Result<(String, KernelInfo), CodegenError> {
    let func = ctx.func;
    ctx.span = span;
    let shape = launch_shape(body).map_err(|e| CodegenError::CudaUnsupported {
        what: format!("launch `{name}` ({})", e.message),
        span,
    })?;
    let symbol = ctx.global_name(&format!("{}_{name}", func.name));
    ctx.begin_function();
    ctx.vector_alignment.clear();

    // The grid: along x the parts' extents add up (each counted as at least 0 when
    // several share the grid, so that every part starts where the one before ends).
    let extents: Vec<Expr> = shape.grid_x.iter().map(part_extent).collect();
    let shares = extents.len() > 1;
    let clamped: Vec<Expr> = extents
        .iter()
        .map(|e| Expr::binary(BinaryOp::Max, e.clone(), Expr::Int(0)))
        .collect();
    let grid_x = match extents.as_slice() {
        [] => Expr::Int(1),
        [one] => one.clone(),
        _ => clamped
            .iter()
            .cloned()
            .reduce(|a, b| Expr::binary(BinaryOp::Add, a, b))
            .expect("several parts"),
    };
    let [grid_y, grid_z] = shape.grid_yz.clone().map(|bounds| match bounds {
        None => Expr::Int(1),
        Some((Expr::Int(0), hi)) => hi,
        Some((lo, hi)) => Expr::binary(BinaryOp::Sub, hi, lo),
    });
    let grid = [grid_x, grid_y, grid_z];
    let block = shape.block.map(|b| u32::try_from(b).unwrap_or(u32::MAX));

    let stmts: Vec<&Stmt> = body.iter().collect();
    let grid_exprs: Vec<&Expr> = if shares {
        clamped.iter().collect()
    } else {
        Vec::new()
    };
    let uses = live_uses(&stmts, &grid_exprs);
    ctx.live = uses.read_vars.clone();

    // Arguments: the params, then the global buffers, that the launch uses; a buffer it
    // does not write is `const` (read through the read-only data cache).
    let mut args = Vec::new();
    let mut signature = Vec::new();
    for &p in &uses.params {
        signature.push(format!("long long {}", ctx.param_name(p)?));
        args.push(KernelArg::Param {
            index: p.0 as usize,
            name: func.params[p].name.clone(),
        });
    }
    let stored = Stmt::stored_buffers(body);
    let mut shared = Vec::new();
    let mut locals = Vec::new();
    for &b in &uses.buffers {
        let buf = ctx.buffer(b)?;
        let ty = storage_name(buf.dtype);
        let c_name = ctx.buffer_name(b)?.to_string();
        let len = || match &buf.layout {
            BufferLayout::Flat(Expr::Int(n)) if *n >= 1 => Ok(*n),
            _ => Err(CodegenError::LocalLength {
                buffer: buf.name.clone(),
                span: buf.span,
            }),
        };
        match buf.kind {
            BufferKind::Shared => shared.push((c_name, ty, len()?, buf.dtype.size_bytes())),
            BufferKind::Local => locals.push((c_name, ty, len()?)),
            _ => {
                let qual = if stored.contains(&b) { "" } else { "const " };
                signature.push(format!("{qual}{ty} *__restrict__ {c_name}"));
                args.push(KernelArg::Buffer {
                    index: b.0 as usize,
                    name: buf.name.clone(),
                });
            }
        }
    }
    let shared_bytes = shared
        .iter()
        .map(|&(_, _, n, size)| {
            usize::try_from(n)
                .unwrap_or(usize::MAX)
                .saturating_mul(size)
        })
        .fold(0usize, usize::saturating_add);

    let mut w = Writer::default();
    let show = |e: &Expr| ExprDisplay::new(func, e).to_string();
    w.line(&format!(
        "/* Launch `{}`: grid ({}, {}, {}) x block ({}, {}, {}), {shared_bytes} bytes of shared memory. */",
        comment_text(name),
        comment_text(&show(&grid[0])),
        comment_text(&show(&grid[1])),
        comment_text(&show(&grid[2])),
        block[0],
        block[1],
        block[2],
    ));
    let threads = shape.threads();
    w.line(&format!(
        "extern \"C\" __global__ void __launch_bounds__({threads}, {}) {symbol}({})",
        min_blocks(threads),
        signature.join(", ")
    ));
    w.line("{");
    w.indent += 1;
    for (c_name, ty, n, _) in &shared {
        w.line(&format!("__shared__ {ty} {c_name}[{n}];"));
    }
    for (c_name, ty, n) in &locals {
        w.line(&format!("{ty} {c_name}[{n}]; /* local */"));
    }
    let mut part_ends = Vec::new();
    let mut bx = String::new();
    if shares {
        bx = ctx.names.fresh("bx");
        w.line(&format!("const int64_t {bx} = (int64_t)blockIdx.x;"));
        for (k, extent) in clamped.iter().enumerate() {
            let end = ctx.names.fresh(&format!("part{k}_end"));
            let e = emit_as(ctx, extent, Ty::I64)?;
            match part_ends.last() {
                None => w.line(&format!("const int64_t {end} = {};", e.text)),
                Some(prev) => w.line(&format!(
                    "const int64_t {end} = {prev} + {};",
                    e.at(PREC_ADD + 1)
                )),
            }
            part_ends.push(end);
        }
    }
    let launch = Launch {
        shape: &shape,
        parts: shape
            .grid_x
            .iter()
            .enumerate()
            .map(|(k, part)| (part.var, k))
            .collect::<HashMap<_, _>>(),
        part_ends,
        bx,
        carried: Default::default(),
    };
    emit_stmts(ctx, &launch, &mut w, body, None)?;
    let alignments = std::mem::take(&mut ctx.vector_alignment)
        .into_iter()
        .map(|(b, bytes)| {
            Ok(BufferAlignment {
                index: b.0 as usize,
                name: ctx.buffer(b)?.name.clone(),
                bytes,
            })
        })
        .collect::<Result<Vec<_>, CodegenError>>()?;
    w.indent -= 1;
    w.line("}");
    Ok((
        w.out,
        KernelInfo {
            symbol,
            launch: name.to_string(),
            grid,
            block,
            shared_bytes,
            args,
            alignments,
        },
    ))
}

/// The blocks per multiprocessor a kernel of `threads` threads asks ptxas to fit
/// (`__launch_bounds__`'s second argument): 1,024 threads' worth, which leaves each thread
/// 64 of a multiprocessor's 65,536 registers (sm_80, sm_90), and at most the 32 blocks a
/// multiprocessor holds. Given only the block size, ptxas aims at full occupancy (2,048
/// threads, 32 registers) and spills kernels that need a few more, such as 64-bit index
/// arithmetic around a row of non-zeros. Registers are allocated per warp, so a block
/// counts as whole warps: a block of 80 threads holds 3 warps (96 threads' registers), and
/// 10 of them fit, not 12 (which would leave each thread 56 registers).
pub(crate) fn min_blocks(threads: i64) -> i64 {
    let warps = (threads.max(1) + 31) / 32;
    (32 / warps).clamp(1, 32)
}

#[cfg(test)]
mod tests {
    use super::min_blocks;

    #[test]
    fn blocks_count_whole_warps() {
        for (threads, blocks) in [
            (1, 32),
            (32, 32),
            (33, 16),
            (64, 16),
            (80, 10),
            (96, 10),
            (128, 8),
            (256, 4),
            (1024, 1),
        ] {
            assert_eq!(min_blocks(threads), blocks, "{threads} threads");
            // Never more than 64 registers' worth of threads: 65,536 / 64.
            let allocated = blocks * ((threads + 31) / 32) * 32;
            assert!(allocated <= 1024 || blocks == 1, "{threads}");
        }
    }
}
