//! Checks shared by the checked constructors: `indptr` arrays, index values and the
//! order of indices under each parent position.

use sparsile_ir::IndexType;

use crate::{FormatError, IndexArray};

/// Where the indices of a checked axis are out of order (first occurrence each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Order {
    /// `(parent, position)` of the first index smaller than its predecessor.
    pub unsorted: Option<(usize, usize)>,
    /// `(parent, position, value)` of the first index equal to its predecessor.
    pub duplicate: Option<(usize, usize, usize)>,
}

impl Order {
    /// The first problem as an error, for callers that fix nothing.
    pub fn into_result(self, axis: usize, unique: bool) -> Result<(), FormatError> {
        if let Some((parent, position)) = self.unsorted {
            return Err(FormatError::UnsortedIndices {
                axis,
                parent,
                position,
            });
        }
        if let (true, Some((parent, position, value))) = (unique, self.duplicate) {
            return Err(FormatError::DuplicateIndex {
                axis,
                parent,
                position,
                value,
            });
        }
        Ok(())
    }
}

/// Checks that `size` (a dimension or axis length) fits `index_type`.
pub(crate) fn check_fits(
    dim: usize,
    size: usize,
    index_type: IndexType,
) -> Result<(), FormatError> {
    if size as u64 > index_type.max_value() {
        return Err(FormatError::ShapeTooLarge {
            dim,
            size,
            index_type,
        });
    }
    Ok(())
}

/// Checks an `indptr` over `nparents` parent positions ending at `npos`: length, start
/// at 0, never decreasing, end.
pub(crate) fn check_indptr(
    axis: usize,
    indptr: &IndexArray<'_>,
    nparents: usize,
    npos: usize,
) -> Result<(), FormatError> {
    let expected = nparents.saturating_add(1);
    if indptr.len() != expected {
        return Err(FormatError::IndptrLength {
            axis,
            found: indptr.len(),
            expected,
        });
    }
    let first = indptr.get_i64(0);
    if first != 0 {
        return Err(FormatError::IndptrStart { axis, found: first });
    }
    for entry in 1..indptr.len() {
        let (previous, value) = (indptr.get_i64(entry - 1), indptr.get_i64(entry));
        if value < previous {
            return Err(FormatError::IndptrDecreasing {
                axis,
                entry,
                value,
                previous,
            });
        }
    }
    let last = indptr.get_i64(indptr.len() - 1);
    if last as u64 != npos as u64 {
        return Err(FormatError::IndptrEnd {
            axis,
            found: last,
            expected: npos,
        });
    }
    Ok(())
}

/// Checks the indices of one axis: every value in `0..length` (or equal to `length`,
/// the padding sentinel, when `allow_padding`; padding only at the end of a parent's
/// range), and reports where they are out of order. `ranges` yields `(parent,
/// positions)` for every parent position.
pub(crate) fn check_indices(
    axis: usize,
    indices: &IndexArray<'_>,
    length: usize,
    allow_padding: bool,
    ranges: impl Iterator<Item = (usize, std::ops::Range<usize>)>,
) -> Result<Order, FormatError> {
    let mut order = Order::default();
    for (parent, range) in ranges {
        let mut prev: Option<i64> = None;
        let mut in_padding = false;
        for position in range {
            let value = indices.get_i64(position);
            if value < 0 {
                return Err(FormatError::NegativeIndex {
                    axis,
                    position,
                    value,
                });
            }
            let is_sentinel = allow_padding && value as u64 == length as u64;
            if value as u64 >= length as u64 && !is_sentinel {
                return Err(FormatError::IndexOutOfRange {
                    axis,
                    parent,
                    position,
                    value,
                    dim: length,
                });
            }
            if is_sentinel {
                in_padding = true;
                continue;
            }
            if in_padding {
                return Err(FormatError::PaddingNotTrailing {
                    axis,
                    parent,
                    position,
                });
            }
            if let Some(p) = prev {
                if value < p && order.unsorted.is_none() {
                    order.unsorted = Some((parent, position));
                }
                if value == p && order.duplicate.is_none() {
                    order.duplicate = Some((parent, position, value as usize));
                }
            }
            prev = Some(value);
        }
    }
    Ok(order)
}

/// [`check_indices`] over the runs of a validated `indptr`, with a fast path: when every
/// index is in `0..length` and every run strictly increases ([`super::indices_within`],
/// [`super::runs_increasing`]: branch-free passes) there is nothing to report; otherwise
/// the runs are read one by one to say where the problem is.
pub(crate) fn check_compressed_indices(
    axis: usize,
    indices: &IndexArray<'_>,
    length: usize,
    allow_padding: bool,
    indptr: &IndexArray<'_>,
) -> Result<Order, FormatError> {
    fn clean<P: Copy + Into<i64>, C: Copy + Into<i64>>(p: &[P], c: &[C], length: usize) -> bool {
        p.last().is_some_and(|&e| e.into() as usize == c.len())
            && super::indices_within(c, length as u64)
            && super::runs_increasing(p, c, true)
    }
    let fast = !allow_padding
        && match (indptr, indices) {
            (IndexArray::I32(p), IndexArray::I32(c)) => clean(p, c, length),
            (IndexArray::I32(p), IndexArray::I64(c)) => clean(p, c, length),
            (IndexArray::I64(p), IndexArray::I32(c)) => clean(p, c, length),
            (IndexArray::I64(p), IndexArray::I64(c)) => clean(p, c, length),
        };
    if fast {
        return Ok(Order::default());
    }
    check_indices(axis, indices, length, allow_padding, indptr_ranges(indptr))
}

/// The `(parent, positions)` ranges of a validated `indptr`.
pub(crate) fn indptr_ranges<'b>(
    indptr: &'b IndexArray<'_>,
) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + 'b {
    (0..indptr.len().saturating_sub(1)).map(move |p| (p, indptr.get(p)..indptr.get(p + 1)))
}
