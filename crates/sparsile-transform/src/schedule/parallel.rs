//! `parallel`: marks a loop [`ForKind::Parallel`].
//!
//! Purpose: let the runtime split the loop's iterations into chunks that run on several
//! threads. Parallel iterations may run in any order at once, so they must not touch
//! the same element when one of them writes it.
//!
//! Preconditions (each violation is its own [`ScheduleError`], naming the loop and its
//! block):
//! - the loop is the outermost loop of a top-level block: no loop, conditional or other
//!   block encloses it ([`ScheduleError::NotOutermostLoop`]; the kernel ABI hands only
//!   those loops to the runtime's thread pool — inner parallel loops are not supported
//!   yet), or the whole body of a serial loop with constant bounds of at most
//!   [`ForKind::MAX_PANEL_ITERATIONS`] iterations that is the outermost loop of a
//!   top-level block (a panel loop, see `hoist_loop`: each of its iterations becomes
//!   one parallel phase);
//! - the loop is serial or already parallel ([`ScheduleError::NotSerial`]);
//! - no local declared outside the loop is assigned inside it
//!   ([`ScheduleError::LoopCarriedLocal`]);
//! - its iterations are independent ([`ScheduleError::LoopCarriedAccess`], naming the
//!   access that may race). The check is conservative: for every buffer the loop
//!   stores to, there must be one index position at which *every* access of that buffer
//!   in the loop (stores, loads, searches) selects a set of elements owned by the current
//!   iteration `v` alone. An index owns its elements when it is
//!   - affine in `v`: `c*v + r + e` with `c != 0`, `e` the same loop-invariant
//!     expression in every access, and `r` a sum of constants and variables of inner
//!     loops with constant bounds whose combined range over all accesses spans fewer
//!     than `|c|` values (so `io * 4 + ii` with `ii in 0..4` is accepted), or, where
//!     the loop has constant bounds `lo..hi`, whose inner-loop terms are all multiples
//!     of some `m` (the same constants in every access) with `|c| * (hi - lo - 1) < m`
//!     (so the lane `ii` of `co * 32 + ii` with `ii in 0..32` is accepted whatever the
//!     range of `co`: positions of distinct `ii` differ modulo 32);
//!   - or the variable of an inner position loop whose range is disjoint per iteration:
//!     `for p in P[v]..P[v + 1]` over an `indptr` array `P` (non-decreasing), or
//!     `for p in v * w..v * w + w` with `w` loop-invariant, the same in every access.
//!
//!   - or the coordinate `I[v]` of a sparse axis with no parent and unique coordinates
//!     (a `dcsr` row axis), read from its `indices` array `I`, which the loop does not
//!     write: distinct positions of such an axis hold distinct coordinates;
//!   - or affine in such a coordinate `u = I[v]` as above with `u` for `v` (`c*u + r + e`,
//!     the inner-loop terms `r` spanning fewer than `|c|` values: `io * 4 + ii` in a
//!     `dbsr` block row), where the index reads `v` in no other way.
//!
//!   A `let` local declared in the loop and never assigned (the original variable
//!   after `split` or `fuse`) stands for its value.
//!
//!   Anything else — any other index read from an `indices` array, a store that does not
//!   depend on `v` (a reduction: race strategies come later) — is refused. Distinct
//!   position tuples are distinct elements because stage-II accesses are in bounds.
//!
//! Postcondition: the same function with the loop marked `parallel`.
//!
//! Example (`tests/schedule/parallel/spmv_csr.before` → `.after`):
//! ```text
//! block y {                                block y {
//!   for i_2 in 0..m {               →        for i_2 in 0..m parallel {
//!     for j_p in P[i_2]..P[i_2 + 1] {          ...
//!       y[i_2] = y[i_2] + ...
//! ```
//!
//! ```
//! use sparsile_transform::schedule::parallel::parallel;
//! use sparsile_transform::schedule::LoopRef;
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let func = sparsile_transform::lower_iterations(&program).unwrap();
//! let rows = LoopRef { block: "y".into(), var: "i_2".into() };
//! let scheduled = parallel(&func, &rows).unwrap();
//! assert!(scheduled.to_string().contains("for i_2 in 0..m parallel {"));
//! // The position loop inside is refused: only outermost loops may be parallel.
//! let inner = LoopRef { block: "y".into(), var: "j_p".into() };
//! assert!(parallel(&func, &inner).is_err());
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{BufferKind, Expr, ExprDisplay, For, ForKind, Func, Stmt};
use sparsile_ir::Span;

