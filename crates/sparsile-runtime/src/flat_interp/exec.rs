//! Execution of loop-level statements.
//!
//! Every loop runs serially, in order. While a `parallel` loop runs with checking on,
//! its iterations' loads and stores of writable buffers are recorded (scratch buffers
//! excepted: they are private working memory, see [`super::races`]); two iterations
//! storing the same element is a [`FlatInterpError::ParallelWriteConflict`], one
//! loading what another stores a [`FlatInterpError::ParallelReadWriteConflict`], and
//! assigning a local declared outside the loop a [`FlatInterpError::ParallelSharedLocal`].
//! Atomic adds race only with plain loads and stores; local buffers never race (each
//! iteration of a parallel loop starts with them poisoned).

use std::cell::RefCell;

use sparsile_ir::loops::{For, ForKind, Func, Stmt};
use sparsile_ir::{BufferId, IdVec, ParamId, Span, VarId};

use super::eval::{Evaluator, Scalar};
use super::memory::{Data, Mem};
use super::races::{Conflict, Races};
use super::FlatInterpError;

/// A bound variable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Local {
    pub value: Scalar,
    /// A loop variable (not assignable).
    pub is_loop: bool,
    /// The number of parallel loops running when it was declared.
    pub depth: usize,
}

/// The interpreter state.
pub(crate) struct Exec<'f, 'i> {
    pub func: &'f Func,
    pub params: IdVec<ParamId, i64>,
    pub mems: IdVec<BufferId, Mem<'i>>,
    pub vars: IdVec<VarId, Option<Local>>,
    pub check_parallel: bool,
    /// The span of the statement being executed, for messages.
    pub at: Span,
    /// The running parallel loops (loads record themselves through `&self`).
    races: RefCell<Races>,
}

impl<'f, 'i> Exec<'f, 'i> {
    pub fn new(
        func: &'f Func,
        params: IdVec<ParamId, i64>,
        mems: IdVec<BufferId, Mem<'i>>,
        check_parallel: bool,
    ) -> Self {
        Exec {
            func,
            params,
            mems,
            vars: func.vars.values().map(|_| None).collect(),
            check_parallel,
            at: Span::default(),
            races: RefCell::new(Races::default()),
        }
    }

    /// Runs a statement list; locals it declares go out of scope at its end.
    pub fn run(&mut self, stmts: &[Stmt]) -> Result<(), FlatInterpError> {
        let mut saved: Vec<(VarId, Option<Local>)> = Vec::new();
        for stmt in stmts {
            self.stmt(stmt, &mut saved)?;
        }
        for (var, old) in saved.into_iter().rev() {
            self.vars[var] = old;
        }
        Ok(())
    }

