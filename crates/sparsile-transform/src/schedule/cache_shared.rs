//! `cache_shared`: stages the elements of an input buffer that one iteration of a loop
//! reads into a `shared` buffer, loaded cooperatively by the lanes of the warp (or
//! block) that run the loop, with the barriers that order the loads and the reads.
//!
//! Purpose: GE-SpMM's coalesced row caching. In a row-per-warp SpMM every lane walks the
//! same row of the sparse operand and loads the same column index and value, one
//! non-zero at a time. Split the row's non-zeros into chunks of 32 and stage each chunk:
//! the 32 lanes load 32 consecutive indices and values with one coalesced load each,
//! then every lane reads the chunk from shared memory.
//!
//! The loop `target` runs inside a launch, under a loop bound to `threadIdx.x` (the
//! *lanes*, which share the work of loading) and possibly loops bound to `threadIdx.y` /
//! `threadIdx.z` (each value of those has its own copy: the *groups*).
//!
//! Preconditions (each violation is its own [`ScheduleError`] naming loop and buffer):
//! - the loop exists, inside a launch, under a `threadIdx.x` loop whose extent is the
//!   block's `x` extent, `threadIdx.y`/`z` loops with constant bounds
//!   ([`ScheduleError::UnknownLoop`], [`ScheduleError::CacheBuffer`]);
//! - `buffer` is an input the function never writes
//!   ([`ScheduleError::UnknownBuffer`], [`ScheduleError::CacheBuffer`]);
//! - every lane runs the loop's iterations alike: no condition between the lanes'
//!   loop and the loop, and no bound of a loop on that path or of the loop itself,
//!   depends on the lane (its variable, a `let` computed from it, or a local assigned in
//!   the lanes' loop) ([`ScheduleError::CacheBuffer`]);
//! - the barrier that orders the lanes exists: 32 lanes make one warp per group
//!   (`sync_warp`); other multiples of 32 need the whole block to run the loop alike
//!   (`sync_threads`: no thread-dependent condition or bound from the launch down)
//!   ([`ScheduleError::CacheBuffer`]);
//! - every access of `buffer` in the body has, at each index position, either the same
//!   expression computable at the top of the iteration and the same for all lanes
//!   (*fixed*), or `scale * v + offset` — directly or through a `let` — with `v` the
//!   variable of an inner loop with constant bounds and `offset` fixed, the same `scale`
//!   and `offset` in every access (*staged*); at least one position is staged
//!   ([`ScheduleError::CacheAccess`]);
//! - the staged elements of all groups, with the launch's other shared buffers, fit in
//!   [`MAX_SHARED_BYTES`] ([`ScheduleError::CacheTooLarge`]).
//!
//! Postcondition: a `shared` buffer `<buffer>_shared` of `groups × staged` elements.
//! After the loop's opening `let`s, the lanes copy the staged elements that exist
//! (`0 <= position < positions of the axis`, fixed positions likewise) — lane `l` the
//! elements `l, l + lanes, …` of the group's slice — and every access in the body reads
//! the group's slice instead. Barriers come from [`insert_barriers`]: before the copy
//! (the previous iteration's reads) and after it. Reads of elements that do not exist
//! never happened in the original loop either (its accesses were in bounds), so the
//! slots the copy skips are never read.
//!
//! Example (`tests/schedule/gpu/cache_shared_spmm.before` → `.after`):
//! ```text
//! for l in 0..32 bind(threadIdx.x) {          for l in 0..32 bind(threadIdx.x) {
//!   for c in 0..n {                             for c in 0..n {
//!     for t in 0..32 {                            sync_warp
//!       if c * 32 + t < len {             →       if c * 32 + l < len { J_shared[y * 32 + l] = J[s + c * 32 + l] }
//!         let j = J[s + c * 32 + t]               sync_warp
//!         ...                                     for t in 0..32 { if .. { let j = J_shared[y * 32 + t] ... } }
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    launch_shape, BarrierScope, Buffer, BufferKind, BufferLayout, Expr, ExprDisplay, For, ForKind,
    Func, GpuAxis, GpuDim, Stmt, MAX_SHARED_BYTES, WARP_SIZE,
};
use sparsile_ir::Span;

use super::cache_write::{accesses, affine_in, cache_buffer_for, positions_of, Body};
use super::error::CacheAccess;
use super::insert_barriers::insert_barriers;
use super::launch_path::{block_uniform, dependents, depends, path_to, Around, Path};
use super::loop_ref::{fresh_index_var, fresh_name, loop_mut};
use super::parallel::find_loop;
use super::{LoopRef, ScheduleError};
use crate::index_expr::{add, all, ge, lt, mul, npos, sub};

