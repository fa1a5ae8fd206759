//! `static int64_t <prefix>_phase<k>_work(buffers, params)`: the estimated work of a
//! parallel phase ([`sparsile_ir::loops::estimated_work`]: leaf statements executed over
//! the whole phase), or -1 when the estimate is unknown. The runtime uses it to run small
//! phases on the calling thread alone and to wake sleeping threads only for large ones.

use sparsile_ir::loops::{estimated_work, Stmt};

use super::ctx::Ctx;
use super::expr::emit_as;
use super::phases::{live_uses, Phase};
use super::stmt::Writer;
use super::types::Ty;
use super::{bindings, lets_of};
use crate::CodegenError;

/// The work function of parallel phase `k`.
pub(super) fn work_fn(
    ctx: &mut Ctx,
    prefix: &str,
    k: usize,
    phase: &Phase,
    lets: &[&Stmt],
) -> Result<String, CodegenError> {
    let f = phase.parallel_loop().expect("parallel phase");
    ctx.begin_function();
    let mut w = Writer::default();
    w.line(&format!(
        "/* Phase {k}: estimated work (leaf statements executed), or -1 when unknown. */"
    ));
    w.line(&format!(
        "static int64_t {prefix}_phase{k}_work(void *const *buffers, const int64_t *params)"
    ));
    w.line("{");
    w.indent += 1;
    match estimated_work(f) {
        Some(work) => {
            // The estimate reads the loop's bounds' inputs and structure arrays at the
            // ends of its range only.
            let mut uses = live_uses(&[], &[&f.lo, &f.hi, &work]);
            let heap = bindings(ctx, &mut w, &mut uses, lets_of(phase, lets), "return -1;")?;
            ctx.span = f.span;
            let lo = emit_as(ctx, &f.lo, Ty::I64)?;
            let hi = emit_as(ctx, &f.hi, Ty::I64)?;
            let (lo_name, hi_name, work_name) = (
                ctx.names.fresh("lo"),
                ctx.names.fresh("hi"),
                ctx.names.fresh("work"),
            );
            w.line(&format!("const int64_t {lo_name} = {};", lo.text));
            w.line(&format!("const int64_t {hi_name} = {};", hi.text));
            // An empty loop reads no structure (its indptr may be empty).
            w.line(&format!("if ({hi_name} <= {lo_name}) return 0;"));
            let value = emit_as(ctx, &work, Ty::I64)?;
            w.line(&format!("const int64_t {work_name} = {};", value.text));
            for h in &heap {
                w.line(&format!("free({h});"));
            }
            w.line(&format!("return {work_name} < 0 ? -1 : {work_name};"));
        }
        None => {
            w.line("(void)buffers;");
            w.line("(void)params;");
            w.line("return -1;");
        }
    }
    w.indent -= 1;
    w.line("}");
    Ok(w.out)
}
