//! The four kinds of axis: dense or sparse × fixed or variable.
//!
//! *Dense* axes store no coordinates (the coordinate is the offset within the parent's
//! range); *sparse* axes store an `indices` array. *Fixed* axes have the same number of
//! positions under every parent position; *variable* axes have an `indptr` array.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Dense/sparse × fixed/variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AxisKind {
    /// Every coordinate `0..length` is present; no structure arrays.
    DenseFixed,
    /// A contiguous run of coordinates `0..len(p)` under each parent position; `indptr`.
    DenseVariable,
    /// The same number of stored coordinates under each parent position; `indices`.
    SparseFixed,
    /// A varying number of stored coordinates under each parent position; `indptr` and `indices`.
    SparseVariable,
}

impl AxisKind {
    /// All four kinds, in a fixed order.
    pub const ALL: [AxisKind; 4] = [
        AxisKind::DenseFixed,
        AxisKind::DenseVariable,
        AxisKind::SparseFixed,
        AxisKind::SparseVariable,
    ];

    /// Whether the axis stores coordinates (`indices`).
    pub fn is_sparse(self) -> bool {
        matches!(self, AxisKind::SparseFixed | AxisKind::SparseVariable)
    }

    /// Whether the axis stores an `indptr` array.
    pub fn is_variable(self) -> bool {
        matches!(self, AxisKind::DenseVariable | AxisKind::SparseVariable)
    }

    /// The name used in the text IR.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::DenseFixed => "dense_fixed",
            AxisKind::DenseVariable => "dense_variable",
            AxisKind::SparseFixed => "sparse_fixed",
            AxisKind::SparseVariable => "sparse_variable",
        }
    }
}

impl fmt::Display for AxisKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AxisKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AxisKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown axis kind `{s}` (expected one of dense_fixed, dense_variable, sparse_fixed, sparse_variable)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in AxisKind::ALL {
            assert_eq!(k.name().parse::<AxisKind>().unwrap(), k);
        }
        assert!("dense".parse::<AxisKind>().is_err());
    }
}
