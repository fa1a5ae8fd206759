//! The C backend: stage-III functions to C99 exporting the compiled-kernel ABI.
//!
//! # ABI (version [`ABI_VERSION`])
//! The translation unit includes `<stdint.h>`, `<stdlib.h>` and `<math.h>`, needs no
//! OpenMP, and exports exactly [`ENTRY_SYMBOLS`]:
//! ```c
//! int64_t sparsile_abi_version(void);            /* returns 1 */
//! int64_t sparsile_num_phases(void);
//! int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params);
//! int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
//!                            int64_t begin, int64_t end);
//! ```
//! `buffers[b]` points at the data of `Func.buffers[b]` ([`CSource::buffer_order`]):
//! values as `float`/`double`, structure arrays as `int32_t`/`int64_t`. Scratch buffers
//! are allocated by the generated code (their slot is ignored and may be null).
//! `params[p]` is the value of `Func.params[p]` ([`CSource::param_order`]).
//!
//! Phases are described in [`phases`]: the extent of a parallel phase is
//! `max(0, hi - lo)` of its loop and work item `t` runs the loop body with the loop
//! variable `lo + t`; a serial phase has extent 1. `sparsile_phase_run` runs the work
//! items `[begin, end)` of a phase and returns 0, or nonzero when scratch memory cannot
//! be allocated or `ph` is out of range. Work items of a parallel phase may run on
//! different threads; scratch memory is allocated per call and lives for that call.
//!
//! # Shape of the code
//! Every phase is a `static` function named after the program and the phase
//! (`spmv_phase0`) that binds the params and buffers it uses to named locals
//! (`const int64_t m = params[0];`, `float *restrict y = (float *)buffers[4];`; inputs
//! are `const`), then runs the statements; the ABI functions dispatch on the phase
//! number. Helpers ([`prelude`]) are emitted only when used. See `tests/c/*.c` for
//! complete examples.

mod ctx;
mod expr;
mod literal;
mod names;
pub mod phases;
pub mod prelude;
mod stmt;
mod types;

use std::fmt::Write as _;

use sparsile_ir::coord::BufferRole;
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, Func, Stmt};
use sparsile_ir::{BufferId, DType};

use ctx::Ctx;
use expr::emit_as;
use phases::{needed_lets, split, Phase, Uses};
use stmt::{comment_text, emit_stmts, Writer};
use types::{storage_name, Ty};

use crate::CodegenError;

/// The ABI version the generated code reports.
pub const ABI_VERSION: i64 = 1;

/// The symbols every generated translation unit exports, in ABI order.
pub const ENTRY_SYMBOLS: [&str; 4] = [
    "sparsile_abi_version",
    "sparsile_num_phases",
    "sparsile_phase_extent",
    "sparsile_phase_run",
];

/// Scratch buffers up to this many bytes with a constant length live on the stack.
const STACK_SCRATCH_BYTES: i64 = 4096;

/// Generated C and what a runtime needs to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct CSource {
    /// The C99 translation unit.
    pub code: String,
    /// The stage-III function's name.
    pub func_name: String,
    /// [`ENTRY_SYMBOLS`].
    pub entry_symbols: [&'static str; 4],
    /// `buffers[b]` of the ABI is the data of `buffer_order[b]`.
    pub buffer_order: Vec<BufferArg>,
    /// `params[p]` of the ABI is the value of the parameter named `param_order[p]`.
    pub param_order: Vec<String>,
    /// The phases, in the order the runtime runs them.
    pub phases: Vec<PhaseInfo>,
}

/// One slot of the ABI's `buffers` array.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferArg {
    pub name: String,
    pub dtype: DType,
    pub kind: BufferKind,
    pub role: BufferRole,
    /// Number of elements (an integer expression over the params).
    pub len: Expr,
    /// Scratch memory the generated code allocates itself: pass a null pointer.
    pub allocated_by_kernel: bool,
}

/// Whether a phase splits into independent work items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    /// One work item per iteration of its loop.
    Parallel,
    /// A single work item.
    Serial,
}

/// One phase of the generated kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseInfo {
    pub kind: PhaseKind,
    /// The top-level block the phase came from.
    pub block: Option<String>,
    /// The loop variable of a parallel phase.
    pub var: Option<String>,
}

