//! `warp_segment_reduce`: runs the iterations of a loop on the lanes of a GPU warp when
//! neighbouring iterations add into the same element only some of the time, combining
//! the lanes that share an element with a segmented warp sum (DA-SpMM's *conditional
//! reduction*).
//!
//! Purpose: element-balanced SpMM. After `sparse_fuse` of the row and column axes, one
//! loop runs over all non-zeros; split by 32, each warp takes 32 consecutive non-zeros,
//! one per lane, whatever rows they fall in. For each output column, the lanes holding
//! non-zeros of one row add their products with `warp_segment_sum` keyed by the row, and
//! only the first lane of each run of equal rows adds the run's sum to the output: one
//! add per row and warp instead of one per non-zero. A row that spans several warps gets
//! one add from each, so the loops around are bound with `bind_atomic`.
//!
//! Where [`super::warp_reduce()`] sums a whole loop into one element and reduces once at
//! its end, this primitive reduces *at every update*: each update `X[e] = X[e] + v` in
//! the loop's body becomes
//! ```text
//! let X_part: T = v                                     (0 in lanes past the end)
//! let X_sum: T = warp_segment_sum(X_part, key, lanes)
//! if <first lane of its key> { X[e] = X[e] + X_sum }
//! ```
//! so updates may sit inside inner loops (SpMM's loop over the dense width), as long as
//! every lane reaches them together.
//!
//! Preconditions (each a [`ScheduleError`] naming the loop and its block):
//! - the loop exists ([`ScheduleError::UnknownLoop`]), is serial
//!   ([`ScheduleError::NotSerial`]), runs `0..lanes` with `lanes` a power of two from 2 to
//!   32, and can be bound to `threadIdx.x` (the rules of [`super::bind()`], iteration
//!   independence aside); after binding it covers every thread along `threadIdx.x` of
//!   its launch ([`ScheduleError::NotBindable`]);
//! - its body is either the work `S` or `if G { S }` where `G` is `a < b` (or `<=`) with
//!   `a` stepping by one with the loop variable and `b` independent of it (the tail guard
//!   of a `split`): the lanes that run form a leading run ([`ScheduleError::NotBindable`]);
//! - every store in `S` adds to one float buffer `X` in memory (not a local):
//!   `X[e] = X[e] + v`, `v` and nothing else in the loop reading `X`; `S` holds no atomic
//!   add, barrier or warp reduction, and assigns no local declared outside the loop
//!   ([`ScheduleError::NotAReduction`], [`ScheduleError::LoopCarriedLocal`]);
//! - every index of `e` is independent of the lane (reads neither the loop variable nor
//!   a variable declared in `S`, except the variables of loops holding the update) or is
//!   one *key* variable `r`, the same for every update, declared by a `let` of `S` before
//!   the first statement that holds an update and not assigned from there on;
//! - the keys do not decrease along the lanes, proven from the structure: `S` reads a
//!   buffer at positions `[…, r, q, …]` where the axis of `q` is a variable axis (with an
//!   `indptr`) whose parent is the axis of `r`, so `r` is the parent position of `q`, and
//!   `q` (after substituting the `let`s of `S`) is `c + lane` with `c` independent of the
//!   lane. The first lane of a run is then the lane 0 or the one whose `q` is the first
//!   position under `r` (`q == indptr[r]`) ([`ScheduleError::NotAReduction`]);
//! - every loop and condition between the body and an update has bounds or a condition
//!   independent of the lane, so the whole warp reaches each segmented sum together
//!   ([`ScheduleError::NotBindable`]).
//!
//! Lanes past the end (`G` false) still take part in every segmented sum, with the value 0
//! and a key above every other (`9223372036854775807`); the statements of `S` they must
//! not run are guarded: a `let x = e` whose `e` reads memory or divides becomes
//! `let x = select(G, e, 0)`, other statements without an update `if G { … }`. `G` is
//! computed once, as `let <loop>_in`.
//!
//! Postcondition (`tests/schedule/warp_segment_reduce/spmm_fused.before` → `.after`):
//! ```text
//! for p_i in 0..32 {                          for p_i in 0..32 bind(threadIdx.x) {
//!   if lo + (p_o * 32 + p_i) < hi {              let p_i_in: idx = lo + (p_o * 32 + p_i) < hi
//!     let p: idx = lo + (p_o * 32 + p_i)         let p: idx = select(p_i_in, lo + (p_o * 32 + p_i), 0)
//!     <row search: i_p>                          let i_p: idx = 0
//!     for k in 0..20 {                  →        if p_i_in { <row search> }
//!       C[i_p, k] = C[i_p, k] + A[i_p, p] * …    for k in 0..20 {
//!     }                                            let C_part: f32 = select(p_i_in, A[i_p, p] * …, 0.0)
//!   }                                              let C_sum: f32 = warp_segment_sum(C_part, select(p_i_in, i_p, 9223372036854775807), 32)
//! }                                                if p_i_in && (p_i == 0 || p == indptr[i_p]) { C[i_p, k] = C[i_p, k] + C_sum }
//!                                                }
//!                                              }
//! ```
//! Floating-point sums are reassociated. The rewritten updates are plain adds: bind the
//! loops around with `bind_atomic` when a key's run may continue in another warp.

