//! Checks that every id a loop-level function uses is declared, so that execution can
//! index its tables without panicking.

use sparsile_ir::loops::{BufferLayout, Expr, ForKind, Func, Stmt};
use sparsile_ir::{AxisId, BufferId, ParamId, VarId};

use super::FlatInterpError;

/// The first undeclared buffer, variable, parameter or axis id used by `func`.
pub(crate) fn check_ids(func: &Func) -> Result<(), FlatInterpError> {
    let mut checker = Checker { func, error: None };
    for buf in func.buffers.values() {
        match &buf.layout {
            BufferLayout::Axes(axes) => axes.iter().for_each(|&a| checker.axis(a)),
            BufferLayout::Flat(len) => checker.expr(len),
        }
    }
    checker.stmts(&func.body);
    match checker.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Checker<'f> {
    func: &'f Func,
    error: Option<FlatInterpError>,
}

impl Checker<'_> {
    fn fail(&mut self, what: &'static str, id: String) {
        if self.error.is_none() {
            self.error = Some(FlatInterpError::UnknownId {
                func: self.func.name.clone(),
                what,
                id,
            });
        }
    }

    fn axis(&mut self, a: AxisId) {
        if self.func.axes.get(a).is_none() {
            self.fail("axis", a.to_string());
        }
    }

    fn buffer(&mut self, b: BufferId) {
        if self.func.buffers.get(b).is_none() {
            self.fail("buffer", b.to_string());
        }
    }

    fn var(&mut self, v: VarId) {
        if self.func.vars.get(v).is_none() {
            self.fail("variable", v.to_string());
        }
    }

    fn param(&mut self, p: ParamId) {
        if self.func.params.get(p).is_none() {
            self.fail("parameter", p.to_string());
        }
    }

    fn expr(&mut self, e: &Expr) {
        e.visit(&mut |e| match e {
            Expr::Var(v) => self.var(*v),
            Expr::Param(p) => self.param(*p),
            Expr::Load { buffer, .. } | Expr::Search { buffer, .. } => self.buffer(*buffer),
            _ => {}
        });
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    self.var(f.var);
                    if let ForKind::ParallelBalanced { indptr } = f.kind {
                        self.buffer(indptr);
                    }
                    self.expr(&f.lo);
                    self.expr(&f.hi);
                    self.stmts(&f.body);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    self.expr(cond);
                    self.stmts(then_body);
                    self.stmts(else_body);
                }
                Stmt::Let { var, value, .. } | Stmt::Assign { var, value, .. } => {
                    self.var(*var);
                    self.expr(value);
                }
                Stmt::WarpReduce {
                    var, value, key, ..
                } => {
                    self.var(*var);
                    self.expr(value);
                    key.iter().for_each(|k| self.expr(k));
                }
                Stmt::Barrier { .. } => {}
                Stmt::Mma(m) => {
                    m.tile_vars().into_iter().for_each(|v| self.var(v));
                    self.buffer(m.c);
                    m.exprs().into_iter().for_each(|e| self.expr(e));
                }
                Stmt::Store {
                    buffer,
                    indices,
                    value,
                    ..
                }
                | Stmt::AtomicAdd {
                    buffer,
                    indices,
                    value,
                    ..
                } => {
                    self.buffer(*buffer);
                    indices.iter().for_each(|e| self.expr(e));
                    self.expr(value);
                }
                Stmt::Prefetch {
                    buffer, indices, ..
                } => {
                    self.buffer(*buffer);
                    indices.iter().for_each(|e| self.expr(e));
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => self.stmts(body),
            }
        }
    }
}
