//! `cache_write`: accumulates the elements of a buffer that one iteration of a loop
//! writes in a local array, and writes them back once at the end of the iteration.
//!
//! Purpose: an SpMM row `C[i, 0..K]` is read and written once per non-zero of row `i`;
//! cached, it lives in registers or on the stack (a [`BufferKind::Local`] array) and `C`
//! is touched twice per row.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - the loop exists; `buffer` is a values buffer laid out over axes (stage II) that the
//!   loop body stores to ([`ScheduleError::UnknownBuffer`],
//!   [`ScheduleError::CacheBuffer`]);
//! - every access of `buffer` in the loop body (loads, stores; no `search`) has, at each
//!   index position, either
//!   - *fixed*: the same expression in every access, computable at the top of the
//!     iteration (it reads only variables declared outside the body or by the `let`s
//!     that open it, and no buffer the body stores to) once the variable of every inner
//!     loop that runs exactly once is read as its value (`y[io * 1 + ii]` under
//!     `for ii in 0..1`, a `bsr:1xC` block row); or
//!   - *cached*: the variable of an inner loop with constant bounds (after `bound`), over
//!     a parentless `dense_fixed` axis of `buffer` (so position = coordinate and the
//!     valid positions are `0..length`);
//!
//!   ([`ScheduleError::CacheAccess`] names the access and position that is neither);
//! - the cached positions span at most [`MAX_LOCAL_ELEMENTS`] elements
//!   ([`ScheduleError::CacheTooLarge`]);
//! - the loop does not add to `buffer` atomically (other iterations of an enclosing
//!   parallel loop update the same elements) ([`ScheduleError::CacheBuffer`]);
//! - no parallel loop inside the loop stores to `buffer` (each of its threads would store
//!   into a local copy of its own, never written back) ([`ScheduleError::CacheBuffer`]);
//! - inside a parallel loop, no store to `buffer` is limited by a condition reading both
//!   the body's own variables and outer ones (a split tail inside one thread's rows): the
//!   copy back covers whole cached ranges and would overwrite elements other iterations
//!   write ([`ScheduleError::CacheBuffer`]).
//!
//! Postcondition: a new `local` buffer `<buffer>_local` of the union of the cached ranges;
//! after the opening `let`s the iteration loads the cached elements that exist
//! (`0 <= c < length`; the others start at 0), every access of `buffer` in the body
//! becomes an access of the local array, and the iteration ends by storing the existing
//! elements back. Loading first makes it correct whatever the loop does not write.
//! The local array of an f16 or bf16 buffer is f32 ([`sparsile_ir::DType::compute_type`]): the
//! partial sums are rounded once, when stored back.
//!
//! Example (`tests/schedule/cache_write/spmm_csr.before` → `.after`):
//! ```text
//! for i_2 in 0..m {                      for i_2 in 0..m {
//!   for j_p in ... {                        for c_k in 0..8 { if c_k < k { C_local[c_k] = C[i_2, c_k] } else { C_local[c_k] = 0.0 } }
//!     for k2 in 0..8 {            →         for j_p in ... { for k2 in 0..8 { if k2 < k {
//!       if k2 < k {                               C_local[k2] = C_local[k2] + ... } } }
//!         C[i_2, k2] = C[i_2, k2] + ...     for c_k in 0..8 { if c_k < k { C[i_2, c_k] = C_local[c_k] } }
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_ir::coord::BufferRole;
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    Buffer, BufferKind, BufferLayout, Expr, ExprDisplay, For, ForKind, Func, Stmt,
};
use sparsile_ir::{AxisKind, Span};

use super::error::CacheAccess;
use super::loop_ref::{fresh_index_var, fresh_name, loop_mut};
use super::parallel::find_loop;
use super::single_iteration::{fold, single_iterations};
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, all, ge, lt, mul, npos, sub};

const PRIMITIVE: &str = "cache_write";

/// The largest local array `cache_write` and `cache_read` create, in elements.
pub const MAX_LOCAL_ELEMENTS: i64 = 1 << 16;

