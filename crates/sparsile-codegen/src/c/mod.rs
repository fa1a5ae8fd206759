//! The C backend: stage-III functions to C99 exporting the compiled-kernel ABI.
//!
//! # ABI (version [`ABI_VERSION`])
//! The translation unit includes `<stdint.h>`, `<stdlib.h>` and `<math.h>`, needs no
//! OpenMP runtime, and exports exactly [`ENTRY_SYMBOLS`]:
//! ```c
//! int64_t sparsile_abi_version(void);            /* returns 3 */
//! int64_t sparsile_num_phases(void);
//! int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params);
//! int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
//!                            int64_t begin, int64_t end);
//! int64_t sparsile_phase_partition(int64_t ph);  /* 0 static, 1 dynamic, 2 balanced */
//! int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params,
//!                               int64_t n, int64_t *bounds);
//! int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params);
//! ```
//! `buffers[b]` points at the data of `Func.buffers[b]` ([`CSource::buffer_order`]):
//! values as `float`/`double` (f16 and bf16 values as their 16 bits, `unsigned short`,
//! computed in f32), structure arrays as `int32_t`/`int64_t`. Scratch buffers
//! are allocated by the generated code (their slot is ignored and may be null).
//! A scratch buffer used by several phases must outlive a phase call, so the caller
//! allocates it instead, zero-filled ([`BufferArg::allocated_by_kernel`] is false; the
//! phase fails when its slot is null). Local buffers are C arrays on the stack of each
//! phase call (their slot is ignored): a call runs its work items one after the other on
//! one thread, so each work item has them to itself.
//! `params[p]` is the value of `Func.params[p]` ([`CSource::param_order`]).
//!
//! Phases are the top-level statements of the body with top-level blocks flattened: a
//! `parallel` loop is a parallel phase (and a short serial loop with constant bounds
//! around one parallel loop one parallel phase per iteration, see `phases.rs`),
//! consecutive other statements one serial phase
//! (top-level `let`s are evaluated again by later phases that use them). The extent of a
//! parallel phase is `max(0, hi - lo)` of its loop and work item `t` runs the loop body
//! with the loop variable `lo + t`; a serial phase has extent 1. Query a phase's extent
//! after the phases before it have run (its bounds may read what they wrote). `sparsile_phase_run` runs the work
//! items `[begin, end)` of a phase and returns 0, or nonzero when scratch memory cannot
//! be allocated or `ph` is out of range. Work items of a parallel phase may run on
//! different threads; scratch memory is allocated per call and lives for that call.
//!
//! `sparsile_phase_partition` tells how the caller should divide a phase's work items
//! ([`PhasePartition`]): in even chunks (0, also every serial phase), in many small
//! chunks handed to threads as they become free (1), or by `sparsile_phase_bounds` (2).
//! `sparsile_phase_bounds` writes `n + 1` nondecreasing work-item boundaries
//! `bounds[0] = 0 <= … <= bounds[n] = extent` for `n >= 1` chunks and returns 0
//! (nonzero for `n < 1` or an unknown phase); for a balanced phase over `v in lo..hi`
//! with weights `P[v + 1] - P[v]`, chunk `c` starts at the first work item `t` with
//! `P[lo + t] >= P[lo] + (P[hi] - P[lo]) * c / n` (a binary search over the indptr),
//! so chunks carry about equal weight; other phases get even chunks.
//! `sparsile_phase_work` estimates how many leaf statements a parallel phase executes in
//! all ([`sparsile_ir::loops::estimated_work`]), or returns -1 when it cannot tell (and
//! for serial phases); like the extent, query it after the phases before it have run.
//!
//! # Shape of the code
//! Every phase is a `static` function named after the program and the phase
//! (`spmv_phase0`) that binds the params and buffers it uses to named locals
//! (`const int64_t m = params[0];`, `float *restrict y = (float *)buffers[4];`; inputs
//! are `const`), then runs the statements; the ABI functions dispatch on the phase
//! number. Helpers (floor division, binary search, …) are emitted only when used. See
//! `tests/c/*.c` for complete examples.

