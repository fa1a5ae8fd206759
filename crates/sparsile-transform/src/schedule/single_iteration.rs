//! Loops that run exactly once: `for v in c..c + 1` (integer literals), such as the
//! block-row loop of a `bsr:1xC` block. Their variable is the constant `c` wherever it is
//! read, so an index such as `io * 1 + ii` names one element for the whole block row and
//! is computable before the loop over the row's blocks. `rfactor` and `cache_write`
//! compare and place indices with these variables replaced by their values. A loop whose
//! body is one `if` on its own variable (what `bound` makes of `for v in 0..m` with
//! extent 1) is not one of them: its iteration may do nothing (`m = 0`), so an index
//! folded to `0` could name an element that does not exist.
//!
//! Precondition: `stmts` is a loop body of a verified function (every variable is
//! declared once).
//!
//! ```text
//! for jo_p in ... {                 single_iterations(body) = [(ii, 0)]
//!   for ii in 0..1 {                fold(`io * 1 + ii`)     = `io * 1 + 0`
//!     y[io * 1 + ii] = ...
//! ```

use sparsile_ir::loops::{Expr, Stmt};
use sparsile_ir::VarId;

/// The variables of the loops in `stmts` (nested ones included) that run exactly once,
/// with their one value.
pub(crate) fn single_iterations(stmts: &[Stmt]) -> Vec<(VarId, i64)> {
    let mut out = Vec::new();
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::For(l) = s {
            if let (Expr::Int(lo), Expr::Int(hi)) = (&l.lo, &l.hi) {
                if *hi == *lo + 1 && !guarded_by_itself(l) {
                    out.push((l.var, *lo));
                }
            }
        }
    });
    out
}

/// Whether the body of `l` is one `if` on its own variable, as `bound` makes it: the one
/// iteration may do nothing, so its variable does not stand for a value that is used.
fn guarded_by_itself(l: &sparsile_ir::loops::For) -> bool {
    let mut reads = false;
    if let [Stmt::If { cond, .. }] = l.body.as_slice() {
        reads = cond.reads_var(l.var);
    }
    reads
}

/// `e` with every variable of `once` replaced by its value.
pub(crate) fn fold(e: &Expr, once: &[(VarId, i64)]) -> Expr {
    e.substitute(&mut |v| {
        once.iter()
            .find(|(w, _)| *w == v)
            .map(|(_, c)| Expr::Int(*c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparsile_ir::loops::Func;

    #[test]
    fn only_loops_of_one_iteration_fold() {
        let f: Func = "flat func f(n) {\n  buffer y: f64[n] output values\n  for i in 0..n {\n    for a in 2..3 {\n      for b in 0..2 {\n        y[i + a + b] = 1.0\n      }\n    }\n  }\n}\n"
            .parse()
            .unwrap();
        let Stmt::For(outer) = &f.body[0] else {
            panic!("a loop")
        };
        let once = single_iterations(&outer.body);
        assert_eq!(once.len(), 1);
        assert_eq!(once[0].1, 2);
        let a = once[0].0;
        let e = Expr::Var(a);
        assert_eq!(fold(&e, &once), Expr::Int(2));
        assert_eq!(fold(&Expr::Var(outer.var), &once), Expr::Var(outer.var));
    }
}