/// Caches the elements of `buffer` written by one iteration of `target` (see the module
/// docs). Returns the function and the name of the local buffer.
pub fn cache_write(
    func: &Func,
    target: &LoopRef,
    buffer: &str,
) -> Result<(Func, String), ScheduleError> {
    let found = find_loop(func, target, PRIMITIVE)?;
    let f = found.for_;
    let id = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let body = Body::of(f);
    if !body.stores.contains(&id) {
        return Err(cache_buffer(
            target,
            buffer,
            f.span,
            "the loop does not store to it",
        ));
    }
    if adds_atomically(&f.body, id) {
        // Atomic adds mean other iterations of the enclosing parallel loop update the
        // same elements: a private copy written back with a plain store loses theirs.
        return Err(cache_buffer(
            target,
            buffer,
            f.span,
            "the loop adds to it atomically (other parallel iterations update the same elements)",
        ));
    }
    if let Some(span) = parallel_store(&f.body, id) {
        // A local array is private to each thread of a parallel loop: the threads'
        // stores into it would never reach the copy back.
        return Err(cache_buffer(
            target,
            buffer,
            span,
            "a parallel loop inside stores to it, and each thread would store into a local \
             copy of its own that is never written back (cache inside the parallel loop)",
        ));
    }
    if under_parallel(&func.body, f.var, false) == Some(true) {
        let once = single_iterations(&f.body);
        let inside = Stmt::declared_vars(&f.body);
        if let Some(span) = guarded_across(&f.body, id, &inside, &once, &mut Vec::new()) {
            // The copies cover whole cached ranges; a store limited by a condition on both
            // the body's own variables and outer ones (a split tail inside one thread's
            // rows) leaves cached elements that another iteration writes, and the copy
            // back would overwrite them.
            return Err(cache_buffer(
                target,
                buffer,
                span,
                "inside a parallel loop, a store to it is limited by a condition on the \
                 body's variables and outer ones: the copy back would write elements other \
                 iterations write",
            ));
        }
    }
    let plan = Plan::new(func, target, f, id, &body, PRIMITIVE)?;
    let mut out = func.clone();
    let local = plan.declare_local(&mut out, buffer);
    let (load_back, store_back) = plan.copy_loops(&mut out, local, true);
    let lets = body.leading_lets;
    let f = loop_mut(&mut out, target, PRIMITIVE)?;
    let mut new_body: Vec<Stmt> = f.body[..lets].to_vec();
    new_body.push(load_back);
    new_body.extend(f.body[lets..].iter().map(|s| plan.rewrite_stmt(s, local)));
    new_body.push(store_back);
    f.body = new_body;
    let name = out.buffers[local].name.clone();
    Ok((out, name))
}

/// The span of a parallel loop in `stmts` (nested ones included) that stores to `buffer`.
fn parallel_store(stmts: &[Stmt], buffer: BufferId) -> Option<Span> {
    let mut found = None;
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::For(g) = s {
            if found.is_none() && g.kind.is_parallel() {
                let mut stores = false;
                Stmt::visit_all(&g.body, &mut |t| {
                    stores |= matches!(t, Stmt::Store { buffer: b, .. } | Stmt::AtomicAdd { buffer: b, .. } if *b == buffer);
                });
                if stores {
                    found = Some(g.span);
                }
            }
        }
    });
    found
}

/// Whether the loop over `var` in `stmts` runs inside a parallel loop (`None`: not found).
fn under_parallel(stmts: &[Stmt], var: VarId, parallel: bool) -> Option<bool> {
    stmts.iter().find_map(|s| match s {
        Stmt::For(g) if g.var == var => Some(parallel),
        Stmt::For(g) => under_parallel(&g.body, var, parallel || g.kind.is_parallel()),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => under_parallel(then_body, var, parallel)
            .or_else(|| under_parallel(else_body, var, parallel)),
        Stmt::Block { body, .. } | Stmt::Launch { body, .. } => under_parallel(body, var, parallel),
        _ => None,
    })
}

/// The span of a store to `buffer` in `stmts` under a condition that reads both a
/// variable of `inside` and one declared outside (loops that run once read as their
/// value, see [`single_iterations`]).
fn guarded_across(
    stmts: &[Stmt],
    buffer: BufferId,
    inside: &[VarId],
    once: &[(VarId, i64)],
    conds: &mut Vec<Expr>,
) -> Option<Span> {
    stmts.iter().find_map(|s| match s {
        Stmt::For(g) => guarded_across(&g.body, buffer, inside, once, conds),
        Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
            guarded_across(body, buffer, inside, once, conds)
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
            ..
        } => {
            conds.push(fold(cond, once));
            let found = guarded_across(then_body, buffer, inside, once, conds)
                .or_else(|| guarded_across(else_body, buffer, inside, once, conds));
            conds.pop();
            found
        }
        Stmt::Store {
            buffer: b, span, ..
        } if *b == buffer => conds
            .iter()
            .any(|c| {
                let (mut own, mut outer) = (false, false);
                c.visit(&mut |e| {
                    if let Expr::Var(v) = e {
                        if inside.contains(v) {
                            own = true;
                        } else {
                            outer = true;
                        }
                    }
                });
                own && outer
            })
            .then_some(*span),
        _ => None,
    })
}