/// Emits C99 for a stage-III function.
///
/// Errors: the function is not in stage III, has f16/bf16 buffers or locals, accesses a
/// buffer with other than one offset, or shares a top-level local or scratch buffer
/// between phases in a way the ABI cannot express (see [`CodegenError`]).
pub fn emit_c(func: &Func) -> Result<CSource, CodegenError> {
    let mut ctx = Ctx::new(func)?;
    let (phases, lets) = split(&func.body);
    check_scratch(func, &phases)?;
    let prefix = ctx.names.fresh(&func.name);
    let mut phase_fns = String::new();
    let mut infos = Vec::new();
    for (k, phase) in phases.iter().enumerate() {
        if let Some(f) = phase.parallel_loop() {
            phase_fns.push_str(&extent_fn(&mut ctx, &prefix, k, phase, &lets)?);
            phase_fns.push('\n');
            infos.push(PhaseInfo {
                kind: PhaseKind::Parallel,
                block: phase.block().map(str::to_string),
                var: Some(ctx.var(f.var)?.name.clone()),
            });
        } else {
            infos.push(PhaseInfo {
                kind: PhaseKind::Serial,
                block: phase.block().map(str::to_string),
                var: None,
            });
        }
        phase_fns.push_str(&run_fn(&mut ctx, &prefix, k, phase, &lets)?);
        phase_fns.push('\n');
    }

    let mut code = String::new();
    header(&mut code, func, &infos);
    code.push_str("#include <stdint.h>\n#include <stdlib.h>\n#include <math.h>\n\n");
    for h in &ctx.helpers {
        code.push_str(h.definition());
        code.push('\n');
    }
    code.push_str(&phase_fns);
    abi_fns(&mut code, &prefix, &infos);

    Ok(CSource {
        code,
        func_name: func.name.clone(),
        entry_symbols: ENTRY_SYMBOLS,
        buffer_order: func
            .buffers
            .values()
            .map(|b| BufferArg {
                name: b.name.clone(),
                dtype: b.dtype,
                kind: b.kind.clone(),
                role: b.role,
                len: match &b.layout {
                    BufferLayout::Flat(len) => len.clone(),
                    BufferLayout::Axes(_) => unreachable!("rejected by Ctx::new"),
                },
                allocated_by_kernel: b.kind == BufferKind::Scratch,
            })
            .collect(),
        param_order: func.params.values().map(|p| p.name.clone()).collect(),
        phases: infos,
    })
}

fn header(code: &mut String, func: &Func, infos: &[PhaseInfo]) {
    let _ = writeln!(
        code,
        "/* Generated by Sparsile from the stage-III function `{}` (kernel ABI version {ABI_VERSION}).",
        comment_text(&func.name)
    );
    let params: Vec<String> = func.params.values().map(|p| p.name.clone()).collect();
    let _ = writeln!(code, " * params:  {}", comment_text(&params.join(", ")));
    let buffers: Vec<String> = func
        .buffers
        .values()
        .map(|b| {
            let scratch = if b.kind == BufferKind::Scratch {
                ", scratch"
            } else {
                ""
            };
            format!("{} ({}{scratch})", b.name, b.dtype)
        })
        .collect();
    let _ = writeln!(code, " * buffers: {}", comment_text(&buffers.join(", ")));
    for (k, p) in infos.iter().enumerate() {
        let what = match (&p.kind, &p.var) {
            (PhaseKind::Parallel, Some(v)) => format!("parallel over {v}"),
            _ => "serial".to_string(),
        };
        let block = p
            .block
            .as_deref()
            .map(|b| format!(" (block {b})"))
            .unwrap_or_default();
        let _ = writeln!(
            code,
            " * phase {k}: {}",
            comment_text(&format!("{what}{block}"))
        );
    }
    code.push_str(" */\n");
}

/// Scratch memory lives for one phase call: a scratch buffer used by two phases is an
/// error.
fn check_scratch(func: &Func, phases: &[Phase]) -> Result<(), CodegenError> {
    let mut first_use: Vec<Option<usize>> = vec![None; func.buffers.len()];
    for (k, phase) in phases.iter().enumerate() {
        let mut uses = Uses::default();
        for (s, _) in &phase.stmts {
            uses.stmt(s);
        }
        for b in uses.buffers {
            let Some(buf) = func.buffers.get(b) else {
                continue;
            };
            if buf.kind != BufferKind::Scratch {
                continue;
            }
            match first_use[b.0 as usize] {
                Some(first) if first != k => {
                    return Err(CodegenError::ScratchAcrossPhases {
                        buffer: buf.name.clone(),
                        first,
                        second: k,
                    })
                }
                _ => first_use[b.0 as usize] = Some(k),
            }
        }
    }
    Ok(())
}

