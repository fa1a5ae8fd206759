//! Lockstep execution of a launch body by the threads of one block.
//!
//! A statement list runs with an *activity mask*: the threads (by number in the block,
//! ascending) that reach it. Each statement runs for every active thread, in a seeded
//! random order, each thread with its own variables; `if` runs its `then` branch with the
//! threads where the condition holds and then its `else` branch with the others; a
//! serial loop runs iteration `k` with the threads whose own bounds give an iteration
//! `k`, while any does; a thread-bound loop keeps the threads whose `threadIdx` falls in
//! its range; a block-bound loop runs once when the block's number falls in its range.
//! Barriers and warp reductions are in [`super::warp`], `mma` in [`super::mma`].

use std::cell::RefCell;

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use sparsile_ir::loops::{For, ForKind, Func, GpuAxis, GpuDim, Stmt};
use sparsile_ir::{BufferId, IdVec, ParamId, Span, VarId};

use super::error::{AccessKind, Fault, SimtError};
use super::launch::Launch;
use super::shadow::Shadow;
use super::state::{Block, Space};
use crate::flat_interp::eval::{Evaluator, Scalar};
use crate::flat_interp::exec::Local;
use crate::flat_interp::memory::Mem;
use crate::FlatInterpError;

/// Variables declared by a statement list, with the values they hid (thread, var, old).
pub(super) type Saved = Vec<(usize, VarId, Option<Local>)>;

/// The interpreter state.
pub(super) struct Sim<'f, 'i> {
    pub func: &'f Func,
    pub params: IdVec<ParamId, i64>,
    /// Every buffer as bound; for shared and local buffers, the template of the copies.
    pub globals: IdVec<BufferId, Mem<'i>>,
    pub space: IdVec<BufferId, Space>,
    pub rng: ChaCha8Rng,
    pub shadow: RefCell<Shadow>,
    /// The running launch.
    pub launch: Launch<'f>,
    /// The running block.
    pub block: Block<'i>,
}