use super::{LoopRef, ScheduleError};

/// Marks `target` parallel after checking the preconditions in the module docs.
pub fn parallel(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let f = check_position(func, target, "parallel", true)?;
    check_independent(func, f, target, "parallel", false)?;
    Ok(with_loop(func, target, |f| f.kind = ForKind::Parallel))
}

/// The position rules of the parallel primitives: `target` is serial or parallel and the
/// outermost loop of a top-level block or, when `panel_ok`, the whole body of a panel
/// loop that is a statement of its top-level block (see the module docs).
pub(crate) fn check_position<'f>(
    func: &'f Func,
    target: &LoopRef,
    primitive: &'static str,
    panel_ok: bool,
) -> Result<&'f For, ScheduleError> {
    let found = find_loop(func, target, primitive)?;
    let inside = found
        .enclosing_in_block
        .as_ref()
        .filter(|_| !(panel_ok && in_panel_loop(func, target)));
    if let Some(enclosing) = found.enclosing_outside_block.as_ref().or(inside) {
        return Err(ScheduleError::NotOutermostLoop {
            primitive,
            block: target.block.clone(),
            var: target.var.clone(),
            enclosing: enclosing.clone(),
            span: found.for_.span,
        });
    }
    let f = found.for_;
    if !(f.kind == ForKind::Serial || f.kind.is_parallel()) {
        return Err(not_serial(primitive, target, f));
    }
    Ok(f)
}

/// Whether `target` is the whole body of a panel loop ([`For::is_panel_loop`]) that is a
/// statement of its top-level block.
fn in_panel_loop(func: &Func, target: &LoopRef) -> bool {
    func.body.iter().any(|s| match s {
        Stmt::Block { name, body, .. } if *name == target.block => body.iter().any(|t| {
            matches!(t, Stmt::For(f) if f.is_panel_loop()
                && matches!(f.body.as_slice(), [Stmt::For(g)] if func.vars[g.var].name == target.var))
        }),
        _ => false,
    })
}

/// The details of [`ScheduleError::LoopCarriedAccess`]: the loop, and the access of
/// `buffer` that different iterations may share.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedAccess {
    pub primitive: &'static str,
    pub block: String,
    pub var: String,
    pub buffer: String,
    /// The access as text (`C[i, k2]`).
    pub access: String,
    /// The statement holding the access.
    pub access_span: Span,
    pub reason: String,
    /// The loop.
    pub span: Span,
}

impl std::fmt::Display for CarriedAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: loop `{}` in block `{}` ({}): different iterations may access the same element of `{}` through `{}` ({}): {}",
            self.primitive,
            self.var,
            self.block,
            self.span,
            self.buffer,
            self.access,
            self.access_span,
            self.reason
        )
    }
}

/// A loop found by [`find_loop`] and what surrounds it.
pub(crate) struct Found<'a> {
    pub for_: &'a For,
    /// The innermost loop or conditional between the loop and its block, described
    /// (`loop \`i\``), if any.
    pub enclosing_in_block: Option<String>,
    /// What encloses the loop's block, described, when the block is not top-level.
    pub enclosing_outside_block: Option<String>,
}

