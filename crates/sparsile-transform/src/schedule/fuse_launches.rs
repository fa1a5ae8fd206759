//! `fuse_launches`: runs several launches as one, their grids side by side (SparseTIR's
//! horizontal fusion on the GPU): the loops bound to `blockIdx.x` of every launch become
//! parts of one grid, each taking the next range of block numbers (see
//! [`sparsile_ir::loops::gpu`]). The parts of a decomposed operand (`hyb` buckets) then
//! cost one launch instead of one each, and small parts fill the GPU together.
//!
//! Preconditions (each a [`ScheduleError::NotFusable`] naming the launches and the rule):
//! - at least two launches, none named twice, each a top-level launch of the function,
//!   consecutive and in the given order;
//! - each launch holds only loops bound to `blockIdx.x` at its top (through blocks): no
//!   `blockIdx.y`/`z` loop (parts share the grid along `x`) and no statement outside the
//!   parts (it would run in every block of every part);
//! - the launches can run at once: a buffer in memory that one writes is not read by
//!   another, and two write the same buffer only with atomic adds (`local` and `shared`
//!   buffers are private to a thread or a block, and a block runs one part);
//! - the fused launch passes the verifier (its block has the largest extent of every
//!   thread axis, so a barrier in a part whose threads no longer cover the block is
//!   refused).
//!
//! Postcondition: one launch, named as the first, whose body is the bodies in order.
//!
//! ```text
//! launch C_p0 { block C_p0 { for i in 0..r0 bind(blockIdx.x) { B0 } } }
//! launch C_p1 { block C_p1 { for i2 in 0..r1 bind(blockIdx.x) { B1 } } }
//!   →  launch C_p0 { block C_p0 { … B0 … } block C_p1 { … B1 … } }   (grid r0 + r1)
//! ```

use std::collections::HashSet;

use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    launch_shape, verify, BufferKind, Expr, ForKind, Func, GpuAxis, GpuDim, Stmt,
};

use super::ScheduleError;

/// Fuses the launches named `launches` (see the module docs).
pub fn fuse_launches(func: &Func, launches: &[String]) -> Result<Func, ScheduleError> {
    let refuse = |reason: String| ScheduleError::NotFusable {
        launches: launches.join("`, `"),
        reason,
    };
    if launches.len() < 2 {
        return Err(refuse(format!(
            "two launches or more are fused, {} given",
            launches.len()
        )));
    }
    let mut at = Vec::with_capacity(launches.len());
    for (k, name) in launches.iter().enumerate() {
        if launches[..k].contains(name) {
            return Err(refuse(format!("launch `{name}` is named twice")));
        }
        let index = func
            .body
            .iter()
            .position(|s| matches!(s, Stmt::Launch { name: n, .. } if n == name))
            .ok_or_else(|| refuse(format!("no launch `{name}` in the function")))?;
        if k > 0 && index != at[k - 1] + 1 {
            return Err(refuse(format!(
                "launch `{name}` does not follow launch `{}`",
                launches[k - 1]
            )));
        }
        at.push(index);
    }
    let bodies: Vec<&[Stmt]> = at
        .iter()
        .map(|&i| match &func.body[i] {
            Stmt::Launch { body, .. } => body.as_slice(),
            _ => unreachable!("found as a launch"),
        })
        .collect();
    for (name, body) in launches.iter().zip(&bodies) {
        if let Err(why) = grid_parts_only(body) {
            return Err(refuse(format!("launch `{name}` {why}")));
        }
        if let Ok(shape) = launch_shape(body) {
            if shape.grid_yz.iter().any(Option::is_some) {
                return Err(refuse(format!(
                    "launch `{name}` has a loop bound to `blockIdx.y` or `blockIdx.z` (parts share the grid along `x`)"
                )));
            }
        }
    }
    let uses: Vec<Uses> = bodies.iter().map(|b| Uses::of(b)).collect();
    for (a, ua) in uses.iter().enumerate() {
        for (b, ub) in uses.iter().enumerate() {
            if a == b {
                continue;
            }
            let mut written: Vec<&BufferId> = ua.written.iter().collect();
            written.sort();
            for x in written {
                // Local and shared memory is private to a thread or a block, and a block
                // runs one part.
                if matches!(
                    func.buffers[*x].kind,
                    BufferKind::Local | BufferKind::Shared
                ) {
                    continue;
                }
                let buffer = &func.buffers[*x].name;
                if ub.read.contains(x) {
                    return Err(refuse(format!(
                        "launch `{}` reads `{buffer}`, which launch `{}` writes: they cannot run at once",
                        launches[b], launches[a]
                    )));
                }
                if ub.written.contains(x) && !(ua.atomic_only(*x) && ub.atomic_only(*x)) {
                    return Err(refuse(format!(
                        "launches `{}` and `{}` both write `{buffer}`, not only with atomic adds",
                        launches[a], launches[b]
                    )));
                }
            }
        }
    }
    let mut out = func.clone();
    let first = at[0];
    let merged: Vec<Stmt> = bodies.iter().flat_map(|b| b.iter().cloned()).collect();
    let Stmt::Launch { body, .. } = &mut out.body[first] else {
        unreachable!("found as a launch")
    };
    *body = merged;
    for &i in at[1..].iter().rev() {
        out.body.remove(i);
    }
    verify(&out).map_err(|errors| {
        refuse(format!(
            "the fused launch breaks a GPU rule: {}",
            errors.first().map(|e| e.to_string()).unwrap_or_default()
        ))
    })?;
    Ok(out)
}

/// Whether the top of a launch (through blocks) holds only loops bound to `blockIdx.x`.
fn grid_parts_only(body: &[Stmt]) -> Result<(), &'static str> {
    let mut parts = 0;
    fn walk(stmts: &[Stmt], parts: &mut usize) -> Result<(), &'static str> {
        for s in stmts {
            match s {
                Stmt::Block { body, .. } => walk(body, parts)?,
                Stmt::For(f) if f.kind == ForKind::Bound(GpuAxis::Block(GpuDim::X)) => {
                    *parts += 1
                }
                _ => {
                    return Err(
                        "holds a statement outside its loops bound to `blockIdx.x` (it would run in every block of every part)",
                    )
                }
            }
        }
        Ok(())
    }
    walk(body, &mut parts)?;
    if parts == 0 {
        return Err("has no loop bound to `blockIdx.x`");
    }
    Ok(())
}

/// The buffers a launch reads and writes.
#[derive(Default)]
struct Uses {
    read: HashSet<BufferId>,
    written: HashSet<BufferId>,
    /// Written by a plain store somewhere.
    stored: HashSet<BufferId>,
}

impl Uses {
    fn of(body: &[Stmt]) -> Uses {
        let mut u = Uses::default();
        Stmt::visit_all(body, &mut |s| {
            match s {
                Stmt::Store { buffer, .. } => {
                    u.written.insert(*buffer);
                    u.stored.insert(*buffer);
                }
                Stmt::AtomicAdd { buffer, .. } => {
                    u.written.insert(*buffer);
                }
                // An `mma` reads and writes its accumulator's tile.
                Stmt::Mma(m) => {
                    u.written.insert(m.c);
                    u.stored.insert(m.c);
                    u.read.insert(m.c);
                }
                _ => {}
            }
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
                        u.read.insert(*buffer);
                    }
                });
            }
        });
        u
    }

    fn atomic_only(&self, buffer: BufferId) -> bool {
        !self.stored.contains(&buffer)
    }
}
