//! `decompose_format`: rewrites the computation on one input buffer into one sparse
//! iteration per part of a format decomposition.
//!
//! `decompose_format(program, "A", rule)` declares, for every part `p` of `rule`
//! ([`DecomposeRule::part_layouts`]), the part's axes, an input buffer `A_p{p}` over
//! them, and the derivation `derived A_p{p} = part(A, p) by rule` (the runtime computes
//! the part's tensor from `A`'s before a run; the caller still passes only `A`). Every
//! top-level iteration that reads `A` is replaced by
//! - `{it}_init`, when it has `init` statements: an iteration over its spatial axes
//!   whose body is the `init` (it runs once per spatial point, as `init` did);
//! - `{it}_p{p}` for every part: the iteration's axes with `A`'s axes replaced by the
//!   part's (at the place of `A`'s first axis), fresh iterator variables, `A[…]` read as
//!   `A_p{p}[…]` and every use of `A`'s variable for logical dimension `d` replaced by the
//!   part's `to_logical[d]` expression. A part axis is spatial when every logical
//!   dimension it maps to was spatial and its parent (if any) is spatial.
//!
//! The parts together store each entry of `A` exactly once (padding reads as 0 and its
//! out-of-range coordinates skip writes), so the result is unchanged when the body only
//! accumulates: every store is `X[idx] = X[idx] + e` (or `e + X[idx]`).
//!
//! Preconditions (each its own [`ScheduleError`]):
//! - the program verifies; the rule is well formed and applies to `A`'s order
//!   ([`ScheduleError::DecomposeBadRule`]);
//! - `A` is a declared input buffer, not itself derived, stored with one axis per
//!   logical dimension in order (CSR, DCSR, CSF, COO, ELL, dense), so that the variable of
//!   its axis `d` is the logical coordinate `d` ([`ScheduleError::UnknownBuffer`],
//!   [`ScheduleError::NotDecomposable`]);
//! - at least one top-level iteration reads `A` ([`ScheduleError::BufferNotRead`]);
//! - each such iteration iterates every axis of `A` and no other of its axes has one of
//!   them as parent ([`ScheduleError::SourceAxisNotIterated`]); none of its fused groups
//!   contains an axis of `A` ([`ScheduleError::AlreadyFused`]); every read of `A` is
//!   `A[v0, v1, …]` with the variables of `A`'s axes ([`ScheduleError::SourceAccessNotIterated`]);
//!   its body is only accumulating stores that do not read what they accumulate into
//!   otherwise ([`ScheduleError::NotAnAccumulation`]).
//!
//! Example (`tests/schedule/decompose_format/spmm_hyb.sir` → `.after.sir`), hyb(1, 1):
//! ```text
//! iter C over [I: S, J: R, K: S] as (i, j, k) {      iter C_init over [I: S, K: S] as (i, k) {
//!   init { C[i, k] = 0.0 }                     →       C[i, k] = 0.0 }
//!   C[i, k] = C[i, k] + A[i, j] * B[j, k]            iter C_p0 over [A_p0_I: S, A_p0_J: R, K: S] as (i_p0, j_p0, k_p0) {
//! }                                                    C[i_p0, k_p0] = C[i_p0, k_p0] + A_p0[i_p0, j_p0] * B[j_p0, k_p0] }
//!                                                    iter C_p1 … (the width-2 bucket)
//! ```

use std::collections::HashSet;

use sparsile_formats::decompose::DecomposeRule;
use sparsile_formats::{Layout, MapExpr, SizeSpec};
use sparsile_ir::coord::display::ExprDisplay;
use sparsile_ir::coord::{
    AxisDecl, AxisStructure, BinaryOp, BufferDecl, BufferRole, DerivedBuffer, Expr, Extent,
    IterAxis, IterKind, IterVar, Param, Program, SparseIteration, Stmt, Store,
};
use sparsile_ir::{AxisId, AxisKind, BufferId, IndexType, IterVarId, Span};

use super::sparse_reorder::{check_program, check_result};
use super::ScheduleError;

const PRIMITIVE: &str = "decompose_format";