mod batched;
mod batched_rows;
pub(crate) mod ctx;
pub(crate) mod expr;
pub(crate) mod half_sums;
mod invariant_guards;
mod literal;
mod masked;
pub(crate) mod names;
pub(crate) mod phases;
pub(crate) mod prelude;
mod reduction;
mod register_tiled;
pub(crate) mod stmt;
pub(crate) mod types;
mod vector;
mod work;

use std::collections::HashSet;
use std::fmt::Write as _;

use sparsile_ir::coord::BufferRole;
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, ForKind, Func, Stmt};
use sparsile_ir::{BufferId, DType};

use ctx::Ctx;
use expr::emit_as;
use phases::{live_uses, needed_lets, split, Phase, Uses};
use stmt::{comment_text, emit_stmts, Writer};
use types::{storage_name, Ty};

use crate::CodegenError;

/// The ABI version the generated code reports.
pub const ABI_VERSION: i64 = 3;

/// The symbols every generated translation unit exports, in ABI order.
pub const ENTRY_SYMBOLS: [&str; 7] = [
    "sparsile_abi_version",
    "sparsile_num_phases",
    "sparsile_phase_extent",
    "sparsile_phase_run",
    "sparsile_phase_partition",
    "sparsile_phase_bounds",
    "sparsile_phase_work",
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
    pub entry_symbols: [&'static str; 7],
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
    /// Scratch memory the generated code allocates itself: pass a null pointer. False
    /// for every other buffer, including scratch shared by several phases, which the
    /// caller allocates zero-filled. In a [`crate::CudaSource`]: the `shared` and
    /// `local` buffers, which the kernels declare and which are no arguments.
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

/// How the caller divides a phase's work items between threads (the value
/// `sparsile_phase_partition` returns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhasePartition {
    /// Even chunks (0); every serial phase.
    Static,
    /// Many small chunks taken by threads as they become free (1).
    Dynamic,
    /// The chunks `sparsile_phase_bounds` computes from an indptr (2).
    Balanced,
}

impl PhasePartition {
    /// The ABI code.
    pub fn code(self) -> i64 {
        match self {
            PhasePartition::Static => 0,
            PhasePartition::Dynamic => 1,
            PhasePartition::Balanced => 2,
        }
    }
}

/// One phase of the generated kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseInfo {
    pub kind: PhaseKind,
    /// How the work items are divided between threads.
    pub partition: PhasePartition,
    /// The top-level block the phase came from.
    pub block: Option<String>,
    /// The loop variable of a parallel phase.
    pub var: Option<String>,
}