/// Finds the loop `target.var` whose innermost enclosing block is `target.block`.
pub(crate) fn find_loop<'a>(
    func: &'a Func,
    target: &LoopRef,
    primitive: &'static str,
) -> Result<Found<'a>, ScheduleError> {
    fn walk<'a>(
        func: &'a Func,
        stmts: &'a [Stmt],
        target: &LoopRef,
        block: Option<&str>,
        outside: Option<String>,
        inside: Option<String>,
    ) -> Option<Found<'a>> {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if block == Some(target.block.as_str()) && func.vars[f.var].name == target.var {
                        return Some(Found {
                            for_: f,
                            enclosing_in_block: inside,
                            enclosing_outside_block: outside,
                        });
                    }
                    let here = format!("loop `{}`", func.vars[f.var].name);
                    let r = if block.is_some() {
                        walk(func, &f.body, target, block, outside.clone(), Some(here))
                    } else {
                        walk(func, &f.body, target, block, Some(here), inside.clone())
                    };
                    if r.is_some() {
                        return r;
                    }
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    let here = "a conditional".to_string();
                    for b in [then_body, else_body] {
                        let r = if block.is_some() {
                            walk(func, b, target, block, outside.clone(), Some(here.clone()))
                        } else {
                            walk(func, b, target, block, Some(here.clone()), inside.clone())
                        };
                        if r.is_some() {
                            return r;
                        }
                    }
                }
                Stmt::Block { name, body, .. } => {
                    let outer = match (block, &outside, &inside) {
                        (_, _, Some(i)) => Some(i.clone()),
                        (Some(b), _, None) => Some(format!("block `{b}`")),
                        (None, o, None) => o.clone(),
                    };
                    if let Some(r) = walk(func, body, target, Some(name), outer, None) {
                        return Some(r);
                    }
                }
                // A launch only groups blocks (at the top level).
                Stmt::Launch { body, .. } => {
                    if let Some(r) =
                        walk(func, body, target, block, outside.clone(), inside.clone())
                    {
                        return Some(r);
                    }
                }
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::Prefetch { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. }
                | Stmt::Mma(_) => {}
            }
        }
        None
    }
    walk(func, &func.body, target, None, None, None).ok_or_else(|| ScheduleError::UnknownLoop {
        primitive,
        block: target.block.clone(),
        var: target.var.clone(),
    })
}

/// A pending edit of one loop.
type Edit<'e> = Option<Box<dyn FnOnce(&mut For) + 'e>>;

/// A copy of `func` with `edit` applied to the loop `target` (which must exist).
pub(crate) fn with_loop(func: &Func, target: &LoopRef, edit: impl FnOnce(&mut For)) -> Func {
    fn walk(
        vars: &Func,
        stmts: &mut [Stmt],
        target: &LoopRef,
        block: Option<&str>,
        edit: &mut Edit<'_>,
    ) {
        for s in stmts {
            if edit.is_none() {
                return;
            }
            match s {
                Stmt::For(f) => {
                    if block == Some(target.block.as_str()) && vars.vars[f.var].name == target.var {
                        if let Some(e) = edit.take() {
                            e(f);
                        }
                        return;
                    }
                    walk(vars, &mut f.body, target, block, edit);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(vars, then_body, target, block, edit);
                    walk(vars, else_body, target, block, edit);
                }
                Stmt::Block { name, body, .. } => {
                    let name = name.clone();
                    walk(vars, body, target, Some(&name), edit);
                }
                Stmt::Launch { body, .. } => walk(vars, body, target, block, edit),
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::Prefetch { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. }
                | Stmt::Mma(_) => {}
            }
        }
    }
    let mut out = func.clone();
    let mut body = std::mem::take(&mut out.body);
    let mut edit: Edit<'_> = Some(Box::new(edit));
    walk(func, &mut body, target, None, &mut edit);
    assert!(
        edit.is_none(),
        "with_loop: loop {target:?} was found before"
    );
    out.body = body;
    out
}

pub(crate) fn not_serial(primitive: &'static str, target: &LoopRef, f: &For) -> ScheduleError {
    ScheduleError::NotSerial {
        primitive,
        block: target.block.clone(),
        var: target.var.clone(),
        kind: f.kind.name(),
        span: f.span,
    }
}

/// One access of a buffer inside the loop.
struct Access {
    buffer: BufferId,
    is_store: bool,
    /// An atomic add (which never races with another atomic add).
    atomic: bool,
    /// `None` for a `search`, whose position is unknown.
    indices: Option<Vec<Expr>>,
    span: Span,
}