/// Whether `stmts` add to `buffer` with an atomic add.
fn adds_atomically(stmts: &[Stmt], buffer: BufferId) -> bool {
    stmts.iter().any(|s| match s {
        Stmt::AtomicAdd { buffer: b, .. } => *b == buffer,
        Stmt::For(f) => adds_atomically(&f.body, buffer),
        Stmt::If {
            then_body,
            else_body,
            ..
        } => adds_atomically(then_body, buffer) || adds_atomically(else_body, buffer),
        Stmt::Block { body, .. } | Stmt::Launch { body, .. } => adds_atomically(body, buffer),
        _ => false,
    })
}

fn cache_buffer(target: &LoopRef, buffer: &str, span: Span, reason: &'static str) -> ScheduleError {
    cache_buffer_for(PRIMITIVE, target, buffer, span, reason)
}

/// [`ScheduleError::CacheBuffer`] of `primitive`.
pub(crate) fn cache_buffer_for(
    primitive: &'static str,
    target: &LoopRef,
    buffer: &str,
    span: Span,
    reason: &'static str,
) -> ScheduleError {
    ScheduleError::CacheBuffer {
        primitive,
        block: target.block.clone(),
        var: target.var.clone(),
        what: format!("`{buffer}`: {reason}"),
        span,
    }
}

/// What a loop body declares and writes.
pub(crate) struct Body {
    /// Variables declared in the body (inner loops, `let`s) except the opening `let`s.
    pub inner_vars: HashSet<VarId>,
    /// Inner loops with constant bounds: variable → (lo, hi).
    pub constant_loops: HashMap<VarId, (i64, i64)>,
    /// Buffers the body stores to.
    pub stores: HashSet<BufferId>,
    /// How many `let`s open the body.
    pub leading_lets: usize,
    /// The value of each `let` in the body (after the opening ones).
    pub lets: HashMap<VarId, Expr>,
    /// Variables the body assigns (mutable, so never an index's fixed meaning).
    pub assigned: HashSet<VarId>,
}

impl Body {
    pub(crate) fn of(f: &For) -> Body {
        let leading_lets = f
            .body
            .iter()
            .take_while(|s| matches!(s, Stmt::Let { .. }))
            .count();
        let mut b = Body {
            inner_vars: HashSet::new(),
            constant_loops: HashMap::new(),
            stores: HashSet::new(),
            leading_lets,
            lets: HashMap::new(),
            assigned: HashSet::new(),
        };
        b.walk(&f.body[leading_lets..]);
        // Opening lets are computable at the top, unless something assigns them.
        b
    }

    fn walk(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::For(g) => {
                    self.inner_vars.insert(g.var);
                    if let (Expr::Int(lo), Expr::Int(hi)) = (&g.lo, &g.hi) {
                        self.constant_loops.insert(g.var, (*lo, *hi));
                    }
                    self.walk(&g.body);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    self.walk(then_body);
                    self.walk(else_body);
                }
                Stmt::Let { var, value, .. } => {
                    self.inner_vars.insert(*var);
                    self.lets.insert(*var, value.clone());
                }
                Stmt::Assign { var, .. } | Stmt::WarpReduce { var, .. } => {
                    self.inner_vars.insert(*var);
                    self.assigned.insert(*var);
                }
                Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } => {
                    self.stores.insert(*buffer);
                }
                Stmt::Mma(m) => {
                    self.inner_vars.extend(m.tile_vars());
                    self.stores.insert(m.c);
                }
                Stmt::Prefetch { .. } | Stmt::Barrier { .. } => {}
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => self.walk(body),
            }
        }
    }

    /// Whether `e` can be computed after the opening `let`s: no inner variable, no load
    /// of a buffer the body writes.
    pub(crate) fn top_computable(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.visit(&mut |x| match x {
            Expr::Var(v) if self.inner_vars.contains(v) => ok = false,
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. }
                if self.stores.contains(buffer) =>
            {
                ok = false
            }
            _ => {}
        });
        ok
    }
}