const PRIMITIVE: &str = "cache_shared";

/// Stages the elements of `buffer` read by one iteration of `target` in shared memory
/// (see the module docs). Returns the function and the name of the shared buffer.
pub fn cache_shared(
    func: &Func,
    target: &LoopRef,
    buffer: &str,
) -> Result<(Func, String), ScheduleError> {
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    let refuse = |reason: String| ScheduleError::CacheBuffer {
        primitive: PRIMITIVE,
        block: target.block.clone(),
        var: target.var.clone(),
        what: format!("`{buffer}`: {reason}"),
        span: f.span,
    };
    let id = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let buf = &func.buffers[id];
    if buf.role != BufferRole::Input || Stmt::stored_buffers(&func.body).contains(&id) {
        return Err(refuse(
            "only an input the function never writes is staged (a copy would go stale)".to_string(),
        ));
    }
    let path = path_to(&func.body, f.var)
        .ok_or_else(|| refuse("the loop is not inside a launch".to_string()))?;
    let team = Team::of(&path, f).map_err(refuse)?;

    // The accesses and their staged positions.
    let body = Body::of(f);
    let found = accesses(&f.body[body.leading_lets..], id);
    if found.is_empty() {
        return Err(cache_buffer_for(
            PRIMITIVE,
            target,
            buffer,
            f.span,
            "the loop does not read it",
        ));
    }
    let plan = Plan::new(func, target, id, &body, &team, &found)?;
    let bytes = plan.size * team.groups * buf.dtype.size_bytes() as i64;
    let other_shared = launch_shared_bytes(func, path.launch);
    if bytes + other_shared > MAX_SHARED_BYTES as i64 {
        return Err(ScheduleError::CacheTooLarge {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            buffer: buffer.to_string(),
            size: plan.size * team.groups,
            max: (MAX_SHARED_BYTES as i64 - other_shared) / buf.dtype.size_bytes() as i64,
        });
    }

    let mut out = func.clone();
    let name = fresh_name(&out, &format!("{buffer}_shared"));
    let dtype = buf.dtype;
    let shared = out.buffers.push(Buffer {
        name: name.clone(),
        dtype,
        layout: BufferLayout::Flat(Expr::Int(plan.size * team.groups)),
        role: BufferRole::Temp,
        kind: BufferKind::Shared,
        span: Span::default(),
    });
    let load = plan.copy(&mut out, &team, shared);
    let carried = !runs_once(f) || path.serial_inside_launch;
    let lets = body.leading_lets;
    // Every shared buffer: those staged at this loop before share the barriers.
    let staged: HashSet<BufferId> = out
        .buffers
        .iter()
        .filter(|(_, b)| b.kind == BufferKind::Shared)
        .map(|(id, _)| id)
        .collect();
    let l = loop_mut(&mut out, target, PRIMITIVE)?;
    let mut rest = vec![load];
    rest.extend(
        l.body[lets..]
            .iter()
            .map(|s| plan.rewrite(s, &team, shared)),
    );
    let mut new_body: Vec<Stmt> = l.body[..lets].to_vec();
    new_body.extend(insert_barriers(rest, &staged, team.scope, carried));
    l.body = new_body;
    Ok((out, name))
}

/// Whether the loop runs exactly once (constant bounds one apart).
fn runs_once(f: &For) -> bool {
    matches!((&f.lo, &f.hi), (Expr::Int(lo), Expr::Int(hi)) if hi - lo == 1)
}

/// The threads that run the loop together.
struct Team {
    /// The `threadIdx.x` loop: its variable and bounds.
    lane: VarId,
    lane_lo: i64,
    lanes: i64,
    /// The `threadIdx.y` / `threadIdx.z` loops (variable, lo, extent), outermost first.
    group_loops: Vec<(VarId, i64, i64)>,
    /// The number of groups (each its own slice of the shared buffer).
    groups: i64,
    /// Variables whose value differs between the lanes of a group.
    per_lane: HashSet<VarId>,
    scope: BarrierScope,
}