/// What the loop body binds and touches.
#[derive(Default)]
struct Body {
    /// Variables that take different values in different iterations.
    variant: HashSet<VarId>,
    /// Locals declared inside the loop.
    declared: HashSet<VarId>,
    /// Locals assigned inside the loop, with the span of the first assignment.
    assigned: Vec<(VarId, Span)>,
    /// Inner loops with constant bounds: variable → (min, max) value.
    bounded: HashMap<VarId, (i64, i64)>,
    /// Inner loops with their bounds, in order.
    ranges: Vec<(VarId, Expr, Expr)>,
    /// Inner loops whose whole range belongs to one iteration: variable → range key.
    owned_range: HashMap<VarId, RangeKey>,
    /// Inner loop variables in order (for [`Body::inner_loops`]).
    inner_loops: Vec<VarId>,
    /// The values of the `let`s declared in the loop that nothing assigns (split and fuse
    /// leave the original loop variable as one), seen through by the analysis.
    let_values: HashMap<VarId, Expr>,
    stores: HashSet<BufferId>,
    /// Stores, loads and searches in program order (`check_independent` puts stores first).
    accesses: Vec<Access>,
}

/// How a position loop's range is tied to the iteration.
#[derive(Debug, Clone, PartialEq)]
enum RangeKey {
    /// `P[v]..P[v + 1]` over the `indptr` array `P`.
    Indptr(BufferId),
    /// `v * w..v * w + w`.
    Strided(Expr),
}

/// `c*v + r + e` (see the module docs).
#[derive(Debug, Clone, PartialEq)]
struct Affine {
    coef: i64,
    range: (i64, i64),
    invariant: Vec<(i64, Expr)>,
    /// The gcd of the coefficients of the inner-loop terms of `r` (0 without any).
    step: i64,
    /// The sum of the constant terms of `r`.
    constant: i64,
}

/// Which elements one iteration owns at one index position.
#[derive(Debug, Clone, PartialEq)]
enum Owner {
    Affine(Affine),
    Range(RangeKey),
    /// The coordinate a root compressed axis stores at position `v`.
    Coordinate(BufferId),
    /// Affine in that coordinate `u = I[v]` (`u * 4 + ii`: a `dbsr` block row's rows).
    CoordinateAffine(BufferId, Affine),
}

/// Inner loop variables of the body of `f`, in order (all depths).
pub(crate) fn inner_loop_vars(f: &For) -> Vec<VarId> {
    let mut b = Body::default();
    collect_stmts(&f.body, &mut b);
    b.inner_loops
}

fn collect_stmts(stmts: &[Stmt], b: &mut Body) {
    for s in stmts {
        match s {
            Stmt::For(f) => {
                b.variant.insert(f.var);
                b.inner_loops.push(f.var);
                collect_expr(&f.lo, f.span, b);
                collect_expr(&f.hi, f.span, b);
                if let (Expr::Int(lo), Expr::Int(hi)) = (&f.lo, &f.hi) {
                    b.bounded.insert(f.var, (*lo, (*hi - 1).max(*lo)));
                }
                b.ranges.push((f.var, f.lo.clone(), f.hi.clone()));
                collect_stmts(&f.body, b);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                collect_expr(cond, *span, b);
                collect_stmts(then_body, b);
                collect_stmts(else_body, b);
            }
            Stmt::Let { var, value, span } => {
                b.variant.insert(*var);
                b.declared.insert(*var);
                b.let_values.insert(*var, value.clone());
                collect_expr(value, *span, b);
            }
            Stmt::Assign { var, value, span } => {
                b.variant.insert(*var);
                if !b.assigned.iter().any(|(a, _)| a == var) {
                    b.assigned.push((*var, *span));
                }
                collect_expr(value, *span, b);
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } => {
                b.stores.insert(*buffer);
                indices.iter().for_each(|e| collect_expr(e, *span, b));
                collect_expr(value, *span, b);
                b.accesses.push(Access {
                    buffer: *buffer,
                    is_store: true,
                    atomic: false,
                    indices: Some(indices.clone()),
                    span: *span,
                });
            }
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                span,
            } => {
                b.stores.insert(*buffer);
                indices.iter().for_each(|e| collect_expr(e, *span, b));
                collect_expr(value, *span, b);
                b.accesses.push(Access {
                    buffer: *buffer,
                    is_store: true,
                    atomic: true,
                    indices: Some(indices.clone()),
                    span: *span,
                });
            }
            // The prefetched element is not accessed; only the loads in its indices.
            Stmt::Prefetch { indices, span, .. } => {
                indices.iter().for_each(|e| collect_expr(e, *span, b));
            }
            Stmt::WarpReduce {
                var,
                value,
                key,
                span,
                ..
            } => {
                b.variant.insert(*var);
                b.declared.insert(*var);
                [value]
                    .into_iter()
                    .chain(key)
                    .for_each(|e| collect_expr(e, *span, b));
            }
            // Like the loop nest it stands for: the tile variables are inner loops with
            // constant bounds, and the accumulator is loaded and stored at its indices.
            Stmt::Mma(m) => {
                let extents = [m.shape.m(), m.shape.n(), m.shape.k()];
                for (v, n) in m.tile_vars().into_iter().zip(extents) {
                    b.variant.insert(v);
                    b.inner_loops.push(v);
                    b.bounded.insert(v, (0, i64::from(n) - 1));
                    b.ranges.push((v, Expr::Int(0), Expr::Int(i64::from(n))));
                }
                m.exprs()
                    .into_iter()
                    .for_each(|e| collect_expr(e, m.span, b));
                let load = Expr::load(m.c, m.c_indices.clone());
                collect_expr(&load, m.span, b);
                b.stores.insert(m.c);
                b.accesses.push(Access {
                    buffer: m.c,
                    is_store: true,
                    atomic: false,
                    indices: Some(m.c_indices.clone()),
                    span: m.span,
                });
            }
            Stmt::Barrier { .. } => {}
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => collect_stmts(body, b),
        }
    }
}

