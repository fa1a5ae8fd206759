//! Visiting every statement of a statement list, nested ones included.

use super::stmt::Stmt;
use crate::id::VarId;

impl Stmt {
    /// Calls `f` on every statement of `stmts` and of the bodies nested in them (loops,
    /// both branches of conditionals, blocks), parents first, in program order.
    ///
    /// ```
    /// use sparsile_ir::loops::{Func, Stmt};
    /// let f: Func = "flat func f(n) {\n  buffer y: f64[n] output values\n  for i in 0..n {\n    y[i] = 1.0\n  }\n}\n"
    ///     .parse()
    ///     .unwrap();
    /// let mut stores = 0;
    /// Stmt::visit_all(&f.body, &mut |s| stores += matches!(s, Stmt::Store { .. }) as usize);
    /// assert_eq!(stores, 1);
    /// ```
    pub fn visit_all<'s>(stmts: &'s [Stmt], f: &mut impl FnMut(&'s Stmt)) {
        for s in stmts {
            f(s);
            match s {
                Stmt::For(l) => Stmt::visit_all(&l.body, f),
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    Stmt::visit_all(then_body, f);
                    Stmt::visit_all(else_body, f);
                }
                Stmt::Block { body, .. } => Stmt::visit_all(body, f),
                Stmt::Let { .. }
                | Stmt::Assign { .. }
                | Stmt::Store { .. }
                | Stmt::AtomicAdd { .. }
                | Stmt::Prefetch { .. } => {}
            }
        }
    }

    /// The variables declared anywhere in `stmts` (loop variables and `let`s), in order.
    pub fn declared_vars(stmts: &[Stmt]) -> Vec<VarId> {
        let mut out = Vec::new();
        Stmt::visit_all(stmts, &mut |s| match s {
            Stmt::For(l) => out.push(l.var),
            Stmt::Let { var, .. } => out.push(*var),
            _ => {}
        });
        out
    }

    /// The locals assigned anywhere in `stmts`, in order (with repeats).
    pub fn assigned_vars(stmts: &[Stmt]) -> Vec<VarId> {
        let mut out = Vec::new();
        Stmt::visit_all(stmts, &mut |s| {
            if let Stmt::Assign { var, .. } = s {
                out.push(*var);
            }
        });
        out
    }
}