impl Team {
    fn of(path: &Path<'_>, f: &For) -> Result<Team, String> {
        let shape = launch_shape(path.launch)
            .map_err(|e| format!("the launch has no well-formed shape: {}", e.message))?;
        let at = path.around.iter().position(|a| {
            matches!(a, Around::Loop(l) if l.kind.gpu_axis() == Some(GpuAxis::Thread(GpuDim::X)))
        });
        let Some(at) = at else {
            return Err(
                "no loop bound to threadIdx.x encloses the loop (its lanes load the shared copy)"
                    .to_string(),
            );
        };
        let Around::Loop(lane_loop) = &path.around[at] else {
            unreachable!("found a loop")
        };
        let (Expr::Int(lane_lo), Expr::Int(lane_hi)) = (&lane_loop.lo, &lane_loop.hi) else {
            return Err("the threadIdx.x loop has no constant bounds".to_string());
        };
        let lanes = lane_hi - lane_lo;
        if lanes != shape.block[0] {
            return Err(format!(
                "the threadIdx.x loop runs {lanes} lanes of the block's {} (some threads would not load)",
                shape.block[0]
            ));
        }
        let mut group_loops = Vec::new();
        for a in &path.around {
            if let Around::Loop(l) = a {
                if let Some(GpuAxis::Thread(GpuDim::Y | GpuDim::Z)) = l.kind.gpu_axis() {
                    let (Expr::Int(lo), Expr::Int(hi)) = (&l.lo, &l.hi) else {
                        return Err("a thread-bound loop has no constant bounds".to_string());
                    };
                    group_loops.push((l.var, *lo, hi - lo));
                }
            }
        }
        let groups = group_loops.iter().map(|g| g.2).product::<i64>().max(1);
        // Lane-dependent values: the lane, lets computed from it, locals assigned per lane.
        let mut per_lane: HashSet<VarId> = HashSet::from([lane_loop.var]);
        dependents(&lane_loop.body, &mut per_lane);
        let below = &path.around[at + 1..];
        let lane_dependent = below.iter().any(|a| match a {
            Around::Loop(l) => depends(&l.lo, &per_lane) || depends(&l.hi, &per_lane),
            Around::Cond(c) => depends(c, &per_lane),
        }) || depends(&f.lo, &per_lane)
            || depends(&f.hi, &per_lane);
        if lane_dependent {
            return Err("the loop's bounds, or a condition or loop bound between the threadIdx.x loop and it, depend on the lane (the lanes must run the loop alike to load together)".to_string());
        }
        let scope = if lanes == WARP_SIZE as i64 {
            BarrierScope::Warp
        } else if lanes % WARP_SIZE as i64 == 0 {
            // Every thread of the block must reach sync_threads.
            if !block_uniform(path, f) {
                return Err(format!("{lanes} lanes span several warps, so the barrier is sync_threads, but a condition or loop bound around the loop depends on the thread"));
            }
            BarrierScope::Block
        } else {
            return Err(format!(
                "{lanes} lanes along threadIdx.x are not whole warps (32, or a multiple of 32)"
            ));
        };
        Ok(Team {
            lane: lane_loop.var,
            lane_lo: *lane_lo,
            lanes,
            group_loops,
            groups,
            per_lane,
            scope,
        })
    }

    /// The group's first element in the shared buffer, in units of `size`.
    fn group_index(&self) -> Expr {
        let mut g = Expr::Int(0);
        for &(v, lo, n) in &self.group_loops {
            g = add(mul(g, Expr::Int(n)), sub(Expr::Var(v), Expr::Int(lo)));
        }
        g
    }
}

/// The bytes of the shared buffers the launch already uses.
pub(crate) fn launch_shared_bytes(func: &Func, launch: &[Stmt]) -> i64 {
    let mut used = Stmt::loaded_buffers(launch);
    used.extend(Stmt::stored_buffers(launch));
    used.into_iter()
        .filter_map(|b| {
            let b = &func.buffers[b];
            match (&b.kind, &b.layout) {
                (BufferKind::Shared, BufferLayout::Flat(Expr::Int(n))) => {
                    Some(n.saturating_mul(b.dtype.size_bytes() as i64))
                }
                _ => None,
            }
        })
        .sum()
}

/// One index position of the staged buffer.
enum Dim {
    Fixed(Expr),
    /// `scale * v + offset` for `v` in `lo..hi`; `lets` maps each `let` variable an
    /// access indexes with to its loop variable (an access indexing with the loop
    /// variable itself maps to itself).
    Staged {
        lo: i64,
        hi: i64,
        scale: i64,
        offset: Expr,
        lets: Vec<(VarId, VarId)>,
    },
}

struct Plan {
    buffer: BufferId,
    dims: Vec<Dim>,
    /// Staged elements per group.
    size: i64,
    /// The valid positions of each index position: `0..len`.
    lens: Vec<Expr>,
    /// Per index position, whether a fixed index is known valid (no guard needed).
    known_valid: Vec<bool>,
}