/// Emits C99 for a stage-III function.
///
/// Errors: the function is not in stage III, has f16/bf16 locals, sums into an f16/bf16
/// buffer in place across a loop (`half_sums.rs`), accesses a buffer with other than one
/// offset, or shares a top-level local between phases in a
/// way the ABI cannot express (see [`CodegenError`]).
pub fn emit_c(func: &Func) -> Result<CSource, CodegenError> {
    let mut ctx = Ctx::new(func)?;
    half_sums::check(func)?;
    let (phases, owned_lets) = split(&func.body);
    let lets: Vec<&Stmt> = owned_lets.iter().map(|l| l.as_ref()).collect();
    ctx.caller_scratch = shared_scratch(func, &phases);
    let prefix = ctx.global_name(&func.name);
    let mut phase_fns = String::new();
    let mut infos = Vec::new();
    for (k, phase) in phases.iter().enumerate() {
        if let Some(f) = phase.parallel_loop() {
            phase_fns.push_str(&extent_fn(&mut ctx, &prefix, k, phase, &lets)?);
            phase_fns.push('\n');
            phase_fns.push_str(&work::work_fn(&mut ctx, &prefix, k, phase, &lets)?);
            phase_fns.push('\n');
            let partition = match f.kind {
                ForKind::ParallelDynamic => PhasePartition::Dynamic,
                ForKind::ParallelBalanced { indptr } => {
                    phase_fns.push_str(&bounds_fn(&mut ctx, &prefix, k, phase, &lets, indptr)?);
                    phase_fns.push('\n');
                    PhasePartition::Balanced
                }
                _ => PhasePartition::Static,
            };
            infos.push(PhaseInfo {
                kind: PhaseKind::Parallel,
                partition,
                block: phase.block().map(str::to_string),
                var: Some(ctx.var(f.var)?.name.clone()),
            });
        } else {
            infos.push(PhaseInfo {
                kind: PhaseKind::Serial,
                partition: PhasePartition::Static,
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
            .iter()
            .map(|(id, b)| BufferArg {
                name: b.name.clone(),
                dtype: b.dtype,
                kind: b.kind.clone(),
                role: b.role,
                len: match &b.layout {
                    BufferLayout::Flat(len) => len.clone(),
                    BufferLayout::Axes(_) => unreachable!("rejected by Ctx::new"),
                },
                allocated_by_kernel: b.kind == BufferKind::Local
                    || (b.kind == BufferKind::Scratch && !ctx.caller_scratch.contains(&id)),
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
            let scratch = match b.kind {
                BufferKind::Scratch => ", scratch",
                BufferKind::Local => ", local",
                _ => "",
            };
            format!("{} ({}{scratch})", b.name, b.dtype)
        })
        .collect();
    let _ = writeln!(code, " * buffers: {}", comment_text(&buffers.join(", ")));
    for (k, p) in infos.iter().enumerate() {
        let what = match (&p.kind, &p.var, p.partition) {
            (PhaseKind::Parallel, Some(v), PhasePartition::Static) => format!("parallel over {v}"),
            (PhaseKind::Parallel, Some(v), PhasePartition::Dynamic) => {
                format!("parallel over {v}, dynamic")
            }
            (PhaseKind::Parallel, Some(v), PhasePartition::Balanced) => {
                format!("parallel over {v}, balanced")
            }
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

/// The scratch buffers used by more than one phase: they must outlive a phase call, so
/// the caller allocates them (zero-filled, `len` elements) and passes them in.
fn shared_scratch(func: &Func, phases: &[Phase]) -> HashSet<BufferId> {
    let mut first_use: Vec<Option<usize>> = vec![None; func.buffers.len()];
    let mut shared = HashSet::new();
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
                    shared.insert(b);
                }
                _ => first_use[b.0 as usize] = Some(k),
            }
        }
    }
    shared
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
                && !ctx.caller_scratch.contains(b)
        })
        .collect();
    for b in &scratch {
        if let BufferLayout::Flat(len) = &func.buffers[*b].layout {
            uses.expr(len);
        }
    }
    let locals: Vec<BufferId> = uses
        .buffers
        .iter()
        .copied()
        .filter(|b| {
            func.buffers
                .get(*b)
                .is_some_and(|x| x.kind == BufferKind::Local)
        })
        .collect();
    let binds_buffers = uses.buffers.iter().any(|b| {
        func.buffers
            .get(*b)
            .is_some_and(|x| !matches!(x.kind, BufferKind::Scratch | BufferKind::Local))
            || ctx.caller_scratch.contains(b)
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
        let from_caller = ctx.caller_scratch.contains(&b);
        if (buf.kind == BufferKind::Scratch && !from_caller) || buf.kind == BufferKind::Local {
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
        if from_caller {
            w.line(&format!(
                "if (!{}) {fail} /* scratch shared by several phases: the caller allocates it */",
                ctx.buffer_name(b)?
            ));
        }
    }
    for b in locals {
        let buf = ctx.buffer(b)?;
        let ty = storage_name(buf.dtype);
        let name = ctx.buffer_name(b)?.to_string();
        match &buf.layout {
            BufferLayout::Flat(Expr::Int(n)) if *n >= 1 => {
                w.line(&format!("{ty} {name}[{n}]; /* local */"));
            }
            _ => {
                return Err(CodegenError::LocalLength {
                    buffer: buf.name.clone(),
                    span: buf.span,
                })
            }
        }
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
    ctx.begin_function();
    let mut w = Writer::default();
    w.line(&format!(
        "/* Phase {k}: number of work items (iterations of the parallel loop). */"
    ));
    w.line(&format!(
        "static int64_t {prefix}_phase{k}_extent(void *const *buffers, const int64_t *params)"
    ));
    w.line("{");
    w.indent += 1;
    let mut uses = live_uses(&[], &[&f.lo, &f.hi]);
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

/// `static int32_t <prefix>_phase<k>_bounds(buffers, params, n, bounds)`: the chunk
/// boundaries of a balanced phase (see the module docs).
fn bounds_fn(
    ctx: &mut Ctx,
    prefix: &str,
    k: usize,
    phase: &Phase,
    lets: &[&Stmt],
    indptr: BufferId,
) -> Result<String, CodegenError> {
    let f = phase.parallel_loop().expect("parallel phase");
    ctx.span = f.span;
    let ok = ctx
        .func
        .buffers
        .get(indptr)
        .is_some_and(|b| b.dtype.is_int() && matches!(b.layout, BufferLayout::Flat(_)));
    if !ok {
        return Err(CodegenError::BalancedIndptr {
            var: ctx.var(f.var)?.name.clone(),
            buffer: ctx
                .func
                .buffers
                .get(indptr)
                .map_or_else(|| indptr.to_string(), |b| b.name.clone()),
            span: f.span,
        });
    }
    ctx.begin_function();
    let mut w = Writer::default();
    let ptr_text = comment_text(&ctx.func.buffers[indptr].name);
    w.line(&format!(
        "/* Phase {k}: boundaries of n chunks of about equal weight {ptr_text}[v + 1] - {ptr_text}[v]. */"
    ));
    // Fresh names: none of them may hide a param or buffer the bounds read.
    let [n, bounds, lo_n, hi_n, extent, w0, total, q, r, prev, c, target, first, count, half] = [
        "n", "bounds", "lo", "hi", "extent", "w0", "total", "q", "r", "prev", "c", "target",
        "first", "count", "half",
    ]
    .map(|x| ctx.names.fresh(x));
    w.line(&format!(
        "static int32_t {prefix}_phase{k}_bounds(void *const *buffers, const int64_t *params, int64_t {n}, int64_t *{bounds})"
    ));
    w.line("{");
    w.indent += 1;
    let probe = Expr::load(indptr, vec![f.lo.clone()]);
    let mut uses = live_uses(&[], &[&f.lo, &f.hi, &probe]);
    let heap = bindings(ctx, &mut w, &mut uses, lets_of(phase, lets), "return 1;")?;
    let lo = emit_as(ctx, &f.lo, Ty::I64)?;
    let hi = emit_as(ctx, &f.hi, Ty::I64)?;
    let ptr = ctx.buffer_name(indptr)?.to_string();
    for h in &heap {
        w.line(&format!("free({h});"));
    }
    for line in [
        format!("const int64_t {lo_n} = {};", lo.text),
        format!("const int64_t {hi_n} = {};", hi.text),
        format!("const int64_t {extent} = {hi_n} > {lo_n} ? {hi_n} - {lo_n} : 0;"),
        format!("if ({n} < 1) return 1;"),
        format!("{bounds}[0] = 0;"),
        format!("if ({extent} == 0) {{"),
        format!("    for (int64_t {c} = 1; {c} <= {n}; ++{c}) {bounds}[{c}] = 0;"),
        "    return 0;".to_string(),
        "}".to_string(),
        format!("const int64_t {w0} = (int64_t){ptr}[{lo_n}];"),
        format!("const int64_t {total} = (int64_t){ptr}[{hi_n}] - {w0};"),
        format!("const int64_t {q} = {total} / {n}, {r} = {total} % {n};"),
        format!("int64_t {prev} = 0;"),
        format!("for (int64_t {c} = 1; {c} < {n}; ++{c}) {{"),
        format!("    const int64_t {target} = {w0} + {q} * {c} + {r} * {c} / {n};"),
        format!("    int64_t {first} = {lo_n} + {prev}, {count} = {hi_n} - {first};"),
        format!("    while ({count} > 0) {{"),
        format!("        const int64_t {half} = {count} / 2;"),
        format!("        if ((int64_t){ptr}[{first} + {half}] < {target}) {{"),
        format!("            {first} += {half} + 1;"),
        format!("            {count} -= {half} + 1;"),
        "        } else {".to_string(),
        format!("            {count} = {half};"),
        "        }".to_string(),
        "    }".to_string(),
        format!("    {prev} = {first} - {lo_n};"),
        format!("    {bounds}[{c}] = {prev};"),
        "}".to_string(),
        format!("{bounds}[{n}] = {extent};"),
        "return 0;".to_string(),
    ] {
        w.line(&line);
    }
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
    ctx.begin_function();
    let mut w = Writer::default();
    let block = phase
        .block()
        .map(|b| format!(" (block {})", comment_text(b)))
        .unwrap_or_default();
    let parallel = phase.parallel_loop();
    let mut uses = match parallel {
        Some(f) => {
            w.line(&format!(
                "/* Phase {k}{block}: work items [begin, end) of the parallel loop over {}. */",
                comment_text(&ctx.var(f.var)?.name)
            ));
            w.line(&format!(
                "static int32_t {prefix}_phase{k}(void *const *buffers, const int64_t *params, int64_t begin, int64_t end)"
            ));
            let body: Vec<&Stmt> = f.body.iter().collect();
            live_uses(&body, &[&f.lo])
        }
        None => {
            w.line(&format!("/* Phase {k}{block}: serial. */"));
            w.line(&format!(
                "static int32_t {prefix}_phase{k}(void *const *buffers, const int64_t *params)"
            ));
            let stmts: Vec<&Stmt> = phase.stmts.iter().map(|(s, _)| *s).collect();
            live_uses(&stmts, &[])
        }
    };
    w.line("{");
    w.indent += 1;
    let heap = bindings(ctx, &mut w, &mut uses, lets_of(phase, lets), "return 1;")?;
    match parallel {
        Some(f) => {
            ctx.span = f.span;
            let v = ctx.var_name(f.var)?;
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
    code.push_str("    default: return 1;\n    }\n}\n\n");
    code.push_str("int64_t sparsile_phase_partition(int64_t ph)\n{\n    switch (ph) {\n");
    for (k, p) in infos.iter().enumerate() {
        if p.partition != PhasePartition::Static {
            let _ = writeln!(code, "    case {k}: return {};", p.partition.code());
        }
    }
    code.push_str("    default: return 0;\n    }\n}\n\n");
    code.push_str(
        "int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params)\n{\n",
    );
    if !infos.iter().any(|p| p.kind == PhaseKind::Parallel) {
        code.push_str("    (void)buffers;\n    (void)params;\n");
    }
    code.push_str("    switch (ph) {\n");
    for (k, p) in infos.iter().enumerate() {
        if p.kind == PhaseKind::Parallel {
            let _ = writeln!(
                code,
                "    case {k}: return {prefix}_phase{k}_work(buffers, params);"
            );
        }
    }
    code.push_str("    default: return -1;\n    }\n}\n\n");
    code.push_str(
        "int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds)\n{\n",
    );
    code.push_str("    if (ph < 0 || ph >= sparsile_num_phases() || n < 1) return 1;\n");
    for (k, p) in infos.iter().enumerate() {
        if p.partition == PhasePartition::Balanced {
            let _ = writeln!(
                code,
                "    if (ph == {k}) return {prefix}_phase{k}_bounds(buffers, params, n, bounds);"
            );
        }
    }
    code.push_str(
        "    const int64_t extent = sparsile_phase_extent(ph, buffers, params);\n    \
         const int64_t q = extent / n, r = extent % n;\n    \
         for (int64_t c = 0; c <= n; ++c) bounds[c] = q * c + r * c / n;\n    \
         return 0;\n}\n",
    );
}
