//! Axis storage and its capabilities.
//!
//! Positions: a parentless axis has positions `0..npos`. An axis with a parent has a
//! *global* position space over all parent positions: under parent position `p`,
//! - `dense_variable` / `sparse_variable`: positions `indptr[p]..indptr[p+1]`;
//! - `sparse_fixed` with `k` positions per parent: `p*k..(p+1)*k`.
//!
//! A `dense_fixed` axis has no parent and positions `0..length`; when it follows other
//! axes in a buffer it nests row-major inside them (see [`crate::Structure::value_offset`]).
//!
//! Coordinates: dense axes store none (`crd = pos - start of the parent's range`); sparse
//! axes store `indices[pos]`. A stored coordinate equal to the axis length marks a
//! padding position (ELL, SR-BCRS), whose value is an explicit zero.

use std::fmt;
use std::ops::Range;

use sparsile_ir::{AxisKind, IndexType};

use crate::IndexArray;

/// A position: the index of a stored element within its axis's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos(pub usize);

/// A coordinate: an index in the logical tensor along one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Crd(pub usize);

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pos {}", self.0)
    }
}

impl fmt::Display for Crd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "crd {}", self.0)
    }
}

/// The stored structure of one axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisStorage<'a> {
    pub kind: AxisKind,
    /// Index of the parent axis within the same [`crate::Structure`].
    pub parent: Option<usize>,
    /// Coordinates range over `0..length`.
    pub length: usize,
    /// Total number of positions of this axis.
    pub npos: usize,
    /// Positions per parent position (`sparse_fixed` only).
    pub nnz_per_parent: Option<usize>,
    /// `indptr` (variable axes), of length (parent positions + 1).
    pub indptr: Option<IndexArray<'a>>,
    /// `indices` (sparse axes), of length `npos`.
    pub indices: Option<IndexArray<'a>>,
    /// Whether coordinates under one parent position strictly increase.
    pub unique: bool,
}

impl<'a> AxisStorage<'a> {
    /// A `dense_fixed(length)` axis.
    pub fn dense_fixed(length: usize) -> AxisStorage<'static> {
        AxisStorage {
            kind: AxisKind::DenseFixed,
            parent: None,
            length,
            npos: length,
            nnz_per_parent: None,
            indptr: None,
            indices: None,
            unique: true,
        }
    }

    /// The integer type of the axis's arrays (i32 for axes without arrays).
    pub fn index_type(&self) -> IndexType {
        self.indices
            .as_ref()
            .or(self.indptr.as_ref())
            .map(|a| a.index_type())
            .unwrap_or(IndexType::I32)
    }

    /// Capability: the position range under a parent position (`None` for parentless
    /// axes, whose range is all positions).
    #[inline]
    pub fn positions(&self, parent: Option<Pos>) -> Range<usize> {
        match (self.kind, parent) {
            (AxisKind::DenseFixed, _) | (_, None) => 0..self.npos,
            (AxisKind::DenseVariable | AxisKind::SparseVariable, Some(Pos(p))) => {
                let indptr = self.indptr.as_ref().expect("variable axis without indptr");
                indptr.get(p)..indptr.get(p + 1)
            }
            (AxisKind::SparseFixed, Some(Pos(p))) => {
                let k = self
                    .nnz_per_parent
                    .expect("sparse_fixed axis without nnz_per_parent");
                p * k..(p + 1) * k
            }
        }
    }

    /// Capability: the coordinate stored at `pos`, given the start of its parent's range.
    #[inline]
    pub fn coordinate(&self, pos: Pos, range_start: usize) -> Crd {
        match &self.indices {
            Some(indices) => Crd(indices.get(pos.0)),
            None => Crd(pos.0 - range_start),
        }
    }

    /// Capability: the position of coordinate `crd` under `parent`, if stored. Sparse
    /// axes search their sorted `indices` (binary search); for non-unique axes the first
    /// matching position is returned.
    pub fn locate(&self, parent: Option<Pos>, crd: Crd) -> Option<Pos> {
        if crd.0 >= self.length {
            return None;
        }
        let range = self.positions(parent);
        match &self.indices {
            None => {
                let pos = range.start + crd.0;
                (pos < range.end).then_some(Pos(pos))
            }
            Some(indices) => {
                let at = indices.lower_bound(range.start, range.end, crd.0);
                (at < range.end && indices.get(at) == crd.0).then_some(Pos(at))
            }
        }
    }

    /// Whether `pos` is a padding position (stored coordinate equal to the length).
    #[inline]
    pub fn is_padding(&self, pos: Pos) -> bool {
        self.indices
            .as_ref()
            .is_some_and(|indices| indices.get(pos.0) >= self.length)
    }

    /// A borrowed view of this axis.
    pub fn view(&self) -> AxisStorage<'_> {
        AxisStorage {
            kind: self.kind,
            parent: self.parent,
            length: self.length,
            npos: self.npos,
            nnz_per_parent: self.nnz_per_parent,
            indptr: self.indptr.as_ref().map(|a| a.view()),
            indices: self.indices.as_ref().map(|a| a.view()),
            unique: self.unique,
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> AxisStorage<'static> {
        AxisStorage {
            kind: self.kind,
            parent: self.parent,
            length: self.length,
            npos: self.npos,
            nnz_per_parent: self.nnz_per_parent,
            indptr: self.indptr.map(|a| a.into_owned()),
            indices: self.indices.map(|a| a.into_owned()),
            unique: self.unique,
        }
    }
}