/// Whether `e` is the variable of a loop of `func` over `lo..npos(axis)` with a constant
/// `lo >= 0`: its values are positions of `axis`. (A loop `bound` gave a constant extent
/// runs past them; so does any index computed from data.)
pub(crate) fn positions_of(func: &Func, e: &Expr, axis: sparsile_ir::id::AxisId) -> bool {
    // `indptr[x]..indptr[x + 1]` of an indptr buffer of `axis`: positions of one
    // segment (indptr is validated monotone within `0..=npos` before any run).
    let segment = |lo: &Expr, hi: &Expr| match (lo, hi) {
        (
            Expr::Load {
                buffer: b1,
                indices: i1,
            },
            Expr::Load {
                buffer: b2,
                indices: i2,
            },
        ) => {
            b1 == b2
                && is_indptr_of(func, *b1, axis)
                && matches!((i1.as_slice(), i2.as_slice()), ([x], [y])
                    if *y == add(x.clone(), Expr::Int(1)))
        }
        _ => false,
    };
    let whole = npos(&func.axes, axis);
    fn walk(stmts: &[Stmt], v: VarId, ok: &dyn Fn(&Expr, &Expr) -> bool) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::For(f) => (f.var == v && ok(&f.lo, &f.hi)) || walk(&f.body, v, ok),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => walk(then_body, v, ok) || walk(else_body, v, ok),
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk(body, v, ok),
            _ => false,
        })
    }
    let ok = |lo: &Expr, hi: &Expr| {
        (matches!(lo, Expr::Int(l) if *l >= 0) && *hi == whole) || segment(lo, hi)
    };
    matches!(e, Expr::Var(v) if walk(&func.body, *v, &ok))
}

/// Whether `buffer` is the indptr array of a tensor whose buffer lies over `axis`.
fn is_indptr_of(func: &Func, buffer: BufferId, axis: sparsile_ir::id::AxisId) -> bool {
    let BufferKind::Indptr {
        tensor,
        axis: level,
    } = &func.buffers[buffer].kind
    else {
        return false;
    };
    func.buffer_by_name(tensor).is_some_and(|t| {
        matches!(&func.buffers[t].layout,
            BufferLayout::Axes(ax) if ax.get(*level) == Some(&axis))
    })
}

/// One index position of the cached buffer.
#[derive(Debug, Clone)]
pub(crate) enum Dim {
    Fixed(Expr),
    /// Positions `lo..hi`, valid below `len`; with `affine`, the accesses index
    /// `scale * v + offset` through a `let` of an inner loop's variable `v` over
    /// `lo..hi`, and the local array holds one element per value of `v`.
    Cached {
        lo: i64,
        hi: i64,
        len: Expr,
        affine: Option<Affine>,
    },
}

/// A cached position `scale * v + offset`: `v` the variable of an inner loop with
/// constant bounds, `offset` computable at the top of the iteration, read through the
/// `let`s in `lets` (each defined as that value).
#[derive(Debug, Clone)]
pub(crate) struct Affine {
    pub scale: i64,
    pub offset: Expr,
    /// Each `let` variable an access indexes with → the loop variable it is built on.
    pub lets: HashMap<VarId, VarId>,
    /// Whether every position is known to lie in `0..len` (the offset is the cached
    /// loop's own variable over `0..scale`, and `scale * hi <= len`): no guard needed.
    pub in_range: bool,
}

/// `e` as `scale * v + offset` with `v` one of `loops` and `offset` free of every loop
/// in `loops` (a sum of terms, one of them `v`, `v * c` or `c * v`).
pub(crate) fn affine_in(
    e: &Expr,
    loops: &HashMap<VarId, (i64, i64)>,
) -> Option<(VarId, i64, Expr)> {
    fn terms(e: &Expr, out: &mut Vec<Expr>) {
        match e {
            Expr::Binary {
                op: sparsile_ir::coord::BinaryOp::Add,
                lhs,
                rhs,
            } => {
                terms(lhs, out);
                terms(rhs, out);
            }
            _ => out.push(e.clone()),
        }
    }
    let mentions = |e: &Expr| {
        let mut m = false;
        e.visit(&mut |x| m |= matches!(x, Expr::Var(v) if loops.contains_key(v)));
        m
    };
    let mut parts = Vec::new();
    terms(e, &mut parts);
    let mut found: Option<(VarId, i64)> = None;
    let mut rest = Expr::Int(0);
    for t in parts {
        let linear = match &t {
            Expr::Var(v) if loops.contains_key(v) => Some((*v, 1)),
            Expr::Binary {
                op: sparsile_ir::coord::BinaryOp::Mul,
                lhs,
                rhs,
            } => match (&**lhs, &**rhs) {
                (Expr::Var(v), Expr::Int(c)) | (Expr::Int(c), Expr::Var(v))
                    if loops.contains_key(v) =>
                {
                    Some((*v, *c))
                }
                _ => None,
            },
            _ => None,
        };
        match linear {
            Some(l) if found.is_none() => found = Some(l),
            Some(_) => return None,
            None if mentions(&t) => return None,
            None => rest = add(rest, t),
        }
    }
    found.map(|(v, c)| (v, c, rest))
}

