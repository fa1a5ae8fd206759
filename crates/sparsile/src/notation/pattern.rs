//! The sparsity pattern of a sparse output, derived from its right-hand side.
//!
//! An operand *samples* the output when it is a sparse tensor in the output's format and
//! dims, indexed exactly by the output's indices. Products keep the pattern of their
//! sampling factors (several: intersection), sums and `max`/`min` of sampled terms take the
//! union, `/` keeps the numerator's pattern, and zero-preserving functions (`-`, `neg`,
//! `relu`, `sqrt`, `abs`) keep their argument's. Anything else (a dense term, a constant
//! term, `exp`) has no derivable pattern.
//!
//! `C[i,j] = A[i,j] * (X[i,k] * Y[k,j])` -> sampled by `A`; `C[i,j] = A[i,j] + B[i,j]`
//! -> union of `A` and `B`.

use sparsile_ir::coord::{BinaryOp, UnaryOp};

use super::ast::{Access, Expr};
use super::typecheck::Checked;

/// Tensors whose stored entries give the output's stored entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// One operand's pattern (the output shares its axes).
    Leaf(usize),
    Union(Vec<usize>),
    Intersect(Vec<usize>),
}

impl Pattern {
    fn leaves(&self) -> &[usize] {
        match self {
            Pattern::Leaf(t) => std::slice::from_ref(t),
            Pattern::Union(v) | Pattern::Intersect(v) => v,
        }
    }

    fn combine(a: Pattern, b: Pattern, union: bool) -> Result<Pattern, String> {
        let ok = |p: &Pattern| match p {
            Pattern::Leaf(_) => true,
            Pattern::Union(_) => union,
            Pattern::Intersect(_) => !union,
        };
        if !ok(&a) || !ok(&b) {
            return Err(
                "it mixes sums (union) and products (intersection) of sparse operands".into(),
            );
        }
        let mut leaves = a.leaves().to_vec();
        for &t in b.leaves() {
            if !leaves.contains(&t) {
                leaves.push(t);
            }
        }
        Ok(match (leaves.len(), union) {
            (1, _) => Pattern::Leaf(leaves[0]),
            (_, true) => Pattern::Union(leaves),
            (_, false) => Pattern::Intersect(leaves),
        })
    }
}

/// The pattern of `rhs` for the output accessed as `lhs`; `Ok(None)` when none derives.
pub(super) fn derive(
    checked: &Checked,
    lhs: &Access,
    rhs: &Expr,
) -> Result<Option<Pattern>, String> {
    let ast = &checked.ast;
    let (_, out) = ast
        .tensor(&lhs.tensor)
        .expect("outputs are resolved by the type checker");
    Ok(match rhs {
        Expr::Access(a) => {
            let (t, decl) = ast.tensor(&a.tensor).expect("resolved by the type checker");
            let same_indices = a.indices.len() == lhs.indices.len()
                && a.indices
                    .iter()
                    .zip(&lhs.indices)
                    .all(|(x, y)| x.as_var().is_some() && x.as_var() == y.as_var());
            (checked.is_sparse(t)
                && decl.format == out.format
                && decl.dims == out.dims
                && same_indices)
                .then_some(Pattern::Leaf(t))
        }
        Expr::Int { .. } | Expr::Float { .. } => None,
        Expr::Unary { op, arg, .. } => match op {
            UnaryOp::Neg | UnaryOp::Relu | UnaryOp::Sqrt | UnaryOp::Abs => {
                derive(checked, lhs, arg)?
            }
            UnaryOp::Exp | UnaryOp::Log => None,
        },
        Expr::Binary {
            op, lhs: a, rhs: b, ..
        } => {
            let pa = derive(checked, lhs, a)?;
            match op {
                BinaryOp::Div | BinaryOp::Rem => pa,
                BinaryOp::Mul => match (pa, derive(checked, lhs, b)?) {
                    (Some(x), Some(y)) => Some(Pattern::combine(x, y, false)?),
                    (x, y) => x.or(y),
                },
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Max | BinaryOp::Min => {
                    match (pa, derive(checked, lhs, b)?) {
                        (Some(x), Some(y)) => Some(Pattern::combine(x, y, true)?),
                        _ => None,
                    }
                }
            }
        }
    })
}
