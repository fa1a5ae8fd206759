//! Integer arrays of structure (`indptr`, `indices`) in i32 or i64, owned or borrowed.

use std::borrow::Cow;

use sparsile_ir::IndexType;

/// An `indptr` or `indices` array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexArray<'a> {
    I32(Cow<'a, [i32]>),
    I64(Cow<'a, [i64]>),
}

impl<'a> IndexArray<'a> {
    /// Builds an owned array of the narrowest type that holds `max_value`.
    pub fn from_usizes(values: &[usize], index_type: IndexType) -> IndexArray<'static> {
        match index_type {
            IndexType::I32 => {
                IndexArray::I32(Cow::Owned(values.iter().map(|&v| v as i32).collect()))
            }
            IndexType::I64 => {
                IndexArray::I64(Cow::Owned(values.iter().map(|&v| v as i64).collect()))
            }
        }
    }

    pub fn index_type(&self) -> IndexType {
        match self {
            IndexArray::I32(_) => IndexType::I32,
            IndexArray::I64(_) => IndexType::I64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            IndexArray::I32(v) => v.len(),
            IndexArray::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw signed value at `i` (validated arrays hold only non-negative values).
    #[inline]
    pub fn get_i64(&self, i: usize) -> i64 {
        match self {
            IndexArray::I32(v) => v[i] as i64,
            IndexArray::I64(v) => v[i],
        }
    }

    /// The value at `i` as `usize`. Only for validated arrays (values are non-negative).
    #[inline]
    pub fn get(&self, i: usize) -> usize {
        self.get_i64(i) as usize
    }

    /// Copies the values out as `usize`. Only for validated arrays.
    pub fn to_usizes(&self) -> Vec<usize> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }

    /// An owned copy (no-op for owned arrays apart from the move).
    pub fn into_owned(self) -> IndexArray<'static> {
        match self {
            IndexArray::I32(v) => IndexArray::I32(Cow::Owned(v.into_owned())),
            IndexArray::I64(v) => IndexArray::I64(Cow::Owned(v.into_owned())),
        }
    }

    /// A borrowed view of this array.
    pub fn view(&self) -> IndexArray<'_> {
        match self {
            IndexArray::I32(v) => IndexArray::I32(Cow::Borrowed(v)),
            IndexArray::I64(v) => IndexArray::I64(Cow::Borrowed(v)),
        }
    }

    /// Converts to another index type. Values must fit (checked by the caller).
    pub fn cast(&self, index_type: IndexType) -> IndexArray<'static> {
        IndexArray::from_usizes(&self.to_usizes(), index_type)
    }

    /// First `i` in `lo..hi` with `self[i] >= value` (binary search over a sorted run).
    pub fn lower_bound(&self, lo: usize, hi: usize, value: usize) -> usize {
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < value {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}