impl Plan {
    fn new(
        func: &Func,
        target: &LoopRef,
        id: BufferId,
        body: &Body,
        team: &Team,
        found: &[(Option<Vec<Expr>>, Span)],
    ) -> Result<Plan, ScheduleError> {
        let buf = &func.buffers[id];
        let name = buf.name.clone();
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
                primitive: PRIMITIVE,
                block: target.block.clone(),
                var: target.var.clone(),
                access: text,
                dim,
                reason,
                span: a.1,
            }))
        };
        if let Some(a) = found.iter().find(|a| a.0.is_none()) {
            return Err(err(a, 0, "a search cannot be redirected".to_string()));
        }
        let (lens, axes): (Vec<Expr>, Vec<Option<sparsile_ir::id::AxisId>>) = match &buf.layout {
            BufferLayout::Axes(axes) => (
                axes.iter().map(|&a| npos(&func.axes, a)).collect(),
                axes.iter().map(|&a| Some(a)).collect(),
            ),
            BufferLayout::Flat(n) => (vec![n.clone()], vec![None]),
        };
        let index = |a: &(Option<Vec<Expr>>, Span), d: usize| -> Expr {
            a.0.as_ref().expect("no searches")[d].clone()
        };
        let lane_free = |e: &Expr| {
            let mut free = true;
            e.visit(&mut |x| free &= !matches!(x, Expr::Var(v) if team.per_lane.contains(v)));
            free
        };
        let mut dims = Vec::new();
        let mut known_valid = Vec::new();
        let mut size: i64 = 1;
        for d in 0..lens.len() {
            let first = index(&found[0], d);
            if found.iter().all(|a| index(a, d) == first)
                && body.top_computable(&first)
                && lane_free(&first)
            {
                known_valid.push(
                    matches!(&first, Expr::Int(c) if *c >= 0 && matches!(&lens[d], Expr::Int(n) if c < n))
                        || axes[d].is_some_and(|ax| positions_of(func, &first, ax)),
                );
                dims.push(Dim::Fixed(first));
                continue;
            }
            let mut shape: Option<(i64, Expr)> = None;
            let mut range: Option<(i64, i64)> = None;
            let mut lets = Vec::new();
            for a in found {
                let e = index(a, d);
                let (k, value) = match &e {
                    Expr::Var(k) if body.lets.contains_key(k) && !body.assigned.contains(k) => {
                        (*k, body.lets[k].clone())
                    }
                    Expr::Var(k) => (*k, e.clone()),
                    _ => return Err(err(a, d, "the index is neither the same lane-independent expression computable at the top of the iteration in every access, nor a variable (or `let`) `scale * v + offset` of an inner loop `v` with constant bounds".to_string())),
                };
                let Some((v, scale, offset)) = affine_in(&value, &body.constant_loops) else {
                    return Err(err(a, d, "the index is not `scale * v + offset` with `v` an inner loop with constant bounds (use split or bound first)".to_string()));
                };
                if scale == 0 || !body.top_computable(&offset) || !lane_free(&offset) {
                    return Err(err(a, d, "the offset beside the inner loop is not computable at the top of the iteration, or differs between lanes".to_string()));
                }
                match &shape {
                    None => shape = Some((scale, offset)),
                    Some((s, o)) if *s == scale && *o == offset => {}
                    Some(_) => {
                        return Err(err(
                            a,
                            d,
                            "the accesses stage different positions (another scale or offset)"
                                .to_string(),
                        ))
                    }
                }
                let (lo, hi) = body.constant_loops[&v];
                range = Some(match range {
                    None => (lo, hi.max(lo + 1)),
                    Some((x, y)) => (x.min(lo), y.max(hi)),
                });
                lets.push((k, v));
            }
            let (scale, offset) = shape.expect("at least one access");
            let (lo, hi) = range.expect("at least one access");
            size = size.saturating_mul(hi - lo);
            known_valid.push(false);
            dims.push(Dim::Staged {
                lo,
                hi,
                scale,
                offset,
                lets,
            });
        }
        if !dims.iter().any(|d| matches!(d, Dim::Staged { .. })) {
            return Err(err(
                &found[0],
                0,
                "no index position runs over an inner loop: there is one element to stage (cache_read keeps it in a register)".to_string(),
            ));
        }
        Ok(Plan {
            buffer: id,
            dims,
            size,
            lens,
            known_valid,
        })
    }

    /// The offset in the group's slice of the staged coordinates `coords` (one per
    /// staged position, in order).
    fn slot(&self, coords: &[Expr]) -> Expr {
        let mut offset = Expr::Int(0);
        let mut c = coords.iter();
        for dim in &self.dims {
            if let Dim::Staged { lo, hi, .. } = dim {
                let coord = c.next().expect("one coordinate per staged position");
                offset = add(
                    mul(offset, Expr::Int(hi - lo)),
                    sub(coord.clone(), Expr::Int(*lo)),
                );
            }
        }
        offset
    }

    fn shared_index(&self, team: &Team, slot: Expr) -> Expr {
        add(mul(team.group_index(), Expr::Int(self.size)), slot)
    }

    /// The cooperative copy: lane `l` copies slots `l, l + lanes, …` of its group's
    /// slice that exist in the buffer.
    fn copy(&self, func: &mut Func, team: &Team, shared: BufferId) -> Stmt {
        let base = func.buffers[self.buffer].name.clone();
        let passes = (self.size + team.lanes - 1) / team.lanes;
        let lane = sub(Expr::Var(team.lane), Expr::Int(team.lane_lo));
        // One pass: the lane's own slot; more: a loop over passes.
        let pass = (passes > 1).then(|| fresh_index_var(func, &format!("{base}_pass")).0);
        let slot = match pass {
            Some(p) => add(mul(Expr::Var(p), Expr::Int(team.lanes)), lane),
            None => lane,
        };
        // The staged coordinates of `slot`, last position fastest.
        let mut coords = Vec::new();
        let mut stride = 1;
        let staged: Vec<(i64, i64)> = self
            .dims
            .iter()
            .filter_map(|d| match d {
                Dim::Staged { lo, hi, .. } => Some((*lo, *hi)),
                Dim::Fixed(_) => None,
            })
            .collect();
        for &(lo, hi) in staged.iter().rev() {
            let n = hi - lo;
            let q = if stride == 1 {
                slot.clone()
            } else {
                Expr::binary(BinaryOp::Div, slot.clone(), Expr::Int(stride))
            };
            let r = if n == self.size / stride && stride * n == self.size {
                q
            } else {
                Expr::binary(BinaryOp::Rem, q, Expr::Int(n))
            };
            coords.push(add(r, Expr::Int(lo)));
            stride *= n;
        }
        coords.reverse();
        let mut conds = Vec::new();
        if passes * team.lanes != self.size {
            conds.push(lt(slot.clone(), Expr::Int(self.size)));
        }
        let mut indices = Vec::new();
        let mut staged_coords = coords.iter();
        for (d, dim) in self.dims.iter().enumerate() {
            let position = match dim {
                Dim::Fixed(e) => e.clone(),
                Dim::Staged { scale, offset, .. } => {
                    let c = staged_coords.next().expect("one per staged position");
                    add(mul(c.clone(), Expr::Int(*scale)), offset.clone())
                }
            };
            if !self.known_valid[d] {
                conds.push(ge(position.clone(), Expr::Int(0)));
                conds.push(lt(position.clone(), self.lens[d].clone()));
            }
            indices.push(position);
        }
        let copy = Stmt::Store {
            buffer: shared,
            indices: vec![self.shared_index(team, slot)],
            value: Expr::load(self.buffer, indices),
            span: Span::default(),
        };
        let body = match all(conds) {
            None => vec![copy],
            Some(c) => vec![Stmt::If {
                cond: c,
                then_body: vec![copy],
                else_body: Vec::new(),
                span: Span::default(),
            }],
        };
        match pass {
            Some(var) => Stmt::For(For {
                var,
                lo: Expr::Int(0),
                hi: Expr::Int(passes),
                kind: ForKind::Serial,
                body,
                span: Span::default(),
            }),
            None => {
                let [one] = <[Stmt; 1]>::try_from(body).expect("one statement");
                one
            }
        }
    }

    /// `s` with every load of the buffer reading the group's slice.
    fn rewrite(&self, s: &Stmt, team: &Team, shared: BufferId) -> Stmt {
        let mut out = Stmt::map_exprs(std::slice::from_ref(s), &mut |e| {
            e.map(&mut |x| match x {
                Expr::Load { buffer, indices } if *buffer == self.buffer => {
                    let coords: Vec<Expr> = self
                        .dims
                        .iter()
                        .zip(indices)
                        .filter_map(|(dim, e)| match (dim, e) {
                            (Dim::Staged { lets, .. }, Expr::Var(k)) => {
                                let v = lets
                                    .iter()
                                    .find(|(l, _)| l == k)
                                    .map(|(_, v)| *v)
                                    .expect("planned: every access's index");
                                Some(Expr::Var(v))
                            }
                            (Dim::Staged { .. }, _) => unreachable!("planned: a variable"),
                            (Dim::Fixed(_), _) => None,
                        })
                        .collect();
                    Some(Expr::load(
                        shared,
                        vec![self.shared_index(team, self.slot(&coords))],
                    ))
                }
                _ => None,
            })
        });
        out.pop().expect("one statement in, one out")
    }
}