use std::collections::HashSet;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    update_addend, BufferKind, BufferLayout, CmpOp, Expr, For, Func, GpuAxis, GpuDim, LogicOp,
    Stmt, Var, VarType, WarpOp,
};
use sparsile_ir::Span;

use super::cache_write::accesses;
use super::loop_ref::fresh_name;
use super::parallel::find_loop;
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "warp_segment_reduce";
const LANES: GpuAxis = GpuAxis::Thread(GpuDim::X);
/// The key of lanes past the end: above every position.
pub const PAST_END_KEY: i64 = i64::MAX;

/// Runs `target` on the lanes of a warp with each update combined over the lanes of its
/// key by `warp_segment_sum` (see the module docs).
pub fn warp_segment_reduce(func: &Func, target: &LoopRef) -> Result<Func, ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    let refuse = |reason: String| ScheduleError::NotBindable {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        axis: LANES,
        reason,
        span: f.span,
    };
    let not_reduction = |what: String, span: Span| ScheduleError::NotAReduction {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        what,
        span,
    };
    let lanes = match (&f.lo, &f.hi) {
        (Expr::Int(0), Expr::Int(n)) if (2..=32).contains(n) && (*n as u64).is_power_of_two() => *n,
        _ => {
            return Err(refuse(
                "a warp reduction runs `0..lanes` with lanes a power of two from 2 to 32"
                    .to_string(),
            ))
        }
    };
    let lane = f.var;
    // The guard of a split's tail, if any, and the work it guards.
    let (guard, work): (Option<&Expr>, &[Stmt]) = match f.body.as_slice() {
        [Stmt::If {
            cond,
            then_body,
            else_body,
            ..
        }] if else_body.is_empty() && cond.reads_var(lane) => (Some(cond), then_body),
        body => (None, body),
    };
    if let Some(g) = guard {
        if !leading_run(g, lane) {
            return Err(refuse(
                "its body is guarded by a condition that is not `a < b` with `a` stepping by one with the lane and `b` independent of it (the lanes that run must be a leading run)".to_string(),
            ));
        }
    }

    // The updates: one float buffer in memory, only as sums.
    let mut stored: Vec<(BufferId, Vec<Expr>, Span, bool)> = Vec::new();
    let mut forbidden = None;
    Stmt::visit_all(work, &mut |s| match s {
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } => stored.push((
            *buffer,
            indices.clone(),
            *span,
            update_addend(*buffer, indices, value).is_some(),
        )),
        Stmt::AtomicAdd { span, .. }
        | Stmt::Barrier { span, .. }
        | Stmt::WarpReduce { span, .. } => {
            forbidden.get_or_insert(*span);
        }
        _ => {}
    });
    if let Some(span) = forbidden {
        return Err(not_reduction(
            "no element as a plain sum: the loop already holds an atomic add, a barrier or a warp reduction".to_string(),
            span,
        ));
    }
    let Some((x, _, first_span, _)) = stored.first().cloned() else {
        return Err(not_reduction(
            "no element as a sum: the loop has no update `X[e] = X[e] + v`".to_string(),
            f.span,
        ));
    };
    let buffer = &func.buffers[x];
    let name = buffer.name.clone();
    if let Some((b, _, span, _)) = stored.iter().find(|(b, ..)| *b != x) {
        return Err(not_reduction(
            format!(
                "`{name}` but not alone: the loop also stores to `{}`",
                func.buffers[*b].name
            ),
            *span,
        ));
    }
    if let Some((_, _, span, _)) = stored.iter().find(|(.., update)| !update) {
        return Err(not_reduction(
            format!("`{name}` but not as a sum: a store in the loop is not an update of it"),
            *span,
        ));
    }
    if buffer.kind == BufferKind::Local || buffer.dtype.is_int() {
        return Err(not_reduction(
            format!(
                "`{name}` but not as a float sum in memory (a local would hold the sum in one lane only)"
            ),
            first_span,
        ));
    }
    if accesses(work, x).len() != 2 * stored.len() {
        return Err(not_reduction(
            format!("`{name}` but not as a sum: the loop reads it outside its `+=` updates"),
            first_span,
        ));
    }
    let declared: HashSet<VarId> = Stmt::declared_vars(work).into_iter().collect();
    if let Some(v) = Stmt::assigned_vars(work)
        .into_iter()
        .find(|v| !declared.contains(v))
    {
        return Err(ScheduleError::LoopCarriedLocal {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            local: func.vars[v].name.clone(),
            span: f.span,
        });
    }

    // The key: the one lane-dependent index of the updated elements.
    let first_update = work
        .iter()
        .position(|s| holds_store(std::slice::from_ref(s)))
        .expect("a store was found");
    let uniform = uniform_vars(work, lane, &declared);
    let mut key: Option<VarId> = None;
    for (_, indices, span, _) in &stored {
        for ix in indices {
            let mut lane_vars = Vec::new();
            ix.visit(&mut |e| match e {
                Expr::Var(v) if (*v == lane || declared.contains(v)) && !uniform.contains(v) => {
                    lane_vars.push(*v)
                }
                _ => {}
            });
            if lane_vars.is_empty() {
                continue;
            }
            match (ix, key) {
                (Expr::Var(v), None) if *v != lane => key = Some(*v),
                (Expr::Var(v), Some(k)) if *v == k => {}
                _ => {
                    return Err(not_reduction(
                        format!(
                            "`{name}` but not by one key: an index of the updated element depends on the lane other than as one variable declared in the loop"
                        ),
                        *span,
                    ))
                }
            }
        }
    }
    let Some(key) = key else {
        return Err(not_reduction(
            format!("`{name}` as one element in every lane: nothing to segment (use warp_reduce)"),
            first_span,
        ));
    };
    let key_name = func.vars[key].name.clone();
    let prefix = &work[..first_update];
    let declared_in_prefix = prefix
        .iter()
        .any(|s| matches!(s, Stmt::Let { var, .. } if *var == key));
    if !declared_in_prefix || Stmt::assigned_vars(&work[first_update..]).contains(&key) {
        return Err(not_reduction(
            format!(
                "`{name}` by key `{key_name}`, which is not declared by a `let` of the loop before its first update, or is assigned after it"
            ),
            first_span,
        ));
    }
    let lets = inlinable_lets(work);
    let Some((indptr, q)) = parent_proof(func, work, key, lane, &lets) else {
        return Err(not_reduction(
            format!(
                "`{name}` by key `{key_name}`, which is not read as the parent position of a position that steps by one with the lane (so the keys may decrease along the lanes)"
            ),
            first_span,
        ));
    };

    // Rewrite.
    let mut out = func.clone();
    let dtype = buffer.dtype;
    let active = guard.map(|g| {
        let name = fresh_name(&out, &format!("{}_in", target.var));
        let v = out.vars.push(Var {
            name,
            ty: VarType::Index,
        });
        (v, g.clone())
    });
    let mut rw = Rewrite {
        func: &mut out,
        active: active.as_ref().map(|(v, _)| *v),
        lane,
        key,
        q,
        indptr,
        lanes: lanes as u32,
        dtype,
        declared: &declared,
        uniform: &uniform,
    };
    let mut new_body = Vec::new();
    if let Some((v, g)) = &active {
        new_body.push(Stmt::Let {
            var: *v,
            value: g.clone(),
            span: f.span,
        });
    }
    for s in work {
        if holds_store(std::slice::from_ref(s)) {
            new_body.extend(rw.convert(s, &HashSet::new()).map_err(&refuse)?);
        } else {
            new_body.push(rw.guarded(s));
        }
    }
    super::warp_reduce::bind_on_lanes(out, f.var, target, new_body, lanes, refuse)
}