/// How accesses of the buffer map to the local array.
pub(crate) struct Plan {
    pub buffer: BufferId,
    pub dims: Vec<Dim>,
    pub size: i64,
}

impl Plan {
    pub(crate) fn new(
        func: &Func,
        target: &LoopRef,
        f: &For,
        id: BufferId,
        body: &Body,
        primitive: &'static str,
    ) -> Result<Plan, ScheduleError> {
        let buf = &func.buffers[id];
        let name = buf.name.clone();
        let BufferLayout::Axes(axes) = &buf.layout else {
            return Err(ScheduleError::CacheBuffer {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                what: format!("`{name}`: it is not laid out over axes (a stage-II values buffer)"),
                span: f.span,
            });
        };
        if buf.kind != BufferKind::Values || buf.dtype.is_int() {
            return Err(ScheduleError::CacheBuffer {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                what: format!("`{name}`: only float values buffers are cached"),
                span: f.span,
            });
        }
        let accesses = accesses(&f.body[body.leading_lets..], id);
        let err = |a: &(Option<Vec<Expr>>, Span), dim: usize, reason: String| {
            let text = match &a.0 {
                Some(ix) => {
                    let parts: Vec<String> = ix
                        .iter()
                        .map(|e| ExprDisplay::new(func, e).to_string())
                        .collect();
                    format!("{name}[{}]", parts.join(", "))
                }
                None => format!("search({name}, ..)"),
            };
            ScheduleError::CacheAccess(Box::new(CacheAccess {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                access: text,
                dim,
                reason,
                span: a.1,
            }))
        };
        if let Some(a) = accesses.iter().find(|a| a.0.is_none()) {
            return Err(err(a, 0, "a search cannot be redirected".to_string()));
        }
        let mut dims = Vec::new();
        let mut size: i64 = 1;
        // Variables of loops that run once are their constant in a fixed index.
        let once = single_iterations(&f.body[body.leading_lets..]);
        for (d, &axis) in axes.iter().enumerate() {
            let first = &accesses[0];
            // A cached position: the variable of an inner loop with constant bounds in
            // every access (even one that runs once, so that a row of one element is
            // still a row).
            let loop_vars = accesses.iter().all(
                |a| matches!(index_at(a, d), Expr::Var(v) if body.constant_loops.contains_key(v)),
            );
            // A fixed position: the same computable expression in every access, the
            // variables of loops that run once read as their values (unless the position
            // may be cached).
            let at = |a: &(Option<Vec<Expr>>, Span)| match loop_vars {
                true => index_at(a, d).clone(),
                false => fold(index_at(a, d), &once),
            };
            let e0 = at(first);
            if accesses.iter().all(|a| at(a) == e0) && body.top_computable(&e0) {
                dims.push(Dim::Fixed(e0));
                continue;
            }
            if let Some(dim) = affine_dim(func, f, body, &accesses, d, axis) {
                if let Dim::Cached { lo, hi, .. } = &dim {
                    size = size.saturating_mul(hi - lo);
                }
                dims.push(dim);
                continue;
            }
            let mut range: Option<(i64, i64)> = None;
            for a in &accesses {
                let Expr::Var(v) = index_at(a, d) else {
                    return Err(err(a, d, "the index is neither the same computable expression in every access nor the variable of an inner loop with constant bounds".to_string()));
                };
                let Some(&(lo, hi)) = body.constant_loops.get(v) else {
                    return Err(err(
                        a,
                        d,
                        format!(
                            "loop `{}` has no constant bounds (use bound first)",
                            func.vars[*v].name
                        ),
                    ));
                };
                range = Some(match range {
                    None => (lo, hi.max(lo)),
                    Some((a, b)) => (a.min(lo), b.max(hi)),
                });
            }
            let decl = &func.axes[axis];
            if decl.kind != AxisKind::DenseFixed || decl.parent.is_some() {
                return Err(err(
                    first,
                    d,
                    format!("axis `{}` is not a parentless dense_fixed axis", decl.name),
                ));
            }
            let (lo, hi) = range.expect("at least one access");
            size = size.saturating_mul((hi - lo).max(1));
            dims.push(Dim::Cached {
                lo,
                hi: hi.max(lo + 1),
                len: npos(&func.axes, axis),
                affine: None,
            });
        }
        if size > MAX_LOCAL_ELEMENTS {
            return Err(ScheduleError::CacheTooLarge {
                primitive,
                block: target.block.clone(),
                var: target.var.clone(),
                buffer: name,
                size,
                max: MAX_LOCAL_ELEMENTS,
            });
        }
        Ok(Plan {
            buffer: id,
            dims,
            size,
        })
    }