/// Records the loads and searches of `e`, located at the statement `span`.
fn collect_expr(e: &Expr, span: Span, b: &mut Body) {
    e.visit(&mut |x| match x {
        Expr::Load { buffer, indices } => b.accesses.push(Access {
            buffer: *buffer,
            is_store: false,
            atomic: false,
            indices: Some(indices.clone()),
            span,
        }),
        Expr::Search { buffer, .. } => b.accesses.push(Access {
            buffer: *buffer,
            is_store: false,
            atomic: false,
            indices: None,
            span,
        }),
        _ => {}
    });
}

/// The key of an inner loop `lo..hi` whose range is disjoint per value of `v`: over a
/// (non-decreasing) `indptr` array the loop does not write, or strided by an invariant
/// width.
fn owned_range_key(func: &Func, lo: &Expr, hi: &Expr, v: VarId, b: &Body) -> Option<RangeKey> {
    if let (
        Expr::Load {
            buffer: p,
            indices: lo_idx,
        },
        Expr::Load {
            buffer: q,
            indices: hi_idx,
        },
    ) = (lo, hi)
    {
        let next = Expr::binary(BinaryOp::Add, Expr::Var(v), Expr::Int(1));
        if p == q
            && matches!(func.buffers[*p].kind, BufferKind::Indptr { .. })
            && !b.stores.contains(p)
            && lo_idx.as_slice() == [Expr::Var(v)]
            && hi_idx.as_slice() == [next]
        {
            return Some(RangeKey::Indptr(*p));
        }
    }
    if let Expr::Binary {
        op: BinaryOp::Mul,
        lhs,
        rhs,
    } = lo
    {
        let w = match (&**lhs, &**rhs) {
            (Expr::Var(a), w) | (w, Expr::Var(a)) if *a == v => w.clone(),
            _ => return None,
        };
        if invariant(&w, v, b) && *hi == Expr::binary(BinaryOp::Add, lo.clone(), w.clone()) {
            return Some(RangeKey::Strided(w));
        }
    }
    None
}

/// Whether `e` is loop-invariant: no variant variable, no load of a written buffer.
fn invariant(e: &Expr, v: VarId, b: &Body) -> bool {
    let mut ok = true;
    e.visit(&mut |x| match x {
        Expr::Var(w) if *w == v || b.variant.contains(w) => ok = false,
        Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if b.stores.contains(buffer) => {
            ok = false
        }
        _ => {}
    });
    ok
}