/// Whether `stmts` hold a store.
fn holds_store(stmts: &[Stmt]) -> bool {
    !Stmt::stored_buffers(stmts).is_empty()
}

/// The variables of `work` that every lane has alike: those of the loops holding an
/// update (whose bounds the rewrite requires to be independent of the lane), and the
/// `let`s never assigned whose values read no memory, divide nothing and read only such
/// variables and variables from outside the loop (arithmetic every lane computes
/// alike, left unguarded).
fn uniform_vars(work: &[Stmt], lane: VarId, declared: &HashSet<VarId>) -> HashSet<VarId> {
    let assigned = Stmt::assigned_vars(work);
    let mut uniform = HashSet::new();
    Stmt::visit_all(work, &mut |s| {
        if let Stmt::For(f) = s {
            if holds_store(&f.body) {
                uniform.insert(f.var);
            }
        }
    });
    loop {
        let mut more = Vec::new();
        Stmt::visit_all(work, &mut |s| {
            let Stmt::Let { var, value, .. } = s else {
                return;
            };
            // A value that reads memory or divides is guarded (0 past the end), so it
            // is not the same in every lane.
            if uniform.contains(var) || assigned.contains(var) || may_fault(value) {
                return;
            }
            let mut ok = true;
            value.visit(&mut |x| {
                if let Expr::Var(v) = x {
                    ok &= *v != lane && (!declared.contains(v) || uniform.contains(v));
                }
            });
            if ok {
                more.push(*var);
            }
        });
        if more.is_empty() {
            return uniform;
        }
        uniform.extend(more);
    }
}

