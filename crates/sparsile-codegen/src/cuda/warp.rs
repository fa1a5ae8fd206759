//! Warp reductions as register shuffles.
//!
//! `let s: f32 = warp_sum(v, L)` declares `s` with the lane's own value and folds in the
//! other lanes of its aligned group of `L` by a butterfly: for `o = L/2, …, 1`, every lane
//! combines its value with that of lane `lane ^ o` (`__shfl_xor_sync` with width `L`), so
//! after `log2 L` steps each lane holds the result over its group (the same bits in every
//! lane: each step combines the same two values). `warp_max`/`warp_min` combine with
//! `fmaxf`/`fminf` (`fmax`/`fmin` for f64, the integer max/min helpers for indices), as
//! the C backend computes `max`/`min`.
//!
//! `let s: f32 = warp_segment_sum(v, key, L)` is a suffix scan within runs of equal keys:
//! for `o = 1, 2, …, L/2`, each lane reads the value and key of lane `lane + o`
//! (`__shfl_down_sync`) and adds the value when that lane is in its group and has its
//! key. After the step with offset `o` a lane holds the sum over the lanes from itself to
//! `2o - 1` past it or to the end of its run, whichever comes first: this is exact because
//! keys do not decrease along a group (the IR requires it), so a run is contiguous. The
//! lane within the group is `linear thread id & (L - 1)`, the linear id being
//! `threadIdx.x + bx * (threadIdx.y + by * threadIdx.z)` for a block of `bx × by × bz`
//! (just `threadIdx.x & (L - 1)` when `bx` is a multiple of `L`).
//!
//! ```text
//! let s: f32 = warp_sum(x, 8)   ->  float s = x; /* warp_sum over groups of 8 lanes */
//!                                   #pragma unroll
//!                                   for (int s_off = 4; s_off > 0; s_off /= 2) {
//!                                       s = s + __shfl_xor_sync(0xffffffffu, s, s_off, 8);
//!                                   }
//! ```

use sparsile_ir::loops::gpu::WARP_SEGMENT_SUM;
use sparsile_ir::loops::{Expr, WarpOp};
use sparsile_ir::VarId;

use crate::c::ctx::Ctx;
use crate::c::expr::emit_as;
use crate::c::prelude::Helper;
use crate::c::stmt::Writer;
use crate::c::types::{var_ty, Ty};
use crate::CodegenError;

/// The mask of a whole warp: every lane takes part in a warp reduction.
const FULL_MASK: &str = "0xffffffffu";

/// One warp reduction statement (see the module docs); `block` is the block shape.
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_warp_reduce(
    ctx: &mut Ctx,
    w: &mut Writer,
    block: [i64; 3],
    var: VarId,
    op: WarpOp,
    value: &Expr,
    key: Option<&Expr>,
    lanes: u32,
) -> Result<(), CodegenError> {
    let ty = var_ty(ctx.var(var)?.ty);
    let v = emit_as(ctx, value, ty)?;
    let name = ctx.var_name(var)?;
    let what = if key.is_some() {
        WARP_SEGMENT_SUM
    } else {
        op.function()
    };
    w.line(&format!(
        "{} {name} = {}; /* {what} over groups of {lanes} lane{} */",
        ty.c_name(),
        v.text,
        if lanes == 1 { "" } else { "s" }
    ));
    if lanes < 2 {
        return Ok(());
    }
    match key {
        None => butterfly(ctx, w, ty, &name, op, lanes),
        Some(key) => segmented(ctx, w, block, ty, &name, key, lanes),
    }
}

/// `name = name OP shuffle(name)` for offsets `lanes/2 … 1`.
fn butterfly(
    ctx: &mut Ctx,
    w: &mut Writer,
    ty: Ty,
    name: &str,
    op: WarpOp,
    lanes: u32,
) -> Result<(), CodegenError> {
    let off = ctx.names.fresh(&format!("{name}_off"));
    let other = format!("__shfl_xor_sync({FULL_MASK}, {name}, {off}, {lanes})");
    let combined = match (op, ty) {
        (WarpOp::Sum, _) => format!("{name} + {other}"),
        (WarpOp::Max, Ty::F32) => format!("fmaxf({name}, {other})"),
        (WarpOp::Max, Ty::F64) => format!("fmax({name}, {other})"),
        (WarpOp::Min, Ty::F32) => format!("fminf({name}, {other})"),
        (WarpOp::Min, Ty::F64) => format!("fmin({name}, {other})"),
        (WarpOp::Max, Ty::I64) => {
            ctx.helpers.insert(Helper::MaxI64);
            format!("sparsile_max_i64({name}, {other})")
        }
        (WarpOp::Min, Ty::I64) => {
            ctx.helpers.insert(Helper::MinI64);
            format!("sparsile_min_i64({name}, {other})")
        }
    };
    w.line("#pragma unroll");
    w.line(&format!(
        "for (int {off} = {}; {off} > 0; {off} /= 2) {{",
        lanes / 2
    ));
    w.indent += 1;
    w.line(&format!("{name} = {combined};"));
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The segmented suffix sum (see the module docs).
fn segmented(
    ctx: &mut Ctx,
    w: &mut Writer,
    block: [i64; 3],
    ty: Ty,
    name: &str,
    key: &Expr,
    lanes: u32,
) -> Result<(), CodegenError> {
    let key_code = emit_as(ctx, key, Ty::I64)?;
    let [key_name, lane, off, next, next_key] = ["key", "lane", "off", "next", "next_key"]
        .map(|suffix| ctx.names.fresh(&format!("{name}_{suffix}")));
    w.line("{");
    w.indent += 1;
    w.line(&format!("const int64_t {key_name} = {};", key_code.text));
    w.line(&format!(
        "const int {lane} = (int)({} & {}u);",
        linear_thread(block, lanes),
        lanes - 1
    ));
    w.line("#pragma unroll");
    w.line(&format!(
        "for (int {off} = 1; {off} < {lanes}; {off} *= 2) {{"
    ));
    w.indent += 1;
    w.line(&format!(
        "const {} {next} = __shfl_down_sync({FULL_MASK}, {name}, {off}, {lanes});",
        ty.c_name()
    ));
    w.line(&format!(
        "const int64_t {next_key} = __shfl_down_sync({FULL_MASK}, {key_name}, {off}, {lanes});"
    ));
    w.line(&format!(
        "if ({lane} + {off} < {lanes} && {next_key} == {key_name}) {name} = {name} + {next};"
    ));
    w.indent -= 1;
    w.line("}");
    w.indent -= 1;
    w.line("}");
    Ok(())
}

/// The linear thread id, or only as much of it as decides the lane within a group of
/// `lanes` (a power of two dividing 32).
fn linear_thread(block: [i64; 3], lanes: u32) -> String {
    let [bx, by, bz] = block;
    if bx % i64::from(lanes) == 0 || (by == 1 && bz == 1) {
        "threadIdx.x".to_string()
    } else if bz == 1 {
        format!("(threadIdx.x + {bx}u * threadIdx.y)")
    } else {
        format!("(threadIdx.x + {bx}u * (threadIdx.y + {by}u * threadIdx.z))")
    }
}