/// Binds the params, buffers, scratch memory and top-level locals `uses` needs; returns
/// the heap-allocated scratch buffers to free.
fn bindings(
    ctx: &mut Ctx,
    w: &mut Writer,
    uses: &mut Uses,
    lets: &[&Stmt],
    fail: &str,
) -> Result<Vec<String>, CodegenError> {
    let func = ctx.func;
    let needed = needed_lets(&func.body, lets, uses, |v| {
        func.vars.get(v).map(|x| x.name.clone()).unwrap_or_default()
    })?;
    ctx.live = uses.read_vars.clone();
    let scratch: Vec<BufferId> = uses
        .buffers
        .iter()
        .copied()
        .filter(|b| {
            func.buffers
                .get(*b)
                .is_some_and(|x| x.kind == BufferKind::Scratch)
        })
        .collect();
    for b in &scratch {
        if let BufferLayout::Flat(len) = &func.buffers[*b].layout {
            uses.expr(len);
        }
    }
    let binds_buffers = uses.buffers.iter().any(|b| {
        func.buffers
            .get(*b)
            .is_some_and(|x| x.kind != BufferKind::Scratch)
    });
    if uses.params.is_empty() {
        w.line("(void)params;");
    }
    if !binds_buffers {
        w.line("(void)buffers;");
    }
    for p in uses.params.clone() {
        let name = ctx.param_name(p)?;
        w.line(&format!("const int64_t {name} = params[{}];", p.0));
    }
    for b in uses.buffers.clone() {
        let buf = ctx.buffer(b)?;
        if buf.kind == BufferKind::Scratch {
            continue;
        }
        let ty = storage_name(buf.dtype);
        let qual = if buf.role == BufferRole::Input {
            "const "
        } else {
            ""
        };
        w.line(&format!(
            "{qual}{ty} *restrict {} = ({qual}{ty} *)buffers[{}];",
            ctx.buffer_name(b)?,
            b.0
        ));
    }
    let mut heap = Vec::new();
    for b in scratch {
        let buf = ctx.buffer(b)?;
        let ty = storage_name(buf.dtype);
        let name = ctx.buffer_name(b)?.to_string();
        let BufferLayout::Flat(len) = &buf.layout else {
            unreachable!("rejected by Ctx::new")
        };
        match len {
            Expr::Int(n)
                if *n >= 1 && *n * buf.dtype.size_bytes() as i64 <= STACK_SCRATCH_BYTES =>
            {
                w.line(&format!("{ty} {name}[{n}] = {{0}}; /* scratch */"));
            }
            _ => {
                let len_name = ctx.names.fresh(&format!("{name}_len"));
                let len = emit_as(ctx, len, Ty::I64)?;
                w.line(&format!(
                    "const int64_t {len_name} = {}; /* scratch */",
                    len.text
                ));
                w.line(&format!(
                    "{ty} *restrict {name} = ({ty} *)calloc({len_name} > 0 ? (size_t){len_name} : 1, sizeof({ty}));"
                ));
                heap.push(name);
            }
        }
    }
    if !heap.is_empty() {
        let missing: Vec<String> = heap.iter().map(|n| format!("!{n}")).collect();
        let frees: Vec<String> = heap.iter().map(|n| format!("free({n});")).collect();
        w.line(&format!("if ({}) {{", missing.join(" || ")));
        w.indent += 1;
        w.line(&frees.join(" "));
        w.line(fail);
        w.indent -= 1;
        w.line("}");
    }
    for s in needed {
        emit_stmts(ctx, w, std::slice::from_ref(s), None)?;
    }
    Ok(heap)
}

fn lets_of<'a, 'f>(phase: &Phase, lets: &'a [&'f Stmt]) -> &'a [&'f Stmt] {
    &lets[..phase.lets_before]
}

/// `static int64_t <prefix>_phase<k>_extent(buffers, params)`: `max(0, hi - lo)`.
fn extent_fn(
    ctx: &mut Ctx,
    prefix: &str,
    k: usize,
    phase: &Phase,
    lets: &[&Stmt],
) -> Result<String, CodegenError> {
    let f = phase.parallel_loop().expect("parallel phase");
    let mut w = Writer::default();
    w.line(&format!(
        "/* Phase {k}: number of work items (iterations of the parallel loop). */"
    ));
    w.line(&format!(
        "static int64_t {prefix}_phase{k}_extent(void *const *buffers, const int64_t *params)"
    ));
    w.line("{");
    w.indent += 1;
    let mut uses = Uses::default();
    uses.expr(&f.lo);
    uses.expr(&f.hi);
    let heap = bindings(ctx, &mut w, &mut uses, lets_of(phase, lets), "return 0;")?;
    ctx.span = f.span;
    let lo_name = ctx.names.fresh("lo");
    let hi_name = ctx.names.fresh("hi");
    let lo = emit_as(ctx, &f.lo, Ty::I64)?;
    let hi = emit_as(ctx, &f.hi, Ty::I64)?;
    w.line(&format!("const int64_t {lo_name} = {};", lo.text));
    w.line(&format!("const int64_t {hi_name} = {};", hi.text));
    for h in &heap {
        w.line(&format!("free({h});"));
    }
    w.line(&format!(
        "return {hi_name} > {lo_name} ? {hi_name} - {lo_name} : 0;"
    ));
    w.indent -= 1;
    w.line("}");
    Ok(w.out)
}

