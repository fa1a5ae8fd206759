//! Typed ids for every index space, and [`IdVec`], a vector indexed by one of them.
//!
//! Untyped `usize` ids get confused; every table in the IR is an `IdVec<SomeId, T>`.
//!
//! ```
//! use sparsile_ir::{AxisId, IdVec};
//! let mut axes: IdVec<AxisId, &str> = IdVec::new();
//! let i = axes.push("I");
//! assert_eq!(axes[i], "I");
//! assert_eq!(i, AxisId(0));
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use serde::{Deserialize, Serialize};

/// An id usable as an [`IdVec`] index.
pub trait Id: Copy + Eq + fmt::Debug {
    fn from_index(index: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! define_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u32);

        impl Id for $name {
            fn from_index(index: usize) -> Self {
                $name(u32::try_from(index).expect("id space overflow"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

define_id!(
    /// An axis of a program.
    AxisId,
    "axis#"
);
define_id!(
    /// A buffer (sparse or dense) of a program.
    BufferId,
    "buffer#"
);
define_id!(
    /// An iterator variable bound by a sparse iteration.
    IterVarId,
    "var#"
);
define_id!(
    /// A loop variable or local of a loop-level (stage II / III) function.
    VarId,
    "v#"
);
define_id!(
    /// A symbolic integer parameter of a program (a dimension or an nnz count).
    ParamId,
    "param#"
);

/// A vector indexed by a typed id.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdVec<I, T> {
    items: Vec<T>,
    #[serde(skip)]
    _id: PhantomData<I>,
}

impl<I: Id, T> IdVec<I, T> {
    pub fn new() -> Self {
        IdVec {
            items: Vec::new(),
            _id: PhantomData,
        }
    }

    /// Appends and returns the new item's id.
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::from_index(self.items.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, id: I) -> Option<&T> {
        self.items.get(id.index())
    }

    pub fn ids(&self) -> impl Iterator<Item = I> + '_ {
        (0..self.items.len()).map(I::from_index)
    }

    pub fn iter(&self) -> impl Iterator<Item = (I, &T)> + '_ {
        self.items
            .iter()
            .enumerate()
            .map(|(i, t)| (I::from_index(i), t))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (I, &mut T)> + '_ {
        self.items
            .iter_mut()
            .enumerate()
            .map(|(i, t)| (I::from_index(i), t))
    }

    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.items.iter()
    }

    /// The first id whose item satisfies `pred`.
    pub fn position(&self, mut pred: impl FnMut(&T) -> bool) -> Option<I> {
        self.items.iter().position(&mut pred).map(I::from_index)
    }
}

impl<I: Id, T> Default for IdVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: Id, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<I: Id, T> Index<I> for IdVec<I, T> {
    type Output = T;
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: Id, T> IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}

impl<I: Id, T> FromIterator<T> for IdVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        IdVec {
            items: iter.into_iter().collect(),
            _id: PhantomData,
        }
    }
}