    /// Adds the local buffer to `func`.
    pub(crate) fn declare_local(&self, func: &mut Func, buffer: &str) -> BufferId {
        let name = fresh_name(func, &format!("{buffer}_local"));
        // Partial sums of f16/bf16 elements stay in f32.
        let dtype = func.buffers[self.buffer].dtype.compute_type();
        func.buffers.push(Buffer {
            name,
            dtype,
            layout: BufferLayout::Flat(Expr::Int(self.size)),
            role: BufferRole::Temp,
            kind: BufferKind::Local,
            span: Span::default(),
        })
    }

    /// The offset in the local array of the access with these indices.
    fn offset(&self, indices: &[Expr]) -> Expr {
        let coords: Vec<Expr> = self
            .dims
            .iter()
            .zip(indices)
            .map(|(dim, e)| match (dim, e) {
                (
                    Dim::Cached {
                        affine: Some(a), ..
                    },
                    Expr::Var(k),
                ) => Expr::Var(*a.lets.get(k).expect("planned: every access's let")),
                _ => e.clone(),
            })
            .collect();
        self.offset_of(&coords)
    }

    /// The offset in the local array of these coordinates (the cached positions'
    /// loop values).
    fn offset_of(&self, coords: &[Expr]) -> Expr {
        let mut offset = Expr::Int(0);
        for (d, dim) in self.dims.iter().enumerate() {
            if let Dim::Cached { lo, hi, .. } = dim {
                offset = add(
                    mul(offset, Expr::Int(hi - lo)),
                    sub(coords[d].clone(), Expr::Int(*lo)),
                );
            }
        }
        offset
    }

    /// Loops over the cached elements: the first copies the buffer into the local array
    /// (0 where the element does not exist) when `load` is set, the second copies the
    /// local array back.
    pub(crate) fn copy_loops(&self, func: &mut Func, local: BufferId, load: bool) -> (Stmt, Stmt) {
        let fill = self.copy_nest(func, local, "in", |buf, local, indices, offset| {
            let zero = Stmt::Store {
                buffer: local,
                indices: vec![offset.clone()],
                value: Expr::Float(0.0),
                span: Span::default(),
            };
            if !load {
                return (zero, None);
            }
            let copy = Stmt::Store {
                buffer: local,
                indices: vec![offset],
                value: Expr::load(buf, indices),
                span: Span::default(),
            };
            (copy, Some(zero))
        });
        let back = self.copy_nest(func, local, "out", |buf, local, indices, offset| {
            let copy = Stmt::Store {
                buffer: buf,
                indices,
                value: Expr::load(local, vec![offset]),
                span: Span::default(),
            };
            (copy, None)
        });
        (fill, back)
    }

    /// A loop nest over the cached elements with fresh variables `<buffer>_<tag><d>`;
    /// `make` gives the statement for an existing element and the one for a missing
    /// element (if any).
    fn copy_nest(
        &self,
        func: &mut Func,
        local: BufferId,
        tag: &str,
        make: impl FnOnce(BufferId, BufferId, Vec<Expr>, Expr) -> (Stmt, Option<Stmt>),
    ) -> Stmt {
        let base = func.buffers[self.buffer].name.clone();
        let mut vars = Vec::new();
        let mut coords = Vec::new();
        for (d, dim) in self.dims.iter().enumerate() {
            if let Dim::Cached { lo, hi, .. } = dim {
                let (v, _) = fresh_index_var(func, &format!("{base}_{tag}{d}"));
                vars.push((v, *lo, *hi));
                coords.push(Expr::Var(v));
            }
        }
        let (indices, conds) = self.element(func, &coords);
        let offset = self.offset_of_cached(&coords);
        let (then, otherwise) = make(self.buffer, local, indices, offset);
        let mut body = match all(conds) {
            None => vec![then],
            Some(c) => vec![Stmt::If {
                cond: c,
                then_body: vec![then],
                else_body: otherwise.into_iter().collect(),
                span: Span::default(),
            }],
        };
        for &(v, lo, hi) in vars.iter().rev() {
            body = vec![Stmt::For(For {
                var: v,
                lo: Expr::Int(lo),
                hi: Expr::Int(hi),
                kind: ForKind::Serial,
                body,
                span: Span::default(),
            })];
        }
        unwrap_one(body)
    }

    /// The ranges `lo..hi` of the cached positions, in order.
    pub(crate) fn cached_ranges(&self) -> Vec<(i64, i64)> {
        self.dims
            .iter()
            .filter_map(|d| match d {
                Dim::Cached { lo, hi, .. } => Some((*lo, *hi)),
                Dim::Fixed(_) => None,
            })
            .collect()
    }