    fn stmt(
        &mut self,
        stmt: &Stmt,
        saved: &mut Vec<(VarId, Option<Local>)>,
    ) -> Result<(), FlatInterpError> {
        match stmt {
            Stmt::For(f) => {
                self.at = f.span;
                self.for_loop(f)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                self.at = *span;
                if self.eval_int(cond, || "the condition of an if".to_string())? != 0 {
                    self.run(then_body)
                } else {
                    self.run(else_body)
                }
            }
            Stmt::Let { var, value, span } => {
                self.at = *span;
                let value = self.typed(*var, value)?;
                saved.push((*var, self.vars[*var]));
                self.vars[*var] = Some(Local {
                    value,
                    is_loop: false,
                    depth: self.races.borrow().depth(),
                });
                Ok(())
            }
            Stmt::Assign { var, value, span } => {
                self.at = *span;
                let name = || self.func.vars[*var].name.clone();
                let local = match self.vars[*var] {
                    None => {
                        return Err(FlatInterpError::BadAssign {
                            var: name(),
                            why: "not declared",
                            at: self.at,
                        })
                    }
                    Some(l) if l.is_loop => {
                        return Err(FlatInterpError::BadAssign {
                            var: name(),
                            why: "a loop variable",
                            at: self.at,
                        })
                    }
                    Some(l) => l,
                };
                let races = self.races.borrow();
                if self.check_parallel && local.depth < races.depth() {
                    let (var, iteration) = races.frame(local.depth);
                    return Err(FlatInterpError::ParallelSharedLocal {
                        var: self.func.vars[var].name.clone(),
                        local: name(),
                        iteration,
                        at: self.at,
                    });
                }
                drop(races);
                let value = self.typed(*var, value)?;
                self.vars[*var] = Some(Local { value, ..local });
                Ok(())
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            } => {
                self.at = *span;
                let offset = self.offset(*buffer, indices, "store")?;
                let value = self.eval(value)?;
                self.store(*buffer, offset, value)
            }
            Stmt::Prefetch {
                buffer,
                indices,
                span,
            } => {
                // A hint: only its indices are checked (in bounds, loads valid).
                self.at = *span;
                self.offset(*buffer, indices, "prefetch").map(|_| ())
            }
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                span,
            } => {
                self.at = *span;
                let offset = self.offset(*buffer, indices, "atomic add")?;
                let value = self.eval(value)?;
                self.atomic_add(*buffer, offset, value)
            }
            Stmt::Block { body, span, .. } => {
                self.at = *span;
                self.run(body)
            }
            Stmt::Launch { span, .. } => Err(FlatInterpError::GpuNode {
                what: "a launch".to_string(),
                at: *span,
            }),
            Stmt::Barrier { scope, span } => Err(FlatInterpError::GpuNode {
                what: format!("`{}`", scope.keyword()),
                at: *span,
            }),
            Stmt::WarpReduce { span, .. } => Err(FlatInterpError::GpuNode {
                what: "a warp reduction".to_string(),
                at: *span,
            }),
            Stmt::Mma(m) => Err(FlatInterpError::GpuNode {
                what: "an `mma`".to_string(),
                at: m.span,
            }),
        }
    }

    fn for_loop(&mut self, f: &For) -> Result<(), FlatInterpError> {
        let name = &self.func.vars[f.var].name;
        if let ForKind::Bound(axis) = f.kind {
            return Err(FlatInterpError::GpuNode {
                what: format!("loop `{name}` bound to `{axis}`"),
                at: f.span,
            });
        }
        let lo = self.eval_int(&f.lo, || format!("the start of the loop over `{name}`"))?;
        let hi = self.eval_int(&f.hi, || format!("the end of the loop over `{name}`"))?;
        if let ForKind::ParallelBalanced { indptr } = f.kind {
            self.check_balanced(f, indptr, lo, hi)?;
        }
        let parallel = self.check_parallel && f.kind.is_parallel();
        if parallel {
            self.races.get_mut().enter(f.var);
        }
        let old = self.vars[f.var];
        for i in lo..hi {
            if parallel {
                self.races.get_mut().set_iteration(i);
            }
            if f.kind.is_parallel() {
                self.mems
                    .iter_mut()
                    .filter(|(_, m)| m.local)
                    .for_each(|(_, m)| m.poison());
            }
            self.vars[f.var] = Some(Local {
                value: Scalar::Int(i),
                is_loop: true,
                depth: self.races.get_mut().depth(),
            });
            self.run(&f.body)?;
        }
        self.vars[f.var] = old;
        if parallel {
            self.races.get_mut().leave();
        }
        Ok(())
    }

    /// A balanced partition reads `indptr[lo]` and `indptr[hi]` before a non-empty loop
    /// starts: both must be in bounds of a flat integer buffer.
    fn check_balanced(
        &self,
        f: &For,
        indptr: BufferId,
        lo: i64,
        hi: i64,
    ) -> Result<(), FlatInterpError> {
        if hi <= lo {
            return Ok(());
        }
        let name = || {
            self.func
                .buffers
                .get(indptr)
                .map_or_else(|| indptr.to_string(), |b| b.name.clone())
        };
        let Some(mem) = self.mems.get(indptr) else {
            return Err(FlatInterpError::BalancedIndptr {
                var: self.func.vars[f.var].name.clone(),
                buffer: name(),
                detail: "no such buffer".to_string(),
                at: f.span,
            });
        };
        let len = mem.data.len() as i64;
        let detail = if !matches!(mem.data, Data::Int(_)) {
            Some("it is not an integer buffer".to_string())
        } else if lo < 0 || hi >= len {
            Some(format!(
                "the loop runs {lo}..{hi} but the buffer has {len} elements (it needs {})",
                hi + 1
            ))
        } else {
            None
        };
        match detail {
            Some(detail) => Err(FlatInterpError::BalancedIndptr {
                var: self.func.vars[f.var].name.clone(),
                buffer: name(),
                detail,
                at: f.span,
            }),
            None => Ok(()),
        }
    }

    /// `buffer[offset] += value` as an atomic add.
    fn atomic_add(
        &mut self,
        buffer: BufferId,
        offset: usize,
        value: Scalar,
    ) -> Result<(), FlatInterpError> {
        let func = self.func;
        let name = || func.buffers[buffer].name.clone();
        let mem = &self.mems[buffer];
        if let Some(why) = mem.read_only {
            return Err(FlatInterpError::StoreToReadOnly {
                buffer: name(),
                why,
                at: self.at,
            });
        }
        if self.check_parallel && !mem.scratch && self.races.borrow().depth() > 0 {
            let result = self.races.borrow_mut().atomic(buffer, offset);
            if let Err(c) = result {
                return Err(self.conflict(buffer, offset, c));
            }
        }
        let at = self.at;
        self.mems[buffer].add(offset, value, name, at)
    }

    /// The error for a race found at element `offset` of `buffer`.
    fn conflict(&self, buffer: BufferId, offset: usize, c: Conflict) -> FlatInterpError {
        let name = |v: VarId| self.func.vars[v].name.clone();
        let buffer = self.func.buffers[buffer].name.clone();
        match c {
            Conflict::Write { var, first, second } => FlatInterpError::ParallelWriteConflict {
                var: name(var),
                buffer,
                offset,
                first,
                second,
                at: self.at,
            },
            Conflict::ReadWrite {
                var,
                writer,
                reader,
            } => FlatInterpError::ParallelReadWriteConflict {
                var: name(var),
                buffer,
                offset,
                writer,
                reader,
                at: self.at,
            },
        }
    }

    /// Records a load or store of a writable, non-scratch buffer inside parallel loops.
    pub(crate) fn track(
        &self,
        buffer: BufferId,
        offset: usize,
        is_store: bool,
    ) -> Result<(), FlatInterpError> {
        let mem = &self.mems[buffer];
        if !self.check_parallel || mem.scratch || mem.read_only.is_some() {
            return Ok(());
        }
        let mut races = self.races.borrow_mut();
        if races.depth() == 0 {
            return Ok(());
        }
        let result = if is_store {
            races.store(buffer, offset)
        } else {
            races.load(buffer, offset)
        };
        drop(races);
        result.map_err(|c| self.conflict(buffer, offset, c))
    }

    fn store(
        &mut self,
        buffer: BufferId,
        offset: usize,
        value: Scalar,
    ) -> Result<(), FlatInterpError> {
        let name = || self.func.buffers[buffer].name.clone();
        let mem = &self.mems[buffer];
        if let Some(why) = mem.read_only {
            return Err(FlatInterpError::StoreToReadOnly {
                buffer: name(),
                why,
                at: self.at,
            });
        }
        self.track(buffer, offset, true)?;
        let at = self.at;
        let func = self.func;
        self.mems[buffer].put(offset, value, || func.buffers[buffer].name.clone(), at)
    }
}

impl<'i> Evaluator<'i> for Exec<'_, 'i> {
    type Error = FlatInterpError;

    fn func(&self) -> &Func {
        self.func
    }

    fn at(&self) -> Span {
        self.at
    }

    fn var_value(&self, var: VarId) -> Option<Scalar> {
        self.vars[var].map(|local| local.value)
    }

    fn param(&self, param: ParamId) -> i64 {
        self.params[param]
    }

    fn mem(&self, buffer: BufferId) -> &Mem<'i> {
        &self.mems[buffer]
    }

    fn loaded(&self, buffer: BufferId, offset: usize) -> Result<(), FlatInterpError> {
        self.track(buffer, offset, false)
    }
}