/// Decomposes input buffer `buffer` by `rule` (see the module docs).
pub fn decompose_format(
    program: &Program,
    buffer: &str,
    rule: &DecomposeRule,
) -> Result<Program, ScheduleError> {
    check_program(PRIMITIVE, program)?;
    let source = program
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let decl = &program.buffers[source];
    let not_decomposable = |reason: String| ScheduleError::NotDecomposable {
        buffer: buffer.to_string(),
        reason,
        span: decl.span,
    };
    if decl.role != BufferRole::Input {
        return Err(not_decomposable(format!(
            "it is an {} buffer; only inputs can be decomposed",
            decl.role.name()
        )));
    }
    if program.derivation(source).is_some() {
        return Err(not_decomposable(
            "it is itself derived from another buffer".to_string(),
        ));
    }
    for (d, &axis) in decl.axes.iter().enumerate() {
        let a = &program.axes[axis];
        let expected_parent = if d == 0 { None } else { Some(decl.axes[d - 1]) };
        if a.parent.is_some() && a.parent != expected_parent {
            return Err(not_decomposable(format!(
                "its axis `{}` is not stored under the axis before it, so its axes are not one \
                 per logical dimension in order",
                a.name
            )));
        }
    }
    let ndim = decl.axes.len();
    let layouts = rule
        .part_layouts(ndim)
        .map_err(|e| ScheduleError::DecomposeBadRule {
            buffer: buffer.to_string(),
            rule: rule.to_string(),
            reason: e.to_string(),
        })?;

    let mut out = program.clone();
    let mut names = Names::new(program);
    let parts: Vec<Part> = layouts
        .iter()
        .enumerate()
        .map(|(p, layout)| declare_part(&mut out, &mut names, source, p, layout, rule))
        .collect();

    let mut body = Vec::with_capacity(out.body.len());
    let mut rewritten = 0;
    for stmt in std::mem::take(&mut out.body) {
        match stmt {
            Stmt::Iteration(it) if reads(&it.body, source) || reads(&it.init, source) => {
                check_iteration(program, &it, source)?;
                rewritten += 1;
                if !it.init.is_empty() {
                    body.push(Stmt::Iteration(init_iteration(&mut names, &it)));
                }
                for part in &parts {
                    let new = part_iteration(&mut out, &mut names, &it, source, part);
                    body.push(Stmt::Iteration(new));
                }
            }
            other => body.push(other),
        }
    }
    if rewritten == 0 {
        return Err(ScheduleError::BufferNotRead {
            buffer: buffer.to_string(),
        });
    }
    out.body = body;
    out.compact_vars();
    check_result(PRIMITIVE, &out)?;
    Ok(out)
}

/// A declared part: its buffer, axes and coordinate maps.
struct Part {
    index: usize,
    buffer: BufferId,
    axes: Vec<AxisId>,
    /// Short lowercase names for the part's iterator variables.
    var_names: Vec<String>,
    layout: Layout,
}

/// Fresh names, unique among the program's parameters, axes, buffers, variables and
/// iterations.
struct Names {
    taken: HashSet<String>,
}