fn linear(e: &Expr, v: VarId, b: &Body) -> Option<Affine> {
    let zero = Affine {
        coef: 0,
        range: (0, 0),
        invariant: Vec::new(),
        step: 0,
        constant: 0,
    };
    match e {
        Expr::Int(c) => Some(Affine {
            range: (*c, *c),
            constant: *c,
            ..zero
        }),
        Expr::Var(w) if *w == v => Some(Affine { coef: 1, ..zero }),
        Expr::Var(w) if b.bounded.contains_key(w) => {
            let (lo, hi) = b.bounded[w];
            Some(Affine {
                range: (lo, hi),
                // A loop of one value adds a constant.
                step: i64::from(hi > lo),
                constant: if hi > lo { 0 } else { lo },
                ..zero
            })
        }
        Expr::Var(w) if b.let_values.contains_key(w) => linear(&b.let_values[w], v, b),
        _ if invariant(e, v, b) => Some(Affine {
            invariant: vec![(1, e.clone())],
            ..zero
        }),
        Expr::Binary { op, lhs, rhs } => match op {
            BinaryOp::Add => Some(add(linear(lhs, v, b)?, linear(rhs, v, b)?)),
            BinaryOp::Sub => Some(add(linear(lhs, v, b)?, scale(linear(rhs, v, b)?, -1))),
            BinaryOp::Mul => match (&**lhs, &**rhs) {
                (Expr::Int(c), x) | (x, Expr::Int(c)) => Some(scale(linear(x, v, b)?, *c)),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

fn add(a: Affine, b: Affine) -> Affine {
    let mut invariant = a.invariant;
    invariant.extend(b.invariant);
    Affine {
        coef: a.coef + b.coef,
        range: (a.range.0 + b.range.0, a.range.1 + b.range.1),
        invariant,
        step: gcd(a.step, b.step),
        constant: a.constant + b.constant,
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn scale(a: Affine, c: i64) -> Affine {
    let (x, y) = (a.range.0 * c, a.range.1 * c);
    Affine {
        coef: a.coef * c,
        range: (x.min(y), x.max(y)),
        invariant: a.invariant.into_iter().map(|(k, e)| (k * c, e)).collect(),
        step: a.step * c.abs(),
        constant: a.constant * c,
    }
}

fn owner(func: &Func, e: &Expr, v: VarId, b: &Body) -> Option<Owner> {
    if let Expr::Var(w) = e {
        if let Some(key) = b.owned_range.get(w) {
            return Some(Owner::Range(key.clone()));
        }
    }
    if let Some(buffer) = unique_coordinate(func, e, v, b) {
        return Some(Owner::Coordinate(buffer));
    }
    if let Some((buffer, a)) = coordinate_affine(func, e, v, b) {
        return Some(Owner::CoordinateAffine(buffer, a));
    }
    let a = linear(e, v, b)?;
    (a.coef != 0).then_some(Owner::Affine(a))
}

/// `e` as `c * u + r + inv` with `u` a unique coordinate `I[v]` read through `let`s (see
/// [`unique_coordinate`]) and `c != 0`, where `e` reads `v` in no other way: distinct
/// iterations have distinct `u`, so the rule for indices affine in `v` applies to `u`.
fn coordinate_affine(func: &Func, e: &Expr, v: VarId, b: &Body) -> Option<(BufferId, Affine)> {
    let mut coordinate = None;
    let mut mixed = false;
    e.visit(&mut |x| {
        if let Expr::Var(w) = x {
            if let Some(buffer) = unique_coordinate(func, x, v, b) {
                mixed |= coordinate.is_some_and(|c| c != buffer);
                coordinate = Some(buffer);
            } else if reads_through_lets(*w, v, b, 0) {
                // `v` itself, or a `let` whose value reads it: not a function of `u`.
                mixed = true;
            }
        }
    });
    let buffer = coordinate.filter(|_| !mixed)?;
    let pivot =
        e.substitute(&mut |w| unique_coordinate(func, &Expr::Var(w), v, b).map(|_| Expr::Var(v)));
    let a = linear(&pivot, v, b)?;
    (a.coef != 0).then_some((buffer, a))
}

/// Whether variable `w` is `v` or a `let` whose value reads `v` (through other `let`s).
fn reads_through_lets(w: VarId, v: VarId, b: &Body, depth: usize) -> bool {
    if w == v {
        return true;
    }
    let Some(value) = b.let_values.get(&w) else {
        return false;
    };
    if depth > 64 {
        // Deeper than any lowering writes: count it as reading `v`.
        return true;
    }
    let mut found = false;
    value.visit(&mut |x| {
        if let Expr::Var(u) = x {
            found |= reads_through_lets(*u, v, b, depth + 1);
        }
    });
    found
}

/// `I[v]` (directly or through a `let`) with `I` the indices of a sparse axis that has no
/// parent and unique coordinates (a `dcsr` row axis): distinct positions hold distinct
/// coordinates, so distinct iterations own distinct elements. `I` must not be written.
fn unique_coordinate(func: &Func, e: &Expr, v: VarId, b: &Body) -> Option<BufferId> {
    let e = match e {
        Expr::Var(w) => b.let_values.get(w)?,
        e => e,
    };
    let Expr::Load { buffer, indices } = e else {
        return None;
    };
    if indices.as_slice() != [Expr::Var(v)] || b.stores.contains(buffer) {
        return None;
    }
    let BufferKind::Indices { tensor, axis } = &func.buffers[*buffer].kind else {
        return None;
    };
    let t = func.buffer_by_name(tensor)?;
    let sparsile_ir::loops::BufferLayout::Axes(axes) = &func.buffers[t].layout else {
        return None;
    };
    let decl = &func.axes[*axes.get(*axis)?];
    (decl.parent.is_none() && decl.unique && decl.kind.is_sparse()).then_some(*buffer)
}

/// Whether the owners of all accesses at one index position are disjoint per iteration;
/// `extent` is the loop's number of iterations where its bounds are constant.
fn disjoint(owners: &[Owner], extent: Option<i64>) -> bool {
    match owners.first() {
        None => true,
        Some(Owner::Range(key)) => owners.iter().all(|o| o == &Owner::Range(key.clone())),
        Some(Owner::Coordinate(buf)) => owners.iter().all(|o| o == &Owner::Coordinate(*buf)),
        Some(Owner::CoordinateAffine(buf, first)) => {
            // Distinct iterations have distinct coordinates, which differ by at least 1:
            // disjoint when everything else spans fewer values than the coefficient.
            let (mut lo, mut hi) = first.range;
            for o in owners {
                match o {
                    Owner::CoordinateAffine(c, a)
                        if c == buf && a.coef == first.coef && a.invariant == first.invariant =>
                    {
                        lo = lo.min(a.range.0);
                        hi = hi.max(a.range.1);
                    }
                    _ => return false,
                }
            }
            hi - lo < first.coef.abs()
        }
        Some(Owner::Affine(first)) => {
            let (mut lo, mut hi) = first.range;
            let mut step = 0;
            let mut same_constant = true;
            for o in owners {
                match o {
                    Owner::Affine(a) if a.coef == first.coef && a.invariant == first.invariant => {
                        lo = lo.min(a.range.0);
                        hi = hi.max(a.range.1);
                        step = gcd(step, a.step);
                        same_constant &= a.constant == first.constant;
                    }
                    _ => return false,
                }
            }
            // Distinct iterations differ by less than the stride of everything else.
            let interleaved = extent.is_some_and(|n| {
                same_constant && step > 0 && first.coef.abs().saturating_mul(n - 1) < step
            });
            hi - lo < first.coef.abs() || interleaved
        }
    }
}

/// Checks that the iterations of `f` carry no dependence through memory (and, unless
/// `allow_local_reductions`, none through locals). See the module docs for the rules.
pub(crate) fn check_independent(
    func: &Func,
    f: &For,
    target: &LoopRef,
    primitive: &'static str,
    allow_local_reductions: bool,
) -> Result<(), ScheduleError> {
    check_independent_with(func, f, target, primitive, allow_local_reductions, false)
}

/// [`check_independent`]; with `private_shared`, `shared` buffers are private to each
/// iteration like locals (the loop is spread over the blocks of a grid, and each block
/// has its own shared memory).
pub(crate) fn check_independent_with(
    func: &Func,
    f: &For,
    target: &LoopRef,
    primitive: &'static str,
    allow_local_reductions: bool,
    private_shared: bool,
) -> Result<(), ScheduleError> {
    let v = f.var;
    let mut b = Body::default();
    collect_stmts(&f.body, &mut b);
    b.accesses.sort_by_key(|a| !a.is_store);
    for (var, _) in &b.assigned {
        b.let_values.remove(var);
    }
    for (var, lo, hi) in std::mem::take(&mut b.ranges) {
        if let Some(key) = owned_range_key(func, &lo, &hi, v, &b) {
            b.owned_range.insert(var, key);
        }
    }
    if !allow_local_reductions {
        if let Some((local, _)) = b.assigned.iter().find(|(a, _)| !b.declared.contains(a)) {
            return Err(ScheduleError::LoopCarriedLocal {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                local: func.vars[*local].name.clone(),
                span: f.span,
            });
        }
    }
    let vname = &target.var;
    let mut written: Vec<BufferId> = b.stores.iter().copied().collect();
    written.sort();
    for buffer in written {
        let kind = &func.buffers[buffer].kind;
        if *kind == BufferKind::Local || (private_shared && *kind == BufferKind::Shared) {
            // Private to each iteration.
            continue;
        }
        let accesses: Vec<&Access> = b.accesses.iter().filter(|a| a.buffer == buffer).collect();
        let name = &func.buffers[buffer].name;
        let err = |a: &Access, reason: String| {
            ScheduleError::LoopCarriedAccess(Box::new(CarriedAccess {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                buffer: name.clone(),
                access: access_text(func, a),
                access_span: a.span,
                reason,
                span: f.span,
            }))
        };
        if let Some(a) = accesses.iter().find(|a| a.indices.is_none()) {
            return Err(err(a, format!("the loop writes `{name}` and searches it")));
        }
        if accesses.iter().all(|a| a.atomic) {
            // Atomic adds only: they never race with each other.
            continue;
        }
        if accesses.iter().any(|a| a.atomic) {
            let plain = accesses.iter().find(|a| !a.atomic).expect("not all atomic");
            return Err(err(
                plain,
                format!("the loop adds to `{name}` atomically and also accesses it plainly"),
            ));
        }
        if matches!(
            func.buffers[buffer].kind,
            BufferKind::Indptr { .. } | BufferKind::Indices { .. }
        ) {
            return Err(err(
                accesses[0],
                format!("the loop writes the structure array `{name}`"),
            ));
        }
        let rank = accesses[0].indices.as_ref().map_or(0, Vec::len);
        let extent = match (&f.lo, &f.hi) {
            (Expr::Int(lo), Expr::Int(hi)) => Some(hi - lo),
            _ => None,
        };
        let owned = (0..rank).any(|d| {
            let owners: Option<Vec<Owner>> = accesses
                .iter()
                .map(|a| owner(func, a.indices.as_ref()?.get(d)?, v, &b))
                .collect();
            owners.is_some_and(|o| disjoint(&o, extent))
        });
        if !owned {
            // Name the first access that has no index owned by `v` at all.
            let culprit = accesses
                .iter()
                .find(|a| {
                    !a.indices
                        .as_ref()
                        .is_some_and(|ix| ix.iter().any(|e| owner(func, e, v, &b).is_some()))
                })
                .unwrap_or(&accesses[0]);
            let reason = if b.stores.contains(&buffer)
                && culprit
                    .indices
                    .as_ref()
                    .is_some_and(|ix| ix.iter().all(|e| invariant(e, v, &b)))
            {
                format!("the element does not depend on `{vname}` (a reduction across iterations: parallel_reduce, bind_atomic or warp_reduce resolve it)")
            } else {
                format!("no index position selects elements owned by one value of `{vname}` in every access of `{name}` (an index read from memory, or overlapping affine ranges)")
            };
            return Err(err(culprit, reason));
        }
    }
    Ok(())
}

fn access_text(func: &Func, a: &Access) -> String {
    let name = &func.buffers[a.buffer].name;
    match &a.indices {
        None => format!("search({name}, ..)"),
        Some(ix) => {
            let parts: Vec<String> = ix
                .iter()
                .map(|e| ExprDisplay::new(func, e).to_string())
                .collect();
            format!("{name}[{}]", parts.join(", "))
        }
    }
}