/// The `let`s at the top of `work` whose variable is never assigned: substitutable.
fn inlinable_lets(work: &[Stmt]) -> Vec<(VarId, Expr)> {
    let assigned = Stmt::assigned_vars(work);
    work.iter()
        .filter_map(|s| match s {
            Stmt::Let { var, value, .. } if !assigned.contains(var) => Some((*var, value.clone())),
            _ => None,
        })
        .collect()
}

/// `e` with the `let`s substituted (later ones may read earlier ones).
fn inline(e: &Expr, lets: &[(VarId, Expr)]) -> Expr {
    let mut e = e.clone();
    for (var, value) in lets.iter().rev() {
        e = e.substitute(&mut |v| (v == *var).then(|| value.clone()));
    }
    e
}

/// Whether `e` is `c + lane` (with `+` and `-` of lane-independent terms).
fn steps_by_one(e: &Expr, lane: VarId) -> bool {
    match e {
        Expr::Var(v) => *v == lane,
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => match (lhs.reads_var(lane), rhs.reads_var(lane)) {
            (true, false) => steps_by_one(lhs, lane),
            (false, true) => steps_by_one(rhs, lane),
            _ => false,
        },
        Expr::Binary {
            op: BinaryOp::Sub,
            lhs,
            rhs,
        } => !rhs.reads_var(lane) && steps_by_one(lhs, lane),
        _ => false,
    }
}

/// Whether `g` holds for a leading run of lanes: `a < b` or `a <= b` (or `b > a`,
/// `b >= a`) with `a` stepping by one with the lane and `b` independent of it.
fn leading_run(g: &Expr, lane: VarId) -> bool {
    let Expr::Cmp { op, lhs, rhs } = g else {
        return false;
    };
    let (a, b) = match op {
        CmpOp::Lt | CmpOp::Le => (lhs, rhs),
        CmpOp::Gt | CmpOp::Ge => (rhs, lhs),
        _ => return false,
    };
    steps_by_one(a, lane) && !b.reads_var(lane)
}