    /// The offset in the cache of the element whose cached positions' loop values are
    /// `coords` (one per cached position, in order; last fastest).
    pub(crate) fn offset_of_cached(&self, coords: &[Expr]) -> Expr {
        let mut offset = Expr::Int(0);
        for (coord, (lo, hi)) in coords.iter().zip(self.cached_ranges()) {
            offset = add(
                mul(offset, Expr::Int(hi - lo)),
                sub(coord.clone(), Expr::Int(lo)),
            );
        }
        offset
    }

    /// The buffer's indices of the cached element whose cached positions' loop values
    /// are `coords` (one per cached position, in order), and the conditions under which
    /// it exists (empty when it always does).
    pub(crate) fn element(&self, func: &Func, coords: &[Expr]) -> (Vec<Expr>, Vec<Expr>) {
        let mut indices = Vec::new();
        let mut conds = Vec::new();
        let axes = match &func.buffers[self.buffer].layout {
            BufferLayout::Axes(axes) => axes.clone(),
            BufferLayout::Flat(_) => Vec::new(),
        };
        let mut coords = coords.iter();
        for (d, dim) in self.dims.iter().enumerate() {
            match dim {
                Dim::Fixed(e) => {
                    // A fixed index read from data (an ELL or block format's padding
                    // sentinel, one past the last position; a DIA diagonal's column,
                    // negative before the matrix starts), or the variable of a loop
                    // `bound` extended past the axis, may be out of range where the body
                    // guards its access: the copy is guarded too, so it never reads or
                    // writes past the buffer.
                    if let Some(&axis) = axes.get(d) {
                        if !positions_of(func, e, axis) {
                            if !matches!(e, Expr::Int(c) if *c >= 0) {
                                conds.push(ge(e.clone(), Expr::Int(0)));
                            }
                            conds.push(lt(e.clone(), npos(&func.axes, axis)));
                        }
                    }
                    indices.push(e.clone());
                }
                Dim::Cached {
                    lo,
                    hi,
                    len,
                    affine: None,
                } => {
                    let c = coords.next().expect("one coordinate per cached position");
                    if *lo < 0 {
                        conds.push(ge(c.clone(), Expr::Int(0)));
                    }
                    if !matches!(len, Expr::Int(n) if *n >= *hi) {
                        conds.push(lt(c.clone(), len.clone()));
                    }
                    indices.push(c.clone());
                }
                Dim::Cached {
                    len,
                    affine: Some(a),
                    ..
                } => {
                    let c = coords.next().expect("one coordinate per cached position");
                    let position = add(mul(c.clone(), Expr::Int(a.scale)), a.offset.clone());
                    if !a.in_range {
                        conds.push(ge(position.clone(), Expr::Int(0)));
                        conds.push(lt(position.clone(), len.clone()));
                    }
                    indices.push(position);
                }
            }
        }
        (indices, conds)
    }

    /// `s` with every access of the buffer redirected to `local`: loads anywhere, and
    /// the element each store or atomic add writes.
    pub(crate) fn rewrite_stmt(&self, s: &Stmt, local: BufferId) -> Stmt {
        let loads = Stmt::map_exprs(std::slice::from_ref(s), &mut |e| {
            self.rewrite_expr(e, local)
        });
        let mut redirected = Stmt::map_leaves(&loads, &mut |s| match s {
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } if *buffer == self.buffer => Some(Stmt::Store {
                buffer: local,
                indices: vec![self.offset(indices)],
                value: value.clone(),
                span: *span,
            }),
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                span,
            } if *buffer == self.buffer => Some(Stmt::AtomicAdd {
                buffer: local,
                indices: vec![self.offset(indices)],
                value: value.clone(),
                span: *span,
            }),
            _ => None,
        });
        redirected.pop().expect("one statement in, one out")
    }

    pub(crate) fn rewrite_expr(&self, e: &Expr, local: BufferId) -> Expr {
        e.map(&mut |x| match x {
            Expr::Load { buffer, indices } if *buffer == self.buffer => {
                Some(Expr::load(local, vec![self.offset(indices)]))
            }
            _ => None,
        })
    }
}

