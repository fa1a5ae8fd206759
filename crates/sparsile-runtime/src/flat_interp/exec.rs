//! Execution of loop-level statements.
//!
//! Every loop runs serially, in order. While a `parallel` loop runs with checking on,
//! each of its iterations records the elements it stores (scratch buffers excepted:
//! they are private working memory); a store to an element that another iteration of
//! the same loop stored is a [`FlatInterpError::ParallelWriteConflict`], and assigning a
//! local declared outside the loop is a [`FlatInterpError::ParallelSharedLocal`].

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use sparsile_ir::loops::{For, ForKind, Func, Stmt, VarType};
use sparsile_ir::{BufferId, DType, IdVec, ParamId, Span, VarId};

use super::eval::Scalar;
use super::memory::{round_to, Data, Mem};
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

/// A running parallel loop.
#[derive(Debug)]
struct ParFrame {
    var: VarId,
    iteration: i64,
    /// Element -> the iteration that stored it.
    writes: HashMap<(BufferId, usize), i64>,
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
    par: Vec<ParFrame>,
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
            par: Vec::new(),
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
                    depth: self.par.len(),
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
                if self.check_parallel && local.depth < self.par.len() {
                    let frame = &self.par[local.depth];
                    return Err(FlatInterpError::ParallelSharedLocal {
                        var: self.func.vars[frame.var].name.clone(),
                        local: name(),
                        iteration: frame.iteration,
                        at: self.at,
                    });
                }
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
            Stmt::Block { body, span, .. } => {
                self.at = *span;
                self.run(body)
            }
        }
    }

    fn for_loop(&mut self, f: &For) -> Result<(), FlatInterpError> {
        let name = &self.func.vars[f.var].name;
        let lo = self.eval_int(&f.lo, || format!("the start of the loop over `{name}`"))?;
        let hi = self.eval_int(&f.hi, || format!("the end of the loop over `{name}`"))?;
        let parallel = self.check_parallel && f.kind == ForKind::Parallel;
        if parallel {
            self.par.push(ParFrame {
                var: f.var,
                iteration: lo,
                writes: HashMap::new(),
            });
        }
        let old = self.vars[f.var];
        for i in lo..hi {
            if parallel {
                self.par.last_mut().expect("pushed above").iteration = i;
            }
            self.vars[f.var] = Some(Local {
                value: Scalar::Int(i),
                is_loop: true,
                depth: self.par.len(),
            });
            self.run(&f.body)?;
        }
        self.vars[f.var] = old;
        if parallel {
            self.par.pop();
        }
        Ok(())
    }

    /// Evaluates the value of local `var`, converted to its declared type.
    fn typed(
        &self,
        var: VarId,
        value: &sparsile_ir::loops::Expr,
    ) -> Result<Scalar, FlatInterpError> {
        match self.func.vars[var].ty {
            VarType::Index => self
                .eval_int(value, || {
                    format!("the value of index variable `{}`", self.func.vars[var].name)
                })
                .map(Scalar::Int),
            VarType::Value(_) => Ok(Scalar::Float(self.eval(value)?.as_f64())),
        }
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
        if !mem.scratch {
            for frame in &mut self.par {
                match frame.writes.entry((buffer, offset)) {
                    Entry::Occupied(e) if *e.get() != frame.iteration => {
                        return Err(FlatInterpError::ParallelWriteConflict {
                            var: self.func.vars[frame.var].name.clone(),
                            buffer: self.func.buffers[buffer].name.clone(),
                            offset,
                            first: *e.get(),
                            second: frame.iteration,
                            at: self.at,
                        });
                    }
                    Entry::Occupied(_) => {}
                    Entry::Vacant(e) => {
                        e.insert(frame.iteration);
                    }
                }
            }
        }
        let dtype = mem.dtype;
        let at = self.at;
        match (&mut self.mems[buffer].data, value) {
            (Data::Float(v), value) => v[offset] = round_to(value.as_f64(), dtype),
            (Data::Int(v), Scalar::Int(i)) => {
                if dtype == DType::I32 && i32::try_from(i).is_err() {
                    return Err(FlatInterpError::IntegerOutOfRange {
                        buffer: self.func.buffers[buffer].name.clone(),
                        value: i,
                        dtype: dtype.to_string(),
                        at,
                    });
                }
                v[offset] = i;
            }
            (Data::Int(_), Scalar::Float(_)) => {
                return Err(FlatInterpError::FloatIntoInteger {
                    buffer: self.func.buffers[buffer].name.clone(),
                    at,
                })
            }
        }
        Ok(())
    }
}