/// The `indptr` buffer and the position expression `q` that prove `key` does not
/// decrease along the lanes: a load `Y[…, key, q, …]` in `work` where `q`'s axis is a
/// variable axis whose parent is `key`'s, and `q` (with the `let`s substituted) steps by
/// one with the lane.
fn parent_proof(
    func: &Func,
    work: &[Stmt],
    key: VarId,
    lane: VarId,
    lets: &[(VarId, Expr)],
) -> Option<(BufferId, Expr)> {
    let declared: HashSet<VarId> = Stmt::declared_vars(work).into_iter().collect();
    let mut found = None;
    Stmt::visit_all(work, &mut |s| {
        for e in s.own_exprs() {
            e.visit(&mut |x| {
                let Expr::Load { buffer, indices } = x else {
                    return;
                };
                if found.is_some() {
                    return;
                }
                let BufferLayout::Axes(axes) = &func.buffers[*buffer].layout else {
                    return;
                };
                for d in 1..indices.len().min(axes.len()) {
                    if indices[d - 1] != Expr::Var(key) {
                        continue;
                    }
                    let axis = &func.axes[axes[d]];
                    if !axis.kind.is_variable() || axis.parent != Some(axes[d - 1]) {
                        continue;
                    }
                    let q = inline(&indices[d], lets);
                    let lane_free_otherwise = {
                        let mut ok = true;
                        q.visit(&mut |y| {
                            if let Expr::Var(v) = y {
                                ok &= *v == lane || !declared.contains(v);
                            }
                        });
                        ok
                    };
                    if !lane_free_otherwise || !steps_by_one(&q, lane) {
                        continue;
                    }
                    if let Some(indptr) = indptr_of(func, axes[d]) {
                        found = Some((indptr, indices[d].clone()));
                        return;
                    }
                }
            });
        }
    });
    found
}

/// The `indptr` buffer of `axis`: an indptr of a buffer laid out over it.
fn indptr_of(func: &Func, axis: sparsile_ir::AxisId) -> Option<BufferId> {
    func.buffers.iter().find_map(|(id, b)| {
        let BufferKind::Indptr {
            tensor,
            axis: level,
        } = &b.kind
        else {
            return None;
        };
        let owner = func.buffer_by_name(tensor)?;
        match &func.buffers[owner].layout {
            BufferLayout::Axes(axes) if axes.get(*level) == Some(&axis) => Some(id),
            _ => None,
        }
    })
}

/// Whether evaluating `e` may fail where the lane does not run: it reads memory or
/// divides.
fn may_fault(e: &Expr) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        found |= matches!(
            x,
            Expr::Load { .. }
                | Expr::Search { .. }
                | Expr::Binary {
                    op: BinaryOp::Div | BinaryOp::Rem,
                    ..
                }
        )
    });
    found
}

/// The rewriting of the loop's body.
struct Rewrite<'a> {
    func: &'a mut Func,
    /// The local holding the guard, when the body was guarded.
    active: Option<VarId>,
    lane: VarId,
    key: VarId,
    /// The position whose parent is the key (as written at the proving load).
    q: Expr,
    indptr: BufferId,
    lanes: u32,
    dtype: sparsile_ir::DType,
    declared: &'a HashSet<VarId>,
    /// The variables every lane has alike ([`uniform_vars`]).
    uniform: &'a HashSet<VarId>,
}