/// Dimension `d` as an affine cached position: every access indexes it with a `let`
/// variable of the body whose value is `scale * v + offset` (see [`Affine`]), with the
/// same `scale` and `offset` throughout, over a parentless `dense_fixed` axis.
fn affine_dim(
    func: &Func,
    target: &For,
    body: &Body,
    accesses: &[(Option<Vec<Expr>>, Span)],
    d: usize,
    axis: sparsile_ir::id::AxisId,
) -> Option<Dim> {
    let decl = &func.axes[axis];
    if decl.kind != AxisKind::DenseFixed || decl.parent.is_some() {
        return None;
    }
    let mut shape: Option<(i64, Expr)> = None;
    let mut lets = HashMap::new();
    let mut range: Option<(i64, i64)> = None;
    for a in accesses {
        let Expr::Var(k) = index_at(a, d) else {
            return None;
        };
        if body.assigned.contains(k) {
            return None;
        }
        let (v, scale, offset) = affine_in(body.lets.get(k)?, &body.constant_loops)?;
        if scale == 0 || !body.top_computable(&offset) {
            return None;
        }
        match &shape {
            None => shape = Some((scale, offset)),
            Some((s, o)) if *s == scale && *o == offset => {}
            Some(_) => return None,
        }
        let &(lo, hi) = body.constant_loops.get(&v)?;
        range = Some(match range {
            None => (lo, hi.max(lo + 1)),
            Some((a, b)) => (a.min(lo), b.max(hi)),
        });
        lets.insert(*k, v);
    }
    let (scale, offset) = shape?;
    let (lo, hi) = range?;
    let len = npos(&func.axes, axis);
    let in_range = offset == Expr::Var(target.var)
        && target.lo == Expr::Int(0)
        && target.hi == Expr::Int(scale)
        && lo >= 0
        && matches!(len, Expr::Int(n) if hi.saturating_mul(scale) <= n);
    Some(Dim::Cached {
        lo,
        hi,
        len,
        affine: Some(Affine {
            scale,
            offset,
            lets,
            in_range,
        }),
    })
}

/// The index at position `d` of an access (searches were ruled out before).
fn index_at(access: &(Option<Vec<Expr>>, Span), d: usize) -> &Expr {
    &access.0.as_ref().expect("no searches")[d]
}

/// A single statement, or the statements in an `if 1 { ... }`.
fn unwrap_one(mut stmts: Vec<Stmt>) -> Stmt {
    if stmts.len() == 1 {
        return stmts.pop().expect("one statement");
    }
    Stmt::If {
        cond: Expr::Int(1),
        then_body: stmts,
        else_body: Vec::new(),
        span: Span::default(),
    }
}

/// Every access of `buffer` in `stmts`: its indices (`None` for a search) and statement.
pub(crate) fn accesses(stmts: &[Stmt], buffer: BufferId) -> Vec<(Option<Vec<Expr>>, Span)> {
    let mut out = Vec::new();
    fn expr(e: &Expr, buffer: BufferId, span: Span, out: &mut Vec<(Option<Vec<Expr>>, Span)>) {
        e.visit(&mut |x| match x {
            Expr::Load { buffer: b, indices } if *b == buffer => {
                out.push((Some(indices.clone()), span))
            }
            Expr::Search { buffer: b, .. } if *b == buffer => out.push((None, span)),
            _ => {}
        });
    }
    fn walk(stmts: &[Stmt], buffer: BufferId, out: &mut Vec<(Option<Vec<Expr>>, Span)>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    expr(&f.lo, buffer, f.span, out);
                    expr(&f.hi, buffer, f.span, out);
                    walk(&f.body, buffer, out);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    span,
                } => {
                    expr(cond, buffer, *span, out);
                    walk(then_body, buffer, out);
                    walk(else_body, buffer, out);
                }
                Stmt::Let { value, span, .. } | Stmt::Assign { value, span, .. } => {
                    expr(value, buffer, *span, out)
                }
                Stmt::Store {
                    buffer: b,
                    indices,
                    value,
                    span,
                }
                | Stmt::AtomicAdd {
                    buffer: b,
                    indices,
                    value,
                    span,
                } => {
                    if *b == buffer {
                        out.push((Some(indices.clone()), *span));
                    }
                    indices.iter().for_each(|e| expr(e, buffer, *span, out));
                    expr(value, buffer, *span, out);
                }
                // A prefetch reads nothing; its indices may load.
                Stmt::Prefetch { indices, span, .. } => {
                    indices.iter().for_each(|e| expr(e, buffer, *span, out));
                }
                Stmt::WarpReduce {
                    value, key, span, ..
                } => [value]
                    .into_iter()
                    .chain(key)
                    .for_each(|e| expr(e, buffer, *span, out)),
                // A tile of elements: not one the analysis can name.
                Stmt::Mma(m) => {
                    if m.c == buffer {
                        out.push((None, m.span));
                    }
                    m.exprs()
                        .into_iter()
                        .for_each(|e| expr(e, buffer, m.span, out));
                }
                Stmt::Barrier { .. } => {}
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk(body, buffer, out),
            }
        }
    }
    walk(stmts, buffer, &mut out);
    out
}