impl<'f, 'i> Sim<'f, 'i> {
    /// A seeded random order of the positions `0..n` of a mask.
    pub fn order(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut self.rng);
        order
    }

    /// Runs `stmts` with the threads of `mask`; the variables it declares go out of scope
    /// at its end.
    pub fn run(&mut self, stmts: &'f [Stmt], mask: &[usize]) -> Result<(), SimtError> {
        let mut saved = Saved::new();
        for stmt in stmts {
            self.stmt(stmt, mask, &mut saved)?;
        }
        self.restore(saved);
        Ok(())
    }

    fn stmt(&mut self, stmt: &'f Stmt, mask: &[usize], saved: &mut Saved) -> Result<(), SimtError> {
        match stmt {
            Stmt::For(l) => match l.kind {
                ForKind::Bound(GpuAxis::Block(dim)) => self.block_loop(l, dim, mask),
                ForKind::Bound(GpuAxis::Thread(dim)) => self.thread_loop(l, dim, mask),
                _ => self.serial_loop(l, mask),
            },
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                let mut holds = vec![false; mask.len()];
                for pos in self.order(mask.len()) {
                    let t = mask[pos];
                    let c = self
                        .view(t, *span)
                        .eval_int(cond, || "the condition of an if".to_string());
                    holds[pos] = self.ok(t, c)? != 0;
                }
                let (then_mask, else_mask) = split(mask, &holds);
                if !then_mask.is_empty() {
                    self.run(then_body, &then_mask)?;
                }
                if !else_mask.is_empty() {
                    self.run(else_body, &else_mask)?;
                }
                Ok(())
            }
            Stmt::Let { var, value, span } => {
                for pos in self.order(mask.len()) {
                    let t = mask[pos];
                    let v = self.view(t, *span).typed(*var, value);
                    let v = self.ok(t, v)?;
                    self.declare(t, *var, v, false, saved);
                }
                Ok(())
            }
            Stmt::Assign { var, value, span } => {
                for pos in self.order(mask.len()) {
                    let t = mask[pos];
                    self.assign(t, *var, value, *span)?;
                }
                Ok(())
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } => self.write_all(mask, *buffer, indices, value, AccessKind::Store, *span),
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                span,
            } => self.write_all(mask, *buffer, indices, value, AccessKind::AtomicAdd, *span),
            Stmt::Prefetch {
                buffer,
                indices,
                span,
            } => {
                for pos in self.order(mask.len()) {
                    let t = mask[pos];
                    let r = self.view(t, *span).offset(*buffer, indices, "prefetch");
                    self.ok(t, r)?;
                }
                Ok(())
            }
            Stmt::Block { body, .. } => self.run(body, mask),
            Stmt::Launch { name, span, .. } => Err(SimtError::Misplaced {
                what: format!(
                    "launch `{name}` inside launch `{}` (launches are not nested)",
                    self.launch.name
                ),
                at: *span,
            }),
            Stmt::Barrier { scope, span } => self.barrier(*scope, mask, *span),
            Stmt::Mma(m) => self.mma(m, mask),
            Stmt::WarpReduce {
                var,
                op,
                value,
                key,
                lanes,
                span,
            } => self.warp_reduce(
                super::warp::Reduction {
                    var: *var,
                    op: *op,
                    value,
                    key: key.as_ref(),
                    lanes: *lanes,
                    at: *span,
                },
                mask,
                saved,
            ),
        }
    }

    /// The value of a thread's evaluation, or its error naming the thread.
    pub fn ok<T>(&self, thread: usize, r: Result<T, Fault>) -> Result<T, SimtError> {
        r.map_err(|f| self.fail(thread, f))
    }

    /// Declares `var` in thread `t`, remembering what it hid.
    pub fn declare(
        &mut self,
        t: usize,
        var: VarId,
        value: Scalar,
        is_loop: bool,
        saved: &mut Saved,
    ) {
        let slot = &mut self.block.threads[t].vars[var];
        saved.push((t, var, *slot));
        *slot = Some(Local {
            value,
            is_loop,
            depth: 0,
        });
    }

    fn assign(
        &mut self,
        t: usize,
        var: VarId,
        value: &sparsile_ir::loops::Expr,
        at: Span,
    ) -> Result<(), SimtError> {
        let why = match self.block.threads[t].vars[var] {
            None => Some("not declared"),
            Some(l) if l.is_loop => Some("a loop variable"),
            Some(_) => None,
        };
        if let Some(why) = why {
            let e = FlatInterpError::BadAssign {
                var: self.func.vars[var].name.clone(),
                why,
                at,
            };
            return Err(self.fail(t, e.into()));
        }
        let v = self.view(t, at).typed(var, value);
        let v = self.ok(t, v)?;
        if let Some(local) = &mut self.block.threads[t].vars[var] {
            local.value = v;
        }
        Ok(())
    }

    /// A store or atomic add by every thread of `mask`: each evaluates the element, then
    /// the value, then writes.
    fn write_all(
        &mut self,
        mask: &[usize],
        buffer: BufferId,
        indices: &[sparsile_ir::loops::Expr],
        value: &sparsile_ir::loops::Expr,
        kind: AccessKind,
        at: Span,
    ) -> Result<(), SimtError> {
        let access = match kind {
            AccessKind::AtomicAdd => "atomic add",
            AccessKind::Store | AccessKind::Load => "store",
        };
        for pos in self.order(mask.len()) {
            let t = mask[pos];
            let view = self.view(t, at);
            let r = view
                .offset(buffer, indices, access)
                .and_then(|offset| Ok((offset, view.eval(value)?)));
            let (offset, v) = self.ok(t, r)?;
            self.write(t, buffer, offset, v, kind, at)?;
        }
        Ok(())
    }

    /// `for v in lo..hi bind(blockIdx.d)`: once, with `v = lo + blockIdx.d - first`, when
    /// the block falls in the loop's range of block numbers.
    fn block_loop(&mut self, l: &'f For, dim: GpuDim, mask: &[usize]) -> Result<(), SimtError> {
        let Some((first, extent)) = self.launch.range_of(l, dim) else {
            return Err(SimtError::Misplaced {
                what: format!(
                    "loop `{}` bound to `blockIdx.{}` is not part of the grid of launch `{}`",
                    self.func.vars[l.var].name,
                    dim.name(),
                    self.launch.name
                ),
                at: l.span,
            });
        };
        let b = self.block.coords[dim.index()];
        if b < first || b - first >= extent {
            return Ok(());
        }
        let mut saved = Saved::new();
        for pos in self.order(mask.len()) {
            let t = mask[pos];
            let lo = self.view(t, l.span).eval_int(&l.lo, || self.loop_start(l));
            let lo = self.ok(t, lo)?;
            let v = self.ok(t, checked_add(lo, b - first, l.span))?;
            self.declare(t, l.var, Scalar::Int(v), true, &mut saved);
        }
        self.run(&l.body, mask)?;
        self.restore(saved);
        Ok(())
    }

    /// `for v in lo..hi bind(threadIdx.d)`: `v = lo + threadIdx.d` in the threads with
    /// `threadIdx.d < hi - lo`.
    fn thread_loop(&mut self, l: &'f For, dim: GpuDim, mask: &[usize]) -> Result<(), SimtError> {
        let mut inside = vec![false; mask.len()];
        let mut saved = Saved::new();
        for pos in self.order(mask.len()) {
            let t = mask[pos];
            let (lo, hi) = self.bounds(t, l)?;
            let count = self.ok(t, checked_sub(hi, lo, l.span))?;
            let d = self.block.threads[t].coords[dim.index()];
            if d < count {
                let v = self.ok(t, checked_add(lo, d, l.span))?;
                self.declare(t, l.var, Scalar::Int(v), true, &mut saved);
                inside[pos] = true;
            }
        }
        let (active, _) = split(mask, &inside);
        if !active.is_empty() {
            self.run(&l.body, &active)?;
        }
        self.restore(saved);
        Ok(())
    }

    /// A serial (or unrolled) loop: iteration `k` runs with the threads whose own bounds
    /// have one, while any has.
    fn serial_loop(&mut self, l: &'f For, mask: &[usize]) -> Result<(), SimtError> {
        let mut bounds = vec![(0, 0); mask.len()];
        for pos in self.order(mask.len()) {
            bounds[pos] = self.bounds(mask[pos], l)?;
        }
        let mut saved = Saved::new();
        for &t in mask {
            let slot = self.block.threads[t].vars[l.var];
            saved.push((t, l.var, slot));
        }
        let mut k: i64 = 0;
        loop {
            let mut active = Vec::new();
            for (&t, &(lo, hi)) in mask.iter().zip(&bounds) {
                if let Some(v) = lo.checked_add(k).filter(|v| *v < hi) {
                    self.block.threads[t].vars[l.var] = Some(Local {
                        value: Scalar::Int(v),
                        is_loop: true,
                        depth: 0,
                    });
                    active.push(t);
                }
            }
            if active.is_empty() {
                break;
            }
            self.run(&l.body, &active)?;
            k += 1;
        }
        self.restore(saved);
        Ok(())
    }

    /// A loop's `lo` and `hi` for thread `t`.
    fn bounds(&self, t: usize, l: &For) -> Result<(i64, i64), SimtError> {
        let view = self.view(t, l.span);
        let r = view.eval_int(&l.lo, || self.loop_start(l)).and_then(|lo| {
            let name = &self.func.vars[l.var].name;
            let hi = view.eval_int(&l.hi, || format!("the end of the loop over `{name}`"))?;
            Ok((lo, hi))
        });
        self.ok(t, r)
    }

    fn loop_start(&self, l: &For) -> String {
        format!(
            "the start of the loop over `{}`",
            self.func.vars[l.var].name
        )
    }

    /// Gives the variables in `saved` back the values they hid, latest first.
    pub fn restore(&mut self, saved: Saved) {
        for (t, var, old) in saved.into_iter().rev() {
            self.block.threads[t].vars[var] = old;
        }
    }
}

/// The threads of `mask` where `holds` is true, and the others (both ascending).
fn split(mask: &[usize], holds: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let (mut yes, mut no) = (Vec::new(), Vec::new());
    for (&t, &h) in mask.iter().zip(holds) {
        if h {
            yes.push(t);
        } else {
            no.push(t);
        }
    }
    (yes, no)
}

fn checked_add(a: i64, b: i64, at: Span) -> Result<i64, Fault> {
    a.checked_add(b).ok_or_else(|| {
        Fault::Flat(FlatInterpError::IntArithmetic {
            op: "+".to_string(),
            lhs: a,
            rhs: b,
            at,
        })
    })
}

fn checked_sub(a: i64, b: i64, at: Span) -> Result<i64, Fault> {
    a.checked_sub(b).ok_or_else(|| {
        Fault::Flat(FlatInterpError::IntArithmetic {
            op: "-".to_string(),
            lhs: a,
            rhs: b,
            at,
        })
    })
}