impl Rewrite<'_> {
    /// `e` where the lane runs, `zero` past the end.
    fn select(&self, e: Expr, zero: Expr) -> Expr {
        match self.active {
            Some(a) => Expr::select(Expr::Var(a), e, zero),
            None => e,
        }
    }

    /// A statement without an update, run only where the lane runs.
    fn guarded(&self, s: &Stmt) -> Stmt {
        let Some(a) = self.active else {
            return s.clone();
        };
        match s {
            Stmt::Let { var, value, span } => {
                let zero = match self.func.vars[*var].ty {
                    VarType::Index => Expr::Int(0),
                    VarType::Value(_) => Expr::Float(0.0),
                };
                let value = if may_fault(value) {
                    self.select(value.clone(), zero)
                } else {
                    value.clone()
                };
                Stmt::Let {
                    var: *var,
                    value,
                    span: *span,
                }
            }
            other => Stmt::If {
                cond: Expr::Var(a),
                then_body: vec![other.clone()],
                else_body: Vec::new(),
                span: other.span(),
            },
        }
    }

    /// Whether `e` reads only what every lane has alike (`uniform`: the loops around).
    fn lane_invariant(&self, e: &Expr, uniform: &HashSet<VarId>) -> bool {
        let mut ok = true;
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                ok &= !(*v == self.lane || self.declared.contains(v))
                    || uniform.contains(v)
                    || self.uniform.contains(v);
            }
        });
        ok
    }

    /// A statement holding updates, rewritten; `Err` names what breaks the lockstep.
    fn convert(&mut self, s: &Stmt, uniform: &HashSet<VarId>) -> Result<Vec<Stmt>, String> {
        if !holds_store(std::slice::from_ref(s)) {
            return Ok(vec![self.guarded(s)]);
        }
        match s {
            Stmt::For(f) => {
                if !self.lane_invariant(&f.lo, uniform) || !self.lane_invariant(&f.hi, uniform) {
                    return Err(format!(
                        "the loop over `{}` ({}) around an update has bounds that depend on the lane; every lane must reach the warp segment sum together",
                        self.func.vars[f.var].name, f.span
                    ));
                }
                let mut inner = uniform.clone();
                inner.insert(f.var);
                let mut body = Vec::new();
                for t in &f.body {
                    body.extend(self.convert(t, &inner)?);
                }
                Ok(vec![Stmt::For(For { body, ..f.clone() })])
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                if !self.lane_invariant(cond, uniform) {
                    return Err(format!(
                        "the condition at {span} around an update depends on the lane; every lane must reach the warp segment sum together"
                    ));
                }
                let mut then_out = Vec::new();
                for t in then_body {
                    then_out.extend(self.convert(t, uniform)?);
                }
                let mut else_out = Vec::new();
                for t in else_body {
                    else_out.extend(self.convert(t, uniform)?);
                }
                Ok(vec![Stmt::If {
                    cond: cond.clone(),
                    then_body: then_out,
                    else_body: else_out,
                    span: *span,
                }])
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } => {
                let v = update_addend(*buffer, indices, value)
                    .expect("every store is an update")
                    .clone();
                Ok(self.segmented(*buffer, indices, v, *span))
            }
            Stmt::Block { .. } | Stmt::Launch { .. } => {
                Err(format!("a block or launch at {} holds an update", s.span()))
            }
            other => Ok(vec![other.clone()]),
        }
    }

    /// The segmented sum of `v` over the lanes of the key, added by the first of them.
    fn segmented(&mut self, x: BufferId, indices: &[Expr], v: Expr, span: Span) -> Vec<Stmt> {
        let name = self.func.buffers[x].name.clone();
        let part_name = fresh_name(self.func, &format!("{name}_part"));
        let part = self.func.vars.push(Var {
            name: part_name,
            ty: VarType::Value(self.dtype.compute_type()),
        });
        let sum_name = fresh_name(self.func, &format!("{name}_sum"));
        let sum = self.func.vars.push(Var {
            name: sum_name,
            ty: VarType::Value(self.dtype.compute_type()),
        });
        let first_of_key = Expr::Logic {
            op: LogicOp::Or,
            lhs: Box::new(Expr::cmp(CmpOp::Eq, Expr::Var(self.lane), Expr::Int(0))),
            rhs: Box::new(Expr::cmp(
                CmpOp::Eq,
                self.q.clone(),
                Expr::load(self.indptr, vec![Expr::Var(self.key)]),
            )),
        };
        let cond = match self.active {
            Some(a) => Expr::Logic {
                op: LogicOp::And,
                lhs: Box::new(Expr::Var(a)),
                rhs: Box::new(first_of_key),
            },
            None => first_of_key,
        };
        vec![
            Stmt::Let {
                var: part,
                value: self.select(v, Expr::Float(0.0)),
                span,
            },
            Stmt::WarpReduce {
                var: sum,
                op: WarpOp::Sum,
                value: Expr::Var(part),
                key: Some(self.select(Expr::Var(self.key), Expr::Int(PAST_END_KEY))),
                lanes: self.lanes,
                span,
            },
            Stmt::If {
                cond,
                then_body: vec![Stmt::Store {
                    buffer: x,
                    indices: indices.to_vec(),
                    value: Expr::binary(
                        BinaryOp::Add,
                        Expr::load(x, indices.to_vec()),
                        Expr::Var(sum),
                    ),
                    span,
                }],
                else_body: Vec::new(),
                span,
            },
        ]
    }
}
