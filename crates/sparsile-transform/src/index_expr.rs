//! Building integer index expressions of the loop-level IR: extents, position counts of
//! axes, and arithmetic that folds constants (`p * 1` is `p`, `0 + q` is `q`).

use sparsile_ir::coord::{AxisDecl, BinaryOp, Extent};
use sparsile_ir::loops::{CmpOp, Expr, LogicOp};
use sparsile_ir::{AxisId, AxisKind, IdVec};

/// The value of an extent.
pub fn extent(e: Extent) -> Expr {
    match e {
        Extent::Const(c) => Expr::Int(c),
        Extent::Param(p) => Expr::Param(p),
    }
}

/// The number of positions of `axis` (all parent positions together): `length` for
/// `dense_fixed`, `nnz` for variable axes, parent positions × `nnz_per_parent` for
/// `sparse_fixed` (its `nnz_per_parent` when parentless).
///
/// Precondition: the axes pass the stage-I verifier (variable axes have `nnz`,
/// `sparse_fixed` ones `nnz_per_parent`).
pub fn npos(axes: &IdVec<AxisId, AxisDecl>, axis: AxisId) -> Expr {
    let decl = &axes[axis];
    match decl.kind {
        AxisKind::DenseFixed => extent(decl.length),
        AxisKind::DenseVariable | AxisKind::SparseVariable => {
            extent(decl.nnz.expect("verified: variable axes have nnz"))
        }
        AxisKind::SparseFixed => {
            let per = extent(
                decl.nnz_per_parent
                    .expect("verified: sparse_fixed axes have nnz_per_parent"),
            );
            match decl.parent {
                Some(p) => mul(npos(axes, p), per),
                None => per,
            }
        }
    }
}

pub fn add(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Int(0), _) => b,
        (_, Expr::Int(0)) => a,
        (Expr::Int(x), Expr::Int(y)) => x
            .checked_add(*y)
            .map(Expr::Int)
            .unwrap_or_else(|| Expr::binary(BinaryOp::Add, a, b)),
        _ => Expr::binary(BinaryOp::Add, a, b),
    }
}

pub fn sub(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (_, Expr::Int(0)) => a,
        _ => Expr::binary(BinaryOp::Sub, a, b),
    }
}

pub fn mul(a: Expr, b: Expr) -> Expr {
    // `(x * c1) * c2` is `x * (c1 * c2)`.
    if let (
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        },
        Expr::Int(c2),
    ) = (&a, &b)
    {
        if let Expr::Int(c1) = **rhs {
            if let Some(c) = c1.checked_mul(*c2) {
                return mul((**lhs).clone(), Expr::Int(c));
            }
        }
    }
    match (&a, &b) {
        (Expr::Int(1), _) => b,
        (_, Expr::Int(1)) => a,
        (Expr::Int(0), _) | (_, Expr::Int(0)) => Expr::Int(0),
        (Expr::Int(x), Expr::Int(y)) => x
            .checked_mul(*y)
            .map(Expr::Int)
            .unwrap_or_else(|| Expr::binary(BinaryOp::Mul, a, b)),
        _ => Expr::binary(BinaryOp::Mul, a, b),
    }
}

pub fn lt(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Lt, a, b)
}

pub fn ge(a: Expr, b: Expr) -> Expr {
    Expr::cmp(CmpOp::Ge, a, b)
}

/// The conjunction of `conds`; `None` when there are none.
pub fn all(conds: Vec<Expr>) -> Option<Expr> {
    conds.into_iter().reduce(|a, b| Expr::Logic {
        op: LogicOp::And,
        lhs: Box::new(a),
        rhs: Box::new(b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_constants() {
        assert_eq!(mul(Expr::Int(3), Expr::Int(4)), Expr::Int(12));
        assert_eq!(
            add(Expr::Int(0), Expr::Param(sparsile_ir::ParamId(1))),
            Expr::Param(sparsile_ir::ParamId(1))
        );
        assert_eq!(
            mul(Expr::Int(1), Expr::Var(sparsile_ir::VarId(2))),
            Expr::Var(sparsile_ir::VarId(2))
        );
        assert!(matches!(
            mul(Expr::Var(sparsile_ir::VarId(0)), Expr::Int(2)),
            Expr::Binary { .. }
        ));
        assert!(all(vec![]).is_none());
        let p = Expr::Param(sparsile_ir::ParamId(0));
        assert_eq!(
            mul(mul(p.clone(), Expr::Int(4)), Expr::Int(4)),
            mul(p, Expr::Int(16))
        );
    }
}