/// `static int32_t <prefix>_phase<k>(...)`: runs the phase's work items.
fn run_fn(
    ctx: &mut Ctx,
    prefix: &str,
    k: usize,
    phase: &Phase,
    lets: &[&Stmt],
) -> Result<String, CodegenError> {
    let mut w = Writer::default();
    let block = phase
        .block()
        .map(|b| format!(" (block {})", comment_text(b)))
        .unwrap_or_default();
    let parallel = phase.parallel_loop();
    let mut uses = Uses::default();
    match parallel {
        Some(f) => {
            w.line(&format!(
                "/* Phase {k}{block}: work items [begin, end) of the parallel loop over {}. */",
                comment_text(&ctx.var(f.var)?.name)
            ));
            w.line(&format!(
                "static int32_t {prefix}_phase{k}(void *const *buffers, const int64_t *params, int64_t begin, int64_t end)"
            ));
            uses.expr(&f.lo);
            uses.stmts(&f.body);
        }
        None => {
            w.line(&format!("/* Phase {k}{block}: serial. */"));
            w.line(&format!(
                "static int32_t {prefix}_phase{k}(void *const *buffers, const int64_t *params)"
            ));
            for (s, _) in &phase.stmts {
                uses.stmt(s);
            }
        }
    }
    w.line("{");
    w.indent += 1;
    let heap = bindings(ctx, &mut w, &mut uses, lets_of(phase, lets), "return 1;")?;
    match parallel {
        Some(f) => {
            ctx.span = f.span;
            let v = ctx.var_name(f.var)?.to_string();
            let comment = match phase.block() {
                Some(b) => format!(" /* {}, parallel */", comment_text(b)),
                None => " /* parallel */".to_string(),
            };
            if f.lo == Expr::Int(0) {
                w.line(&format!(
                    "for (int64_t {v} = begin; {v} < end; ++{v}) {{{comment}"
                ));
            } else {
                let lo_name = ctx.names.fresh(&format!("{v}_lo"));
                let lo = emit_as(ctx, &f.lo, Ty::I64)?;
                w.line(&format!("const int64_t {lo_name} = {};", lo.text));
                w.line(&format!(
                    "for (int64_t {v} = {lo_name} + begin; {v} < {lo_name} + end; ++{v}) {{{comment}"
                ));
            }
            w.indent += 1;
            emit_stmts(ctx, &mut w, &f.body, phase.block())?;
            w.indent -= 1;
            w.line("}");
        }
        None => {
            for (s, block) in &phase.stmts {
                emit_stmts(ctx, &mut w, std::slice::from_ref(*s), *block)?;
            }
        }
    }
    for h in &heap {
        w.line(&format!("free({h});"));
    }
    w.line("return 0;");
    w.indent -= 1;
    w.line("}");
    Ok(w.out)
}

fn abi_fns(code: &mut String, prefix: &str, infos: &[PhaseInfo]) {
    let _ = write!(
        code,
        "int64_t sparsile_abi_version(void)\n{{\n    return {ABI_VERSION};\n}}\n\n\
         int64_t sparsile_num_phases(void)\n{{\n    return {};\n}}\n\n",
        infos.len()
    );
    code.push_str(
        "int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params)\n{\n",
    );
    if !infos.iter().any(|p| p.kind == PhaseKind::Parallel) {
        code.push_str("    (void)buffers;\n    (void)params;\n");
    }
    code.push_str("    switch (ph) {\n");
    for (k, p) in infos.iter().enumerate() {
        let _ = match p.kind {
            PhaseKind::Parallel => writeln!(
                code,
                "    case {k}: return {prefix}_phase{k}_extent(buffers, params);"
            ),
            PhaseKind::Serial => writeln!(code, "    case {k}: return 1;"),
        };
    }
    code.push_str("    default: return 0;\n    }\n}\n\n");
    code.push_str(
        "int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params, int64_t begin, int64_t end)\n{\n",
    );
    if infos.is_empty() {
        code.push_str("    (void)buffers;\n    (void)params;\n    (void)begin;\n    (void)end;\n");
    }
    code.push_str("    switch (ph) {\n");
    for (k, p) in infos.iter().enumerate() {
        let _ = match p.kind {
            PhaseKind::Parallel => writeln!(
                code,
                "    case {k}: return {prefix}_phase{k}(buffers, params, begin, end);"
            ),
            PhaseKind::Serial => writeln!(
                code,
                "    case {k}: return begin <= 0 && 0 < end ? {prefix}_phase{k}(buffers, params) : 0;"
            ),
        };
    }
    code.push_str("    default: return 1;\n    }\n}\n");
}