impl Names {
    fn new(program: &Program) -> Names {
        let mut taken: HashSet<String> = HashSet::new();
        taken.extend(program.params.values().map(|p| p.name.clone()));
        taken.extend(program.axes.values().map(|a| a.name.clone()));
        taken.extend(program.buffers.values().map(|b| b.name.clone()));
        taken.extend(program.vars.values().map(|v| v.name.clone()));
        collect_iteration_names(&program.body, &mut taken);
        Names { taken }
    }

    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while self.taken.contains(&name) || !sparsile_ir::coord::parser::is_valid_name(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

fn collect_iteration_names(stmts: &[Stmt], taken: &mut HashSet<String>) {
    for s in stmts {
        if let Stmt::Iteration(it) = s {
            taken.insert(it.name.clone());
            collect_iteration_names(&it.init, taken);
            collect_iteration_names(&it.body, taken);
        }
    }
}

/// Declares the axes, parameters, buffer and derivation of part `p`.
fn declare_part(
    out: &mut Program,
    names: &mut Names,
    source: BufferId,
    p: usize,
    layout: &Layout,
    rule: &DecomposeRule,
) -> Part {
    let src = out.buffers[source].clone();
    let index_type = src
        .axes
        .iter()
        .map(|&a| &out.axes[a])
        .find(|a| a.kind != AxisKind::DenseFixed)
        .map_or(IndexType::I32, |a| a.index_type);
    let buffer_name = names.fresh(&format!("{}_p{p}", src.name));
    let mut axes: Vec<AxisId> = Vec::with_capacity(layout.axes.len());
    for (a, spec) in layout.axes.iter().enumerate() {
        // Which axes may hold the padding sentinel: the slots of hyb's ELL buckets, or
        // every sparse axis of a target format that stores it.
        let padded = spec.kind.is_sparse()
            && match rule {
                DecomposeRule::Hyb { .. } => a + 1 == layout.axes.len(),
                DecomposeRule::Convert { format } => format
                    .parse::<sparsile_formats::Format>()
                    .is_ok_and(|f| f.stores_sentinel()),
                // BSR parts and a CSR part: none stores the sentinel.
                DecomposeRule::Blocks { .. } | DecomposeRule::Tiles { .. } => false,
            };
        let axis_name = names.fresh(&format!("{buffer_name}_{}", spec.name));
        let mut param = |out: &mut Program, what: &str| {
            let name = names.fresh(&format!("{axis_name}_{what}"));
            Extent::Param(out.params.push(Param { name }))
        };
        let length = match &spec.length {
            MapExpr::Const(c) => Extent::Const(*c),
            MapExpr::Dim(d) => out.axes[src.axes[*d]].length,
            _ => param(out, "len"),
        };
        let nnz_per_parent = spec.nnz_per_parent.as_ref().map(|size| match size {
            SizeSpec::Expr(MapExpr::Const(c)) => Extent::Const(*c),
            SizeSpec::Expr(MapExpr::Dim(d)) => out.axes[src.axes[*d]].length,
            _ => param(out, "per"),
        });
        let nnz = spec.kind.is_variable().then(|| param(out, "nnz"));
        let decl = AxisDecl {
            name: axis_name,
            kind: spec.kind,
            parent: spec.parent.map(|q| axes[q]),
            length,
            nnz,
            nnz_per_parent,
            index_type: if spec.kind == AxisKind::DenseFixed {
                IndexType::I32
            } else {
                index_type
            },
            unique: spec.unique,
            padded,
            structure: AxisStructure::Bound,
            span: Span::default(),
        };
        axes.push(out.axes.push(decl));
    }
    let buffer = out.buffers.push(BufferDecl {
        name: buffer_name,
        dtype: src.dtype,
        axes: axes.clone(),
        role: BufferRole::Input,
        span: Span::default(),
    });
    out.derived.push(DerivedBuffer {
        buffer,
        source,
        part: p,
        rule: rule.to_spec(),
        span: Span::default(),
    });
    Part {
        index: p,
        buffer,
        axes,
        var_names: layout
            .axes
            .iter()
            .map(|s| s.name.to_ascii_lowercase())
            .collect(),
        layout: layout.clone(),
    }
}

/// Whether any statement reads `buffer` (nested iterations included).
fn reads(stmts: &[Stmt], buffer: BufferId) -> bool {
    let mut found = false;
    let mut look = |e: &Expr| {
        e.visit(&mut |x| {
            if matches!(x, Expr::Load { buffer: b, .. } if *b == buffer) {
                found = true;
            }
        })
    };
    for s in stmts {
        match s {
            Stmt::Store(st) => {
                st.indices.iter().for_each(&mut look);
                look(&st.value);
            }
            Stmt::Iteration(it) => {
                if reads(&it.init, buffer) || reads(&it.body, buffer) {
                    return true;
                }
            }
        }
    }
    found
}

/// The preconditions on one iteration that reads the source.
fn check_iteration(
    program: &Program,
    it: &SparseIteration,
    source: BufferId,
) -> Result<(), ScheduleError> {
    let decl = &program.buffers[source];
    let mut source_vars = Vec::with_capacity(decl.axes.len());
    for &axis in &decl.axes {
        let Some(ia) = it.axes.iter().find(|a| a.axis == axis) else {
            return Err(ScheduleError::SourceAxisNotIterated {
                iteration: it.name.clone(),
                buffer: decl.name.clone(),
                axis: program.axes[axis].name.clone(),
                span: it.span,
            });
        };
        source_vars.push(ia.var);
    }
    for ia in &it.axes {
        let parent = program.axes[ia.axis].parent;
        if !decl.axes.contains(&ia.axis) && parent.is_some_and(|p| decl.axes.contains(&p)) {
            return Err(ScheduleError::SourceAxisNotIterated {
                iteration: it.name.clone(),
                buffer: decl.name.clone(),
                axis: format!(
                    "{}` (the child `{}` of one of its axes is iterated, not part of the buffer)",
                    program.axes[parent.expect("checked")].name,
                    program.axes[ia.axis].name
                ),
                span: it.span,
            });
        }
    }
    for &(start, end) in &it.fused {
        if it.axes[start..end]
            .iter()
            .any(|a| decl.axes.contains(&a.axis))
        {
            let names: Vec<&str> = it.axes[start..end]
                .iter()
                .map(|a| program.axes[a.axis].name.as_str())
                .collect();
            return Err(ScheduleError::AlreadyFused {
                primitive: PRIMITIVE,
                iteration: it.name.clone(),
                axes: names.join(", "),
                span: it.span,
            });
        }
    }
    let expected: Vec<Expr> = source_vars.iter().map(|&v| Expr::Var(v)).collect();
    let mut bad_access: Option<String> = None;
    let mut check = |e: &Expr| {
        e.visit(&mut |x| {
            if let Expr::Load { buffer, indices } = x {
                if *buffer == source && *indices != expected && bad_access.is_none() {
                    bad_access = Some(ExprDisplay::new(program, x).to_string());
                }
            }
        })
    };
    for s in it.init.iter().chain(&it.body) {
        if let Stmt::Store(st) = s {
            st.indices.iter().for_each(&mut check);
            check(&st.value);
        }
    }
    if let Some(access) = bad_access {
        return Err(ScheduleError::SourceAccessNotIterated {
            iteration: it.name.clone(),
            access,
            span: it.span,
        });
    }
    if reads(&it.init, source) {
        return Err(ScheduleError::NotAnAccumulation {
            iteration: it.name.clone(),
            what: format!("its `init` reads `{}`", decl.name),
            span: it.span,
        });
    }
    for s in &it.body {
        let st = match s {
            Stmt::Store(st) => st,
            Stmt::Iteration(inner) => {
                return Err(ScheduleError::NotAnAccumulation {
                    iteration: it.name.clone(),
                    what: format!("its body contains the iteration `{}`", inner.name),
                    span: inner.span,
                })
            }
        };
        if !is_accumulation(st) {
            let target = Expr::load(st.buffer, st.indices.clone());
            return Err(ScheduleError::NotAnAccumulation {
                iteration: it.name.clone(),
                what: format!(
                    "the store to `{}` is not `{} = {} + …` with the rest not reading `{}`",
                    ExprDisplay::new(program, &target),
                    ExprDisplay::new(program, &target),
                    ExprDisplay::new(program, &target),
                    program.buffers[st.buffer].name
                ),
                span: st.span,
            });
        }
    }
    Ok(())
}

/// `X[idx] = X[idx] + e` or `X[idx] = e + X[idx]`, with `e` not reading `X`.
fn is_accumulation(st: &Store) -> bool {
    let Expr::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = &st.value
    else {
        return false;
    };
    let is_self = |e: &Expr| matches!(e, Expr::Load { buffer, indices } if *buffer == st.buffer && *indices == st.indices);
    let rest = if is_self(lhs) {
        rhs
    } else if is_self(rhs) {
        lhs
    } else {
        return false;
    };
    let mut reads_target = false;
    rest.visit(&mut |x| {
        if matches!(x, Expr::Load { buffer, .. } if *buffer == st.buffer) {
            reads_target = true;
        }
    });
    !reads_target
        && !st.indices.iter().any(|i| {
            let mut r = false;
            i.visit(&mut |x| r |= matches!(x, Expr::Load { buffer, .. } if *buffer == st.buffer));
            r
        })
}

/// The iteration that runs the original `init` once per spatial point.
fn init_iteration(names: &mut Names, it: &SparseIteration) -> SparseIteration {
    SparseIteration {
        name: names.fresh(&format!("{}_init", it.name)),
        axes: it
            .axes
            .iter()
            .filter(|a| a.kind == IterKind::Spatial)
            .cloned()
            .collect(),
        init: Vec::new(),
        body: it.init.clone(),
        span: it.span,
        fused: Vec::new(),
    }
}

/// The iteration of `it` over part `part`.
fn part_iteration(
    out: &mut Program,
    names: &mut Names,
    it: &SparseIteration,
    source: BufferId,
    part: &Part,
) -> SparseIteration {
    let p = part.index;
    let source_axes = out.buffers[source].axes.clone();
    let kind_of = |axis: AxisId| {
        it.axes
            .iter()
            .find(|a| a.axis == axis)
            .map_or(IterKind::Reduction, |a| a.kind)
    };
    // Logical dimension d <- the variable of source axis d.
    let source_vars: Vec<IterVarId> = source_axes
        .iter()
        .map(|&axis| {
            it.axes
                .iter()
                .find(|a| a.axis == axis)
                .expect("checked")
                .var
        })
        .collect();
    let mut part_vars: Vec<IterVarId> = Vec::with_capacity(part.axes.len());
    let mut part_kinds: Vec<IterKind> = Vec::with_capacity(part.axes.len());
    for (a, &axis) in part.axes.iter().enumerate() {
        let name = names.fresh(&format!("{}_p{p}", part.var_names[a]));
        part_vars.push(out.vars.push(IterVar { name, axis }));
        let dims: Vec<usize> = (0..part.layout.to_logical.len())
            .filter(|&d| mentions(&part.layout.to_logical[d], a))
            .collect();
        let parent_spatial = part.layout.axes[a]
            .parent
            .is_none_or(|q| part_kinds[q] == IterKind::Spatial);
        let spatial = !dims.is_empty()
            && dims
                .iter()
                .all(|&d| kind_of(source_axes[d]) == IterKind::Spatial)
            && parent_spatial;
        part_kinds.push(if spatial {
            IterKind::Spatial
        } else {
            IterKind::Reduction
        });
    }
    let mut map: Vec<(IterVarId, Expr)> = Vec::new();
    let mut axes = Vec::with_capacity(it.axes.len() + part.axes.len());
    let mut inserted = false;
    // new_index[old index] for the axes kept (fused groups never contain source axes).
    let mut new_index = vec![0usize; it.axes.len()];
    for (old, ia) in it.axes.iter().enumerate() {
        new_index[old] = axes.len();
        if source_axes.contains(&ia.axis) {
            if !inserted {
                inserted = true;
                for (a, &axis) in part.axes.iter().enumerate() {
                    axes.push(IterAxis {
                        axis,
                        kind: part_kinds[a],
                        var: part_vars[a],
                    });
                }
            }
            continue;
        }
        let name = names.fresh(&format!("{}_p{p}", out.vars[ia.var].name));
        let var = out.vars.push(IterVar {
            name,
            axis: ia.axis,
        });
        map.push((ia.var, Expr::Var(var)));
        axes.push(IterAxis {
            axis: ia.axis,
            kind: ia.kind,
            var,
        });
    }
    for (d, &v) in source_vars.iter().enumerate() {
        let logical = map_expr(out, &source_axes, &part_vars, &part.layout.to_logical[d]);
        map.push((v, logical));
    }
    let rewrite = Rewrite {
        source,
        source_vars: &source_vars,
        part_buffer: part.buffer,
        part_vars: &part_vars,
        map: &map,
    };
    SparseIteration {
        name: names.fresh(&format!("{}_p{p}", it.name)),
        axes,
        init: Vec::new(),
        body: it.body.iter().map(|s| rewrite.stmt(s)).collect(),
        span: it.span,
        fused: it
            .fused
            .iter()
            .map(|&(start, end)| (new_index[start], new_index[start] + end - start))
            .collect(),
    }
}

/// Whether `e` uses the coordinate of part axis `a`.
fn mentions(e: &MapExpr, a: usize) -> bool {
    match e {
        MapExpr::Axis(x) => *x == a,
        MapExpr::Logical(_) | MapExpr::Dim(_) | MapExpr::Const(_) => false,
        MapExpr::Add(l, r)
        | MapExpr::Sub(l, r)
        | MapExpr::Mul(l, r)
        | MapExpr::Div(l, r)
        | MapExpr::Rem(l, r) => mentions(l, a) || mentions(r, a),
    }
}

/// A `to_logical` expression as a stage-I expression over the part's variables
/// (`Dim(d)` becomes the length of the source's axis `d`).
fn map_expr(out: &Program, source_axes: &[AxisId], vars: &[IterVarId], e: &MapExpr) -> Expr {
    let bin = |op, l: &MapExpr, r: &MapExpr| {
        Expr::binary(
            op,
            map_expr(out, source_axes, vars, l),
            map_expr(out, source_axes, vars, r),
        )
    };
    match e {
        MapExpr::Axis(a) => Expr::Var(vars[*a]),
        MapExpr::Dim(d) => match out.axes[source_axes[*d]].length {
            Extent::Const(c) => Expr::Int(c),
            Extent::Param(p) => Expr::Param(p),
        },
        MapExpr::Const(c) => Expr::Int(*c),
        // `to_logical` never mentions logical coordinates.
        MapExpr::Logical(_) => Expr::Int(0),
        MapExpr::Add(l, r) => bin(BinaryOp::Add, l, r),
        MapExpr::Sub(l, r) => bin(BinaryOp::Sub, l, r),
        MapExpr::Mul(l, r) => bin(BinaryOp::Mul, l, r),
        MapExpr::Div(l, r) => bin(BinaryOp::Div, l, r),
        MapExpr::Rem(l, r) => bin(BinaryOp::Rem, l, r),
    }
}

/// Rewrites the body of an iteration for one part.
struct Rewrite<'a> {
    source: BufferId,
    source_vars: &'a [IterVarId],
    part_buffer: BufferId,
    part_vars: &'a [IterVarId],
    map: &'a [(IterVarId, Expr)],
}

impl Rewrite<'_> {
    fn stmt(&self, s: &Stmt) -> Stmt {
        match s {
            Stmt::Store(st) => Stmt::Store(Store {
                buffer: st.buffer,
                indices: st.indices.iter().map(|e| self.expr(e)).collect(),
                value: self.expr(&st.value),
                span: st.span,
            }),
            // Checked: bodies hold stores only.
            Stmt::Iteration(it) => Stmt::Iteration(it.clone()),
        }
    }

    fn expr(&self, e: &Expr) -> Expr {
        match e {
            Expr::Var(v) => self
                .map
                .iter()
                .find(|(from, _)| from == v)
                .map_or_else(|| e.clone(), |(_, to)| to.clone()),
            Expr::Load { buffer, indices } if *buffer == self.source => {
                debug_assert_eq!(indices.len(), self.source_vars.len());
                Expr::load(
                    self.part_buffer,
                    self.part_vars.iter().map(|&v| Expr::Var(v)).collect(),
                )
            }
            Expr::Load { buffer, indices } => {
                Expr::load(*buffer, indices.iter().map(|i| self.expr(i)).collect())
            }
            Expr::Unary { op, arg } => Expr::unary(*op, self.expr(arg)),
            Expr::Binary { op, lhs, rhs } => Expr::binary(*op, self.expr(lhs), self.expr(rhs)),
            Expr::Int(_) | Expr::Float(_) | Expr::Param(_) => e.clone(),
        }
    }
}
